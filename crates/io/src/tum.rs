//! The TUM RGB-D dataset layout (Sturm et al., IROS 2012), read and written, so that any SLAM system can
//! run on our episodes and we can run on recordings in that format.
//!
//! ```text
//! DIR/rgb.txt           # color images / # file: ... / # timestamp filename, then `1305031102.175304 rgb/1305031102.175304.png`
//! DIR/depth.txt         # depth maps, the same columns
//! DIR/rgb/<ts>.png      8-bit colour
//! DIR/depth/<ts>.png    16-bit depth, units of 1/depth_scale metres (TUM: 5000, i.e. 0.2 mm); 0 = missing
//! DIR/groundtruth.txt   `timestamp tx ty tz qx qy qz qw`: the camera's pose in the world (camera-to-world)
//! DIR/instances.txt    (ours, generated episodes only) `timestamp filename` of instance-id images
//! DIR/instances/<ts>.png 16-bit simulator instance ids per pixel (0 = none): ground truth, read only by
//!                       modes named oracle
//! DIR/calibration.yaml  calibration (ours, OpenCV FileStorage; read in any format `read_calibration` reads;
//!                       TUM publishes intrinsics on its web page: `calibration/tum-fr*.yaml`)
//! ```
//!
//! Timestamps are seconds written with six decimals. The list files start with exactly three comment lines,
//! as TUM ships them: some readers (ORB-SLAM2's examples among them) skip three lines blindly.
//!
//! Colour and depth images are paired like TUM's `associate.py`: every pair closer than
//! [`TUM_MAX_DIFFERENCE_S`] is a candidate, candidates are taken closest first, each timestamp is used at
//! most once, and the pairs are sorted by colour timestamp.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gst_core::{Calibration, DepthImage, InstanceImage, Pose3, RgbImage, TimedPose, Trajectory};

use crate::{
    IoError, atomic_write, read_depth_png, read_instance_png, read_rgb, write_depth_png, write_instance_png,
    write_rgb_png,
};

/// Largest time difference between a colour and a depth image that `associate.py` pairs by default.
pub const TUM_MAX_DIFFERENCE_S: f64 = 0.02;

/// Depth image units per metre in TUM RGB-D (0.2 mm), used when neither the caller nor the calibration
/// says otherwise.
pub const TUM_DEFAULT_DEPTH_SCALE: f64 = 5000.0;

const RGB_LIST: &str = "rgb.txt";
const DEPTH_LIST: &str = "depth.txt";
const GROUNDTRUTH: &str = "groundtruth.txt";
const CALIBRATION: &str = "calibration.yaml";
const INSTANCE_LIST: &str = "instances.txt";

const RGB_HEADER: &str = "# color images\n# file: 'written by gst'\n# timestamp filename\n";
const DEPTH_HEADER: &str = "# depth maps\n# file: 'written by gst'\n# timestamp filename\n";
const INSTANCE_HEADER: &str =
    "# instance id images (ground truth)\n# file: 'written by gst'\n# timestamp filename\n";
const GROUNDTRUTH_HEADER: &str =
    "# ground truth trajectory\n# file: 'written by gst'\n# timestamp tx ty tz qx qy qz qw\n";
const TRAJECTORY_HEADER: &str = "# timestamp tx ty tz qx qy qz qw\n";

/// A timestamp as TUM writes it: seconds with six decimals (microseconds).
fn format_timestamp(timestamp_s: f64) -> String {
    format!("{timestamp_s:.6}")
}

/// The timestamp in whole microseconds, the resolution of the files.
fn microseconds(timestamp_s: f64) -> i64 {
    (timestamp_s * 1e6).round() as i64
}

/// Pairs `first` and `second` timestamps like TUM's `associate.py`: candidates are the pairs closer than
/// `max_difference_s`, taken closest first (ties by first, then second timestamp), each timestamp at most
/// once. Returns index pairs `(i, j)` into `first` and `second`, sorted by `first[i]`.
pub fn associate(first: &[f64], second: &[f64], max_difference_s: f64) -> Vec<(usize, usize)> {
    let mut second_sorted: Vec<usize> = (0..second.len()).collect();
    second_sorted.sort_by(|&a, &b| second[a].total_cmp(&second[b]));
    let mut candidates = Vec::new();
    for (i, &a) in first.iter().enumerate() {
        // Only the second timestamps inside the window can pair with `a`.
        let start = second_sorted.partition_point(|&j| second[j] <= a - max_difference_s);
        for &j in &second_sorted[start..] {
            let difference = (a - second[j]).abs();
            if second[j] >= a + max_difference_s {
                break;
            }
            if difference < max_difference_s {
                candidates.push((difference, i, j));
            }
        }
    }
    candidates.sort_by(|x, y| {
        x.0.total_cmp(&y.0).then(first[x.1].total_cmp(&first[y.1])).then(second[x.2].total_cmp(&second[y.2]))
    });
    let mut first_used = vec![false; first.len()];
    let mut second_used = vec![false; second.len()];
    let mut pairs = Vec::new();
    for (_, i, j) in candidates {
        if !first_used[i] && !second_used[j] {
            first_used[i] = true;
            second_used[j] = true;
            pairs.push((i, j));
        }
    }
    pairs.sort_by(|x, y| first[x.0].total_cmp(&first[y.0]));
    pairs
}

/// Writes a sequence in the TUM RGB-D layout. Images are written as frames are added; the list files,
/// `groundtruth.txt` and `calibration.yaml` are written (atomically) by [`finish`](Self::finish), so a
/// writer that is dropped early leaves images but no lists: an unfinished export does not look complete.
#[derive(Debug)]
pub struct TumWriter {
    dir: PathBuf,
    calibration: Calibration,
    depth_scale: f64,
    rgb_list: String,
    depth_list: String,
    groundtruth: String,
    instance_list: String,
    frames: usize,
    last_timestamp_us: Option<i64>,
}

impl TumWriter {
    /// Prepares `dir` (creating it, `rgb/` and `depth/`). Depth is written at the calibration's
    /// `depth_scale`, or [`TUM_DEFAULT_DEPTH_SCALE`].
    pub fn create(dir: &Path, calibration: &Calibration) -> Result<Self, IoError> {
        let depth_scale = calibration.depth_scale.unwrap_or(TUM_DEFAULT_DEPTH_SCALE);
        if !(depth_scale.is_finite() && depth_scale > 0.0) {
            return Err(IoError::InvalidDataset {
                path: dir.into(),
                message: format!("depth scale {depth_scale} must be positive"),
            });
        }
        for sub in ["rgb", "depth"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| IoError::Io { path, source })?;
        }
        Ok(Self {
            dir: dir.into(),
            calibration: calibration.clone(),
            depth_scale,
            rgb_list: RGB_HEADER.into(),
            depth_list: DEPTH_HEADER.into(),
            groundtruth: GROUNDTRUTH_HEADER.into(),
            instance_list: INSTANCE_HEADER.into(),
            frames: 0,
            last_timestamp_us: None,
        })
    }

    /// Writes one frame. Timestamps must increase by at least a microsecond (the files' resolution); both
    /// images must have the calibration's size. `world_from_camera`, when given, goes to `groundtruth.txt`.
    pub fn add_frame(
        &mut self,
        timestamp_s: f64,
        rgb: &RgbImage,
        depth: &DepthImage,
        world_from_camera: Option<&Pose3>,
    ) -> Result<(), IoError> {
        let invalid = |message: String| IoError::InvalidDataset { path: self.dir.clone(), message };
        if !timestamp_s.is_finite() {
            return Err(invalid(format!("timestamp {timestamp_s} is not finite")));
        }
        let timestamp_us = microseconds(timestamp_s);
        if let Some(last) = self.last_timestamp_us
            && timestamp_us <= last
        {
            return Err(invalid(format!(
                "frame timestamps must increase by at least 1 µs: {} after {}",
                format_timestamp(timestamp_s),
                format_timestamp(last as f64 * 1e-6)
            )));
        }
        let camera = &self.calibration.camera;
        for (what, size) in
            [("colour", (rgb.width(), rgb.height())), ("depth", (depth.width(), depth.height()))]
        {
            if size != (camera.width, camera.height) {
                return Err(invalid(format!(
                    "{what} image at {} s is {}x{} but the calibration is {}x{}",
                    format_timestamp(timestamp_s),
                    size.0,
                    size.1,
                    camera.width,
                    camera.height
                )));
            }
        }
        let stamp = format_timestamp(timestamp_s);
        let rgb_name = format!("rgb/{stamp}.png");
        let depth_name = format!("depth/{stamp}.png");
        write_rgb_png(&self.dir.join(&rgb_name), rgb)?;
        write_depth_png(&self.dir.join(&depth_name), depth, self.depth_scale)?;
        let _ = writeln!(self.rgb_list, "{stamp} {rgb_name}");
        let _ = writeln!(self.depth_list, "{stamp} {depth_name}");
        if let Some(pose) = world_from_camera {
            self.groundtruth += &pose_line(&stamp, pose);
        }
        self.frames += 1;
        self.last_timestamp_us = Some(timestamp_us);
        Ok(())
    }

    /// Writes the instance-id image of the frame added last to `instances/<ts>.png` and lists it in
    /// `instances.txt` (simulator ground truth, for oracle modes). An error before any frame.
    pub fn add_instances(&mut self, ids: &InstanceImage) -> Result<(), IoError> {
        let Some(last) = self.last_timestamp_us else {
            return Err(IoError::InvalidDataset {
                path: self.dir.clone(),
                message: "instance image added before any frame".into(),
            });
        };
        let camera = &self.calibration.camera;
        if (ids.width(), ids.height()) != (camera.width, camera.height) {
            return Err(IoError::InvalidDataset {
                path: self.dir.clone(),
                message: format!(
                    "instance image is {}x{} but the calibration is {}x{}",
                    ids.width(),
                    ids.height(),
                    camera.width,
                    camera.height
                ),
            });
        }
        let stamp = format_timestamp(last as f64 * 1e-6);
        let name = format!("instances/{stamp}.png");
        let dir = self.dir.join("instances");
        std::fs::create_dir_all(&dir).map_err(|source| IoError::Io { path: dir, source })?;
        write_instance_png(&self.dir.join(&name), ids)?;
        let _ = writeln!(self.instance_list, "{stamp} {name}");
        Ok(())
    }

    /// Frames added so far.
    pub fn len(&self) -> usize {
        self.frames
    }

    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// Writes `calibration.yaml`, `groundtruth.txt` (when any frame had a pose), `depth.txt` and, last,
    /// `rgb.txt`. A sequence without frames is an error.
    pub fn finish(self) -> Result<(), IoError> {
        if self.frames == 0 {
            return Err(IoError::InvalidDataset { path: self.dir, message: "no frames were added".into() });
        }
        // The file records the depth scale the images were written with, also when the caller's
        // calibration left it to the default.
        let calibration = Calibration { depth_scale: Some(self.depth_scale), ..self.calibration };
        atomic_write(&self.dir.join(CALIBRATION), calibration.to_file_storage_yaml().as_bytes())?;
        if self.groundtruth.len() > GROUNDTRUTH_HEADER.len() {
            atomic_write(&self.dir.join(GROUNDTRUTH), self.groundtruth.as_bytes())?;
        }
        if self.instance_list.len() > INSTANCE_HEADER.len() {
            atomic_write(&self.dir.join(INSTANCE_LIST), self.instance_list.as_bytes())?;
        }
        atomic_write(&self.dir.join(DEPTH_LIST), self.depth_list.as_bytes())?;
        atomic_write(&self.dir.join(RGB_LIST), self.rgb_list.as_bytes())
    }
}

/// `timestamp tx ty tz qx qy qz qw` with nanometre precision, newline-terminated.
fn pose_line(stamp: &str, pose: &Pose3) -> String {
    let t = pose.translation();
    let q = pose.rotation();
    format!("{stamp} {:.9} {:.9} {:.9} {:.9} {:.9} {:.9} {:.9}\n", t.x, t.y, t.z, q.i, q.j, q.k, q.w)
}

/// One associated colour and depth image of a [`TumSequence`].
#[derive(Clone, Debug, PartialEq)]
pub struct TumEntry {
    /// The colour image's timestamp: the frame's time.
    pub timestamp_s: f64,
    pub depth_timestamp_s: f64,
    pub rgb_path: PathBuf,
    pub depth_path: PathBuf,
}

/// A frame of a [`TumSequence`], images decoded (depth in metres, 0 = missing).
#[derive(Clone, Debug, PartialEq)]
pub struct TumFrame {
    pub timestamp_s: f64,
    pub depth_timestamp_s: f64,
    pub rgb: RgbImage,
    pub depth: DepthImage,
}

/// A TUM RGB-D directory: the associated colour/depth pairs, the ground truth when present, and the
/// calibration when the directory has a `calibration.yaml`. Images are read on demand.
#[derive(Clone, Debug)]
pub struct TumSequence {
    dir: PathBuf,
    depth_scale: f64,
    calibration: Option<Calibration>,
    entries: Vec<TumEntry>,
    groundtruth: Option<Trajectory>,
    /// Per entry, its instance-id image when the directory has `instances.txt` (generated episodes).
    instances: Option<Vec<Option<PathBuf>>>,
}

impl TumSequence {
    /// Reads the lists of `dir` and associates them. The depth scale is `depth_scale` if given, else the
    /// `depth_scale` of `dir/calibration.yaml` if there is one, else [`TUM_DEFAULT_DEPTH_SCALE`]. A
    /// sequence in which no colour image pairs with a depth image is an error.
    pub fn open(dir: &Path, depth_scale: Option<f64>) -> Result<Self, IoError> {
        let invalid = |message: String| IoError::InvalidDataset { path: dir.into(), message };
        let calibration_path = dir.join(CALIBRATION);
        let calibration =
            if calibration_path.is_file() { Some(crate::read_calibration(&calibration_path)?) } else { None };
        let depth_scale = depth_scale
            .or_else(|| calibration.as_ref().and_then(|c| c.depth_scale))
            .unwrap_or(TUM_DEFAULT_DEPTH_SCALE);
        if !(depth_scale.is_finite() && depth_scale > 0.0) {
            return Err(invalid(format!("depth scale {depth_scale} must be positive")));
        }

        let rgb = read_list(&dir.join(RGB_LIST))?;
        let depth = read_list(&dir.join(DEPTH_LIST))?;
        let rgb_stamps: Vec<f64> = rgb.iter().map(|(t, _)| *t).collect();
        let depth_stamps: Vec<f64> = depth.iter().map(|(t, _)| *t).collect();
        let entries: Vec<TumEntry> = associate(&rgb_stamps, &depth_stamps, TUM_MAX_DIFFERENCE_S)
            .into_iter()
            .map(|(i, j)| TumEntry {
                timestamp_s: rgb[i].0,
                depth_timestamp_s: depth[j].0,
                rgb_path: dir.join(&rgb[i].1),
                depth_path: dir.join(&depth[j].1),
            })
            .collect();
        if entries.is_empty() {
            return Err(invalid(format!(
                "no colour image has a depth image within {TUM_MAX_DIFFERENCE_S} s ({} colour, {} depth \
                 entries)",
                rgb.len(),
                depth.len()
            )));
        }

        let groundtruth_path = dir.join(GROUNDTRUTH);
        let groundtruth =
            if groundtruth_path.is_file() { Some(read_trajectory_tum(&groundtruth_path)?) } else { None };
        let instance_list = dir.join(INSTANCE_LIST);
        let instances = if instance_list.is_file() {
            let listed: std::collections::HashMap<i64, PathBuf> = read_list(&instance_list)?
                .into_iter()
                .map(|(t, name)| (microseconds(t), dir.join(name)))
                .collect();
            Some(entries.iter().map(|e| listed.get(&microseconds(e.timestamp_s)).cloned()).collect())
        } else {
            None
        };
        Ok(Self { dir: dir.into(), depth_scale, calibration, entries, groundtruth, instances })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Depth image units per metre used to decode depth.
    pub fn depth_scale(&self) -> f64 {
        self.depth_scale
    }

    /// The directory's `calibration.yaml`, if it has one.
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// `groundtruth.txt` (camera-to-world), if the directory has one.
    pub fn groundtruth(&self) -> Option<&Trajectory> {
        self.groundtruth.as_ref()
    }

    /// The associated pairs, sorted by colour timestamp.
    /// Whether the directory lists instance-id images (`instances.txt`, generated episodes only).
    pub fn has_instances(&self) -> bool {
        self.instances.is_some()
    }

    /// The instance-id image of entry `index` (simulator ground truth: for oracle modes only), or `None`
    /// when the directory has none for that frame.
    pub fn instance_image(&self, index: usize) -> Result<Option<InstanceImage>, IoError> {
        match self.instances.as_ref().and_then(|list| list.get(index)).and_then(Option::as_ref) {
            Some(path) => read_instance_png(path).map(Some),
            None => Ok(None),
        }
    }

    pub fn entries(&self) -> &[TumEntry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads the images of frame `index`; colour and depth must have the same size.
    pub fn frame(&self, index: usize) -> Result<TumFrame, IoError> {
        let Some(entry) = self.entries.get(index) else {
            return Err(IoError::InvalidDataset {
                path: self.dir.clone(),
                message: format!("frame {index} does not exist ({} frames)", self.entries.len()),
            });
        };
        let rgb = read_rgb(&entry.rgb_path)?;
        let depth = read_depth_png(&entry.depth_path, self.depth_scale)?;
        if (rgb.width(), rgb.height()) != (depth.width(), depth.height()) {
            return Err(IoError::InvalidDataset {
                path: entry.depth_path.clone(),
                message: format!(
                    "depth image is {}x{} but its colour image {} is {}x{}",
                    depth.width(),
                    depth.height(),
                    entry.rgb_path.display(),
                    rgb.width(),
                    rgb.height()
                ),
            });
        }
        Ok(TumFrame {
            timestamp_s: entry.timestamp_s,
            depth_timestamp_s: entry.depth_timestamp_s,
            rgb,
            depth,
        })
    }

    /// The frames in order, each read when the iterator reaches it.
    pub fn frames(&self) -> impl Iterator<Item = Result<TumFrame, IoError>> + '_ {
        (0..self.entries.len()).map(|index| self.frame(index))
    }
}

/// The data lines of a file: 1-based line number and fields, skipping blank lines and `#` comments.
fn data_lines(path: &Path) -> Result<Vec<(usize, Vec<String>)>, IoError> {
    let text = std::fs::read_to_string(path).map_err(|source| IoError::Io { path: path.into(), source })?;
    Ok(text_lines(&text))
}

/// The data lines of a text: 1-based line number and fields, skipping blank lines and `#` comments.
fn text_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim();
            !line.is_empty() && !line.starts_with('#')
        })
        .map(|(index, line)| {
            let fields = line.split_whitespace().map(str::to_string).collect();
            (index + 1, fields)
        })
        .collect()
}

fn parse_number(path: &Path, line: usize, what: &str, field: &str) -> Result<f64, IoError> {
    match field.parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(IoError::MalformedLine {
            path: path.into(),
            line,
            message: format!("{what} {field:?} is not a finite number"),
        }),
    }
}

/// Reads `rgb.txt` or `depth.txt`: `timestamp filename` lines, sorted by timestamp on return.
fn read_list(path: &Path) -> Result<Vec<(f64, String)>, IoError> {
    parse_list_lines(data_lines(path)?, path)
}

/// Parses the text of `rgb.txt` or `depth.txt` (see [`TumSequence::open`]); `path` names the file in
/// errors. Entries are sorted by timestamp on return; a repeated timestamp or an empty list is an error.
pub fn parse_list(text: &str, path: &Path) -> Result<Vec<(f64, String)>, IoError> {
    parse_list_lines(text_lines(text), path)
}

fn parse_list_lines(lines: Vec<(usize, Vec<String>)>, path: &Path) -> Result<Vec<(f64, String)>, IoError> {
    let mut entries = Vec::new();
    let mut lines_of_entries = Vec::new();
    for (line, fields) in lines {
        let [stamp, file] = fields.as_slice() else {
            return Err(IoError::MalformedLine {
                path: path.into(),
                line,
                message: format!("expected `timestamp filename`, found {} fields", fields.len()),
            });
        };
        entries.push((parse_number(path, line, "timestamp", stamp)?, file.clone()));
        lines_of_entries.push(line);
    }
    if entries.is_empty() {
        return Err(IoError::InvalidDataset { path: path.into(), message: "the list has no entries".into() });
    }
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| entries[a].0.total_cmp(&entries[b].0));
    for pair in order.windows(2) {
        if entries[pair[0]].0 == entries[pair[1]].0 {
            let (a, b) = (lines_of_entries[pair[0]], lines_of_entries[pair[1]]);
            return Err(IoError::MalformedLine {
                path: path.into(),
                line: a.max(b),
                message: format!("timestamp {} repeats line {}", entries[pair[0]].0, a.min(b)),
            });
        }
    }
    Ok(order.into_iter().map(|i| entries[i].clone()).collect())
}

/// Reads a trajectory in the TUM format: `timestamp tx ty tz qx qy qz qw` lines (camera-to-world, the
/// quaternion normalised on reading), `#` comments and blank lines skipped. Timestamps must increase; a
/// file without poses is an error.
pub fn read_trajectory_tum(path: &Path) -> Result<Trajectory, IoError> {
    trajectory_from_lines(data_lines(path)?, path)
}

/// Parses the text of a TUM trajectory file (see [`read_trajectory_tum`]); `path` names it in errors.
pub fn parse_trajectory_tum(text: &str, path: &Path) -> Result<Trajectory, IoError> {
    trajectory_from_lines(text_lines(text), path)
}

fn trajectory_from_lines(lines: Vec<(usize, Vec<String>)>, path: &Path) -> Result<Trajectory, IoError> {
    let malformed =
        |line: usize, message: String| IoError::MalformedLine { path: path.into(), line, message };
    let mut poses: Vec<TimedPose> = Vec::new();
    for (line, fields) in lines {
        if fields.len() != 8 {
            return Err(malformed(
                line,
                format!("expected `timestamp tx ty tz qx qy qz qw`, found {} fields", fields.len()),
            ));
        }
        let mut values = [0.0; 8];
        for (value, (field, what)) in
            values.iter_mut().zip(fields.iter().zip(["timestamp", "tx", "ty", "tz", "qx", "qy", "qz", "qw"]))
        {
            *value = parse_number(path, line, what, field)?;
        }
        let [timestamp_s, tx, ty, tz, qx, qy, qz, qw] = values;
        let norm = (qx * qx + qy * qy + qz * qz + qw * qw).sqrt();
        if !(norm > 1e-6) {
            return Err(malformed(line, "the quaternion has zero length".into()));
        }
        let world_from_camera = pose_from_parts([tx, ty, tz], [qx / norm, qy / norm, qz / norm, qw / norm])
            .map_err(|message| malformed(line, message))?;
        if let Some(previous) = poses.last()
            && !(timestamp_s > previous.timestamp_s)
        {
            return Err(malformed(
                line,
                format!("timestamps must increase: {timestamp_s} after {}", previous.timestamp_s),
            ));
        }
        poses.push(TimedPose { timestamp_s, world_from_camera });
    }
    if poses.is_empty() {
        return Err(IoError::InvalidDataset { path: path.into(), message: "the file holds no poses".into() });
    }
    Trajectory::new(poses).map_err(IoError::from)
}

/// Builds a pose from a translation and a unit quaternion (x, y, z, w) through `Pose3`'s validated
/// serialised form, which is the one constructor of `gst-core` that needs no nalgebra types here.
fn pose_from_parts(translation: [f64; 3], rotation_xyzw: [f64; 4]) -> Result<Pose3, String> {
    let value = serde_json::json!({ "translation": translation, "rotation_xyzw": rotation_xyzw });
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Writes a trajectory in the TUM format (six-decimal timestamps, camera-to-world), atomically. Poses
/// closer than a microsecond, which the format cannot tell apart, are an error, and so is an empty
/// trajectory (which [`read_trajectory_tum`] would refuse).
pub fn write_trajectory_tum(path: &Path, trajectory: &Trajectory) -> Result<(), IoError> {
    if trajectory.is_empty() {
        return Err(IoError::InvalidDataset {
            path: path.into(),
            message: "the trajectory has no poses".into(),
        });
    }
    let mut text = String::from(TRAJECTORY_HEADER);
    let mut previous_us = None;
    for pose in trajectory.poses() {
        let timestamp_us = microseconds(pose.timestamp_s);
        if previous_us.is_some_and(|previous| timestamp_us <= previous) {
            return Err(IoError::InvalidDataset {
                path: path.into(),
                message: format!(
                    "poses at {} s are closer than the format's 1 µs resolution",
                    format_timestamp(pose.timestamp_s)
                ),
            });
        }
        previous_us = Some(timestamp_us);
        text += &pose_line(&format_timestamp(pose.timestamp_s), &pose.world_from_camera);
    }
    atomic_write(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::{Image, PinholeCamera};

    const WIDTH: u32 = 16;
    const HEIGHT: u32 = 12;

    fn calibration() -> Calibration {
        Calibration {
            camera: PinholeCamera {
                width: WIDTH,
                height: HEIGHT,
                fx: 20.0,
                fy: 20.0,
                cx: 7.5,
                cy: 5.5,
                distortion: Default::default(),
            },
            depth_scale: Some(5000.0),
            camera_name: Some("test".into()),
        }
    }

    fn rgb_frame(index: u32) -> RgbImage {
        let data = (0..WIDTH * HEIGHT)
            .map(|p| [(p * 7 + index) as u8, (p / WIDTH * 20) as u8, index as u8])
            .collect();
        Image::from_vec(WIDTH, HEIGHT, data).expect("size")
    }

    fn depth_frame(index: u32) -> DepthImage {
        let data = (0..WIDTH * HEIGHT)
            .map(|p| if p % 17 == 0 { 0.0 } else { 0.5 + 0.01234 * (p + index) as f32 })
            .collect();
        Image::from_vec(WIDTH, HEIGHT, data).expect("size")
    }

    fn pose(index: u32) -> Pose3 {
        let value = serde_json::json!({
            "translation": [0.1 * f64::from(index), -2.0, 1.4],
            "rotation_xyzw": [0.0, 0.0, (0.1 * f64::from(index)).sin(), (0.1 * f64::from(index)).cos()],
        });
        serde_json::from_value(value).expect("unit quaternion")
    }

    fn error_of<T: std::fmt::Debug>(result: Result<T, IoError>) -> String {
        result.expect_err("should fail").to_string()
    }

    #[test]
    fn writer_and_reader_round_trip() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("seq");
        let mut writer = TumWriter::create(&root, &calibration())?;
        for index in 0..5u32 {
            let timestamp_s = 1305031102.175304 + f64::from(index) / 30.0;
            let pose = pose(index);
            writer.add_frame(timestamp_s, &rgb_frame(index), &depth_frame(index), Some(&pose))?;
        }
        writer.finish()?;

        let rgb_txt = std::fs::read_to_string(root.join("rgb.txt"))?;
        assert!(rgb_txt.starts_with("# color images\n# file: "), "{rgb_txt}");
        assert_eq!(rgb_txt.lines().filter(|l| l.starts_with('#')).count(), 3);
        assert!(rgb_txt.contains("\n1305031102.175304 rgb/1305031102.175304.png\n"), "{rgb_txt}");
        assert!(std::fs::read_to_string(root.join("depth.txt"))?.starts_with("# depth maps\n"));

        let sequence = TumSequence::open(&root, None)?;
        assert_eq!(sequence.len(), 5);
        assert_eq!(sequence.depth_scale(), 5000.0);
        assert_eq!(sequence.calibration(), Some(&calibration()));
        for (index, frame) in sequence.frames().enumerate() {
            let frame = frame?;
            let expected_s = 1305031102.175304 + index as f64 / 30.0;
            assert!((frame.timestamp_s - expected_s).abs() < 1e-6);
            assert_eq!(frame.rgb, rgb_frame(index as u32));
            for (a, b) in frame.depth.data().iter().zip(depth_frame(index as u32).data()) {
                assert!((a - b).abs() <= 0.0001 + 1e-6, "depth {a} vs {b}");
            }
        }
        let groundtruth = sequence.groundtruth().ok_or("ground truth")?;
        assert_eq!(groundtruth.len(), 5);
        for (index, timed) in groundtruth.poses().iter().enumerate() {
            let expected = pose(index as u32);
            let back = timed.world_from_camera;
            assert!((back.translation() - expected.translation()).norm() < 1e-6);
            assert!(back.rotation().angle_to(&expected.rotation()) < 1e-6);
        }

        // An explicit depth scale wins over the calibration's.
        let halved = TumSequence::open(&root, Some(10000.0))?.frame(0)?;
        assert!((halved.depth.data()[1] - depth_frame(0).data()[1] / 2.0).abs() < 1e-4);
        assert!(error_of(sequence.frame(5)).contains("frame 5 does not exist"));
        assert!(!sequence.has_instances());
        assert_eq!(sequence.instance_image(0)?, None);
        Ok(())
    }

    #[test]
    fn instance_images_round_trip_per_frame() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("seq");
        let mut writer = TumWriter::create(&root, &calibration())?;
        let ids = |index: u32| -> InstanceImage {
            Image::from_vec(WIDTH, HEIGHT, (0..WIDTH * HEIGHT).map(|p| ((p + index) % 300) as u16).collect())
                .expect("size")
        };
        assert!(error_of(writer.add_instances(&ids(0))).contains("before any frame"));
        for index in 0..3u32 {
            writer.add_frame(10.0 + f64::from(index) * 0.1, &rgb_frame(index), &depth_frame(index), None)?;
            // Frame 1 has no instance image.
            if index != 1 {
                writer.add_instances(&ids(index))?;
            }
        }
        let small: InstanceImage = Image::from_vec(2, 2, vec![0; 4]).expect("size");
        assert!(error_of(writer.add_instances(&small)).contains("instance image is 2x2"));
        writer.finish()?;
        let sequence = TumSequence::open(&root, None)?;
        assert!(sequence.has_instances());
        assert_eq!(sequence.instance_image(0)?, Some(ids(0)));
        assert_eq!(sequence.instance_image(1)?, None);
        assert_eq!(sequence.instance_image(2)?, Some(ids(2)));
        assert_eq!(sequence.instance_image(3)?, None);
        Ok(())
    }

    #[test]
    fn writer_refuses_bad_frames() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let unscaled = Calibration { depth_scale: None, ..calibration() };
        let mut writer = TumWriter::create(dir.path(), &unscaled)?;
        writer.add_frame(1.0, &rgb_frame(0), &depth_frame(0), None)?;
        assert!(error_of(writer.add_frame(1.0, &rgb_frame(1), &depth_frame(1), None)).contains("increase"));
        let small = Image::filled(WIDTH / 2, HEIGHT, 1.0f32);
        assert!(error_of(writer.add_frame(2.0, &rgb_frame(1), &small, None)).contains("8x12"));
        writer.finish()?;
        assert!(!dir.path().join("groundtruth.txt").exists(), "no poses, no ground truth");
        let sequence = TumSequence::open(dir.path(), None)?;
        assert_eq!(sequence.len(), 1, "the refused frames left no list entries");
        let written = sequence.calibration().ok_or("calibration.yaml")?;
        assert_eq!(written.depth_scale, Some(TUM_DEFAULT_DEPTH_SCALE), "the file records the scale used");
        assert!(
            error_of(TumWriter::create(&dir.path().join("e"), &calibration())?.finish())
                .contains("no frames")
        );
        Ok(())
    }

    /// rgb.txt and depth.txt exactly as TUM ships them (fr1/xyz), with a missing depth stamp.
    #[test]
    fn reads_tum_lists_as_shipped() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        std::fs::write(
            root.join("rgb.txt"),
            "# color images\n# file: 'rgbd_dataset_freiburg1_xyz.bag'\n# timestamp filename\n\
             1305031102.175304 rgb/1305031102.175304.png\n\
             1305031102.211214 rgb/1305031102.211214.png\n\
             1305031102.243211 rgb/1305031102.243211.png\n",
        )?;
        std::fs::write(
            root.join("depth.txt"),
            "# depth maps\n# file: 'rgbd_dataset_freiburg1_xyz.bag'\n# timestamp filename\n\
             1305031102.160407 depth/1305031102.160407.png\n\
             1305031102.194330 depth/1305031102.194330.png\n",
        )?;
        std::fs::write(
            root.join("groundtruth.txt"),
            "# ground truth trajectory\n# file: 'rgbd_dataset_freiburg1_xyz.bag'\n# timestamp tx ty tz qx qy qz qw\n\
             1305031098.6659 1.3563 0.6305 1.6380 0.6132 0.5962 -0.3311 -0.3986\n\
             1305031098.6758 1.3543 0.6306 1.6360 0.6129 0.5966 -0.3316 -0.3980\n",
        )?;
        let sequence = TumSequence::open(root, None)?;
        let pairs: Vec<(f64, f64)> =
            sequence.entries().iter().map(|e| (e.timestamp_s, e.depth_timestamp_s)).collect();
        // 102.175304 pairs with 102.160407 (15 ms); 102.211214 with 102.194330 (17 ms); 102.243211 has no
        // depth left within 20 ms.
        assert_eq!(
            pairs,
            vec![(1305031102.175304, 1305031102.160407), (1305031102.211214, 1305031102.19433)]
        );
        assert_eq!(sequence.entries()[0].rgb_path, root.join("rgb/1305031102.175304.png"));
        assert_eq!(sequence.depth_scale(), TUM_DEFAULT_DEPTH_SCALE);
        assert!(sequence.calibration().is_none());
        let groundtruth = sequence.groundtruth().ok_or("ground truth")?;
        assert_eq!(groundtruth.len(), 2);
        assert!((groundtruth.poses()[0].world_from_camera.translation().x - 1.3563).abs() < 1e-12);
        // The images do not exist: reading a frame names the missing file.
        assert!(error_of(sequence.frame(0)).contains("1305031102.175304.png"));
        Ok(())
    }

    #[test]
    fn association_follows_associate_py() {
        // Jittered depth stamps, one depth frame missing, one too far away (25 ms), and a depth stamp
        // that two colour stamps compete for.
        let rgb = [0.000, 0.100, 0.200, 0.300, 0.400, 0.500];
        let depth = [0.004, 0.093, 0.325, 0.412, 0.505, 0.515];
        let pairs = associate(&rgb, &depth, TUM_MAX_DIFFERENCE_S);
        assert_eq!(pairs, vec![(0, 0), (1, 1), (4, 3), (5, 4)]);
        // Closest pairs first: 0.505 is 5 ms from 0.500 and wins over 0.515 (15 ms).
        let pairs = associate(&[0.5], &[0.515, 0.505], TUM_MAX_DIFFERENCE_S);
        assert_eq!(pairs, vec![(0, 1)]);
        // Each stamp used once: two colour stamps near one depth stamp.
        let pairs = associate(&[1.000, 1.010], &[1.008], TUM_MAX_DIFFERENCE_S);
        assert_eq!(pairs, vec![(1, 0)]);
        // Exactly the maximum difference is not associated (associate.py compares with `<`).
        assert!(associate(&[1.0], &[1.5], 0.5).is_empty());
        // Unsorted input, sorted output.
        assert_eq!(associate(&[0.2, 0.1], &[0.1, 0.2], TUM_MAX_DIFFERENCE_S), vec![(1, 0), (0, 1)]);
    }

    #[test]
    fn malformed_lists_name_file_and_line() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        let good_depth = "# depth maps\n1.0 depth/1.png\n";
        let cases = [
            ("rgb.txt", "# color images\n\n1.0 rgb/1.png\n2.0\n", "rgb.txt, line 4"),
            ("rgb.txt", "# color images\n1.0 rgb/1.png extra\n", "rgb.txt, line 2"),
            ("rgb.txt", "# color images\nabc rgb/1.png\n", "rgb.txt, line 2: timestamp \"abc\""),
            ("rgb.txt", "1.0 rgb/1.png\n1.0 rgb/2.png\n", "rgb.txt, line 2: timestamp 1 repeats line 1"),
            ("rgb.txt", "# only comments\n", "rgb.txt: the list has no entries"),
            ("rgb.txt", "5.0 rgb/5.png\n", "no colour image has a depth image within 0.02 s"),
            ("groundtruth.txt", "# gt\n1.0 0 0 0 0 0 0 1\n0.5 0 0 0 0 0 0 1\n", "groundtruth.txt, line 3"),
            ("groundtruth.txt", "1.0 0 0 0 0 0 0\n", "groundtruth.txt, line 1: expected"),
            ("groundtruth.txt", "1.0 0 0 0 0 0 0 0\n", "groundtruth.txt, line 1: the quaternion"),
            ("groundtruth.txt", "1.0 0 0 nan 0 0 0 1\n", "groundtruth.txt, line 1: tz"),
            ("groundtruth.txt", "# no poses\n", "groundtruth.txt: the file holds no poses"),
        ];
        for (file, text, expected) in cases {
            std::fs::write(root.join("rgb.txt"), "1.0 rgb/1.png\n")?;
            std::fs::write(root.join("depth.txt"), good_depth)?;
            let _ = std::fs::remove_file(root.join("groundtruth.txt"));
            std::fs::write(root.join(file), text)?;
            let error = error_of(TumSequence::open(root, None));
            assert!(error.contains(expected), "{error} should contain {expected}");
        }
        std::fs::remove_file(root.join("depth.txt"))?;
        std::fs::write(root.join("rgb.txt"), "1.0 rgb/1.png\n")?;
        assert!(error_of(TumSequence::open(root, None)).contains("depth.txt"));
        std::fs::write(root.join("depth.txt"), good_depth)?;
        std::fs::write(root.join("calibration.yaml"), "image_width: 640\n")?;
        assert!(error_of(TumSequence::open(root, None)).contains("calibration.yaml"));
        Ok(())
    }

    #[test]
    fn trajectories_round_trip_in_tum_format() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("trajectory.tum");
        let trajectory = Trajectory::new(
            (0..4u32)
                .map(|i| TimedPose { timestamp_s: 0.1 * f64::from(i), world_from_camera: pose(i) })
                .collect(),
        )?;
        write_trajectory_tum(&path, &trajectory)?;
        let text = std::fs::read_to_string(&path)?;
        assert!(
            text.starts_with("# timestamp tx ty tz qx qy qz qw\n0.000000 0.000000000 -2.000000000 "),
            "{text}"
        );
        let back = read_trajectory_tum(&path)?;
        assert_eq!(back.len(), 4);
        for (a, b) in back.poses().iter().zip(trajectory.poses()) {
            assert!((a.timestamp_s - b.timestamp_s).abs() < 1e-9);
            assert!((a.world_from_camera.translation() - b.world_from_camera.translation()).norm() < 1e-6);
            assert!(a.world_from_camera.rotation().angle_to(&b.world_from_camera.rotation()) < 1e-6);
        }
        let crowded = Trajectory::new(vec![
            TimedPose { timestamp_s: 1.0, world_from_camera: pose(0) },
            TimedPose { timestamp_s: 1.0 + 1e-7, world_from_camera: pose(1) },
        ])?;
        assert!(error_of(write_trajectory_tum(&path, &crowded)).contains("1 µs"));
        assert!(error_of(write_trajectory_tum(&path, &Trajectory::default())).contains("no poses"));
        Ok(())
    }
}
