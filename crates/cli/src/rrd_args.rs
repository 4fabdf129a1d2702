//! `--rrd FILE` / `--spawn` / `--connect [ADDR]`: the Rerun options shared by the commands that can record a run, and a frame
//! source wrapper that records every frame as it is read.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use gst_core::{Calibration, RgbdFrame};
use gst_io::{FrameSource, IoError, SourceKind};
use gst_viz::{FrameTime, ImageSettings, Recorder, VizError};

/// The application id of every gst recording (the viewer keeps one layout per application id).
pub const APP_ID: &str = "gst";

/// How frame images go into a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RrdImages {
    /// JPEG colour, 16-bit PNG depth in millimetres (a few tens of kB per frame).
    Compact,
    /// Raw RGB and f32 depth, exact (about 2.3 MB per 640x512 frame).
    Lossless,
    /// No images: poses, trajectories, metrics and maps only.
    None,
}

#[derive(Clone, Debug, clap::Args)]
pub struct RrdArgs {
    /// Record the run into a Rerun recording (.rrd) to open later with `gst view FILE`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["spawn", "connect"])]
    pub rrd: Option<PathBuf>,
    /// Stream the run to a Rerun viewer started from $GST_VENV/bin, .venv/bin or PATH.
    #[arg(long, conflicts_with = "connect")]
    pub spawn: bool,
    /// Stream the run, while it runs, to a Rerun viewer that is already running (start one with `rerun`):
    /// HOST:PORT or rerun+http://HOST:PORT/proxy, default 127.0.0.1:9876. Fails at once when nothing
    /// listens there.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = gst_viz::DEFAULT_CONNECT_ADDR)]
    pub connect: Option<String>,
    /// How frame images are recorded.
    #[arg(long, value_enum, default_value = "compact")]
    pub rrd_images: RrdImages,
    /// Shrink recorded frame images by this integer factor (the camera model is scaled to match).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub rrd_downscale: u32,
}

impl RrdArgs {
    /// Whether frame images are recorded.
    pub fn records_images(&self) -> bool {
        self.rrd_images != RrdImages::None
    }

    fn image_settings(&self) -> ImageSettings {
        let base = match self.rrd_images {
            RrdImages::Lossless => ImageSettings::lossless(),
            RrdImages::Compact | RrdImages::None => ImageSettings::compact(),
        };
        ImageSettings { downscale: self.rrd_downscale, ..base }
    }

    /// The recorder these options ask for: off without `--rrd`/`--spawn`/`--connect`.
    pub fn recorder(&self) -> Result<Recorder> {
        let recorder = if let Some(path) = &self.rrd {
            Recorder::to_file(APP_ID, path)
                .with_context(|| format!("creating the recording {}", path.display()))?
        } else if self.spawn {
            Recorder::spawn(APP_ID).context("starting the Rerun viewer")?
        } else if let Some(addr) = &self.connect {
            let recorder = Recorder::connect(APP_ID, Some(addr))?;
            eprintln!("streaming to the Rerun viewer at {addr}");
            recorder
        } else {
            return Ok(Recorder::off());
        };
        Ok(recorder.with_images(self.image_settings())?)
    }
}

/// Completes a recording and says where it is.
pub fn finish(recorder: &Recorder) -> Result<()> {
    recorder.finish().context("finishing the Rerun recording")?;
    if let Some(path) = recorder.file_path() {
        eprintln!("recorded {} (open it with `gst view {}`)", path.display(), path.display());
    }
    Ok(())
}

/// Reports a recording error without stopping the run: a broken recording should not throw away the
/// computation it records. The first error is a warning, later ones are counted at debug level.
#[derive(Debug, Default)]
pub struct RecordingErrors {
    count: usize,
}

impl RecordingErrors {
    pub fn check(&mut self, result: Result<(), VizError>) {
        if let Err(error) = result {
            self.count += 1;
            if self.count == 1 {
                tracing::warn!("recording: {error} (the run goes on; later recording errors are not shown)");
            } else {
                tracing::debug!("recording: {error}");
            }
        }
    }
}

/// A frame source that records each frame (colour, depth, ground-truth pose) as it is read, on the reading
/// thread, so that image encoding overlaps with tracking.
pub struct RecordedSource<S> {
    inner: S,
    recorder: Recorder,
    images: bool,
    errors: RecordingErrors,
}

impl<S> RecordedSource<S> {
    pub fn new(inner: S, recorder: Recorder, images: bool) -> Self {
        Self { inner, recorder, images, errors: RecordingErrors::default() }
    }
}

impl<S: FrameSource> FrameSource for RecordedSource<S> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }
    fn calibration(&self) -> &Calibration {
        self.inner.calibration()
    }
    fn has_depth(&self) -> bool {
        self.inner.has_depth()
    }
    fn len(&self) -> Option<usize> {
        self.inner.len()
    }
    fn next_frame(&mut self) -> Result<Option<RgbdFrame>, IoError> {
        let frame = self.inner.next_frame()?;
        if let Some(frame) = &frame
            && self.recorder.is_on()
        {
            let time = FrameTime::new(frame.index, frame.timestamp_s);
            if self.images {
                self.errors.check(self.recorder.log_rgb(&time, &frame.rgb));
                if let Some(depth) = &frame.depth {
                    self.errors.check(self.recorder.log_depth(&time, depth));
                }
            }
            if let Some(pose) = &frame.ground_truth {
                self.errors.check(self.recorder.log_groundtruth_pose(&time, pose));
            }
        }
        Ok(frame)
    }
}

impl<S> std::fmt::Debug for RecordedSource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedSource").field("recorder", &self.recorder).finish_non_exhaustive()
    }
}
