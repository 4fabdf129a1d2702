//! The calibration files shipped in `calibration/` load and describe the cameras they claim to.

use std::path::{Path, PathBuf};

use gst_core::{Calibration, Distortion, PinholeCamera};
use gst_io::{CalibrationFormat, read_calibration, read_calibration_with_format};

fn calibration_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("calibration")
}

#[test]
fn benchmark_camera_file_is_640x512_with_90_degree_fov() -> anyhow::Result<()> {
    let path = calibration_dir().join("gst-640x512.yaml");
    let calibration = Calibration::from_file(&path)?;
    assert_eq!(calibration.camera, PinholeCamera::gst_benchmark());
    assert!((calibration.camera.horizontal_fov().to_degrees() - 90.0).abs() < 1e-9);
    assert_eq!(calibration.depth_scale, Some(5000.0));
    assert_eq!(read_calibration(&path)?, calibration);
    Ok(())
}

#[test]
fn every_file_in_calibration_reads() -> anyhow::Result<()> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(calibration_dir())?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.sort();
    assert!(paths.len() >= 6, "{paths:?}");
    for path in paths {
        let (calibration, format) =
            read_calibration_with_format(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        calibration.camera.validate()?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let expected_format = if name.starts_with("ros-") {
            CalibrationFormat::RosCameraInfo
        } else if name.starts_with("kalibr-") {
            CalibrationFormat::KalibrCamchain
        } else {
            CalibrationFormat::OpenCvFileStorage
        };
        assert_eq!(format, expected_format, "{name}");
    }
    Ok(())
}

#[test]
fn tum_and_ros_files_hold_the_published_values() -> anyhow::Result<()> {
    let read = |name: &str| read_calibration(&calibration_dir().join(name));
    let cases = [
        ("tum-fr1.yaml", [517.3, 516.5, 318.6, 255.3], [0.2624, -0.9531, -0.0054, 0.0026, 1.1633]),
        ("tum-fr2.yaml", [520.9, 521.0, 325.1, 249.7], [0.2312, -0.7849, -0.0033, -0.0001, 0.9172]),
        ("tum-fr3.yaml", [535.4, 539.2, 320.1, 247.6], [0.0; 5]),
        ("ros-kinect-default.yaml", [525.0, 525.0, 319.5, 239.5], [0.0; 5]),
    ];
    for (name, [fx, fy, cx, cy], [k1, k2, p1, p2, k3]) in cases {
        let calibration = read(name)?;
        let expected = PinholeCamera {
            width: 640,
            height: 480,
            fx,
            fy,
            cx,
            cy,
            distortion: Distortion { k1, k2, p1, p2, k3 },
        };
        assert_eq!(calibration.camera, expected, "{name}");
        assert_eq!(calibration.depth_scale, Some(5000.0), "{name}");
    }
    let kalibr = read("kalibr-example-camchain.yaml")?;
    assert_eq!((kalibr.camera.width, kalibr.camera.height), (640, 480));
    assert!(!kalibr.camera.distortion.is_zero());
    Ok(())
}
