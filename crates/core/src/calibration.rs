//! Camera calibration files in OpenCV's FileStorage YAML format (what `cv::FileStorage` writes and
//! OpenCV's calibration sample produces), read without OpenCV so that every crate can load a camera.
//!
//! ```yaml
//! %YAML:1.0
//! ---
//! image_width: 640
//! image_height: 512
//! camera_matrix: !!opencv-matrix
//!    rows: 3
//!    cols: 3
//!    dt: d
//!    data: [ 320., 0., 319.5, 0., 320., 255.5, 0., 0., 1. ]
//! distortion_coefficients: !!opencv-matrix
//!    rows: 1
//!    cols: 5
//!    dt: d
//!    data: [ 0., 0., 0., 0., 0. ]
//! depth_scale: 5000.   # optional: depth image units per metre (TUM: 5000)
//! ```
//!
//! Keys that are not needed (OpenCV writes `avg_reprojection_error`, `nframes` and more) are ignored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{CoreError, Distortion, PinholeCamera};

/// A camera calibration: the intrinsics and, for RGB-D cameras, how depth images encode metres.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    pub camera: PinholeCamera,
    /// Depth image units per metre (TUM RGB-D and this project's 16-bit PNGs: 5000, i.e. 0.2 mm).
    pub depth_scale: Option<f64>,
    pub camera_name: Option<String>,
}

/// A value of a FileStorage document: a scalar, a matrix, or a nested mapping.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Scalar(String),
    Matrix { rows: usize, cols: usize, data: Vec<f64> },
    Map(BTreeMap<String, Node>),
}

impl Calibration {
    /// Reads a calibration file, naming the file and the line in every error.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, CoreError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| CoreError::CalibrationIo { path: path.into(), source })?;
        Self::from_str_named(&text, path)
    }

    /// Parses FileStorage YAML text; `path` is only used in error messages.
    pub fn from_str_named(text: &str, path: &Path) -> Result<Self, CoreError> {
        let root = parse_document(text, path)?;
        let invalid = |message: String| CoreError::CalibrationInvalid { path: path.into(), message };

        let width = scalar_u32(&root, "image_width", path)?;
        let height = scalar_u32(&root, "image_height", path)?;
        let (rows, cols, k) = match root.get("camera_matrix") {
            Some(Node::Matrix { rows, cols, data }) => (*rows, *cols, data.clone()),
            Some(_) => return Err(invalid("camera_matrix must be an !!opencv-matrix".into())),
            None => return Err(invalid("missing key camera_matrix".into())),
        };
        if (rows, cols) != (3, 3) {
            return Err(invalid(format!("camera_matrix must be 3x3, is {rows}x{cols}")));
        }
        if k[1] != 0.0 || k[3] != 0.0 || k[6] != 0.0 || k[7] != 0.0 || k[8] != 1.0 {
            return Err(invalid(format!(
                "camera_matrix is not a pinhole matrix [fx 0 cx; 0 fy cy; 0 0 1]: {k:?}"
            )));
        }
        let distortion = match root.get("distortion_coefficients") {
            None => Distortion::default(),
            Some(Node::Matrix { data, .. }) => {
                let c = |i: usize| data.get(i).copied().unwrap_or(0.0);
                if !(4..=5).contains(&data.len()) {
                    return Err(invalid(format!(
                        "distortion_coefficients must have 4 or 5 values (k1 k2 p1 p2 [k3]), has {}",
                        data.len()
                    )));
                }
                Distortion { k1: c(0), k2: c(1), p1: c(2), p2: c(3), k3: c(4) }
            }
            Some(_) => return Err(invalid("distortion_coefficients must be an !!opencv-matrix".into())),
        };
        let camera = PinholeCamera { width, height, fx: k[0], fy: k[4], cx: k[2], cy: k[5], distortion };
        camera.validate().map_err(|e| invalid(e.to_string()))?;

        let depth_scale = match root.get("depth_scale") {
            None => None,
            Some(Node::Scalar(text)) => match text.parse::<f64>() {
                Ok(scale) if scale.is_finite() && scale > 0.0 => Some(scale),
                _ => return Err(invalid(format!("depth_scale must be a positive number, is {text:?}"))),
            },
            Some(_) => return Err(invalid("depth_scale must be a number".into())),
        };
        let camera_name = match root.get("camera_name") {
            Some(Node::Scalar(name)) => Some(name.trim_matches('"').to_string()),
            _ => None,
        };
        Ok(Self { camera, depth_scale, camera_name })
    }

    /// Writes the calibration in the same format.
    pub fn to_file_storage_yaml(&self) -> String {
        let c = &self.camera;
        let d = &c.distortion;
        let mut text = String::from("%YAML:1.0\n---\n");
        if let Some(name) = &self.camera_name {
            text += &format!("camera_name: \"{name}\"\n");
        }
        text += &format!("image_width: {}\nimage_height: {}\n", c.width, c.height);
        text += &format!(
            "camera_matrix: !!opencv-matrix\n   rows: 3\n   cols: 3\n   dt: d\n   data: [ {:?}, 0., {:?}, 0., {:?}, {:?}, 0., 0., 1. ]\n",
            c.fx, c.cx, c.fy, c.cy
        );
        text += &format!(
            "distortion_coefficients: !!opencv-matrix\n   rows: 1\n   cols: 5\n   dt: d\n   data: [ {:?}, {:?}, {:?}, {:?}, {:?} ]\n",
            d.k1, d.k2, d.p1, d.p2, d.k3
        );
        if let Some(scale) = self.depth_scale {
            text += &format!("depth_scale: {scale:?}\n");
        }
        text
    }
}

fn scalar_u32(root: &BTreeMap<String, Node>, key: &str, path: &Path) -> Result<u32, CoreError> {
    let invalid = |message: String| CoreError::CalibrationInvalid { path: path.into(), message };
    match root.get(key) {
        Some(Node::Scalar(text)) => {
            text.parse::<u32>().map_err(|_| invalid(format!("{key} must be a positive integer, is {text:?}")))
        }
        Some(_) => Err(invalid(format!("{key} must be a scalar"))),
        None => Err(invalid(format!("missing key {key}"))),
    }
}

/// A logical line: its number (1-based), indentation and content without comments.
struct Line<'a> {
    number: usize,
    indent: usize,
    content: &'a str,
}

fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes => return &line[..i],
            _ => {}
        }
    }
    line
}

fn parse_document(text: &str, path: &Path) -> Result<BTreeMap<String, Node>, CoreError> {
    let syntax =
        |line: usize, message: String| CoreError::CalibrationSyntax { path: path.into(), line, message };
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if number == 1 && raw.starts_with("%YAML") {
            continue;
        }
        let content = strip_comment(raw).trim_end();
        if content.trim().is_empty() || content.trim() == "---" {
            continue;
        }
        if content.contains('\t') {
            return Err(syntax(number, "tabs are not allowed in YAML indentation".into()));
        }
        let indent = content.len() - content.trim_start().len();
        lines.push(Line { number, indent, content: content.trim_start() });
    }
    if lines.is_empty() {
        return Err(syntax(1, "the file holds no keys".into()));
    }
    let mut position = 0;
    let map = parse_map(&lines, &mut position, 0, path)?;
    if let Some(line) = lines.get(position) {
        return Err(syntax(line.number, format!("unexpected indentation before {:?}", line.content)));
    }
    Ok(map)
}

fn parse_map(
    lines: &[Line<'_>],
    position: &mut usize,
    indent: usize,
    path: &Path,
) -> Result<BTreeMap<String, Node>, CoreError> {
    let syntax =
        |line: usize, message: String| CoreError::CalibrationSyntax { path: path.into(), line, message };
    let mut map = BTreeMap::new();
    while let Some(line) = lines.get(*position) {
        if line.indent < indent {
            break;
        }
        if line.indent > indent {
            return Err(syntax(line.number, format!("unexpected indentation before {:?}", line.content)));
        }
        let Some((key, rest)) = line.content.split_once(':') else {
            return Err(syntax(line.number, format!("expected `key: value`, found {:?}", line.content)));
        };
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err(syntax(line.number, "empty key".into()));
        }
        let rest = rest.trim();
        *position += 1;
        let node = if rest.is_empty() || rest.starts_with("!!") {
            let child_indent = lines.get(*position).map(|l| l.indent).unwrap_or(0);
            if child_indent <= indent {
                return Err(syntax(line.number, format!("key {key} has no value")));
            }
            let child = parse_map(lines, position, child_indent, path)?;
            if rest == "!!opencv-matrix" {
                matrix_from_map(&child, line.number, path)?
            } else if rest.is_empty() {
                Node::Map(child)
            } else {
                return Err(syntax(line.number, format!("unsupported tag {rest}")));
            }
        } else if rest.starts_with('[') {
            let mut flow = rest.to_string();
            while !flow.contains(']') {
                let Some(next) = lines.get(*position).filter(|next| next.indent > indent) else {
                    return Err(syntax(line.number, format!("unterminated list for key {key}")));
                };
                flow.push(' ');
                flow.push_str(next.content);
                *position += 1;
            }
            Node::Scalar(flow)
        } else {
            Node::Scalar(rest.to_string())
        };
        if map.insert(key.clone(), node).is_some() {
            return Err(syntax(line.number, format!("duplicate key {key}")));
        }
    }
    Ok(map)
}

fn matrix_from_map(map: &BTreeMap<String, Node>, line: usize, path: &Path) -> Result<Node, CoreError> {
    let syntax = |message: String| CoreError::CalibrationSyntax { path: path.into(), line, message };
    let integer = |key: &str| match map.get(key) {
        Some(Node::Scalar(text)) => {
            text.parse::<usize>().map_err(|_| syntax(format!("matrix {key} must be an integer, is {text:?}")))
        }
        _ => Err(syntax(format!("matrix lacks {key}"))),
    };
    let rows = integer("rows")?;
    let cols = integer("cols")?;
    let Some(Node::Scalar(flow)) = map.get("data") else {
        return Err(syntax("matrix lacks data".into()));
    };
    let inner = flow.trim().trim_start_matches('[').trim_end_matches(']');
    let data = inner
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| v.parse::<f64>().map_err(|_| syntax(format!("matrix value {v:?} is not a number"))))
        .collect::<Result<Vec<_>, _>>()?;
    if data.len() != rows * cols {
        return Err(syntax(format!("matrix is {rows}x{cols} but data has {} values", data.len())));
    }
    if data.iter().any(|v| !v.is_finite()) {
        return Err(syntax("matrix values must be finite".into()));
    }
    Ok(Node::Matrix { rows, cols, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "%YAML:1.0\n---\nimage_width: 640\nimage_height: 480\n# a comment\ncamera_matrix: !!opencv-matrix\n   rows: 3\n   cols: 3\n   dt: d\n   data: [ 517.3, 0., 318.6, 0., 516.5,\n       255.3, 0., 0., 1. ]\ndistortion_coefficients: !!opencv-matrix\n   rows: 1\n   cols: 5\n   dt: d\n   data: [ 0.2624, -0.9531, -0.0054, 0.0026, 1.1633 ]\ndepth_scale: 5000.\navg_reprojection_error: 0.3\n";

    #[test]
    fn parses_opencv_file_storage() -> Result<(), CoreError> {
        let calibration = Calibration::from_str_named(GOOD, Path::new("fr1.yaml"))?;
        assert_eq!(calibration.camera.width, 640);
        assert_eq!(calibration.camera.fx, 517.3);
        assert_eq!(calibration.camera.cy, 255.3);
        assert_eq!(calibration.camera.distortion.k3, 1.1633);
        assert_eq!(calibration.depth_scale, Some(5000.0));
        let again = Calibration::from_str_named(&calibration.to_file_storage_yaml(), Path::new("x"))?;
        assert_eq!(again, calibration);
        Ok(())
    }

    #[test]
    fn malformed_files_name_the_file_and_problem() {
        let cases = [
            ("", "no keys"),
            ("image_width: 640\nimage_height: 480\n", "missing key camera_matrix"),
            (&GOOD.replace("rows: 3", "rows: x"), "rows must be an integer"),
            (&GOOD.replace("255.3, ", ""), "data has 8 values"),
            (&GOOD.replace("image_width: 640", "image_width: -3"), "image_width must be a positive integer"),
            (&GOOD.replace("516.5", "-516.5"), "focal lengths must be positive"),
            (&GOOD.replace("1. ]", "1."), "unterminated list"),
            (&GOOD.replace("depth_scale: 5000.", "depth_scale: zero"), "depth_scale"),
        ];
        for (text, expected) in cases {
            let error =
                Calibration::from_str_named(text, Path::new("broken.yaml")).expect_err(expected).to_string();
            assert!(error.contains("broken.yaml"), "{error}");
            assert!(error.contains(expected), "{error} should mention {expected}");
        }
    }
}
