//! Answer extraction from raw model output: the rules live in [`gst_core::extract`], where the answerers
//! (which must not depend on this crate) use the same reading as the scorer.

pub use gst_core::extract::extract;
