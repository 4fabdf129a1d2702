//! Live RealSense capture (cargo feature `realsense`, off by default): colour (rgb8) and depth (z16) from
//! the first connected camera (or the one with `RealSenseOptions::serial`), depth aligned to colour by
//! librealsense's `align` block, through the `realsense-rust` bindings.
//!
//! **Unbuilt and untested here**: librealsense2 is not packaged in Debian, so this module was written
//! against realsense-rust 1.3's API but never compiled, linked or run on this project's machines
//! (docs/bags.md). The librealsense objects are not `Send`, so a capture thread owns them and hands frames
//! over a bounded channel: the source itself can move to SLAM's reading thread.
//!
//! The calibration is the colour stream's intrinsics. Brown–Conrady coefficients are taken as plumb_bob
//! (k1, k2, p1, p2, k3), as the RealSense ROS wrapper publishes them; fisheye models are refused.
//! Timestamps are the colour frame's (librealsense milliseconds), in seconds.

use std::collections::HashSet;
use std::convert::TryFrom;
use std::ffi::CString;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use realsense_rust::config::Config;
use realsense_rust::context::Context;
use realsense_rust::frame::{ColorFrame, DepthFrame, FrameEx, PixelKind};
use realsense_rust::kind::{Rs2DistortionModel, Rs2Format, Rs2StreamKind};
use realsense_rust::pipeline::{ActivePipeline, InactivePipeline};
use realsense_rust::processing_blocks::align::Align;

use gst_core::{Calibration, Distortion, Image, PinholeCamera, RgbdFrame};
use gst_io::{FrameSource, IoError, SourceKind};

use crate::RealSenseOptions;

const PATH: &str = "realsense";
/// How long a frame may take to arrive before the camera is reported stalled.
const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

fn error(message: String) -> IoError {
    IoError::Source { path: PATH.into(), message }
}

/// A live RealSense camera as a [`FrameSource`].
#[derive(Debug)]
pub struct RealSenseSource {
    name: String,
    calibration: Calibration,
    frames: Receiver<Result<RgbdFrame, String>>,
    delivered: usize,
    max_frames: Option<usize>,
}

impl RealSenseSource {
    /// Starts the camera and waits for its calibration (errors: no camera, a configuration it cannot
    /// stream, a fisheye colour model).
    pub fn open(options: &RealSenseOptions) -> Result<Self, IoError> {
        if options.width == 0 || options.height == 0 || options.fps == 0 {
            return Err(error(format!(
                "{}x{} at {} fps is not a stream size",
                options.width, options.height, options.fps
            )));
        }
        let (calibration_sender, calibration_receiver) = sync_channel(1);
        let (frame_sender, frames) = sync_channel(4);
        let capture_options = options.clone();
        std::thread::Builder::new()
            .name("realsense".into())
            .spawn(move || capture(&capture_options, &calibration_sender, &frame_sender))
            .map_err(|e| error(format!("cannot start the capture thread: {e}")))?;
        let calibration = calibration_receiver
            .recv()
            .map_err(|_| error("the capture thread stopped before the camera started".into()))?
            .map_err(error)?;
        Ok(Self {
            name: format!("RealSense {}x{} at {} fps", options.width, options.height, options.fps),
            calibration,
            frames,
            delivered: 0,
            max_frames: options.max_frames,
        })
    }
}

impl FrameSource for RealSenseSource {
    fn name(&self) -> &str {
        &self.name
    }
    fn path(&self) -> &Path {
        Path::new(PATH)
    }
    fn kind(&self) -> SourceKind {
        SourceKind::Bag
    }
    fn calibration(&self) -> &Calibration {
        &self.calibration
    }
    fn has_depth(&self) -> bool {
        true
    }
    fn len(&self) -> Option<usize> {
        self.max_frames
    }
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        if self.max_frames.is_some_and(|max| self.delivered >= max) {
            return Ok(None);
        }
        match self.frames.recv() {
            Ok(Ok(mut frame)) => {
                frame.index = self.delivered;
                self.delivered += 1;
                Ok(Some(frame))
            }
            Ok(Err(message)) => Err(error(message)),
            // The capture thread ended (the camera stopped): the recording is over.
            Err(_) => Ok(None),
        }
    }
}

/// The capture thread: starts the pipeline, sends the calibration, then aligned frames until the receiver
/// is dropped or the camera fails.
fn capture(
    options: &RealSenseOptions,
    calibration_sender: &SyncSender<Result<Calibration, String>>,
    frames: &SyncSender<Result<RgbdFrame, String>>,
) {
    let (mut pipeline, mut align, calibration) = match start(options) {
        Ok(started) => started,
        Err(message) => {
            let _ = calibration_sender.send(Err(message));
            return;
        }
    };
    let camera = calibration.camera;
    if calibration_sender.send(Ok(calibration)).is_err() {
        return;
    }
    loop {
        let frame = next_aligned(&mut pipeline, &mut align, &camera);
        let failed = frame.is_err();
        if frames.send(frame).is_err() || failed {
            return;
        }
    }
}

fn start(options: &RealSenseOptions) -> Result<(ActivePipeline, Align, Calibration), String> {
    let context = Context::new().map_err(|e| format!("cannot open librealsense2: {e}"))?;
    if context.query_devices(HashSet::new()).is_empty() {
        return Err("no RealSense camera is connected".into());
    }
    let pipeline =
        InactivePipeline::try_from(&context).map_err(|e| format!("cannot create a pipeline: {e}"))?;
    let mut config = Config::new();
    if let Some(serial) = &options.serial {
        let serial =
            CString::new(serial.as_str()).map_err(|_| format!("serial {serial:?} has a NUL byte"))?;
        config.enable_device_from_serial(&serial).map_err(|e| format!("camera {serial:?}: {e}"))?;
    }
    let (w, h, fps) = (options.width as usize, options.height as usize, options.fps as usize);
    config
        .enable_stream(Rs2StreamKind::Depth, None, w, h, Rs2Format::Z16, fps)
        .and_then(|c| c.enable_stream(Rs2StreamKind::Color, None, w, h, Rs2Format::Rgb8, fps))
        .map_err(|e| format!("cannot ask for {w}x{h} at {fps} fps: {e}"))?;
    let pipeline =
        pipeline.start(Some(config)).map_err(|e| format!("cannot stream {w}x{h} at {fps} fps: {e}"))?;
    let colour = pipeline
        .profile()
        .streams()
        .iter()
        .find(|s| s.kind() == Rs2StreamKind::Color)
        .ok_or("the camera streams no colour")?
        .intrinsics()
        .map_err(|e| format!("cannot read the colour intrinsics: {e}"))?;
    let d = colour.distortion();
    let distortion = match d.model {
        Rs2DistortionModel::None => Distortion::default(),
        Rs2DistortionModel::BrownConrady
        | Rs2DistortionModel::BrownConradyModified
        | Rs2DistortionModel::BrownConradyInverse => {
            let c = d.coeffs.map(f64::from);
            Distortion { k1: c[0], k2: c[1], p1: c[2], p2: c[3], k3: c[4] }
        }
        other => {
            return Err(format!("the colour stream has a {other:?} lens model, which gst does not model"));
        }
    };
    let camera = PinholeCamera {
        width: colour.width() as u32,
        height: colour.height() as u32,
        fx: f64::from(colour.fx()),
        fy: f64::from(colour.fy()),
        cx: f64::from(colour.ppx()),
        cy: f64::from(colour.ppy()),
        distortion,
    };
    camera.validate().map_err(|e| format!("the colour intrinsics are not usable: {e}"))?;
    let align =
        Align::new(Rs2StreamKind::Color, 4).map_err(|e| format!("cannot align depth to colour: {e}"))?;
    Ok((
        pipeline,
        align,
        Calibration { camera, depth_scale: Some(1000.0), camera_name: Some("realsense".into()) },
    ))
}

fn next_aligned(
    pipeline: &mut ActivePipeline,
    align: &mut Align,
    camera: &PinholeCamera,
) -> Result<RgbdFrame, String> {
    let frames = pipeline.wait(Some(FRAME_TIMEOUT)).map_err(|e| format!("waiting for a frame: {e}"))?;
    align.queue(frames).map_err(|e| format!("aligning depth to colour: {e}"))?;
    let aligned = align.wait(FRAME_TIMEOUT).map_err(|e| format!("aligning depth to colour: {e}"))?;
    let colour: Vec<ColorFrame> = aligned.frames_of_type();
    let depth: Vec<DepthFrame> = aligned.frames_of_type();
    let (Some(colour), Some(depth)) = (colour.first(), depth.first()) else {
        return Err("a frame set without colour or depth".into());
    };
    let (w, h) = (camera.width as usize, camera.height as usize);
    if (colour.width(), colour.height()) != (w, h) || (depth.width(), depth.height()) != (w, h) {
        return Err(format!(
            "colour {}x{} and aligned depth {}x{} differ from the calibration's {w}x{h}",
            colour.width(),
            colour.height(),
            depth.width(),
            depth.height()
        ));
    }
    let units = depth.depth_units().map_err(|e| format!("cannot read the depth units: {e}"))?;
    let rgb: Vec<[u8; 3]> = colour
        .iter()
        .map(|p| match p {
            PixelKind::Rgb8 { r, g, b } => [*r, *g, *b],
            PixelKind::Bgr8 { b, g, r } => [*r, *g, *b],
            _ => [0, 0, 0],
        })
        .collect();
    let metres: Vec<f32> = depth
        .iter()
        .map(|p| match p {
            PixelKind::Z16 { depth } => f32::from(*depth) * units,
            _ => 0.0,
        })
        .collect();
    let rgb = Image::from_vec(camera.width, camera.height, rgb).map_err(|e| e.to_string())?;
    let depth_image = Image::from_vec(camera.width, camera.height, metres).map_err(|e| e.to_string())?;
    Ok(RgbdFrame {
        index: 0,
        timestamp_s: colour.timestamp() * 1e-3,
        rgb,
        depth: Some(depth_image),
        ground_truth: None,
    })
}
