//! H.264 video in MP4 through OpenCV's videoio: the benchmark's exploration videos.
//!
//! Writing is atomic like every other writer here: frames go to a temporary file in the destination
//! directory, named with an `.mp4` extension because OpenCV picks the container from the extension, and
//! [`VideoWriter::finish`] renames it into place. A writer dropped without `finish` removes its temporary
//! file, so an interrupted export leaves no truncated video behind. Frame sizes must be even (H.264 in 4:2:0
//! chroma subsampling). H.264 is lossy: a frame read back differs from the frame written by a few grey levels
//! on smooth content, more on fine texture.
//!
//! # Encoders
//!
//! The writer prefers OpenCV's GStreamer backend with an explicit pipeline,
//! `appsrc ! videoconvert ! x264enc ! mp4mux ! filesink`, because it is the only route through OpenCV 4.6
//! that sets the encoder's options: x264 preset `superfast`, constant quality 23 (`pass=qual`), a key frame
//! at least every 250 frames, and **one encoder thread**. One thread makes x264 deterministic on every
//! machine; with two or more, GStreamer's x264enc gave different bytes from run to run on the same input
//! (measured; FFmpeg's libx264 wrapper picks 1.5 × CPUs threads and writes that count into the stream). The
//! encoder runs on GStreamer's streaming thread, so it overlaps with whatever the caller does between frames,
//! and several writers encode in parallel. Measured on this 2-core machine, 1,088 frames of 640x512: x264
//! `medium` (what the FFmpeg route gets) took 38.6 s, `superfast` 12.9 s.
//!
//! When the GStreamer pipeline cannot be built (the `gstreamer1.0-plugins-ugly`/`-good` packages that
//! `make setup` installs are missing), the writer falls back to OpenCV's FFmpeg backend with the FourCC
//! `avc1` (libx264 with FFmpeg's defaults: preset medium, CRF 23), warns once, and the determinism below
//! holds only per machine.
//!
//! # Determinism
//!
//! With the GStreamer encoder, the same frames give byte-identical files on any machine with the same x264,
//! GStreamer and OpenCV builds (tested below). GStreamer's MP4 muxer writes the wall-clock time into the
//! `mvhd`, `tkhd` and `mdhd` boxes; the writer overwrites those creation and modification times with 0
//! (what FFmpeg writes) before the file is renamed into place, so no timestamp differs between runs. The
//! stream still names its encoder: x264's informational SEI (version and options) in the first frame, and
//! the muxer's tags in `udta`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use opencv::core::{CV_8UC3, Mat, Scalar, Size};
use opencv::prelude::*;
use opencv::videoio;

use gst_core::{Image, RgbImage};

use crate::IoError;

/// FourCC of H.264 in MP4 (`avc1`), as OpenCV's FFmpeg backend maps it to the H.264 encoder.
const H264_FOURCC: [char; 4] = ['a', 'v', 'c', '1'];

/// x264 settings of the GStreamer pipeline (see the module documentation): fast, constant quality, and one
/// thread, which keeps the output byte-identical between runs and machines.
const X264_SETTINGS: &str = "speed-preset=superfast pass=qual quantizer=23 key-int-max=250 threads=1";

/// Which OpenCV backend encodes a video.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoder {
    GStreamer,
    FFmpeg,
}

/// Opens the GStreamer pipeline writing to `path`; `None` when GStreamer or one of its elements is missing
/// (or the path cannot be quoted in a pipeline description).
fn open_gstreamer(path: &Path, fps: f64, size: Size) -> Option<videoio::VideoWriter> {
    let location = path.to_str().filter(|p| !p.contains(['"', '\\']))?;
    let pipeline = format!(
        "appsrc ! videoconvert ! video/x-raw,format=I420 ! x264enc {X264_SETTINGS} ! mp4mux ! \
         filesink location=\"{location}\""
    );
    let writer =
        videoio::VideoWriter::new_with_backend(&pipeline, videoio::CAP_GSTREAMER, 0, fps, size, true);
    match writer {
        Ok(writer) if writer.is_opened().unwrap_or(false) => Some(writer),
        _ => None,
    }
}

/// Opens OpenCV's FFmpeg writer (libx264 through the FourCC `avc1`) at `path`.
fn open_ffmpeg(path: &Path, fps: f64, size: Size) -> Result<videoio::VideoWriter, String> {
    let [c1, c2, c3, c4] = H264_FOURCC;
    let fourcc = videoio::VideoWriter::fourcc(c1, c2, c3, c4).map_err(|e| e.to_string())?;
    let writer = videoio::VideoWriter::new_with_backend(path, videoio::CAP_FFMPEG, fourcc, fps, size, true);
    // OpenCV may have created the file before failing.
    match writer {
        Ok(writer) if writer.is_opened().unwrap_or(false) => Ok(writer),
        other => {
            let _ = std::fs::remove_file(path);
            let reason = match other {
                Err(e) => format!(": {e}"),
                Ok(_) => String::new(),
            };
            Err(format!(
                "neither OpenCV's GStreamer backend (x264enc, mp4mux) nor its FFmpeg backend can open an \
                 H.264 encoder for MP4{reason}; run `make setup` (it installs the GStreamer plugins)"
            ))
        }
    }
}

fn warn_fallback_once() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "GStreamer's x264enc/mp4mux are not available to OpenCV; encoding with FFmpeg's libx264 \
             (slower, and byte-identical only on the same machine). `make setup` installs the plugins."
        );
    });
}

/// Overwrites the creation and modification times in the `mvhd`, `tkhd` and `mdhd` boxes of an MP4 file
/// with 0 (1904-01-01, what FFmpeg writes), in place. Returns how many boxes were patched.
fn zero_mp4_times(path: &Path) -> Result<usize, String> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut file =
        std::fs::OpenOptions::new().read(true).write(true).open(path).map_err(|e| e.to_string())?;
    let length = file.metadata().map_err(|e| e.to_string())?.len();
    // Find the `moov` box among the top-level boxes, reading headers only (`mdat` is most of the file).
    let mut offset = 0u64;
    let mut moov = None;
    while offset + 8 <= length {
        file.seek(SeekFrom::Start(offset)).map_err(|e| e.to_string())?;
        let mut header = [0u8; 16];
        let available = (length - offset).min(16) as usize;
        file.read_exact(&mut header[..available]).map_err(|e| e.to_string())?;
        let (size, header_len) = box_size(&header[..available], length - offset)?;
        if &header[4..8] == b"moov" {
            moov = Some((offset + header_len, size - header_len));
            break;
        }
        offset += size;
    }
    let (start, size) = moov.ok_or("no moov box")?;
    let mut bytes = vec![0u8; usize::try_from(size).map_err(|e| e.to_string())?];
    file.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
    file.read_exact(&mut bytes).map_err(|e| e.to_string())?;
    let patched = zero_times_in(&mut bytes)?;
    file.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
    file.write_all(&bytes).map_err(|e| e.to_string())?;
    file.sync_all().map_err(|e| e.to_string())?;
    Ok(patched)
}

/// The size of the box whose header starts `header` (and its header length), `remaining` bytes before the
/// end of its parent.
fn box_size(header: &[u8], remaining: u64) -> Result<(u64, u64), String> {
    let field = |range: std::ops::Range<usize>| header.get(range).ok_or("truncated box header");
    let size32 = u32::from_be_bytes(field(0..4)?.try_into().map_err(|_| "box header")?);
    let (size, header_len) = match size32 {
        0 => (remaining, 8),
        1 => (u64::from_be_bytes(field(8..16)?.try_into().map_err(|_| "box header")?), 16),
        n => (u64::from(n), 8),
    };
    if size < header_len || size > remaining {
        return Err(format!("box size {size} does not fit in the {remaining} bytes of its parent"));
    }
    Ok((size, header_len))
}

/// Zeroes the times of every `mvhd`, `tkhd` and `mdhd` box inside `bytes` (the payload of a container box).
fn zero_times_in(bytes: &mut [u8]) -> Result<usize, String> {
    let mut patched = 0;
    let mut offset = 0usize;
    while offset + 8 <= bytes.len() {
        let (size, header_len) = box_size(&bytes[offset..], (bytes.len() - offset) as u64)?;
        let (size, header_len) = (size as usize, header_len as usize);
        let kind: [u8; 4] = bytes[offset + 4..offset + 8].try_into().map_err(|_| "box type")?;
        let payload = &mut bytes[offset + header_len..offset + size];
        match &kind {
            b"moov" | b"trak" | b"mdia" => patched += zero_times_in(payload)?,
            b"mvhd" | b"tkhd" | b"mdhd" => {
                // Version 0: 32-bit creation and modification times after version and flags; version 1: 64-bit.
                let times = if payload.first() == Some(&1) { 16 } else { 8 };
                let field = payload.get_mut(4..4 + times).ok_or("truncated time field")?;
                field.fill(0);
                patched += 1;
            }
            _ => {}
        }
        offset += size;
    }
    Ok(patched)
}

/// Distinguishes temporary files of writers in the same process that target the same path.
static TEMPORARY_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes RGB frames into an H.264 MP4 file, atomically (see the module documentation).
pub struct VideoWriter {
    writer: videoio::VideoWriter,
    path: PathBuf,
    temporary: PathBuf,
    width: u32,
    height: u32,
    /// BGR frame buffer, reused between frames.
    frame: Mat,
    frames_written: usize,
    encoder: Encoder,
    /// Set once the temporary file has been renamed into place; `Drop` then has nothing to remove.
    finished: bool,
}

impl std::fmt::Debug for VideoWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoWriter")
            .field("path", &self.path)
            .field("temporary", &self.temporary)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("frames_written", &self.frames_written)
            .finish_non_exhaustive()
    }
}

impl VideoWriter {
    /// Opens a writer for `path` (which must end in `.mp4`) with frames of `width` x `height` pixels (both
    /// even) at `fps` frames per second. Creates the parent directory if needed.
    pub fn create(path: &Path, width: u32, height: u32, fps: f64) -> Result<Self, IoError> {
        let fail = |message: String| IoError::VideoWrite { path: path.into(), message };
        let is_mp4 = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("mp4"));
        if !is_mp4 {
            return Err(fail("the file name must end in .mp4 (H.264 in an MP4 container)".into()));
        }
        if width == 0 || height == 0 || !width.is_multiple_of(2) || !height.is_multiple_of(2) {
            return Err(fail(format!("frame size {width}x{height} must be positive and even for H.264")));
        }
        if width > i32::MAX as u32 || height > i32::MAX as u32 {
            return Err(fail(format!("frame size {width}x{height} is too large")));
        }
        if !(fps.is_finite() && fps > 0.0) {
            return Err(fail(format!("frame rate {fps} must be positive")));
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(|source| IoError::Io { path: dir.into(), source })?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let counter = TEMPORARY_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temporary = dir.join(format!(".{stem}.tmp-{}-{counter}.mp4", std::process::id()));

        let opencv = |e: opencv::Error| fail(e.to_string());
        let size = Size::new(width as i32, height as i32);
        let (writer, encoder) = match open_gstreamer(&temporary, fps, size) {
            Some(writer) => (writer, Encoder::GStreamer),
            None => {
                warn_fallback_once();
                let _ = std::fs::remove_file(&temporary);
                (open_ffmpeg(&temporary, fps, size).map_err(fail)?, Encoder::FFmpeg)
            }
        };
        let frame = Mat::new_rows_cols_with_default(size.height, size.width, CV_8UC3, Scalar::all(0.0))
            .map_err(opencv)?;
        Ok(Self {
            writer,
            path: path.into(),
            temporary,
            width,
            height,
            frame,
            frames_written: 0,
            encoder,
            finished: false,
        })
    }

    /// The file the video is renamed to by [`finish`](Self::finish).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn frames_written(&self) -> usize {
        self.frames_written
    }

    /// Appends a frame; its size must be the writer's.
    pub fn write(&mut self, frame: &RgbImage) -> Result<(), IoError> {
        let fail = |message: String| IoError::VideoWrite { path: self.path.clone(), message };
        if (frame.width(), frame.height()) != (self.width, self.height) {
            return Err(fail(format!(
                "frame {} is {}x{} but the video is {}x{}",
                self.frames_written,
                frame.width(),
                frame.height(),
                self.width,
                self.height
            )));
        }
        let bytes = self.frame.data_bytes_mut().map_err(|e| fail(e.to_string()))?;
        for (rgb, bgr) in frame.data().iter().zip(bytes.chunks_exact_mut(3)) {
            bgr.copy_from_slice(&[rgb[2], rgb[1], rgb[0]]);
        }
        self.writer.write(&self.frame).map_err(|e| fail(e.to_string()))?;
        self.frames_written += 1;
        Ok(())
    }

    /// Flushes the encoder, closes the file and renames it into place. A video without frames is an error
    /// (and leaves no file).
    pub fn finish(mut self) -> Result<(), IoError> {
        let fail = |message: String| IoError::VideoWrite { path: self.path.clone(), message };
        if self.frames_written == 0 {
            return Err(fail("no frames were written".into()));
        }
        self.writer.release().map_err(|e| fail(format!("closing the encoder: {e}")))?;
        if self.encoder == Encoder::GStreamer {
            zero_mp4_times(&self.temporary).map_err(|e| fail(format!("finishing the MP4 container: {e}")))?;
        }
        std::fs::rename(&self.temporary, &self.path)
            .map_err(|source| IoError::Io { path: self.path.clone(), source })?;
        self.finished = true;
        Ok(())
    }
}

impl Drop for VideoWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.writer.release();
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// Reads a video frame by frame (any container and codec OpenCV's FFmpeg backend reads).
///
/// Opening decodes the first frame, so that a missing, empty, corrupt or frameless video fails at
/// [`open`](Self::open) with an error naming the file.
pub struct VideoReader {
    capture: videoio::VideoCapture,
    path: PathBuf,
    fps: f64,
    width: u32,
    height: u32,
    /// The next frame, already decoded (BGR), or `None` at the end of the video.
    pending: Option<Mat>,
    frames_read: usize,
}

impl std::fmt::Debug for VideoReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoReader")
            .field("path", &self.path)
            .field("fps", &self.fps)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("frames_read", &self.frames_read)
            .finish_non_exhaustive()
    }
}

impl VideoReader {
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let fail = |message: String| IoError::VideoRead { path: path.into(), message };
        let metadata = std::fs::metadata(path).map_err(|source| IoError::Io { path: path.into(), source })?;
        if !metadata.is_file() {
            return Err(fail("not a file".into()));
        }
        if metadata.len() == 0 {
            return Err(fail("the file is empty".into()));
        }
        let mut capture =
            videoio::VideoCapture::from_file(path, videoio::CAP_FFMPEG).map_err(|e| fail(e.to_string()))?;
        if !capture.is_opened().unwrap_or(false) {
            return Err(fail("not a video OpenCV can read (corrupt, truncated or unknown format)".into()));
        }
        let fps = capture.get(videoio::CAP_PROP_FPS).map_err(|e| fail(e.to_string()))?;
        if !(fps.is_finite() && fps > 0.0) {
            return Err(fail(format!("the video has no valid frame rate ({fps})")));
        }
        // The container's declared frame size, checked before a frame buffer is allocated for it.
        let declared = |prop| capture.get(prop).map(|v| if v.is_finite() && v > 0.0 { v as u64 } else { 0 });
        let declared_w = declared(videoio::CAP_PROP_FRAME_WIDTH).map_err(|e| fail(e.to_string()))?;
        let declared_h = declared(videoio::CAP_PROP_FRAME_HEIGHT).map_err(|e| fail(e.to_string()))?;
        if declared_w > 0 && declared_h > 0 {
            gst_core::limits::check_image_size(declared_w, declared_h)
                .map_err(|e| fail(format!("its header {e}")))?;
        }
        let Some(first) = read_mat(&mut capture).map_err(|e| fail(e.to_string()))? else {
            return Err(fail("the video has no frames (or its first frame cannot be decoded)".into()));
        };
        let (width, height) = (first.cols() as u32, first.rows() as u32);
        Ok(Self { capture, path: path.into(), fps, width, height, pending: Some(first), frames_read: 0 })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames per second, as the container declares it.
    pub fn fps(&self) -> f64 {
        self.fps
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// The number of frames the container declares (OpenCV's `CAP_PROP_FRAME_COUNT`), when it declares one.
    /// A hint: the frames actually decodable may be fewer.
    pub fn frame_count_hint(&self) -> Option<usize> {
        let count = self.capture.get(videoio::CAP_PROP_FRAME_COUNT).ok()?;
        (count.is_finite() && count >= 1.0).then_some(count as usize)
    }

    /// Frames returned so far.
    pub fn frames_read(&self) -> usize {
        self.frames_read
    }

    /// The next frame as RGB, or `None` after the last one.
    pub fn next_frame(&mut self) -> Result<Option<RgbImage>, IoError> {
        let Some(mat) = self.pending.take() else {
            return Ok(None);
        };
        let fail = |message: String| IoError::VideoRead { path: self.path.clone(), message };
        let index = self.frames_read;
        let image = rgb_from_bgr_mat(&mat).map_err(|m| fail(format!("frame {index}: {m}")))?;
        if (image.width(), image.height()) != (self.width, self.height) {
            return Err(fail(format!(
                "frame {index} is {}x{} but the video started at {}x{}",
                image.width(),
                image.height(),
                self.width,
                self.height
            )));
        }
        self.pending = read_mat(&mut self.capture).map_err(|e| fail(format!("frame {}: {e}", index + 1)))?;
        self.frames_read += 1;
        Ok(Some(image))
    }
}

/// Decodes the next frame; `None` at the end of the stream.
fn read_mat(capture: &mut videoio::VideoCapture) -> opencv::Result<Option<Mat>> {
    let mut mat = Mat::default();
    if capture.read(&mut mat)? && !mat.empty() { Ok(Some(mat)) } else { Ok(None) }
}

fn rgb_from_bgr_mat(mat: &Mat) -> Result<RgbImage, String> {
    if mat.typ() != CV_8UC3 {
        return Err(format!("unexpected pixel type {} (expected 8-bit BGR)", mat.typ()));
    }
    let continuous =
        if mat.is_continuous() { None } else { Some(mat.try_clone().map_err(|e| e.to_string())?) };
    let bytes = continuous.as_ref().unwrap_or(mat).data_bytes().map_err(|e| e.to_string())?;
    let data: Vec<[u8; 3]> = bytes.chunks_exact(3).map(|b| [b[2], b[1], b[0]]).collect();
    Image::from_vec(mat.cols() as u32, mat.rows() as u32, data).map_err(|e| e.to_string())
}

/// Reads a whole video: its frames as RGB and its frame rate. A video without frames is an error.
pub fn read_video(path: &Path) -> Result<(Vec<RgbImage>, f64), IoError> {
    let mut reader = VideoReader::open(path)?;
    let mut frames = Vec::new();
    while let Some(frame) = reader.next_frame()? {
        frames.push(frame);
    }
    Ok((frames, reader.fps()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIDTH: u32 = 96;
    const HEIGHT: u32 = 64;

    /// A smooth colour gradient moving two pixels to the right per frame.
    fn gradient_frame(index: u32) -> RgbImage {
        let mut data = Vec::with_capacity((WIDTH * HEIGHT) as usize);
        for y in 0..HEIGHT {
            for x in 0..WIDTH {
                let u = (x + 2 * index) % WIDTH;
                data.push([(u * 255 / WIDTH) as u8, (y * 255 / HEIGHT) as u8, 128]);
            }
        }
        Image::from_vec(WIDTH, HEIGHT, data).expect("size matches")
    }

    fn write_gradient_video(path: &Path, frames: u32, fps: f64) -> Result<(), IoError> {
        let mut writer = VideoWriter::create(path, WIDTH, HEIGHT, fps)?;
        for index in 0..frames {
            writer.write(&gradient_frame(index))?;
        }
        writer.finish()
    }

    fn file_names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("readable dir")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Whether an MP4 file holds an H.264 track: its sample description has an `avc1` entry with an `avcC`
    /// (AVC decoder configuration) box.
    fn holds_h264(bytes: &[u8]) -> bool {
        let has = |tag: &[u8]| bytes.windows(4).any(|w| w == tag);
        has(b"ftyp") && has(b"moov") && has(b"avc1") && has(b"avcC")
    }

    #[test]
    fn round_trips_h264_mp4() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("clip.mp4");
        write_gradient_video(&path, 20, 10.0)?;
        assert_eq!(file_names(dir.path()), vec!["clip.mp4".to_string()], "no temporary left behind");
        assert!(holds_h264(&std::fs::read(&path)?), "the file is H.264 in MP4");

        let (frames, fps) = read_video(&path)?;
        assert_eq!(frames.len(), 20);
        assert!((fps - 10.0).abs() < 1e-6, "fps {fps}");
        let mut total_error = 0.0;
        let mut samples = 0.0;
        for (index, frame) in frames.iter().enumerate() {
            assert_eq!((frame.width(), frame.height()), (WIDTH, HEIGHT));
            let original = gradient_frame(index as u32);
            for (a, b) in frame.data().iter().zip(original.data()) {
                for c in 0..3 {
                    total_error += (f64::from(a[c]) - f64::from(b[c])).abs();
                    samples += 1.0;
                }
            }
        }
        let mean_abs_error = total_error / samples;
        assert!(mean_abs_error < 4.0, "mean absolute error {mean_abs_error} grey levels");

        let mut reader = VideoReader::open(&path)?;
        assert_eq!((reader.width(), reader.height()), (WIDTH, HEIGHT));
        let mut count = 0;
        while reader.next_frame()?.is_some() {
            count += 1;
        }
        assert_eq!(count, 20);
        assert!(reader.next_frame()?.is_none(), "stays at the end");
        Ok(())
    }

    #[test]
    fn same_frames_give_the_same_bytes() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let a = dir.path().join("a.mp4");
        let b = dir.path().join("b.mp4");
        write_gradient_video(&a, 20, 10.0)?;
        write_gradient_video(&b, 20, 10.0)?;
        let (a, b) = (std::fs::read(&a)?, std::fs::read(&b)?);
        let first_difference = a.iter().zip(&b).position(|(x, y)| x != y);
        assert!(
            a.len() == b.len() && first_difference.is_none(),
            "lengths {} and {}, first difference at byte {first_difference:?}",
            a.len(),
            b.len()
        );
        Ok(())
    }

    /// `make setup` installs GStreamer's x264enc and mp4mux: the deterministic encoder must be the one used.
    #[test]
    fn encodes_with_one_x264_thread_and_no_wall_clock_times() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("v.mp4");
        let mut writer = VideoWriter::create(&path, WIDTH, HEIGHT, 10.0)?;
        assert_eq!(writer.encoder, Encoder::GStreamer, "GStreamer plugins missing? run `make setup`");
        for k in 0..5 {
            writer.write(&gradient_frame(k))?;
        }
        writer.finish()?;
        let bytes = std::fs::read(&path)?;
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(" threads=1 ") && text.contains("subme=1 "),
            "x264 options: superfast, 1 thread"
        );
        // Patched once more, the file has the same three boxes and nothing else to zero.
        assert_eq!(zero_mp4_times(&path)?, 3);
        assert_eq!(std::fs::read(&path)?, bytes, "times were already zero");
        Ok(())
    }

    #[test]
    fn mp4_box_walk_rejects_bad_sizes() {
        let mut bytes = *b"\0\0\0\x40mvhd\0\0\0\0";
        assert!(zero_times_in(&mut bytes).expect_err("size past the end").contains("does not fit"));
    }

    #[test]
    fn bad_videos_name_the_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing.mp4");
        let error = read_video(&missing).expect_err("missing").to_string();
        assert!(error.contains("missing.mp4"), "{error}");

        let empty = dir.path().join("empty.mp4");
        std::fs::write(&empty, b"")?;
        let error = read_video(&empty).expect_err("empty").to_string();
        assert!(error.contains("empty.mp4") && error.contains("empty"), "{error}");

        let corrupt = dir.path().join("corrupt.mp4");
        std::fs::write(&corrupt, b"\0\0\0\x18ftypisom this is not a video")?;
        let error = read_video(&corrupt).expect_err("corrupt").to_string();
        assert!(error.contains("corrupt.mp4"), "{error}");

        // A video cut in half loses its index (the `moov` box comes last).
        let whole = dir.path().join("whole.mp4");
        write_gradient_video(&whole, 20, 10.0)?;
        let bytes = std::fs::read(&whole)?;
        let truncated = dir.path().join("truncated.mp4");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2])?;
        let error = read_video(&truncated).expect_err("truncated").to_string();
        assert!(error.contains("truncated.mp4"), "{error}");
        Ok(())
    }

    #[test]
    fn bad_writes_are_refused_and_leave_nothing() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("out.mp4");

        let mut writer = VideoWriter::create(&path, WIDTH, HEIGHT, 10.0)?;
        writer.write(&gradient_frame(0))?;
        let small = Image::filled(WIDTH / 2, HEIGHT, [0u8; 3]);
        let error = writer.write(&small).expect_err("size mismatch").to_string();
        assert!(error.contains("out.mp4") && error.contains("48x64"), "{error}");
        drop(writer);
        assert!(file_names(dir.path()).is_empty(), "a dropped writer removes its temporary");

        let writer = VideoWriter::create(&path, WIDTH, HEIGHT, 10.0)?;
        assert!(writer.finish().expect_err("no frames").to_string().contains("no frames"));
        assert!(file_names(dir.path()).is_empty());

        for (width, height, fps, name) in [
            (WIDTH + 1, HEIGHT, 10.0, "out.mp4"),
            (WIDTH, HEIGHT, 0.0, "out.mp4"),
            (WIDTH, HEIGHT, 10.0, "x.avi"),
        ] {
            let error =
                VideoWriter::create(&dir.path().join(name), width, height, fps).expect_err(name).to_string();
            assert!(error.contains(name), "{error}");
        }
        assert!(file_names(dir.path()).is_empty());
        Ok(())
    }
}
