//! A bag as a [`FrameSource`]: the topics chosen, colour and depth paired by header stamp, the camera from
//! CameraInfo (or a calibration file), depth registered to colour when TF says they differ.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use nalgebra::{Isometry3, Point3, Quaternion as NaQuaternion, Translation3, UnitQuaternion};

use gst_core::{Calibration, DepthImage, Image as CoreImage, PinholeCamera, RgbImage, RgbdFrame};
use gst_io::{FrameSource, IoError, SourceKind, Undistorter, associate, decode_gray16, decode_rgb};

use crate::container::{Bag, Record, TopicInfo};
use crate::msg::{self, CameraInfo, Message, MessageKind};

/// Default pairing tolerance: TUM's `associate.py` uses 20 ms.
pub const DEFAULT_PAIR_TOLERANCE_S: f64 = 0.02;

/// How a bag is opened as a frame source.
#[derive(Clone, Debug, PartialEq)]
pub struct BagOptions {
    /// The colour image topic; default: the only colour topic.
    pub rgb_topic: Option<String>,
    /// The depth image topic; default: the only depth topic (none: colour-only frames).
    pub depth_topic: Option<String>,
    /// The colour CameraInfo topic; default: the CameraInfo topic nearest the colour topic.
    pub info_topic: Option<String>,
    /// A calibration file to use instead of CameraInfo.
    pub calibration: Option<PathBuf>,
    /// Undistort frames when the calibration has distortion (as the other sources do).
    pub undistort: bool,
    /// Colour and depth stamps closer than this pair.
    pub tolerance_s: f64,
}

impl Default for BagOptions {
    fn default() -> Self {
        Self {
            rgb_topic: None,
            depth_topic: None,
            info_topic: None,
            calibration: None,
            undistort: true,
            tolerance_s: DEFAULT_PAIR_TOLERANCE_S,
        }
    }
}

/// What an image topic carries, told from its first message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageRole {
    Colour,
    Depth,
}

/// How depth reaches the colour camera.
#[derive(Clone, Debug, PartialEq)]
pub enum Registration {
    /// No depth topic.
    NoDepth,
    /// Depth and colour share a frame id (or TF puts them at the same place): pixel for pixel.
    Same,
    /// Depth is reprojected into the colour camera with the TF extrinsic (`colour_from_depth`).
    Reprojected { depth_frame: String, colour_frame: String, translation_m: [f64; 3] },
    /// The frames differ and no TF connects them: depth is taken as registered (reported).
    Assumed { depth_frame: String, colour_frame: String },
}

/// What opening a bag found: the topics in use, the pairing, and what was skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct BagReport {
    pub rgb_topic: String,
    pub depth_topic: Option<String>,
    /// The CameraInfo topic the calibration came from (`None` with a calibration file).
    pub info_topic: Option<String>,
    pub depth_info_topic: Option<String>,
    pub colour_messages: usize,
    pub depth_messages: usize,
    pub pairs: usize,
    /// Colour messages with no depth within the tolerance (dropped).
    pub unpaired_colour: usize,
    /// Depth messages with no colour within the tolerance (dropped).
    pub unpaired_depth: usize,
    /// Messages whose stamp repeats an earlier one on the same topic (dropped).
    pub duplicates: usize,
    /// Messages whose stamp is earlier than the one before on the topic (re-ordered).
    pub out_of_order: usize,
    pub registration: Registration,
    /// Anything else worth saying (one line each).
    pub warnings: Vec<String>,
}

impl std::fmt::Display for BagReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "colour: {} ({} messages)", self.rgb_topic, self.colour_messages)?;
        match &self.depth_topic {
            Some(depth) => writeln!(f, "depth:  {depth} ({} messages)", self.depth_messages)?,
            None => writeln!(f, "depth:  none (colour-only frames)")?,
        }
        match &self.info_topic {
            Some(info) => writeln!(f, "camera: {info}")?,
            None => writeln!(f, "camera: the calibration file")?,
        }
        writeln!(
            f,
            "pairs:  {} ({} colour and {} depth unpaired, {} duplicate stamps, {} out of order)",
            self.pairs, self.unpaired_colour, self.unpaired_depth, self.duplicates, self.out_of_order
        )?;
        match &self.registration {
            Registration::NoDepth | Registration::Same => writeln!(f, "depth registered to colour: yes")?,
            Registration::Reprojected { depth_frame, colour_frame, translation_m } => writeln!(
                f,
                "depth registered to colour: reprojected {depth_frame} -> {colour_frame} (baseline {:.1} mm)",
                1e3 * (translation_m[0].powi(2) + translation_m[1].powi(2) + translation_m[2].powi(2)).sqrt()
            )?,
            Registration::Assumed { depth_frame, colour_frame } => writeln!(
                f,
                "depth registered to colour: assumed ({depth_frame} and {colour_frame} differ, no TF connects them)"
            )?,
        }
        for warning in &self.warnings {
            writeln!(f, "warning: {warning}")?;
        }
        Ok(())
    }
}

/// One image message with its stamp.
#[derive(Clone, Copy, Debug)]
struct Stamped {
    record: usize,
    stamp_ns: i64,
}

/// A bag's colour (and depth) as frames.
#[derive(Debug)]
pub struct BagSource {
    bag: Bag,
    name: String,
    report: BagReport,
    /// Record indices of the colour and (optional) depth message of each frame, by colour stamp.
    frames: Vec<(Stamped, Option<usize>)>,
    raw_camera: PinholeCamera,
    calibration: Calibration,
    depth_camera: Option<PinholeCamera>,
    colour_from_depth: Option<Isometry3<f64>>,
    undistorter: Option<Undistorter>,
    next: usize,
}

pub(crate) fn error(path: &Path, message: String) -> IoError {
    IoError::Source { path: path.into(), message }
}

/// The path errors name for a message: `FILE` with the topic and index in the message.
fn message_error(path: &Path, topic: &str, index: usize, message: impl std::fmt::Display) -> IoError {
    error(path, format!("topic {topic}, message {index}: {message}"))
}

impl BagSource {
    /// Opens `path` (an `.mcap` file, a rosbag2 folder or a ROS 1 `.bag`).
    pub fn open(path: &Path, options: &BagOptions) -> Result<Self, IoError> {
        Self::from_bag(Bag::open(path)?, options)
    }

    /// Builds the source from an opened bag.
    pub fn from_bag(bag: Bag, options: &BagOptions) -> Result<Self, IoError> {
        if !(options.tolerance_s.is_finite() && options.tolerance_s > 0.0) {
            return Err(error(
                bag.path(),
                format!("pairing tolerance {} s must be positive", options.tolerance_s),
            ));
        }
        let roles = image_roles(&bag)?;
        let rgb_topic = choose_topic(&bag, &roles, ImageRole::Colour, options.rgb_topic.as_deref())?
            .ok_or_else(|| error(bag.path(), format!("has no colour image topic; {}", topic_list(&bag))))?;
        let depth_topic = choose_topic(&bag, &roles, ImageRole::Depth, options.depth_topic.as_deref())?;
        let mut warnings = Vec::new();

        let (colour, colour_stats) = stamps(&bag, rgb_topic)?;
        if colour.is_empty() {
            return Err(error(bag.path(), format!("topic {} has no messages", bag.topics()[rgb_topic].name)));
        }
        let (depth, depth_stats) = match depth_topic {
            Some(t) => {
                let (list, stats) = stamps(&bag, t)?;
                if list.is_empty() {
                    warnings.push(format!(
                        "depth topic {} has no messages: colour-only frames",
                        bag.topics()[t].name
                    ));
                }
                (list, stats)
            }
            None => (Vec::new(), (0, 0)),
        };
        let depth_topic = depth_topic.filter(|_| !depth.is_empty());

        // Pairing (TUM's association, on header stamps).
        let frames: Vec<(Stamped, Option<usize>)> = if depth_topic.is_some() {
            let seconds =
                |list: &[Stamped]| list.iter().map(|s| s.stamp_ns as f64 * 1e-9).collect::<Vec<_>>();
            associate(&seconds(&colour), &seconds(&depth), options.tolerance_s)
                .into_iter()
                .map(|(i, j)| (colour[i], Some(depth[j].record)))
                .collect()
        } else {
            colour.iter().map(|c| (*c, None)).collect()
        };
        if depth_topic.is_some() && frames.is_empty() {
            return Err(error(
                bag.path(),
                format!(
                    "no colour stamp of {} is within {} ms of a depth stamp of {}",
                    bag.topics()[rgb_topic].name,
                    options.tolerance_s * 1e3,
                    depth_topic.map_or("", |t| bag.topics()[t].name.as_str())
                ),
            ));
        }

        // The camera.
        let info_topic = match (&options.calibration, &options.info_topic) {
            (Some(_), _) => None,
            (None, Some(name)) => Some(find_topic(&bag, name, MessageKind::CameraInfo)?),
            (None, None) => nearest_info_topic(&bag, rgb_topic)?,
        };
        let (calibration, calibration_origin) = match (&options.calibration, info_topic) {
            (Some(file), _) => (gst_io::read_calibration(file)?, file.clone()),
            (None, Some(info)) => camera_info_calibration(&bag, info)?,
            (None, None) => {
                return Err(error(
                    bag.path(),
                    format!(
                        "has no sensor_msgs/CameraInfo topic for {}: give a calibration file (--calib)",
                        bag.topics()[rgb_topic].name
                    ),
                ));
            }
        };
        let raw_camera = calibration.camera;

        // Depth registration.
        let depth_info_topic = match depth_topic {
            Some(t) => nearest_info_topic(&bag, t)?.filter(|i| Some(*i) != info_topic),
            None => None,
        };
        let (registration, colour_from_depth, depth_camera) = match depth_topic {
            None => (Registration::NoDepth, None, None),
            Some(_) => {
                let colour_frame = frame_of(&bag, frames[0].0.record)?;
                let depth_frame = match frames[0].1 {
                    Some(record) => frame_of(&bag, record)?,
                    None => colour_frame.clone(),
                };
                let tf = TfTree::from_bag(&bag)?;
                let depth_camera = match depth_info_topic {
                    Some(t) => Some(camera_info_calibration(&bag, t)?.0.camera),
                    None => None,
                };
                if depth_frame == colour_frame {
                    (Registration::Same, None, None)
                } else {
                    match tf.colour_from_depth(&colour_frame, &depth_frame) {
                        Some(t) if is_identity(&t) => (Registration::Same, None, None),
                        Some(t) => {
                            let Some(depth_camera) = depth_camera else {
                                return Err(error(
                                    bag.path(),
                                    format!(
                                        "depth ({depth_frame}) is not registered to colour ({colour_frame}) and \
                                         there is no CameraInfo for the depth topic to reproject it with"
                                    ),
                                ));
                            };
                            let v = t.translation.vector;
                            (
                                Registration::Reprojected {
                                    depth_frame,
                                    colour_frame,
                                    translation_m: [v.x, v.y, v.z],
                                },
                                Some(t),
                                Some(depth_camera),
                            )
                        }
                        None => {
                            warnings.push(format!(
                                "depth frame {depth_frame} and colour frame {colour_frame} differ and no TF \
                                 connects them: depth is taken as registered to colour"
                            ));
                            (Registration::Assumed { depth_frame, colour_frame }, None, None)
                        }
                    }
                }
            }
        };

        let (delivered, undistorter) = if options.undistort && !raw_camera.distortion.is_zero() {
            let undistorter = Undistorter::new(&raw_camera, &calibration_origin)?;
            (Calibration { camera: *undistorter.camera(), ..calibration.clone() }, Some(undistorter))
        } else {
            (calibration.clone(), None)
        };
        let mut delivered = delivered;
        if depth_topic.is_some() && delivered.depth_scale.is_none() {
            delivered.depth_scale = Some(1000.0);
        }

        let colour_count = colour.len() + colour_stats.0;
        let depth_count = depth.len() + depth_stats.0;
        let pairs = frames.len();
        let report = BagReport {
            rgb_topic: bag.topics()[rgb_topic].name.clone(),
            depth_topic: depth_topic.map(|t| bag.topics()[t].name.clone()),
            info_topic: info_topic.map(|t| bag.topics()[t].name.clone()),
            depth_info_topic: depth_info_topic.map(|t| bag.topics()[t].name.clone()),
            colour_messages: colour_count,
            depth_messages: depth_count,
            pairs,
            unpaired_colour: if depth_topic.is_some() { colour.len() - pairs } else { 0 },
            unpaired_depth: depth.len().saturating_sub(pairs),
            duplicates: colour_stats.0 + depth_stats.0,
            out_of_order: colour_stats.1 + depth_stats.1,
            registration,
            warnings,
        };
        for warning in &report.warnings {
            tracing::warn!("{}: {warning}", bag.path().display());
        }
        let name = format!("{} {}", bag.format(), file_name(bag.path()));
        Ok(Self {
            bag,
            name,
            report,
            frames,
            raw_camera,
            calibration: delivered,
            depth_camera,
            colour_from_depth,
            undistorter,
            next: 0,
        })
    }

    pub fn report(&self) -> &BagReport {
        &self.report
    }

    pub fn bag(&self) -> &Bag {
        &self.bag
    }

    /// Decodes the colour image of a record.
    fn colour<'s>(&'s self, record: &'s Record) -> Result<RgbImage, IoError> {
        let (path, topic, message) = self.decoded(record)?;
        let fail = |m: String| message_error(path, topic, record.index, m);
        match message {
            Message::Image(image) => raw_colour(&image).map_err(fail),
            Message::CompressedImage(image) => {
                decode_rgb(image.data, &describe(path, topic, record.index)).map_err(|e| fail(e.to_string()))
            }
            _ => Err(fail("is not an image".into())),
        }
    }

    /// Decodes the depth image of a record, in metres.
    fn depth<'s>(&'s self, record: &'s Record) -> Result<DepthImage, IoError> {
        let (path, topic, message) = self.decoded(record)?;
        let fail = |m: String| message_error(path, topic, record.index, m);
        match message {
            Message::Image(image) => raw_depth(&image).map_err(fail),
            Message::CompressedImage(image) => {
                compressed_depth(image.format.as_str(), image.data, &describe(path, topic, record.index))
                    .map_err(&fail)
            }
            _ => Err(fail("is not an image".into())),
        }
    }

    fn decoded<'s>(&'s self, record: &'s Record) -> Result<(&'s Path, &'s str, Message<'s>), IoError> {
        let topic = &self.bag.topics()[record.topic];
        let (path, bytes) = self.bag.payload(record);
        let kind = topic.kind.unwrap_or(MessageKind::Image);
        let message = msg::decode(kind, topic.wire, bytes)
            .map_err(|m| message_error(path, &topic.name, record.index, m))?;
        Ok((path, &topic.name, message))
    }

    fn frame(&self, index: usize) -> Result<RgbdFrame, IoError> {
        let (colour, depth) = self.frames[index];
        let records = self.bag.records();
        let colour_record = &records[colour.record];
        let rgb = self.colour(colour_record)?;
        let topic = &self.bag.topics()[colour_record.topic].name;
        let camera = &self.raw_camera;
        if (rgb.width(), rgb.height()) != (camera.width, camera.height) {
            return Err(message_error(
                self.bag.path(),
                topic,
                colour_record.index,
                format!(
                    "the colour image is {}x{} but the camera is {}x{}",
                    rgb.width(),
                    rgb.height(),
                    camera.width,
                    camera.height
                ),
            ));
        }
        let depth = match depth {
            Some(record) => {
                let depth_record = &records[record];
                let depth_topic = &self.bag.topics()[depth_record.topic].name;
                let depth = self.depth(depth_record)?;
                let depth = match (&self.colour_from_depth, &self.depth_camera) {
                    (Some(colour_from_depth), Some(depth_camera)) => {
                        if (depth.width(), depth.height()) != (depth_camera.width, depth_camera.height) {
                            return Err(message_error(
                                self.bag.path(),
                                depth_topic,
                                depth_record.index,
                                format!(
                                    "the depth image is {}x{} but its CameraInfo says {}x{}",
                                    depth.width(),
                                    depth.height(),
                                    depth_camera.width,
                                    depth_camera.height
                                ),
                            ));
                        }
                        register(&depth, depth_camera, colour_from_depth, camera)
                    }
                    _ => {
                        if (depth.width(), depth.height()) != (rgb.width(), rgb.height()) {
                            return Err(message_error(
                                self.bag.path(),
                                depth_topic,
                                depth_record.index,
                                format!(
                                    "the depth image is {}x{} but the colour image it pairs with ({topic}, message \
                                     {}) is {}x{}",
                                    depth.width(),
                                    depth.height(),
                                    colour_record.index,
                                    rgb.width(),
                                    rgb.height()
                                ),
                            ));
                        }
                        depth
                    }
                };
                Some(depth)
            }
            None => None,
        };
        let frame =
            RgbdFrame { index, timestamp_s: stamp_seconds(colour.stamp_ns), rgb, depth, ground_truth: None };
        match &self.undistorter {
            Some(undistorter) => undistorter.undistort_frame(frame),
            None => Ok(frame),
        }
    }
}

/// Seconds of a nanosecond stamp, as `sec + nanosec * 1e-9` (the closest double to the decimal stamp).
pub fn stamp_seconds(stamp_ns: i64) -> f64 {
    let sec = stamp_ns.div_euclid(1_000_000_000);
    let nsec = stamp_ns.rem_euclid(1_000_000_000);
    sec as f64 + nsec as f64 * 1e-9
}

fn describe(path: &Path, topic: &str, index: usize) -> PathBuf {
    PathBuf::from(format!("{} (topic {topic}, message {index})", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

impl FrameSource for BagSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn path(&self) -> &Path {
        self.bag.path()
    }

    fn kind(&self) -> SourceKind {
        SourceKind::Bag
    }

    fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    fn has_depth(&self) -> bool {
        self.report.depth_topic.is_some()
    }

    fn len(&self) -> Option<usize> {
        Some(self.frames.len())
    }

    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        let index = self.next;
        if index >= self.frames.len() {
            return Ok(None);
        }
        self.next += 1;
        self.frame(index).map(Some)
    }
}

/// Roles of the image topics, from each one's first message.
pub(crate) fn image_roles(bag: &Bag) -> Result<HashMap<usize, ImageRole>, IoError> {
    let mut roles = HashMap::new();
    for record in bag.records() {
        let topic = &bag.topics()[record.topic];
        if roles.contains_key(&record.topic)
            || !matches!(topic.kind, Some(MessageKind::Image | MessageKind::CompressedImage))
        {
            continue;
        }
        let (path, bytes) = bag.payload(record);
        let kind = topic.kind.unwrap_or(MessageKind::Image);
        let message = msg::decode(kind, topic.wire, bytes)
            .map_err(|m| message_error(path, &topic.name, record.index, m))?;
        let role = match &message {
            Message::Image(image) => match image.encoding.as_str() {
                "16UC1" | "mono16" | "32FC1" => ImageRole::Depth,
                _ => ImageRole::Colour,
            },
            Message::CompressedImage(image) if image.format.contains("compressedDepth") => ImageRole::Depth,
            _ => ImageRole::Colour,
        };
        roles.insert(record.topic, role);
    }
    Ok(roles)
}

fn topic_list(bag: &Bag) -> String {
    let topics: Vec<String> = bag
        .topics()
        .iter()
        .map(|t| {
            let plural = if t.count == 1 { "" } else { "s" };
            format!("{} ({}, {} message{plural})", t.name, t.type_name, t.count)
        })
        .collect();
    if topics.is_empty() { "it has no topics".into() } else { format!("its topics: {}", topics.join(", ")) }
}

fn find_topic(bag: &Bag, name: &str, kind: MessageKind) -> Result<usize, IoError> {
    let Some(index) = bag.topics().iter().position(|t| t.name == name) else {
        return Err(error(bag.path(), format!("has no topic {name}; {}", topic_list(bag))));
    };
    let topic = &bag.topics()[index];
    let ok = match kind {
        MessageKind::Image | MessageKind::CompressedImage => {
            matches!(topic.kind, Some(MessageKind::Image | MessageKind::CompressedImage))
        }
        other => topic.kind == Some(other),
    };
    if !ok {
        return Err(error(
            bag.path(),
            format!("topic {name} is {}, not what was asked for", topic.type_name),
        ));
    }
    Ok(index)
}

/// The topic of a role: the one named (checked), else the only one (an error listing them when several).
fn choose_topic(
    bag: &Bag,
    roles: &HashMap<usize, ImageRole>,
    role: ImageRole,
    named: Option<&str>,
) -> Result<Option<usize>, IoError> {
    if let Some(name) = named {
        let index = find_topic(bag, name, MessageKind::Image)?;
        if bag.topics()[index].count == 0 {
            return Err(error(bag.path(), format!("topic {name} has no messages")));
        }
        return Ok(Some(index));
    }
    let mut candidates: Vec<usize> = roles.iter().filter(|(_, r)| **r == role).map(|(t, _)| *t).collect();
    candidates.sort_unstable();
    match candidates.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        several => {
            let names: Vec<&str> = several.iter().map(|t| bag.topics()[*t].name.as_str()).collect();
            let flag = if role == ImageRole::Colour { "--rgb-topic" } else { "--depth-topic" };
            Err(error(
                bag.path(),
                format!(
                    "has {} {} topics ({}); choose one with {flag}",
                    several.len(),
                    if role == ImageRole::Colour { "colour" } else { "depth" },
                    names.join(", ")
                ),
            ))
        }
    }
}

/// The CameraInfo topic sharing the longest leading path with `image_topic` (`/camera/color/image_raw` →
/// `/camera/color/camera_info`); `None` when there is none, an error when two tie.
fn nearest_info_topic(bag: &Bag, image_topic: usize) -> Result<Option<usize>, IoError> {
    let image = &bag.topics()[image_topic].name;
    let shared =
        |info: &TopicInfo| image.split('/').zip(info.name.split('/')).take_while(|(a, b)| a == b).count();
    let infos: Vec<(usize, usize)> = bag
        .topics()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind == Some(MessageKind::CameraInfo) && t.count > 0)
        .map(|(i, t)| (i, shared(t)))
        .collect();
    let Some(best) = infos.iter().map(|(_, s)| *s).max() else { return Ok(None) };
    let tied: Vec<usize> = infos.iter().filter(|(_, s)| *s == best).map(|(i, _)| *i).collect();
    if tied.len() > 1 {
        let names: Vec<&str> = tied.iter().map(|t| bag.topics()[*t].name.as_str()).collect();
        return Err(error(
            bag.path(),
            format!(
                "has {} CameraInfo topics equally near {image} ({}); choose one with --info-topic",
                tied.len(),
                names.join(", ")
            ),
        ));
    }
    Ok(tied.first().copied())
}

/// The image messages of a topic by stamp (duplicates dropped), and (duplicates, out-of-order) counts.
fn stamps(bag: &Bag, topic: usize) -> Result<(Vec<Stamped>, (usize, usize)), IoError> {
    let info = &bag.topics()[topic];
    let mut list = Vec::with_capacity(info.count);
    let mut out_of_order = 0;
    for (i, record) in bag.records().iter().enumerate().filter(|(_, r)| r.topic == topic) {
        let (path, bytes) = bag.payload(record);
        let kind = info.kind.unwrap_or(MessageKind::Image);
        let message = msg::decode(kind, info.wire, bytes)
            .map_err(|m| message_error(path, &info.name, record.index, m))?;
        let stamp_ns = message.stamp_ns();
        if list.last().is_some_and(|last: &Stamped| stamp_ns < last.stamp_ns) {
            out_of_order += 1;
        }
        list.push(Stamped { record: i, stamp_ns });
    }
    list.sort_by_key(|s| s.stamp_ns);
    let before = list.len();
    list.dedup_by_key(|s| s.stamp_ns);
    let duplicates = before - list.len();
    if duplicates > 0 {
        tracing::warn!(
            "{}: topic {}: {duplicates} messages repeat a stamp; the first is kept",
            bag.path().display(),
            info.name
        );
    }
    if out_of_order > 0 {
        tracing::warn!(
            "{}: topic {}: {out_of_order} messages are out of stamp order; frames follow stamps",
            bag.path().display(),
            info.name
        );
    }
    Ok((list, (duplicates, out_of_order)))
}

fn frame_of(bag: &Bag, record: usize) -> Result<String, IoError> {
    let record = &bag.records()[record];
    let topic = &bag.topics()[record.topic];
    let (path, bytes) = bag.payload(record);
    let message = msg::decode(topic.kind.unwrap_or(MessageKind::Image), topic.wire, bytes)
        .map_err(|m| message_error(path, &topic.name, record.index, m))?;
    Ok(message.frame_id().trim_start_matches('/').to_string())
}

/// The calibration in a CameraInfo topic's first message, through the ROS camera_info reader (so it is
/// checked, and undistorted, exactly as the same camera's YAML file would be). Returns it with the name
/// its errors and undistorter use.
pub fn camera_info_calibration(bag: &Bag, topic: usize) -> Result<(Calibration, PathBuf), IoError> {
    let info = &bag.topics()[topic];
    let Some(record) = bag.records().iter().find(|r| r.topic == topic) else {
        return Err(error(bag.path(), format!("topic {} has no messages", info.name)));
    };
    let (path, bytes) = bag.payload(record);
    let message = msg::decode(MessageKind::CameraInfo, info.wire, bytes)
        .map_err(|m| message_error(path, &info.name, record.index, m))?;
    let Message::CameraInfo(camera_info) = message else {
        return Err(message_error(path, &info.name, record.index, "is not a CameraInfo"));
    };
    let origin = describe(path, &info.name, record.index);
    let text = camera_info_yaml(&camera_info, &info.name);
    let (calibration, _) = gst_io::parse_calibration(&text, &origin)?;
    Ok((calibration, origin))
}

/// A CameraInfo as ROS camera_info YAML (`camera_calibration_parsers`' format).
pub fn camera_info_yaml(info: &CameraInfo, name: &str) -> String {
    let list = |values: &[f64]| values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", ");
    let mut text = format!(
        "image_width: {}\nimage_height: {}\ncamera_name: {:?}\ncamera_matrix:\n  rows: 3\n  cols: 3\n  data: [{}]\n",
        info.width,
        info.height,
        name,
        list(&info.k)
    );
    if !info.distortion_model.is_empty() || !info.d.is_empty() {
        text += &format!("distortion_model: {:?}\n", info.distortion_model);
    }
    if !info.d.is_empty() {
        text += &format!(
            "distortion_coefficients:\n  rows: 1\n  cols: {}\n  data: [{}]\n",
            info.d.len(),
            list(&info.d)
        );
    }
    text
}

/// Static and dynamic transforms of a bag (the first of each parent/child pair), as a tree.
#[derive(Debug, Default)]
struct TfTree {
    /// child → (parent, parent_from_child)
    parents: BTreeMap<String, (String, Isometry3<f64>)>,
}

impl TfTree {
    fn from_bag(bag: &Bag) -> Result<Self, IoError> {
        let mut tree = Self::default();
        for record in bag.records() {
            let topic = &bag.topics()[record.topic];
            if topic.kind != Some(MessageKind::Tf) {
                continue;
            }
            let (path, bytes) = bag.payload(record);
            let message = msg::decode(MessageKind::Tf, topic.wire, bytes)
                .map_err(|m| message_error(path, &topic.name, record.index, m))?;
            let Message::Tf(tf) = message else { continue };
            for t in tf.transforms {
                let child = t.child_frame_id.trim_start_matches('/').to_string();
                let parent = t.header.frame_id.trim_start_matches('/').to_string();
                let r = t.transform.rotation;
                let q = NaQuaternion::new(r.w, r.x, r.y, r.z);
                if !(q.norm() > 0.5 && q.norm() < 2.0) {
                    return Err(message_error(
                        path,
                        &topic.name,
                        record.index,
                        format!(
                            "the transform {parent} -> {child} has a rotation that is not a unit quaternion"
                        ),
                    ));
                }
                let v = t.transform.translation;
                let pose = Isometry3::from_parts(
                    Translation3::new(v.x, v.y, v.z),
                    UnitQuaternion::from_quaternion(q),
                );
                tree.parents.entry(child).or_insert((parent, pose));
            }
        }
        Ok(tree)
    }

    /// `root_from_frame` and the root's name.
    fn to_root(&self, frame: &str) -> (String, Isometry3<f64>) {
        let mut current = frame.to_string();
        let mut pose = Isometry3::identity();
        for _ in 0..64 {
            match self.parents.get(&current) {
                Some((parent, parent_from_child)) => {
                    pose = parent_from_child * pose;
                    current = parent.clone();
                }
                None => break,
            }
        }
        (current, pose)
    }

    fn colour_from_depth(&self, colour: &str, depth: &str) -> Option<Isometry3<f64>> {
        let (colour_root, root_from_colour) = self.to_root(colour);
        let (depth_root, root_from_depth) = self.to_root(depth);
        let connected = colour_root == depth_root && (colour_root != colour || depth_root != depth);
        connected.then(|| root_from_colour.inverse() * root_from_depth)
    }
}

fn is_identity(t: &Isometry3<f64>) -> bool {
    t.translation.vector.norm() < 1e-6 && t.rotation.angle() < 1e-6
}

/// Reprojects depth from the depth camera into the colour camera (nearest surface wins per pixel).
fn register(
    depth: &DepthImage,
    depth_camera: &PinholeCamera,
    colour_from_depth: &Isometry3<f64>,
    colour_camera: &PinholeCamera,
) -> DepthImage {
    let mut out = CoreImage::filled(colour_camera.width, colour_camera.height, 0.0f32);
    for (v, row) in depth.rows().enumerate() {
        for (u, &z) in row.iter().enumerate() {
            if !(z.is_finite() && z > 0.0) {
                continue;
            }
            let z = f64::from(z);
            let x = (u as f64 - depth_camera.cx) / depth_camera.fx * z;
            let y = (v as f64 - depth_camera.cy) / depth_camera.fy * z;
            let p = colour_from_depth * Point3::new(x, y, z);
            let Some(pixel) = colour_camera.project(&p) else { continue };
            let (cu, cv) = (pixel.x.round(), pixel.y.round());
            if cu < 0.0 || cv < 0.0 {
                continue;
            }
            if let Some(target) = out.get_mut(cu as u32, cv as u32) {
                let zc = p.z as f32;
                if *target == 0.0 || zc < *target {
                    *target = zc;
                }
            }
        }
    }
    out
}

/// Colour of a raw `sensor_msgs/Image`.
fn raw_colour(image: &msg::Image<'_>) -> Result<RgbImage, String> {
    let channels = match image.encoding.as_str() {
        "rgb8" | "bgr8" => 3,
        "rgba8" | "bgra8" => 4,
        "mono8" | "8UC1" => 1,
        other => {
            return Err(format!(
                "colour encoding {other:?} is not supported (rgb8, bgr8, rgba8, bgra8, mono8 are)"
            ));
        }
    };
    let rows = checked_rows(image, channels)?;
    let (w, h) = (image.width, image.height);
    let mut data = Vec::with_capacity(w as usize * h as usize);
    for row in rows {
        match image.encoding.as_str() {
            "rgb8" => data.extend(row.chunks_exact(3).map(|p| [p[0], p[1], p[2]])),
            "bgr8" => data.extend(row.chunks_exact(3).map(|p| [p[2], p[1], p[0]])),
            "rgba8" => data.extend(row.chunks_exact(4).map(|p| [p[0], p[1], p[2]])),
            "bgra8" => data.extend(row.chunks_exact(4).map(|p| [p[2], p[1], p[0]])),
            _ => data.extend(row.iter().map(|&g| [g, g, g])),
        }
    }
    CoreImage::from_vec(w, h, data).map_err(|e| e.to_string())
}

/// Depth in metres of a raw `sensor_msgs/Image` (16UC1/mono16 in millimetres, 32FC1 in metres).
fn raw_depth(image: &msg::Image<'_>) -> Result<DepthImage, String> {
    let big = image.is_bigendian != 0;
    let (w, h) = (image.width, image.height);
    let mut data = Vec::with_capacity(w as usize * h as usize);
    match image.encoding.as_str() {
        "16UC1" | "mono16" => {
            for row in checked_rows(image, 2)? {
                data.extend(row.chunks_exact(2).map(|b| {
                    let mm =
                        if big { u16::from_be_bytes([b[0], b[1]]) } else { u16::from_le_bytes([b[0], b[1]]) };
                    f32::from(mm) / 1000.0
                }));
            }
        }
        "32FC1" => {
            for row in checked_rows(image, 4)? {
                data.extend(row.chunks_exact(4).map(|b| {
                    let bytes = [b[0], b[1], b[2], b[3]];
                    let m = if big { f32::from_be_bytes(bytes) } else { f32::from_le_bytes(bytes) };
                    if m.is_finite() && m > 0.0 { m } else { 0.0 }
                }));
            }
        }
        other => {
            return Err(format!("depth encoding {other:?} is not supported (16UC1 in mm, 32FC1 in m are)"));
        }
    }
    CoreImage::from_vec(w, h, data).map_err(|e| e.to_string())
}

/// The rows of an image's pixels (without row padding), after checking `step` and the data length.
fn checked_rows<'a>(
    image: &msg::Image<'a>,
    bytes_per_pixel: usize,
) -> Result<impl Iterator<Item = &'a [u8]>, String> {
    let (w, h, step) = (image.width as usize, image.height as usize, image.step as usize);
    if w == 0 || h == 0 {
        return Err(format!("the image is {w}x{h}"));
    }
    let row_bytes = w * bytes_per_pixel;
    if step < row_bytes {
        return Err(format!(
            "step {step} is shorter than a row of {w} {} pixels ({row_bytes} bytes)",
            image.encoding
        ));
    }
    let needed = step * (h - 1) + row_bytes;
    if image.data.len() < needed {
        return Err(format!(
            "holds {} bytes of pixel data but a {w}x{h} {} image with step {step} needs {needed}",
            image.data.len(),
            image.encoding
        ));
    }
    let data = image.data;
    Ok((0..h).map(move |y| &data[y * step..y * step + row_bytes]))
}

/// Depth of a `compressedDepth` image (`image_transport`'s format: a 12-byte header, then a PNG; 16UC1 in
/// mm, or 32FC1 quantised as inverse depth).
fn compressed_depth(format: &str, data: &[u8], what: &Path) -> Result<DepthImage, String> {
    if !format.contains("compressedDepth") {
        return Err(format!(
            "compressed format {format:?} is not a depth format; compressed depth must be \"16UC1; compressedDepth png\" or \"32FC1; compressedDepth png\""
        ));
    }
    if !format.contains("png") {
        return Err(format!(
            "compressedDepth format {format:?} is not PNG (gst reads png; rvl is not supported)"
        ));
    }
    const HEADER: usize = 12;
    if data.len() <= HEADER {
        return Err(format!("compressedDepth data is {} bytes, no more than its 12-byte header", data.len()));
    }
    let quant_a = f32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    let quant_b = f32::from_le_bytes([data[8], data[9], data[10], data[11]]);
    let png = decode_gray16(&data[HEADER..], what).map_err(|e| e.to_string())?;
    let (w, h) = (png.width(), png.height());
    let float = format.trim_start().starts_with("32FC1");
    let depth: Vec<f32> = png
        .data()
        .iter()
        .map(|&v| {
            if v == 0 {
                0.0
            } else if float {
                let m = quant_a / (f32::from(v) - quant_b);
                if m.is_finite() && m > 0.0 { m } else { 0.0 }
            } else {
                f32::from(v) / 1000.0
            }
        })
        .collect();
    CoreImage::from_vec(w, h, depth).map_err(|e| e.to_string())
}

/// The colour role of every image topic, for `gst bag info`.
pub fn topic_roles(bag: &Bag) -> Result<Vec<(String, Option<ImageRole>)>, IoError> {
    let roles = image_roles(bag)?;
    Ok(bag.topics().iter().enumerate().map(|(i, t)| (t.name.clone(), roles.get(&i).copied())).collect())
}
