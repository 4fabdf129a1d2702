//! Calibration files in the three formats robots come with, read into one [`Calibration`]:
//!
//! - **OpenCV FileStorage YAML** (`%YAML:1.0`, `!!opencv-matrix`): what `cv::FileStorage` and OpenCV's
//!   calibration sample write, and this project's own files; parsed by `gst-core`.
//! - **ROS `camera_info` YAML**: what ROS's `camera_calibration` writes and `camera_info_manager` loads
//!   (`image_width`, `image_height`, `camera_name`, `camera_matrix`, `distortion_model`,
//!   `distortion_coefficients`, `rectification_matrix`, `projection_matrix`, each matrix as
//!   `{rows, cols, data}`).
//! - **Kalibr camchain YAML**: what Kalibr's `kalibr_calibrate_cameras` writes (`cam0: {camera_model,
//!   intrinsics: [fu, fv, pu, pv], distortion_model, distortion_coeffs, resolution: [w, h], ...}`).
//!
//! The format is told from the text: a `%YAML:` directive or an `!!opencv-matrix` tag is FileStorage, a
//! top-level `cam0` key is Kalibr, a top-level `camera_matrix` is ROS.
//!
//! Only the pinhole model with radial-tangential distortion (OpenCV's `k1 k2 p1 p2 k3`, ROS's `plumb_bob`,
//! Kalibr's `radtan`) is supported, since that is what [`gst_core::PinholeCamera`] models. Files with
//! another model (fisheye / `equidistant`, omnidirectional, a `rational_polynomial` with non-zero `k4..k6`)
//! are refused with an error that names the model, rather than read with the distortion dropped.
//!
//! ROS and Kalibr keys are checked: an unknown key is an error, so that a misspelt
//! `distortion_coeficients` does not silently become a distortion-free camera. Keys of the formats that a
//! monocular RGB-D pipeline does not need (ROS's rectification and projection matrices, Kalibr's IMU and
//! stereo extrinsics) are accepted and ignored; frames are undistorted with the camera matrix kept (see
//! [`crate::undistort`]). Neither format records how depth images encode metres, so both accept an extra
//! `depth_scale` key (depth units per metre, e.g. 1000 for RealSense, 5000 for TUM RGB-D).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use gst_core::{Calibration, Distortion, PinholeCamera};

use crate::IoError;

/// The file formats [`read_calibration`] understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CalibrationFormat {
    OpenCvFileStorage,
    RosCameraInfo,
    KalibrCamchain,
}

impl std::fmt::Display for CalibrationFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OpenCvFileStorage => "OpenCV FileStorage YAML",
            Self::RosCameraInfo => "ROS camera_info YAML",
            Self::KalibrCamchain => "Kalibr camchain YAML",
        })
    }
}

/// Reads a calibration file in any of the supported formats (see the module documentation).
pub fn read_calibration(path: &Path) -> Result<Calibration, IoError> {
    read_calibration_with_format(path).map(|(calibration, _)| calibration)
}

/// Reads a calibration file and tells which format it was in.
pub fn read_calibration_with_format(path: &Path) -> Result<(Calibration, CalibrationFormat), IoError> {
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Io { path: path.into(), source })?;
    parse_calibration(&text, path)
}

/// Parses calibration text in any supported format; `path` is only used in error messages.
pub fn parse_calibration(text: &str, path: &Path) -> Result<(Calibration, CalibrationFormat), IoError> {
    let invalid = |message: String| IoError::Calibration { path: path.into(), message };
    if text.trim().is_empty() {
        return Err(invalid("the file is empty".into()));
    }
    if looks_like_file_storage(text) {
        let calibration = Calibration::from_str_named(text, path)?;
        return Ok((calibration, CalibrationFormat::OpenCvFileStorage));
    }
    let value: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| invalid(format!("not valid YAML: {e}")))?;
    let serde_yaml::Value::Mapping(root) = value else {
        return Err(invalid("the file is not a YAML mapping of keys to values".into()));
    };
    let has_key = |key: &str| root.contains_key(key);
    if has_key("cam0") {
        Ok((parse_kalibr(text, path)?, CalibrationFormat::KalibrCamchain))
    } else if has_key("camera_matrix") {
        Ok((parse_ros(text, path)?, CalibrationFormat::RosCameraInfo))
    } else {
        Err(invalid(
            "not a calibration format gst reads: neither OpenCV FileStorage (`%YAML:1.0`, \
             `!!opencv-matrix`), ROS camera_info (a `camera_matrix` key) nor a Kalibr camchain (a `cam0` key)"
                .into(),
        ))
    }
}

/// Whether the text is OpenCV FileStorage YAML, which YAML 1.2 parsers reject (`%YAML:1.0` is not a
/// valid directive there).
fn looks_like_file_storage(text: &str) -> bool {
    let first = text.lines().map(str::trim).find(|line| !line.is_empty() && !line.starts_with('#'));
    first.is_some_and(|line| line.starts_with("%YAML:")) || text.contains("!!opencv-matrix")
}

/// A serde error with its location, for messages that name the field.
fn yaml_message(error: &serde_yaml::Error) -> String {
    error.to_string()
}

/// A camera from a 3x3 camera matrix (row-major) and distortion, validated; `field` names the matrix.
fn pinhole(
    path: &Path,
    field: &str,
    width: u32,
    height: u32,
    k: &[f64],
    distortion: Distortion,
) -> Result<PinholeCamera, IoError> {
    let invalid = |message: String| IoError::Calibration { path: path.into(), message };
    if k.len() != 9 {
        return Err(invalid(format!("{field} must hold 9 values (3x3), holds {}", k.len())));
    }
    if k.iter().any(|v| !v.is_finite()) {
        return Err(invalid(format!("{field} holds a value that is not finite: {k:?}")));
    }
    if k[1] != 0.0 || k[3] != 0.0 || k[6] != 0.0 || k[7] != 0.0 || k[8] != 1.0 {
        return Err(invalid(format!("{field} is not a pinhole matrix [fx 0 cx; 0 fy cy; 0 0 1]: {k:?}")));
    }
    let camera = PinholeCamera { width, height, fx: k[0], fy: k[4], cx: k[2], cy: k[5], distortion };
    camera.validate().map_err(|e| invalid(format!("{field}: {e}")))?;
    Ok(camera)
}

fn depth_scale(path: &Path, scale: Option<f64>) -> Result<Option<f64>, IoError> {
    match scale {
        Some(scale) if !(scale.is_finite() && scale > 0.0) => Err(IoError::Calibration {
            path: path.into(),
            message: format!("depth_scale must be a positive number of depth units per metre, is {scale}"),
        }),
        other => Ok(other),
    }
}

/// Distortion from `k1 k2 p1 p2 [k3 [k4 k5 k6]]`, refusing non-zero terms the model does not have.
fn radial_tangential(path: &Path, field: &str, coefficients: &[f64]) -> Result<Distortion, IoError> {
    let invalid = |message: String| IoError::Calibration { path: path.into(), message };
    if coefficients.iter().any(|c| !c.is_finite()) {
        return Err(invalid(format!("{field} holds a value that is not finite: {coefficients:?}")));
    }
    let c = |i: usize| coefficients.get(i).copied().unwrap_or(0.0);
    match coefficients.len() {
        0 | 4 | 5 => {}
        8 if coefficients[5..].iter().all(|k| *k == 0.0) => {}
        8 => {
            return Err(invalid(format!(
                "{field}: the rational polynomial model with non-zero k4 k5 k6 ({:?}) is not supported; \
                 gst models k1 k2 p1 p2 k3 only",
                &coefficients[5..]
            )));
        }
        n => {
            return Err(invalid(format!(
                "{field} must hold 4 or 5 values (k1 k2 p1 p2 [k3]) or 8 (k1 k2 p1 p2 k3 k4 k5 k6), holds {n}"
            )));
        }
    }
    Ok(Distortion { k1: c(0), k2: c(1), p1: c(2), p2: c(3), k3: c(4) })
}

/// A matrix of a ROS camera_info file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RosMatrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl RosMatrix {
    fn checked(&self, path: &Path, field: &str, shape: Option<(usize, usize)>) -> Result<&[f64], IoError> {
        let invalid = |message: String| IoError::Calibration { path: path.into(), message };
        if let Some((rows, cols)) = shape
            && (self.rows, self.cols) != (rows, cols)
        {
            return Err(invalid(format!("{field} must be {rows}x{cols}, is {}x{}", self.rows, self.cols)));
        }
        if self.data.len() != self.rows * self.cols {
            return Err(invalid(format!(
                "{field} is {}x{} but its data holds {} values",
                self.rows,
                self.cols,
                self.data.len()
            )));
        }
        Ok(&self.data)
    }
}

/// A ROS camera_info YAML file (`camera_calibration_parsers`' format), plus our `depth_scale`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RosCameraInfo {
    image_width: u32,
    image_height: u32,
    #[serde(default)]
    camera_name: Option<String>,
    camera_matrix: RosMatrix,
    #[serde(default)]
    distortion_model: Option<String>,
    #[serde(default)]
    distortion_coefficients: Option<RosMatrix>,
    /// Stereo rectification; identity for a monocular camera. Not applied (frames are only undistorted).
    #[serde(default)]
    rectification_matrix: Option<RosMatrix>,
    /// The rectified camera's projection; not used (the undistorted camera keeps `camera_matrix`).
    #[serde(default)]
    projection_matrix: Option<RosMatrix>,
    #[serde(default)]
    depth_scale: Option<f64>,
}

fn parse_ros(text: &str, path: &Path) -> Result<Calibration, IoError> {
    let invalid = |message: String| IoError::Calibration { path: path.into(), message };
    let info: RosCameraInfo = serde_yaml::from_str(text)
        .map_err(|e| invalid(format!("as ROS camera_info: {}", yaml_message(&e))))?;
    let k = info.camera_matrix.checked(path, "camera_matrix", Some((3, 3)))?;
    let coefficients = match &info.distortion_coefficients {
        Some(matrix) => {
            let data = matrix.checked(path, "distortion_coefficients", None)?;
            if matrix.rows > 1 && matrix.cols > 1 {
                return Err(invalid(format!(
                    "distortion_coefficients must be a row (1xN), is {}x{}",
                    matrix.rows, matrix.cols
                )));
            }
            data.to_vec()
        }
        None => Vec::new(),
    };
    let model = info.distortion_model.as_deref().unwrap_or("").trim();
    let all_zero = coefficients.iter().all(|c| *c == 0.0);
    let distortion = match model {
        "plumb_bob" | "rational_polynomial" => {
            radial_tangential(path, "distortion_coefficients", &coefficients)?
        }
        // No model, or a model without distortion: fine as long as nothing is distorted.
        _ if all_zero => Distortion::default(),
        "" => {
            return Err(invalid(
                "distortion_coefficients are given without a distortion_model (plumb_bob expected)".into(),
            ));
        }
        other => {
            return Err(invalid(format!(
                "distortion_model {other:?} is not supported; gst reads plumb_bob and rational_polynomial \
                 (pinhole with radial-tangential distortion) only"
            )));
        }
    };
    if let Some(r) = &info.rectification_matrix {
        r.checked(path, "rectification_matrix", Some((3, 3)))?;
    }
    if let Some(p) = &info.projection_matrix {
        p.checked(path, "projection_matrix", Some((3, 4)))?;
    }
    let camera = pinhole(path, "camera_matrix", info.image_width, info.image_height, k, distortion)?;
    Ok(Calibration {
        camera,
        depth_scale: depth_scale(path, info.depth_scale)?,
        camera_name: info.camera_name.filter(|name| !name.is_empty()),
    })
}

/// One camera of a Kalibr camchain file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KalibrCamera {
    camera_model: String,
    intrinsics: Vec<f64>,
    distortion_model: String,
    distortion_coeffs: Vec<f64>,
    resolution: Vec<u32>,
    #[serde(default)]
    rostopic: Option<String>,
    #[serde(default)]
    depth_scale: Option<f64>,
    // Extrinsics and timing of a multi-sensor calibration: accepted, not used.
    #[serde(default, rename = "T_cam_imu")]
    _t_cam_imu: Option<serde_yaml::Value>,
    #[serde(default, rename = "T_cn_cnm1")]
    _t_cn_cnm1: Option<serde_yaml::Value>,
    #[serde(default, rename = "cam_overlaps")]
    _cam_overlaps: Option<serde_yaml::Value>,
    #[serde(default, rename = "timeshift_cam_imu")]
    _timeshift_cam_imu: Option<f64>,
}

/// The camera a camchain file describes; with several cameras (`cam0`, `cam1`, …) the first, `cam0`.
const KALIBR_CAMERA: &str = "cam0";

fn parse_kalibr(text: &str, path: &Path) -> Result<Calibration, IoError> {
    let invalid = |message: String| IoError::Calibration { path: path.into(), message };
    let chain: BTreeMap<String, KalibrCamera> = serde_yaml::from_str(text)
        .map_err(|e| invalid(format!("as Kalibr camchain: {}", yaml_message(&e))))?;
    for key in chain.keys() {
        let is_camera =
            key.strip_prefix("cam").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !is_camera {
            return Err(invalid(format!("unexpected top-level key {key:?}: a camchain holds cam0, cam1, …")));
        }
    }
    let Some(cam) = chain.get(KALIBR_CAMERA) else {
        return Err(invalid(format!("missing {KALIBR_CAMERA}")));
    };
    let field = |name: &str| format!("{KALIBR_CAMERA}.{name}");
    if cam.camera_model != "pinhole" {
        return Err(invalid(format!(
            "{}: camera model {:?} is not supported; gst reads pinhole cameras only",
            field("camera_model"),
            cam.camera_model
        )));
    }
    let [fu, fv, pu, pv] = cam.intrinsics[..] else {
        return Err(invalid(format!(
            "{} must be [fu, fv, pu, pv] for a pinhole camera, holds {} values",
            field("intrinsics"),
            cam.intrinsics.len()
        )));
    };
    let [width, height] = cam.resolution[..] else {
        return Err(invalid(format!("{} must be [width, height]", field("resolution"))));
    };
    let distortion = match cam.distortion_model.as_str() {
        "radtan" => {
            if cam.distortion_coeffs.len() != 4 {
                return Err(invalid(format!(
                    "{} must be [k1, k2, p1, p2] for radtan, holds {} values",
                    field("distortion_coeffs"),
                    cam.distortion_coeffs.len()
                )));
            }
            radial_tangential(path, &field("distortion_coeffs"), &cam.distortion_coeffs)?
        }
        "none" => Distortion::default(),
        other => {
            return Err(invalid(format!(
                "{}: distortion model {other:?} is not supported; gst reads radtan (and none) only",
                field("distortion_model")
            )));
        }
    };
    let k = [fu, 0.0, pu, 0.0, fv, pv, 0.0, 0.0, 1.0];
    let camera = pinhole(path, &field("intrinsics"), width, height, &k, distortion)?;
    Ok(Calibration {
        camera,
        depth_scale: depth_scale(path, cam.depth_scale)?,
        camera_name: Some(cam.rostopic.clone().unwrap_or_else(|| KALIBR_CAMERA.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROS: &str = "image_width: 640
image_height: 480
camera_name: rgb_PS1080_PrimeSense
camera_matrix:
  rows: 3
  cols: 3
  data: [517.3, 0, 318.6, 0, 516.5, 255.3, 0, 0, 1]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [0.2624, -0.9531, -0.0054, 0.0026, 1.1633]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]
projection_matrix:
  rows: 3
  cols: 4
  data: [517.3, 0, 318.6, 0, 0, 516.5, 255.3, 0, 0, 0, 1, 0]
";

    const KALIBR: &str = "cam0:
  cam_overlaps: []
  camera_model: pinhole
  distortion_coeffs: [-0.28340811, 0.07395907, 0.00019359, 1.76187114e-05]
  distortion_model: radtan
  intrinsics: [458.654, 457.296, 367.215, 248.375]
  resolution: [752, 480]
  rostopic: /cam0/image_raw
  timeshift_cam_imu: 0.0
  T_cam_imu:
  - [0.0148655429818, -0.999880929698, 0.00414029679422, -0.0216401454975]
  - [0.999557249008, 0.0149672133247, 0.025715529948, -0.064676986768]
  - [-0.0257744366974, 0.00375618835797, 0.999660727178, 0.00981073058949]
  - [0.0, 0.0, 0.0, 1.0]
cam1:
  camera_model: pinhole
  distortion_coeffs: [0, 0, 0, 0]
  distortion_model: radtan
  intrinsics: [457.587, 456.134, 379.999, 255.238]
  resolution: [752, 480]
  T_cn_cnm1:
  - [1, 0, 0, 0.11]
  - [0, 1, 0, 0]
  - [0, 0, 1, 0]
  - [0, 0, 0, 1]
";

    fn parse(text: &str) -> Result<(Calibration, CalibrationFormat), IoError> {
        parse_calibration(text, Path::new("broken.yaml"))
    }

    #[test]
    fn reads_ros_camera_info() -> Result<(), IoError> {
        let (calibration, format) = parse(ROS)?;
        assert_eq!(format, CalibrationFormat::RosCameraInfo);
        let camera = calibration.camera;
        assert_eq!((camera.width, camera.height), (640, 480));
        assert_eq!((camera.fx, camera.fy, camera.cx, camera.cy), (517.3, 516.5, 318.6, 255.3));
        assert_eq!(
            camera.distortion,
            Distortion { k1: 0.2624, k2: -0.9531, p1: -0.0054, p2: 0.0026, k3: 1.1633 }
        );
        assert_eq!(calibration.camera_name.as_deref(), Some("rgb_PS1080_PrimeSense"));
        assert_eq!(calibration.depth_scale, None);

        let rational = ROS
            .replace("plumb_bob", "rational_polynomial")
            .replace("cols: 5", "cols: 8")
            .replace("1.1633]", "1.1633, 0, 0, 0]");
        assert_eq!(parse(&rational)?.0.camera, camera);
        let scaled = format!("{ROS}depth_scale: 1000\n");
        assert_eq!(parse(&scaled)?.0.depth_scale, Some(1000.0));
        Ok(())
    }

    #[test]
    fn reads_kalibr_camchain() -> Result<(), IoError> {
        let (calibration, format) = parse(KALIBR)?;
        assert_eq!(format, CalibrationFormat::KalibrCamchain);
        let camera = calibration.camera;
        assert_eq!((camera.width, camera.height), (752, 480));
        assert_eq!((camera.fx, camera.fy, camera.cx, camera.cy), (458.654, 457.296, 367.215, 248.375));
        assert_eq!(camera.distortion.k1, -0.28340811);
        assert_eq!(camera.distortion.p2, 1.76187114e-05);
        assert_eq!(camera.distortion.k3, 0.0);
        assert_eq!(calibration.camera_name.as_deref(), Some("/cam0/image_raw"));
        Ok(())
    }

    #[test]
    fn reads_opencv_file_storage_through_core() -> Result<(), IoError> {
        let calibration = Calibration {
            camera: PinholeCamera::gst_benchmark(),
            depth_scale: Some(5000.0),
            camera_name: Some("gst".into()),
        };
        let (back, format) = parse(&calibration.to_file_storage_yaml())?;
        assert_eq!(format, CalibrationFormat::OpenCvFileStorage);
        assert_eq!(back, calibration);
        Ok(())
    }

    #[test]
    fn malformed_files_name_the_file_and_the_field() {
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "the file is empty"),
            ("- a\n- b\n".into(), "not a YAML mapping"),
            ("foo: [1, 2\n".into(), "not valid YAML"),
            ("image_width: 640\n".into(), "neither OpenCV FileStorage"),
            (ROS.replace("image_width: 640\n", ""), "image_width"),
            (ROS.replace("318.6, 0, 516.5", "318.6, 0"), "camera_matrix is 3x3 but its data holds 8"),
            (
                ROS.replace("  rows: 3\n  cols: 3\n  data: [517.3", "  rows: 3\n  cols: 4\n  data: [517.3"),
                "camera_matrix must be 3x3",
            ),
            (ROS.replace("distortion_coefficients:", "distortion_coeficients:"), "distortion_coeficients"),
            (ROS.replace("plumb_bob", "equidistant"), "distortion_model \"equidistant\" is not supported"),
            (
                ROS.replace("plumb_bob", "rational_polynomial")
                    .replace("cols: 5", "cols: 8")
                    .replace("1.1633]", "1.1633, 0.1, 0, 0]"),
                "k4 k5 k6",
            ),
            (ROS.replace("cols: 5", "cols: 3").replace("0.2624, -0.9531, ", ""), "must hold 4 or 5 values"),
            (ROS.replace("data: [517.3", "data: [-517.3"), "focal lengths must be positive"),
            (
                ROS.replace("0, 0, 1]\ndistortion_model", "0, 0.5, 1]\ndistortion_model"),
                "not a pinhole matrix",
            ),
            (ROS.replace("cols: 4", "cols: 3"), "projection_matrix"),
            (format!("{ROS}depth_scale: -1\n"), "depth_scale must be a positive"),
            (
                KALIBR.replace(
                    "camera_model: pinhole\n  distortion_coeffs: [-0.28",
                    "camera_model: omni\n  distortion_coeffs: [-0.28",
                ),
                "cam0.camera_model: camera model \"omni\"",
            ),
            (
                KALIBR.replace(
                    "distortion_model: radtan\n  intrinsics: [458",
                    "distortion_model: equidistant\n  intrinsics: [458",
                ),
                "cam0.distortion_model: distortion model \"equidistant\" is not supported",
            ),
            (
                KALIBR.replace("[458.654, 457.296, 367.215, 248.375]", "[458.654, 457.296, 367.215]"),
                "cam0.intrinsics must be [fu, fv, pu, pv]",
            ),
            (
                KALIBR.replace("resolution: [752, 480]\n  rostopic", "resolution: [752]\n  rostopic"),
                "cam0.resolution",
            ),
            (
                KALIBR.replace("1.76187114e-05]", "1.76187114e-05, 0.1]"),
                "cam0.distortion_coeffs must be [k1, k2, p1, p2]",
            ),
            (KALIBR.replace("  rostopic:", "  rostopik:"), "rostopik"),
            (format!("{KALIBR}imu0: {{}}\n"), "imu0"),
            ("%YAML:1.0\n---\nimage_width: 640\n".into(), "missing key image_height"),
        ];
        for (text, expected) in cases {
            let error = match parse(&text) {
                Ok(calibration) => panic!("{expected}: parsed {calibration:?}"),
                Err(error) => error.to_string(),
            };
            assert!(error.contains("broken.yaml"), "{error}");
            assert!(error.contains(expected), "{error} should mention {expected}");
        }
    }

    #[test]
    fn missing_file_is_named() {
        let error = read_calibration(Path::new("/nonexistent/camera.yaml")).err().map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.contains("camera.yaml")));
    }
}
