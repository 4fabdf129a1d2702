//! The calibration files shipped in `calibration/` load and describe the cameras they claim to.

use std::path::Path;

use gst_core::{Calibration, PinholeCamera};

#[test]
fn benchmark_camera_file_is_640x512_with_90_degree_fov() -> anyhow::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("calibration/gst-640x512.yaml");
    let calibration = Calibration::from_file(&path)?;
    assert_eq!(calibration.camera, PinholeCamera::gst_benchmark());
    assert!((calibration.camera.horizontal_fov().to_degrees() - 90.0).abs() < 1e-9);
    assert_eq!(calibration.depth_scale, Some(5000.0));
    Ok(())
}
