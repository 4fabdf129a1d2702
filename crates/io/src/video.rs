//! H.264 video in MP4 through OpenCV's videoio (FFmpeg backend, libx264): the benchmark's exploration
//! videos.
//!
//! Writing is atomic like every other writer here: frames go to a temporary file in the destination
//! directory, named with an `.mp4` extension because OpenCV picks the container from the extension, and
//! [`VideoWriter::finish`] renames it into place. A writer dropped without `finish` removes its temporary
//! file, so an interrupted export leaves no truncated video behind.
//!
//! The codec is chosen with the FourCC `avc1` and the FFmpeg backend is requested explicitly, so that the
//! encoder does not depend on which other backends OpenCV was built with (Debian's has GStreamer too). Frame sizes must
//! be even (H.264 in 4:2:0 chroma subsampling). H.264 is lossy: a frame read back differs from the frame
//! written by a few grey levels on smooth content, more on fine texture.
//!
//! # Determinism
//!
//! Writing the same frames twice on the same machine gives byte-identical files (tested below). What can
//! differ between machines is not a timestamp:
//!
//! - The container has no wall-clock time: FFmpeg's MP4 muxer writes creation and modification times of 0 in
//!   `mvhd`, `tkhd` and `mdhd`, and sample times follow from the frame index and the frame rate. It does
//!   name the muxer version in the `©too` tag (`Lavf59.27.100` with Debian's FFmpeg).
//! - The first frame carries x264's informational SEI message: the x264 version (`core 164 r3095`) and its
//!   options, among them `threads=N`, which x264 picks as 1.5 × the CPUs the process may use (3 on a
//!   2-CPU machine, 1 under `taskset -c 0`). Writing under 1 and under 2 CPUs gave files that differ in
//!   exactly that one byte. From 7 CPUs on N has two digits, the SEI grows by a byte, and everything after
//!   it shifts: the `mdat` payload and the chunk offsets in `stco`.
//! - x264 bounds the vertical motion-vector range by its number of frame threads, so on machines with
//!   different core counts its encoding decisions can differ too (not observed between 1 and 3 threads).
//!
//! OpenCV 4.6 gives no control over the encoder's threads: `OPENCV_FFMPEG_WRITER_OPTIONS` (`threads;1`,
//! `crf;30`) left the output unchanged. Byte-identity of videos therefore holds per machine (CPU count),
//! x264 and FFmpeg build; comparisons across machines should compare decoded frames with a tolerance.
//! The encoder runs with FFmpeg's libx264 defaults as OpenCV sets them (preset medium, CRF 23, 3 B-frames,
//! a key frame at least every 250 frames).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use opencv::core::{CV_8UC3, Mat, Scalar, Size};
use opencv::prelude::*;
use opencv::videoio;

use gst_core::{Image, RgbImage};

use crate::IoError;

/// FourCC of H.264 in MP4 (`avc1`), as OpenCV's FFmpeg backend maps it to the H.264 encoder.
const H264_FOURCC: [char; 4] = ['a', 'v', 'c', '1'];

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
        let [c1, c2, c3, c4] = H264_FOURCC;
        let fourcc = videoio::VideoWriter::fourcc(c1, c2, c3, c4).map_err(opencv)?;
        let size = Size::new(width as i32, height as i32);
        let writer =
            videoio::VideoWriter::new_with_backend(&temporary, videoio::CAP_FFMPEG, fourcc, fps, size, true);
        // OpenCV may have created the file before failing.
        let writer = match writer {
            Ok(writer) if writer.is_opened().unwrap_or(false) => writer,
            other => {
                let _ = std::fs::remove_file(&temporary);
                let reason = match other {
                    Err(e) => format!(": {e}"),
                    Ok(_) => String::new(),
                };
                return Err(fail(format!(
                    "OpenCV's FFmpeg backend cannot open an H.264 (avc1) encoder for MP4{reason}; \
                     is OpenCV built with FFmpeg and libx264?"
                )));
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
