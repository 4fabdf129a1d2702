//! Generate a house from a seed and render one frame of its exploration.
//!
//! ```sh
//! cargo run --release --example render_scene -- 7 out/frame.png
//! ```
//! Writes the colour image and prints the house's rooms and the camera pose.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyhow::{Context, bail};
use gst_core::PinholeCamera;
use gst_sim::explore::{ExploreConfig, explore};
use gst_sim::geometry::build_render_scene;
use gst_sim::library::FurnitureLibrary;
use gst_sim::render::{RenderOptions, render};
use gst_sim::scene::{SceneConfig, generate_scene};
use rand::SeedableRng;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [seed, out] = args.as_slice() else { bail!("usage: render_scene SEED OUT.png") };
    let seed: u64 = seed.parse().with_context(|| format!("SEED {seed:?} is not a whole number"))?;
    let out = PathBuf::from(out);

    // The Sweet Home 3D CC0 catalogue when it is installed (`make setup`), else primitive furniture.
    let library = FurnitureLibrary::open(None).unwrap_or_else(|_| FurnitureLibrary::primitives_only());
    let scene = generate_scene(seed, &SceneConfig::default(), &library)?;
    println!(
        "{}: {} rooms, {} furniture instances",
        scene.name,
        scene.plan.rooms.len(),
        scene.instances.len()
    );

    // An exploration walk through every room; its first pose is where the camera stands.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let walk = explore(&scene, &ExploreConfig::default(), &mut rng)?;
    let Some(first) = walk.poses().first() else { bail!("the exploration of {} is empty", scene.name) };

    let camera = PinholeCamera::gst_benchmark();
    let frame = render(
        &build_render_scene(&scene, &library)?,
        &camera,
        &first.world_from_camera,
        &RenderOptions::default(),
    );
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    gst_io::write_rgb_png(&out, &frame.rgb)?;
    let t = first.world_from_camera.translation();
    println!("camera at ({:.2}, {:.2}, {:.2}) m; wrote {}", t.x, t.y, t.z, out.display());
    Ok(())
}
