//! `gst export-bag`: frames as a ROS 2 MCAP file (profile `ros2`, CDR messages, `ros2msg` schemas), the
//! way `ros2 bag record` with MCAP storage writes them, so that ROS tools, Foxglove and rosbags read it.
//!
//! Topics: `/camera/color/image_raw` (rgb8), `/camera/depth/image_raw` (16UC1 in mm, or 32FC1 in m for a
//! lossless copy of float depth), both in the colour optical frame (registered), and
//! `/camera/color/camera_info` (the calibration with its distortion: frames are exported as recorded).
//! The file is written to a temporary file beside the output and renamed into place.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use gst_core::{Calibration, RgbdFrame};
use gst_io::{FrameSource, IoError};

use crate::msg::{self, CameraInfo, Header, Image, RegionOfInterest, Time, schema};
use crate::source::error;

/// The colour topic of exported bags.
pub const COLOUR_TOPIC: &str = "/camera/color/image_raw";
/// The depth topic of exported bags.
pub const DEPTH_TOPIC: &str = "/camera/depth/image_raw";
/// The CameraInfo topic of exported bags.
pub const INFO_TOPIC: &str = "/camera/color/camera_info";
/// The frame id of every exported image.
pub const CAMERA_FRAME: &str = "camera_color_optical_frame";

/// How depth is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DepthEncoding {
    /// `16UC1` in millimetres (what RealSense and most ROS drivers publish); rounds to 1 mm.
    #[default]
    Millimetres16,
    /// `32FC1` in metres: the frames' depth exactly.
    Metres32,
}

impl std::str::FromStr for DepthEncoding {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "16UC1" | "16uc1" | "mm" => Ok(Self::Millimetres16),
            "32FC1" | "32fc1" | "m" => Ok(Self::Metres32),
            other => Err(format!("depth encoding {other:?}: expected 16UC1 or 32FC1")),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportOptions {
    pub depth: DepthEncoding,
    /// Compress chunks with zstd (smaller, slower to read). Default: off.
    pub compress: bool,
}

/// What an export wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportSummary {
    pub frames: usize,
    pub messages: usize,
    pub bytes: u64,
}

/// Writes every frame of `source` to `out` as a ROS 2 MCAP file. `calibration` is the camera of the
/// frames as read (open the source without undistortion to export the recording as it was).
pub fn export_mcap(
    source: &mut dyn FrameSource,
    calibration: &Calibration,
    out: &Path,
    options: &ExportOptions,
) -> Result<ExportSummary, IoError> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let temp =
        tempfile::NamedTempFile::new_in(&dir).map_err(|source| IoError::Io { path: dir.clone(), source })?;
    let file = temp.reopen().map_err(|source| IoError::Io { path: temp.path().into(), source })?;
    let mcap_error = |e: mcap::McapError| error(out, format!("cannot write MCAP: {e}"));
    let write_options = mcap::WriteOptions::new()
        .profile("ros2")
        .library(format!("gst-bag {}", env!("CARGO_PKG_VERSION")))
        .compression(if options.compress { Some(mcap::Compression::Zstd) } else { None });
    let mut writer = write_options.create(BufWriter::new(file)).map_err(mcap_error)?;
    let image_schema = writer
        .add_schema("sensor_msgs/msg/Image", "ros2msg", schema::image().as_bytes())
        .map_err(mcap_error)?;
    let info_schema = writer
        .add_schema("sensor_msgs/msg/CameraInfo", "ros2msg", schema::camera_info().as_bytes())
        .map_err(mcap_error)?;
    let no_metadata = BTreeMap::new();
    let colour_channel =
        writer.add_channel(image_schema, COLOUR_TOPIC, "cdr", &no_metadata).map_err(mcap_error)?;
    let depth_channel =
        writer.add_channel(image_schema, DEPTH_TOPIC, "cdr", &no_metadata).map_err(mcap_error)?;
    let info_channel =
        writer.add_channel(info_schema, INFO_TOPIC, "cdr", &no_metadata).map_err(mcap_error)?;

    let mut frames = 0usize;
    let mut messages = 0usize;
    let mut sequence = 0u32;
    let mut rgb_bytes = Vec::new();
    let mut depth_bytes = Vec::new();
    while let Some(frame) = source.next_frame()? {
        let stamp_ns = (frame.timestamp_s * 1e9).round() as i64;
        let Some(stamp) = Time::from_nanoseconds(stamp_ns) else {
            return Err(error(
                out,
                format!("frame {}: timestamp {} s does not fit ROS time", frame.index, frame.timestamp_s),
            ));
        };
        let log_time = u64::try_from(stamp_ns).map_err(|_| {
            error(out, format!("frame {}: negative timestamp {} s", frame.index, frame.timestamp_s))
        })?;
        let header = Header { stamp, frame_id: CAMERA_FRAME.into() };
        let mut write = |channel: u16, data: &[u8]| -> Result<(), IoError> {
            writer
                .write_to_known_channel(
                    &mcap::records::MessageHeader {
                        channel_id: channel,
                        sequence,
                        log_time,
                        publish_time: log_time,
                    },
                    data,
                )
                .map_err(mcap_error)?;
            sequence = sequence.wrapping_add(1);
            messages += 1;
            Ok(())
        };
        if frames == 0 {
            write(info_channel, &encode(out, &camera_info(calibration, header.clone()))?)?;
        }
        rgb_bytes.clear();
        rgb_bytes.extend(frame.rgb.data().iter().flatten());
        let colour = colour_message(&frame, header.clone(), &rgb_bytes);
        write(colour_channel, &encode(out, &colour)?)?;
        if let Some(message) = depth_message(&frame, header, options.depth, &mut depth_bytes) {
            write(depth_channel, &encode(out, &message)?)?;
        }
        frames += 1;
    }
    writer.finish().map_err(mcap_error)?;
    let mut inner = writer.into_inner();
    inner.flush().map_err(|source| IoError::Io { path: temp.path().into(), source })?;
    drop(inner);
    let bytes = std::fs::metadata(temp.path()).map(|m| m.len()).unwrap_or(0);
    temp.persist(out).map_err(|e| IoError::Io { path: out.into(), source: e.error })?;
    Ok(ExportSummary { frames, messages, bytes })
}

fn encode<T: serde::Serialize>(out: &Path, message: &T) -> Result<Vec<u8>, IoError> {
    msg::encode_cdr(message).map_err(|e| error(out, format!("cannot encode a message as CDR: {e}")))
}

fn colour_message<'a>(frame: &RgbdFrame, header: Header, bytes: &'a [u8]) -> Image<'a> {
    Image {
        header,
        height: frame.rgb.height(),
        width: frame.rgb.width(),
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: frame.rgb.width() * 3,
        data: bytes,
    }
}

fn depth_message<'a>(
    frame: &RgbdFrame,
    header: Header,
    encoding: DepthEncoding,
    bytes: &'a mut Vec<u8>,
) -> Option<Image<'a>> {
    let depth = frame.depth.as_ref()?;
    bytes.clear();
    let (name, bytes_per_pixel) = match encoding {
        DepthEncoding::Millimetres16 => {
            bytes.extend(depth.data().iter().flat_map(|&m| {
                let mm = (f64::from(m) * 1000.0).round();
                let mm = if m.is_finite() && mm > 0.0 && mm <= f64::from(u16::MAX) { mm as u16 } else { 0 };
                mm.to_le_bytes()
            }));
            ("16UC1", 2)
        }
        DepthEncoding::Metres32 => {
            bytes
                .extend(depth.data().iter().flat_map(|&m| if m.is_finite() { m } else { 0.0 }.to_le_bytes()));
            ("32FC1", 4)
        }
    };
    Some(Image {
        header,
        height: depth.height(),
        width: depth.width(),
        encoding: name.into(),
        is_bigendian: 0,
        step: depth.width() * bytes_per_pixel,
        data: bytes,
    })
}

/// The CameraInfo of a calibration (plumb_bob; `p` is `k` with a zero fourth column, `r` the identity).
pub fn camera_info(calibration: &Calibration, header: Header) -> CameraInfo {
    let c = &calibration.camera;
    let d = &c.distortion;
    CameraInfo {
        header,
        height: c.height,
        width: c.width,
        distortion_model: "plumb_bob".into(),
        d: vec![d.k1, d.k2, d.p1, d.p2, d.k3],
        k: [c.fx, 0.0, c.cx, 0.0, c.fy, c.cy, 0.0, 0.0, 1.0],
        r: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        p: [c.fx, 0.0, c.cx, 0.0, 0.0, c.fy, c.cy, 0.0, 0.0, 0.0, 1.0, 0.0],
        binning_x: 0,
        binning_y: 0,
        roi: RegionOfInterest::default(),
    }
}
