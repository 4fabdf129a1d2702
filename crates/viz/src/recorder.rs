//! The [`Recorder`] handle: off, an `.rrd` file, a spawned viewer, a running viewer it connects to, or
//! memory (tests).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use rerun::RecordingStream;

use crate::paths;
use crate::{ImageSettings, VizError};

/// Environment variable naming the project's virtualenv (its `bin/rerun` is the viewer we spawn).
pub const VENV_ENV: &str = "GST_VENV";
/// Name of the viewer executable (installed by `rerun-sdk` in the virtualenv).
const VIEWER: &str = "rerun";
/// Magic bytes at the start of an `.rrd` file (current and older framing versions).
const RRD_MAGICS: [&[u8; 4]; 3] = [b"RRF2", b"RRF1", b"RRF0"];
/// Where a running viewer listens unless told otherwise (`rerun` with no arguments; Rerun's default port).
pub const DEFAULT_CONNECT_ADDR: &str = "127.0.0.1:9876";
/// How long [`Recorder::connect`] waits for the viewer's port to accept a connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// How long finishing a connected recording waits for the viewer to take what is queued.
const CONNECTED_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// `last_tracking` before any frame was logged.
const NO_TRACKING_YET: i64 = i64::MIN;
/// Bits of `Inner::once`: static data logged with the first call that needs it.
pub(crate) const ONCE_GROUNDTRUTH_AXES: u32 = 1;

/// Where a frame sits on the two frame timelines.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTime {
    /// The frame's index in its source: the `frame` timeline.
    pub index: usize,
    /// Capture time in seconds (the source's clock): the `time` timeline counts from the first timestamp this
    /// recorder saw, so that TUM's Unix times read as seconds into the recording.
    pub timestamp_s: f64,
}

impl FrameTime {
    pub fn new(index: usize, timestamp_s: f64) -> Self {
        Self { index, timestamp_s }
    }
}

/// A cheap, cloneable handle to a recording, or to nothing.
///
/// Off ([`Recorder::off`], also `Default`) every logging method returns at once without building anything,
/// so code can log unconditionally. On, it wraps a `rerun::RecordingStream`, which may be cloned into and
/// used from any thread (each thread sets its own time, which is why every logging method takes its time
/// explicitly). Logging methods take gst types and log under the documented [`crate::paths`].
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    inner: Option<Arc<Inner>>,
    images: ImageSettings,
}

#[derive(Debug)]
struct Inner {
    stream: RecordingStream,
    /// Timestamp that is 0 s on the `time` timeline.
    time_origin_s: OnceLock<f64>,
    /// Last tracking state code logged (state changes go to the text log).
    last_tracking: AtomicI64,
    /// For file recordings: the `.part` file being written and its final name.
    file: Option<(PathBuf, PathBuf)>,
    finished: AtomicBool,
    /// `ONCE_*` bits already done.
    once: AtomicU32,
    /// Streaming to a viewer over the network: flushes wait at most [`CONNECTED_FLUSH_TIMEOUT`].
    connected: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some((partial, path)) = &self.file
            && !self.finished.load(Ordering::Acquire)
        {
            tracing::warn!(
                "the recording was not finished: {} holds what was logged, {} was not written",
                partial.display(),
                path.display()
            );
        }
    }
}

impl Recorder {
    /// A recorder that records nothing.
    pub fn off() -> Self {
        Self::default()
    }

    /// Records into an `.rrd` file at `path` (parent folders are created). Data goes to `path.part` until
    /// [`Recorder::finish`] completes the file and moves it into place, so `path` is never half-written.
    /// The default blueprint is stored at the start of the file.
    pub fn to_file(app_id: &str, path: &Path) -> Result<Self, VizError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| VizError::Io { path: parent.into(), source })?;
        }
        let mut partial = path.as_os_str().to_owned();
        partial.push(".part");
        let partial = PathBuf::from(partial);
        let stream = rerun::RecordingStreamBuilder::new(application_id(app_id)?)
            .with_blueprint(crate::default_blueprint())
            .save(&partial)?;
        Self::start(stream, Some((partial, path.to_path_buf())))
    }

    /// Opens a Rerun viewer (found by [`find_viewer`]) and streams to it; the default blueprint is made
    /// active. A viewer already listening on Rerun's port receives the stream instead.
    pub fn spawn(app_id: &str) -> Result<Self, VizError> {
        let viewer = find_viewer()?;
        let options = rerun::SpawnOptions {
            executable_path: Some(viewer.to_string_lossy().into_owned()),
            ..rerun::SpawnOptions::default()
        };
        let stream = rerun::RecordingStreamBuilder::new(application_id(app_id)?)
            .with_blueprint(crate::default_blueprint())
            .spawn_opts(&options)?;
        Self::start(stream, None)
    }

    /// Streams to a Rerun viewer that is already running (`rerun`, or `rerun --port P`), as Rerun's own
    /// examples do with `connect_grpc`. `addr` is `HOST:PORT` or a `rerun+http://HOST:PORT/proxy` URL
    /// (default [`DEFAULT_CONNECT_ADDR`]). The viewer's port must accept a TCP connection within 3 s, so a
    /// missing viewer is an error at once rather than a run that queues its recording forever; finishing
    /// waits at most 60 s for the viewer to take what is queued. The entity layout is the same as in files.
    pub fn connect(app_id: &str, addr: Option<&str>) -> Result<Self, VizError> {
        let (url, host_port) = connect_url(addr.unwrap_or(DEFAULT_CONNECT_ADDR))?;
        check_listening(&host_port, &url)?;
        let stream = rerun::RecordingStreamBuilder::new(application_id(app_id)?)
            .with_blueprint(crate::default_blueprint())
            .connect_grpc_opts(url.clone())
            .map_err(|e| VizError::Connect { url: url.clone(), message: e.to_string() })?;
        let mut recorder = Self::start(stream, None)?;
        if let Some(inner) = recorder.inner.as_mut().and_then(Arc::get_mut) {
            inner.connected = true;
        }
        Ok(recorder)
    }

    /// Records into memory; the storage returns what was logged (`take()` flushes first). For tests.
    pub fn memory(app_id: &str) -> Result<(Self, rerun::sink::MemorySinkStorage), VizError> {
        let (stream, storage) = rerun::RecordingStreamBuilder::new(application_id(app_id)?)
            .with_blueprint(crate::default_blueprint())
            .memory()?;
        Ok((Self::start(stream, None)?, storage))
    }

    fn start(stream: RecordingStream, file: Option<(PathBuf, PathBuf)>) -> Result<Self, VizError> {
        // Wall-clock and tick timelines would make two recordings of the same run differ; ours are explicit.
        stream.set_log_time_enabled(false);
        stream.set_log_tick_enabled(false);
        stream.log_static(paths::WORLD, &rerun::ViewCoordinates::RIGHT_HAND_Z_UP())?;
        Ok(Self {
            inner: Some(Arc::new(Inner {
                stream,
                time_origin_s: OnceLock::new(),
                last_tracking: AtomicI64::new(NO_TRACKING_YET),
                file,
                finished: AtomicBool::new(false),
                once: AtomicU32::new(0),
                connected: false,
            })),
            images: ImageSettings::default(),
        })
    }

    /// The same recorder with other image settings (validated).
    pub fn with_images(mut self, images: ImageSettings) -> Result<Self, VizError> {
        images.validate()?;
        self.images = images;
        Ok(self)
    }

    pub fn images(&self) -> ImageSettings {
        self.images
    }

    /// Whether anything is recorded. Check it before preparing data only a recording needs.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.inner.as_ref().is_some_and(|inner| !inner.finished.load(Ordering::Relaxed))
    }

    /// The underlying stream, to log what this crate has no method for (under paths of your own).
    pub fn stream(&self) -> Option<&RecordingStream> {
        self.live().map(|inner| &inner.stream)
    }

    #[inline]
    fn live(&self) -> Option<&Inner> {
        self.inner.as_deref().filter(|inner| !inner.finished.load(Ordering::Relaxed))
    }

    /// The stream when on, with this thread's time set to nothing (for static data).
    pub(crate) fn untimed(&self) -> Option<&RecordingStream> {
        let inner = self.live()?;
        inner.stream.reset_time();
        Some(&inner.stream)
    }

    /// The stream when on, with this thread's time set to a frame.
    pub(crate) fn at_frame(&self, time: &FrameTime) -> Option<&RecordingStream> {
        let inner = self.live()?;
        inner.stream.reset_time();
        inner.stream.set_time_sequence(paths::TIMELINE_FRAME, time.index as i64);
        // A frame without a usable timestamp is only on the `frame` timeline (and cannot become the origin).
        if time.timestamp_s.is_finite() {
            let origin = *inner.time_origin_s.get_or_init(|| time.timestamp_s);
            inner.stream.set_duration_secs(paths::TIMELINE_TIME, time.timestamp_s - origin);
        }
        Some(&inner.stream)
    }

    /// The stream when on, with this thread's time set to a question.
    pub(crate) fn at_question(&self, index: usize) -> Option<&RecordingStream> {
        let inner = self.live()?;
        inner.stream.reset_time();
        inner.stream.set_time_sequence(paths::TIMELINE_QUESTION, index as i64);
        Some(&inner.stream)
    }

    /// Stores `code` as the last tracking state; true when it differs from the previous one.
    pub(crate) fn tracking_changed(&self, code: i64) -> bool {
        self.live().is_some_and(|inner| inner.last_tracking.swap(code, Ordering::Relaxed) != code)
    }

    /// True the first time it is asked for `bit` (one of the `ONCE_*` bits).
    pub(crate) fn first_time(&self, bit: u32) -> bool {
        self.live().is_some_and(|inner| inner.once.fetch_or(bit, Ordering::Relaxed) & bit == 0)
    }

    /// Sends everything logged so far (by this thread; see `rerun::RecordingStream::flush_blocking`) to the
    /// sink.
    pub fn flush(&self) -> Result<(), VizError> {
        match self.live() {
            Some(inner) => inner.stream.flush_blocking().map_err(|e| VizError::Flush(e.to_string())),
            None => Ok(()),
        }
    }

    /// Ends the recording: flushes, completes a file recording (footer) and moves it from `.part` to its
    /// name. Afterwards the recorder is off (in every clone). Calling it again does nothing.
    pub fn finish(&self) -> Result<(), VizError> {
        let Some(inner) = self.inner.as_deref() else { return Ok(()) };
        if inner.finished.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if inner.connected {
            inner.stream.flush_with_timeout(CONNECTED_FLUSH_TIMEOUT).map_err(|e| {
                VizError::Flush(format!(
                    "{e} (the viewer did not take the recording within {} s)",
                    CONNECTED_FLUSH_TIMEOUT.as_secs()
                ))
            })?;
            return Ok(());
        }
        inner.stream.flush_blocking().map_err(|e| VizError::Flush(e.to_string()))?;
        if let Some((partial, path)) = &inner.file {
            inner.stream.finalize_deferred_sinks();
            let written = std::fs::metadata(partial)
                .map_err(|source| VizError::Io { path: partial.clone(), source })?;
            if written.len() == 0 {
                return Err(VizError::Flush(format!("{} is empty after flushing", partial.display())));
            }
            std::fs::rename(partial, path).map_err(|source| VizError::Io { path: path.clone(), source })?;
            tracing::info!("wrote {} ({} bytes)", path.display(), written.len());
        }
        Ok(())
    }

    /// The final path of a file recording.
    pub fn file_path(&self) -> Option<&Path> {
        self.inner.as_deref().and_then(|inner| inner.file.as_ref()).map(|(_, path)| path.as_path())
    }
}

/// The gRPC proxy URL of a viewer address and its `HOST:PORT`: `HOST:PORT`, `rerun+http://HOST:PORT/proxy`
/// (or `http://`, `rerun://`, `rerun+https://`; the `/proxy` path is added when missing).
pub fn connect_url(addr: &str) -> Result<(String, String), VizError> {
    let addr = addr.trim();
    let invalid = |why: &str| VizError::Invalid(format!("viewer address {addr:?}: {why}"));
    let (scheme, rest) = match addr.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("rerun+http", addr),
    };
    if !matches!(scheme, "rerun+http" | "rerun+https" | "rerun" | "http" | "https") {
        return Err(invalid("expected HOST:PORT or rerun+http://HOST:PORT/proxy"));
    }
    let scheme = if scheme.starts_with("rerun") { scheme.to_string() } else { format!("rerun+{scheme}") };
    let (host_port, path) = match rest.split_once('/') {
        Some((host_port, path)) => (host_port, path.trim_end_matches('/')),
        None => (rest, ""),
    };
    if !(path.is_empty() || path == "proxy") {
        return Err(invalid("the only path a viewer serves is /proxy"));
    }
    let Some((host, port)) = host_port.rsplit_once(':') else {
        return Err(invalid("no port (Rerun's default is 9876)"));
    };
    if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(invalid("expected HOST:PORT with a port from 1 to 65535"));
    }
    Ok((format!("{scheme}://{host_port}/proxy"), host_port.to_string()))
}

/// Whether something accepts TCP connections at `host_port` (within [`CONNECT_TIMEOUT`]).
fn check_listening(host_port: &str, url: &str) -> Result<(), VizError> {
    use std::net::ToSocketAddrs;
    let failed = |message: String| VizError::Connect { url: url.to_string(), message };
    let addrs: Vec<_> = host_port
        .to_socket_addrs()
        .map_err(|e| failed(format!("cannot resolve {host_port}: {e}")))?
        .collect();
    let mut last = None;
    for addr in &addrs {
        match std::net::TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(failed(format!(
        "nothing listens at {host_port} ({}); start a viewer first (`rerun`, from .venv/bin) or give its address",
        last.map_or_else(|| "no address".to_string(), |e| e.to_string())
    )))
}

/// Rerun's application id (the viewer keeps one layout per id); errors name a malformed id.
fn application_id(app_id: &str) -> Result<rerun::ApplicationId, VizError> {
    rerun::ApplicationId::try_from(app_id.to_owned())
        .map_err(|e| VizError::Invalid(format!("application id {app_id:?}: {e}")))
}

/// Where we look for the viewer, in order: `$GST_VENV/bin/rerun`, `.venv/bin/rerun` under the current
/// directory (the project's virtualenv, installed by `make setup`), then every directory of `PATH`.
pub fn viewer_candidates() -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(venv) = std::env::var_os(VENV_ENV).filter(|v| !v.is_empty()) {
        candidates.push(PathBuf::from(venv).join("bin").join(VIEWER));
    }
    if let Ok(cwd) = std::env::current_dir() {
        candidates.push(cwd.join(".venv").join("bin").join(VIEWER));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join(VIEWER)));
    }
    candidates
}

/// The first viewer executable of [`viewer_candidates`].
pub fn find_viewer() -> Result<PathBuf, VizError> {
    let candidates = viewer_candidates();
    candidates.iter().find(|p| p.is_file()).cloned().ok_or(VizError::ViewerNotFound { searched: candidates })
}

/// Checks that `path` is an `.rrd` recording (by its magic bytes); errors name the file.
pub fn check_recording(path: &Path) -> Result<(), VizError> {
    let not = |message: String| VizError::NotARecording { path: path.into(), message };
    let mut head = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|e| not(format!("cannot open it: {e}")))?;
    std::io::Read::read_exact(&mut file, &mut head)
        .map_err(|_| not("not a Rerun recording (.rrd): shorter than its header".into()))?;
    if !RRD_MAGICS.iter().any(|m| **m == head) {
        return Err(not(format!(
            "not a Rerun recording (.rrd): it starts with {:?}, not RRF2",
            String::from_utf8_lossy(&head)
        )));
    }
    Ok(())
}

/// Opens a saved recording in the viewer and waits until the viewer is closed. A sibling blueprint file
/// (`NAME.rbl`) is opened with it when present.
pub fn view_file(path: &Path) -> Result<(), VizError> {
    check_recording(path)?;
    let viewer = find_viewer()?;
    let mut command = std::process::Command::new(&viewer);
    command.arg(path);
    let blueprint = path.with_extension("rbl");
    if blueprint.is_file() {
        command.arg(&blueprint);
    }
    let status =
        command.status().map_err(|e| VizError::Viewer { viewer: viewer.clone(), message: e.to_string() })?;
    if !status.success() {
        return Err(VizError::Viewer { viewer, message: format!("exited with {status}") });
    }
    Ok(())
}
