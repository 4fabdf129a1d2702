//! Procedural multi-room houses furnished from the CC0 Sweet Home 3D catalog, a CPU rasteriser that renders
//! them as RGB, metric depth and instance ids, and the benchmark's top-down images.
//!
//! Everything random takes a seeded RNG, so one seed gives byte-identical scenes and images.

pub mod alter;
pub mod annotate;
pub mod catalog;
pub mod error;
pub mod explore;
pub mod furnish;
pub mod geometry;
pub mod library;
pub mod mesh;
pub mod noise;
pub mod obj;
pub mod plan;
pub mod primitives;
pub mod render;
pub mod scene;
pub mod textures;
pub mod topdown;
pub mod views;
pub mod walk;

pub use error::SimError;
pub use mesh::{Material, Texture, TriangleMesh};
