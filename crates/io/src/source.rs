//! Frame sources: what a robot has — timestamped colour (and depth) frames and a calibration file — behind
//! one pull trait, [`FrameSource`], so that the SLAM front end never cares where frames come from.
//!
//! | source | what it reads | depth | ground truth |
//! |---|---|---|---|
//! | [`TumSource`] | a TUM RGB-D directory (`rgb.txt`, `depth.txt`, images), colour and depth associated like `associate.py` | yes | `groundtruth.txt`, when present |
//! | generated episode | `DIR/<split>/tum/<scene>/` written by `gst generate` (a [`TumSource`]) | yes | yes |
//! | [`ImageFolderSource`] | a folder of colour images, optionally a `depth/` folder matched by file stem | optional | no |
//! | [`VideoSource`] | a video file (mp4) through OpenCV | no | no |
//!
//! [`open_source`] tells the kind from the path. The calibration is the file given by the caller, else
//! the source's own `calibration.yaml` (any format [`crate::read_calibration`] reads); sources without
//! either are refused before any frame is read. Frames must have the calibration's size.
//!
//! When the calibration has distortion, sources undistort every frame through OpenCV ([`Undistorter`])
//! and report the distortion-free camera from [`FrameSource::calibration`]: consumers can treat every
//! frame as an ideal pinhole image. [`SourceOptions::undistort`] turns that off.
//!
//! Bad frames (a corrupt image, a missing depth file, a frame of the wrong size) are errors that name the
//! file; a source that has returned an error can be asked for the next frame again.

use std::path::{Path, PathBuf};

use gst_core::{Calibration, Pose3, RgbdFrame, Trajectory};

use crate::tum::{TUM_DEFAULT_DEPTH_SCALE, TUM_MAX_DIFFERENCE_S, TumSequence};
use crate::{IoError, Undistorter, VideoReader, read_calibration, read_depth_png, read_rgb};

/// The calibration file a source directory may carry.
pub const SOURCE_CALIBRATION_FILE: &str = "calibration.yaml";

/// Frame rate assumed for an image folder whose file names are not timestamps, when none is given.
pub const DEFAULT_IMAGE_FOLDER_FPS: f64 = 30.0;

/// File stems of at least this many digits (and no decimal point) are nanosecond timestamps, as ROS
/// tools and EuRoC-style datasets name images (`1403636579763555584.png`); shorter digit runs are frame
/// numbers.
const NANOSECOND_STEM_DIGITS: usize = 16;

/// Image extensions an image folder's colour images may have (OpenCV reads them all).
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "bmp", "tif", "tiff", "ppm", "pgm", "webp"];

/// Subfolders that hold the colour images of an image folder, in the order they are looked for.
const RGB_FOLDERS: &[&str] = &["rgb", "color", "colour"];

/// The subfolder of an image folder that holds 16-bit depth PNGs.
const DEPTH_FOLDER: &str = "depth";

/// Video extensions [`open_source`] treats as videos.
const VIDEO_EXTENSIONS: &[&str] = &["mp4", "mov", "mkv", "avi", "m4v", "webm"];

/// What kind of recording a source reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Tum,
    /// A TUM RGB-D export of a `gst generate` episode.
    GeneratedEpisode,
    ImageFolder,
    Video,
    /// A robot recording: an MCAP file, a rosbag2 folder or a ROS 1 bag (read by the `gst-bag` crate).
    Bag,
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tum => "TUM RGB-D sequence",
            Self::GeneratedEpisode => "generated episode",
            Self::ImageFolder => "image folder",
            Self::Video => "video",
            Self::Bag => "ROS bag",
        })
    }
}

/// A pull source of RGB-D frames.
pub trait FrameSource {
    /// A short description for messages, e.g. `TUM RGB-D sequence rgbd_dataset_freiburg1_xyz`.
    fn name(&self) -> &str;

    /// The file or directory the frames come from.
    fn path(&self) -> &Path;

    fn kind(&self) -> SourceKind;

    /// The calibration of the frames as delivered: distortion-free when the source undistorts.
    fn calibration(&self) -> &Calibration;

    /// Whether frames carry depth.
    fn has_depth(&self) -> bool;

    /// The number of frames, when known before reading them (not for videos).
    fn len(&self) -> Option<usize>;

    /// Whether the source is known to have no frames.
    fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The next frame, or `None` after the last one.
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError>;
}

impl<S: FrameSource + ?Sized> FrameSource for Box<S> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn path(&self) -> &Path {
        (**self).path()
    }
    fn kind(&self) -> SourceKind {
        (**self).kind()
    }
    fn calibration(&self) -> &Calibration {
        (**self).calibration()
    }
    fn has_depth(&self) -> bool {
        (**self).has_depth()
    }
    fn len(&self) -> Option<usize> {
        (**self).len()
    }
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        (**self).next_frame()
    }
}

/// How a source is opened. The defaults suit a recording with a calibration file inside it.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceOptions {
    /// The calibration file (OpenCV FileStorage, ROS camera_info or Kalibr camchain). Default: none, use
    /// the source's own `calibration.yaml`.
    pub calibration: Option<PathBuf>,
    /// Undistort frames when the calibration has distortion. Default: true. Turn off for a consumer that
    /// models distortion itself.
    pub undistort: bool,
    /// Frame rate of an image folder: timestamps are `index / fps` (in the folder's order). Default: none,
    /// timestamps from the file names when they are timestamps, else [`DEFAULT_IMAGE_FOLDER_FPS`].
    pub fps: Option<f64>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self { calibration: None, undistort: true, fps: None }
    }
}

impl SourceOptions {
    /// Options with a calibration file and the other defaults.
    pub fn with_calibration(calibration: Option<&Path>) -> Self {
        Self { calibration: calibration.map(Path::to_path_buf), ..Self::default() }
    }

    fn validate(&self, path: &Path) -> Result<(), IoError> {
        if let Some(fps) = self.fps
            && !(fps.is_finite() && fps > 0.0)
        {
            return Err(source_error(path, format!("frame rate {fps} must be positive")));
        }
        Ok(())
    }
}

fn source_error(path: &Path, message: String) -> IoError {
    IoError::Source { path: path.into(), message }
}

/// Opens `path` as whichever source it is (see the module documentation), with `calibration` as the
/// calibration file if given.
pub fn open_source(path: &Path, calibration: Option<&Path>) -> Result<Box<dyn FrameSource + Send>, IoError> {
    open_source_with(path, &SourceOptions::with_calibration(calibration))
}

/// [`open_source`] with all options.
pub fn open_source_with(
    path: &Path,
    options: &SourceOptions,
) -> Result<Box<dyn FrameSource + Send>, IoError> {
    options.validate(path)?;
    if !path.exists() {
        return Err(source_error(path, "no such file or directory".into()));
    }
    if path.is_file() {
        if has_extension(path, VIDEO_EXTENSIONS) {
            return Ok(Box::new(VideoSource::open(path, options)?));
        }
        return Err(source_error(
            path,
            format!(
                "is a file but not a video ({}); frame sources are videos, TUM RGB-D directories, \
                 generated episodes and image folders",
                VIDEO_EXTENSIONS.join(", ")
            ),
        ));
    }
    if is_tum_dir(path) {
        return Ok(Box::new(TumSource::open(path, options)?));
    }
    if let Some(tum_dir) = generated_episode_from(path)? {
        return Ok(Box::new(TumSource::open(&tum_dir, options)?));
    }
    if let Some(layout) = ImageFolderLayout::find(path)? {
        return Ok(Box::new(ImageFolderSource::open_layout(path, layout, options)?));
    }
    Err(source_error(
        path,
        format!(
            "is neither a TUM RGB-D directory (no rgb.txt/depth.txt), nor a generated split (no tum/) or \
             episode, nor an image folder (no images in it or in {}/), nor a video",
            RGB_FOLDERS.join("/, ")
        ),
    ))
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.iter().any(|known| e.eq_ignore_ascii_case(known)))
}

fn is_tum_dir(dir: &Path) -> bool {
    dir.join("rgb.txt").is_file() && dir.join("depth.txt").is_file()
}

/// Loads the calibration: the given file, else `fallback` if it exists; without either, an error about
/// `source` with `hint` appended.
fn load_calibration(
    options: &SourceOptions,
    fallback: &Path,
    source: &Path,
    hint: &str,
) -> Result<(Calibration, PathBuf), IoError> {
    if let Some(path) = &options.calibration {
        return Ok((read_calibration(path)?, path.clone()));
    }
    if fallback.is_file() {
        return Ok((read_calibration(fallback)?, fallback.into()));
    }
    Err(source_error(
        source,
        format!("has no calibration: give a calibration file, or put one at {}{hint}", fallback.display()),
    ))
}

/// The calibration the frames are delivered in, and the undistorter that gets them there.
fn prepare_undistortion(
    calibration: Calibration,
    calibration_path: &Path,
    options: &SourceOptions,
) -> Result<(Calibration, Option<Undistorter>), IoError> {
    if !options.undistort || calibration.camera.distortion.is_zero() {
        return Ok((calibration, None));
    }
    let undistorter = Undistorter::new(&calibration.camera, calibration_path)?;
    let delivered = Calibration { camera: *undistorter.camera(), ..calibration };
    Ok((delivered, Some(undistorter)))
}

/// Checks that an image has the calibration's size.
fn check_size(
    image_path: &Path,
    what: &str,
    (width, height): (u32, u32),
    calibration: &Calibration,
    calibration_path: &Path,
) -> Result<(), IoError> {
    let camera = &calibration.camera;
    if (width, height) != (camera.width, camera.height) {
        return Err(source_error(
            image_path,
            format!(
                "{what} image is {width}x{height} but the calibration {} is {}x{}",
                calibration_path.display(),
                camera.width,
                camera.height
            ),
        ));
    }
    Ok(())
}

/// The ground-truth pose at a frame's time: interpolated between the poses around it, provided the
/// nearest is within [`TUM_MAX_DIFFERENCE_S`] (so that gaps in motion capture give no pose rather than a
/// made-up one).
pub fn ground_truth_at(trajectory: &Trajectory, timestamp_s: f64) -> Option<Pose3> {
    let poses = trajectory.poses();
    let after = poses.partition_point(|p| p.timestamp_s < timestamp_s);
    let nearest =
        [after.checked_sub(1), Some(after)].into_iter().flatten().filter_map(|i| poses.get(i)).min_by(
            |a, b| (a.timestamp_s - timestamp_s).abs().total_cmp(&(b.timestamp_s - timestamp_s).abs()),
        )?;
    if !((nearest.timestamp_s - timestamp_s).abs() < TUM_MAX_DIFFERENCE_S) {
        return None;
    }
    trajectory.interpolate(timestamp_s).or(Some(nearest.world_from_camera))
}

/// A TUM RGB-D directory (or a generated episode, which is one) as a frame source.
#[derive(Debug)]
pub struct TumSource {
    sequence: TumSequence,
    kind: SourceKind,
    name: String,
    calibration: Calibration,
    calibration_path: PathBuf,
    undistorter: Option<Undistorter>,
    next: usize,
}

impl TumSource {
    /// Opens a TUM RGB-D directory. The calibration is `options.calibration`, else the directory's
    /// `calibration.yaml`; the depth scale is the calibration's, else the directory calibration's, else
    /// TUM's 5000 units per metre.
    pub fn open(dir: &Path, options: &SourceOptions) -> Result<Self, IoError> {
        options.validate(dir)?;
        if !is_tum_dir(dir) {
            return Err(source_error(dir, "is not a TUM RGB-D directory (no rgb.txt/depth.txt)".into()));
        }
        let hint = tum_calibration_hint(dir);
        let (calibration, calibration_path) =
            load_calibration(options, &dir.join(SOURCE_CALIBRATION_FILE), dir, &hint)?;
        let sequence = TumSequence::open(dir, calibration.depth_scale)?;
        let calibration = Calibration { depth_scale: Some(sequence.depth_scale()), ..calibration };
        let (calibration, undistorter) = prepare_undistortion(calibration, &calibration_path, options)?;
        let (kind, name) = match generated_split_of(dir) {
            Some(split) => (
                SourceKind::GeneratedEpisode,
                format!("generated episode {} of {}", file_name(dir), split.display()),
            ),
            None => (SourceKind::Tum, format!("TUM RGB-D sequence {}", file_name(dir))),
        };
        Ok(Self { sequence, kind, name, calibration, calibration_path, undistorter, next: 0 })
    }

    /// The underlying sequence (its entries, ground truth and depth scale).
    pub fn sequence(&self) -> &TumSequence {
        &self.sequence
    }

    /// The calibration file in use.
    pub fn calibration_path(&self) -> &Path {
        &self.calibration_path
    }
}

/// Suggests the shipped TUM calibration for a `rgbd_dataset_freiburgN_*` directory.
fn tum_calibration_hint(dir: &Path) -> String {
    let name = file_name(dir);
    ["freiburg1", "freiburg2", "freiburg3"]
        .iter()
        .zip(["tum-fr1.yaml", "tum-fr2.yaml", "tum-fr3.yaml"])
        .find(|(camera, _)| name.contains(*camera))
        .map(|(_, file)| format!(" (for this TUM sequence: calibration/{file} of the gst repository)"))
        .unwrap_or_default()
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

impl FrameSource for TumSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn path(&self) -> &Path {
        self.sequence.dir()
    }

    fn kind(&self) -> SourceKind {
        self.kind
    }

    fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    fn has_depth(&self) -> bool {
        true
    }

    fn len(&self) -> Option<usize> {
        Some(self.sequence.len())
    }

    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        let index = self.next;
        let Some(entry) = self.sequence.entries().get(index) else {
            return Ok(None);
        };
        // Skip a bad frame on the next call rather than failing on it forever.
        self.next += 1;
        let rgb_path = entry.rgb_path.clone();
        let frame = self.sequence.frame(index)?;
        check_size(
            &rgb_path,
            "colour",
            (frame.rgb.width(), frame.rgb.height()),
            &self.calibration,
            &self.calibration_path,
        )?;
        let ground_truth = self.sequence.groundtruth().and_then(|gt| ground_truth_at(gt, frame.timestamp_s));
        let frame = RgbdFrame {
            index,
            timestamp_s: frame.timestamp_s,
            rgb: frame.rgb,
            depth: Some(frame.depth),
            ground_truth,
        };
        match &self.undistorter {
            Some(undistorter) => undistorter.undistort_frame(frame).map(Some),
            None => Ok(Some(frame)),
        }
    }
}

/// The split directory (`DIR/<split>`) of a generated episode's TUM directory (`DIR/<split>/tum/<scene>`).
fn generated_split_of(tum_dir: &Path) -> Option<PathBuf> {
    let parent = tum_dir.parent()?;
    if parent.file_name()? != "tum" {
        return None;
    }
    let split = parent.parent()?;
    (split.join("questions").is_dir() || split.join("scenes").is_dir()).then(|| split.to_path_buf())
}

/// The scenes of a generated split that have a TUM export, sorted.
fn generated_scenes(split_dir: &Path) -> Result<Vec<String>, IoError> {
    let tum = split_dir.join("tum");
    let entries = std::fs::read_dir(&tum).map_err(|source| IoError::Io { path: tum.clone(), source })?;
    let mut scenes = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| IoError::Io { path: tum.clone(), source })?;
        if is_tum_dir(&entry.path()) {
            scenes.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    scenes.sort();
    Ok(scenes)
}

/// The TUM directory of scene `scene` in a `gst generate` split directory (`DIR/<split>`).
pub fn generated_episode_dir(split_dir: &Path, scene: &str) -> Result<PathBuf, IoError> {
    let dir = split_dir.join("tum").join(scene);
    if is_tum_dir(&dir) {
        return Ok(dir);
    }
    let known = if split_dir.join("tum").is_dir() { generated_scenes(split_dir)? } else { Vec::new() };
    Err(source_error(
        split_dir,
        if known.is_empty() {
            format!(
                "has no TUM export of scene {scene:?} (no tum/{scene}/rgb.txt): is it a `gst generate` split?"
            )
        } else {
            format!("has no TUM export of scene {scene:?}; its scenes are {}", known.join(", "))
        },
    ))
}

/// Opens scene `scene` of a `gst generate` split directory.
pub fn open_generated_episode(
    split_dir: &Path,
    scene: &str,
    options: &SourceOptions,
) -> Result<TumSource, IoError> {
    TumSource::open(&generated_episode_dir(split_dir, scene)?, options)
}

/// Resolves a path into a generated split to its episode's TUM directory: the split itself when it holds
/// exactly one scene, or a scene's folder under `scenes/`, `videos/` or `images/`.
fn generated_episode_from(path: &Path) -> Result<Option<PathBuf>, IoError> {
    if path.join("tum").is_dir() {
        let scenes = generated_scenes(path)?;
        return match scenes.as_slice() {
            [scene] => Ok(Some(path.join("tum").join(scene))),
            [] => Err(source_error(path, "is a generated split but tum/ holds no TUM RGB-D export".into())),
            _ => Err(source_error(
                path,
                format!(
                    "is a generated split with {} scenes ({}): name one, as {}",
                    scenes.len(),
                    scenes.join(", "),
                    path.join("tum").join("<scene>").display()
                ),
            )),
        };
    }
    let (Some(parent), Some(scene)) = (path.parent(), path.file_name()) else {
        return Ok(None);
    };
    let in_split_folder = parent.file_name().is_some_and(|n| n == "scenes" || n == "videos" || n == "images");
    if let (true, Some(split)) = (in_split_folder, parent.parent()) {
        let dir = split.join("tum").join(scene);
        if is_tum_dir(&dir) {
            return Ok(Some(dir));
        }
    }
    Ok(None)
}

/// Where an image folder keeps its images.
#[derive(Clone, Debug, PartialEq)]
struct ImageFolderLayout {
    rgb_dir: PathBuf,
    depth_dir: Option<PathBuf>,
}

impl ImageFolderLayout {
    /// The layout of `dir`: colour in `rgb/` (or `color/`, `colour/`) with depth in `depth/` when present,
    /// or colour images directly in `dir`. `None` when there are no images.
    fn find(dir: &Path) -> Result<Option<Self>, IoError> {
        let depth_dir = Some(dir.join(DEPTH_FOLDER)).filter(|d| d.is_dir());
        for name in RGB_FOLDERS {
            let rgb_dir = dir.join(name);
            if rgb_dir.is_dir() && !list_images(&rgb_dir)?.is_empty() {
                return Ok(Some(Self { rgb_dir, depth_dir }));
            }
        }
        if !list_images(dir)?.is_empty() {
            return Ok(Some(Self { rgb_dir: dir.into(), depth_dir: None }));
        }
        Ok(None)
    }
}

/// The image files of a directory (by extension), unsorted.
fn list_images(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Io { path: dir.into(), source })?;
    let mut images = Vec::new();
    for entry in entries {
        let path = entry.map_err(|source| IoError::Io { path: dir.into(), source })?.path();
        if path.is_file() && has_extension(&path, IMAGE_EXTENSIONS) {
            images.push(path);
        }
    }
    Ok(images)
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// How an image folder's frames get their times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FrameTiming {
    /// File stems are seconds (`1305031102.175304.png`).
    StemSeconds,
    /// File stems are integer nanoseconds (`1403636579763555584.png`).
    StemNanoseconds,
    /// Frames in file-name order at a fixed rate, the first at 0 s.
    Fps(f64),
}

/// The timing the stems imply: timestamps when every stem is one, else the frame rate.
fn timing_from_stems(stems: &[String], fps: Option<f64>) -> FrameTiming {
    if let Some(fps) = fps {
        return FrameTiming::Fps(fps);
    }
    let is_seconds = |s: &String| s.contains('.') && s.parse::<f64>().is_ok_and(f64::is_finite);
    let is_nanoseconds =
        |s: &String| s.len() >= NANOSECOND_STEM_DIGITS && s.bytes().all(|b| b.is_ascii_digit());
    if stems.iter().all(is_seconds) {
        FrameTiming::StemSeconds
    } else if stems.iter().all(is_nanoseconds) {
        FrameTiming::StemNanoseconds
    } else {
        FrameTiming::Fps(DEFAULT_IMAGE_FOLDER_FPS)
    }
}

/// One frame of an image folder.
#[derive(Clone, Debug, PartialEq)]
struct FolderEntry {
    timestamp_s: f64,
    rgb_path: PathBuf,
    depth_path: Option<PathBuf>,
}

/// A folder of colour images, with depth images matched by file stem, as a frame source.
///
/// ```text
/// DIR/rgb/<stem>.png|jpg   colour (or color/, colour/, or the images directly in DIR: no depth then)
/// DIR/depth/<stem>.png     16-bit depth in units of 1/depth_scale metres, 0 = missing (optional)
/// DIR/calibration.yaml     used when no calibration file is given
/// ```
///
/// Timestamps come from the file stems when every stem is one (seconds with a decimal point, or integer
/// nanoseconds of at least 16 digits), else from the frame rate with frames in natural file-name order
/// (`2.png` before `10.png`). With a depth folder, every colour image needs its depth image: a missing
/// one is an error that names it. Depth is decoded with the calibration's `depth_scale`, else TUM's 5000.
#[derive(Debug)]
pub struct ImageFolderSource {
    dir: PathBuf,
    name: String,
    timing: FrameTiming,
    depth_scale: f64,
    calibration: Calibration,
    calibration_path: PathBuf,
    undistorter: Option<Undistorter>,
    entries: Vec<FolderEntry>,
    next: usize,
}

impl ImageFolderSource {
    pub fn open(dir: &Path, options: &SourceOptions) -> Result<Self, IoError> {
        options.validate(dir)?;
        if !dir.is_dir() {
            return Err(source_error(dir, "is not a directory".into()));
        }
        let Some(layout) = ImageFolderLayout::find(dir)? else {
            return Err(source_error(
                dir,
                format!(
                    "holds no images ({}), neither directly nor in {}/",
                    IMAGE_EXTENSIONS.join(", "),
                    RGB_FOLDERS.join("/, ")
                ),
            ));
        };
        Self::open_layout(dir, layout, options)
    }

    fn open_layout(dir: &Path, layout: ImageFolderLayout, options: &SourceOptions) -> Result<Self, IoError> {
        let (calibration, calibration_path) =
            load_calibration(options, &dir.join(SOURCE_CALIBRATION_FILE), dir, "")?;
        let depth_scale = calibration.depth_scale.unwrap_or(TUM_DEFAULT_DEPTH_SCALE);

        let mut rgb = list_images(&layout.rgb_dir)?;
        rgb.sort();
        let stems: Vec<String> = rgb.iter().map(|p| stem(p)).collect();
        for pair in rgb.windows(2) {
            if stem(&pair[0]) == stem(&pair[1]) {
                return Err(source_error(
                    &pair[1],
                    format!("has the same file stem as {}: frames are matched by stem", pair[0].display()),
                ));
            }
        }
        let timing = timing_from_stems(&stems, options.fps);

        let depth_by_stem = match &layout.depth_dir {
            Some(depth_dir) => {
                let mut depth: Vec<PathBuf> =
                    list_images(depth_dir)?.into_iter().filter(|p| has_extension(p, &["png"])).collect();
                depth.sort();
                Some(depth.into_iter().map(|p| (stem(&p), p)).collect::<std::collections::BTreeMap<_, _>>())
            }
            None => None,
        };

        let mut entries = Vec::with_capacity(rgb.len());
        for (rgb_path, stem) in rgb.into_iter().zip(&stems) {
            let depth_path = match (&depth_by_stem, &layout.depth_dir) {
                (Some(by_stem), Some(depth_dir)) => match by_stem.get(stem) {
                    Some(path) => Some(path.clone()),
                    None => {
                        return Err(source_error(
                            &depth_dir.join(format!("{stem}.png")),
                            format!(
                                "is missing: the depth image of {} (matched by file stem)",
                                rgb_path.display()
                            ),
                        ));
                    }
                },
                _ => None,
            };
            let timestamp_s = match timing {
                FrameTiming::StemSeconds => stem.parse::<f64>().unwrap_or(f64::NAN),
                FrameTiming::StemNanoseconds => stem.parse::<u64>().map_or(f64::NAN, |ns| ns as f64 * 1e-9),
                FrameTiming::Fps(_) => 0.0, // set below, once the order is known
            };
            entries.push(FolderEntry { timestamp_s, rgb_path, depth_path });
        }
        match timing {
            FrameTiming::Fps(fps) => {
                entries.sort_by(|a, b| natural_cmp(&stem(&a.rgb_path), &stem(&b.rgb_path)));
                for (index, entry) in entries.iter_mut().enumerate() {
                    entry.timestamp_s = index as f64 / fps;
                }
            }
            FrameTiming::StemSeconds | FrameTiming::StemNanoseconds => {
                entries.sort_by(|a, b| a.timestamp_s.total_cmp(&b.timestamp_s));
                for pair in entries.windows(2) {
                    if pair[0].timestamp_s == pair[1].timestamp_s {
                        return Err(source_error(
                            &pair[1].rgb_path,
                            format!("has the same timestamp as {}", pair[0].rgb_path.display()),
                        ));
                    }
                }
            }
        }

        let (calibration, undistorter) = prepare_undistortion(calibration, &calibration_path, options)?;
        let calibration = Calibration { depth_scale: Some(depth_scale), ..calibration };
        Ok(Self {
            dir: dir.into(),
            name: format!("image folder {}", file_name(dir)),
            timing,
            depth_scale,
            calibration,
            calibration_path,
            undistorter,
            entries,
            next: 0,
        })
    }

    /// How the frames got their timestamps.
    pub fn timing(&self) -> FrameTiming {
        self.timing
    }
}

/// Orders names with their digit runs compared as numbers (`frame2` before `frame10`).
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let ordering = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ordering.is_ne() {
            return ordering;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

impl FrameSource for ImageFolderSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn path(&self) -> &Path {
        &self.dir
    }

    fn kind(&self) -> SourceKind {
        SourceKind::ImageFolder
    }

    fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    fn has_depth(&self) -> bool {
        self.entries.first().is_some_and(|e| e.depth_path.is_some())
    }

    fn len(&self) -> Option<usize> {
        Some(self.entries.len())
    }

    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        let index = self.next;
        let Some(entry) = self.entries.get(index) else {
            return Ok(None);
        };
        self.next += 1;
        let rgb = read_rgb(&entry.rgb_path)?;
        check_size(
            &entry.rgb_path,
            "colour",
            (rgb.width(), rgb.height()),
            &self.calibration,
            &self.calibration_path,
        )?;
        let depth = match &entry.depth_path {
            Some(path) => {
                let depth = read_depth_png(path, self.depth_scale)?;
                check_size(
                    path,
                    "depth",
                    (depth.width(), depth.height()),
                    &self.calibration,
                    &self.calibration_path,
                )?;
                Some(depth)
            }
            None => None,
        };
        let frame = RgbdFrame { index, timestamp_s: entry.timestamp_s, rgb, depth, ground_truth: None };
        match &self.undistorter {
            Some(undistorter) => undistorter.undistort_frame(frame).map(Some),
            None => Ok(Some(frame)),
        }
    }
}

/// A video file as a frame source: colour only, timestamps `index / fps` from the container's frame rate.
/// The calibration is the given file, else `calibration.yaml` beside the video.
#[derive(Debug)]
pub struct VideoSource {
    reader: VideoReader,
    name: String,
    calibration: Calibration,
    undistorter: Option<Undistorter>,
}

impl VideoSource {
    pub fn open(path: &Path, options: &SourceOptions) -> Result<Self, IoError> {
        options.validate(path)?;
        let beside = path.parent().unwrap_or(Path::new(".")).join(SOURCE_CALIBRATION_FILE);
        let (calibration, calibration_path) = load_calibration(options, &beside, path, "")?;
        let reader = VideoReader::open(path)?;
        check_size(path, "video", (reader.width(), reader.height()), &calibration, &calibration_path)?;
        let (calibration, undistorter) = prepare_undistortion(calibration, &calibration_path, options)?;
        Ok(Self { reader, name: format!("video {}", file_name(path)), calibration, undistorter })
    }

    /// The container's frame rate.
    pub fn fps(&self) -> f64 {
        self.reader.fps()
    }
}

impl FrameSource for VideoSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn path(&self) -> &Path {
        self.reader.path()
    }

    fn kind(&self) -> SourceKind {
        SourceKind::Video
    }

    fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    fn has_depth(&self) -> bool {
        false
    }

    fn len(&self) -> Option<usize> {
        None
    }

    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        let index = self.reader.frames_read();
        let Some(rgb) = self.reader.next_frame()? else {
            return Ok(None);
        };
        let timestamp_s = index as f64 / self.reader.fps();
        let frame = RgbdFrame { index, timestamp_s, rgb, depth: None, ground_truth: None };
        match &self.undistorter {
            Some(undistorter) => undistorter.undistort_frame(frame).map(Some),
            None => Ok(Some(frame)),
        }
    }
}
