//! The exploration as the protocol gives it: colour frames decoded from the question's video, paired with the
//! RGB-D track's depth stream.
//!
//! The benchmark's questions hand a model the exploration video (`videos/<scene>/explore.mp4`, H.264, lossy),
//! not the generator's lossless frames. The map baseline therefore decodes that video into a TUM RGB-D
//! sequence in the evaluation's own cache (`CACHE/frames/<scene>/`, never inside the bench): `rgb/` holds
//! the decoded frames, `rgb.txt` stamps frame `k` at `k / fps` of the container, `depth.txt` lists the depth
//! stream of the bench's TUM export (the sensor-model depth of the RGB-D track) by absolute path, and
//! `calibration.yaml` is the camera's intrinsics. Nothing else of the export is read: not its colour
//! images, not `groundtruth.txt`, not the instance masks (those stay with the oracle modes).
//! See `docs/protocol.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::BaselineError;

/// The marker of a finished decode; its content says what was decoded.
const DONE: &str = "frames.json";

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Decoded {
    video: PathBuf,
    video_bytes: u64,
    frames: usize,
    fps: f64,
}

/// The video of a scene's exploration inside a split.
pub fn exploration_video(split_dir: &Path, scene: &str) -> PathBuf {
    split_dir.join("videos").join(scene).join("explore.mp4")
}

/// The TUM RGB-D sequence of a scene's exploration with colour decoded from its video: decodes it into
/// `cache_dir/frames/<scene>/` on first use (a partial folder, renamed when complete) and returns that
/// folder. `tum_dir` is the export whose depth stream and intrinsics the sequence uses. Errors name the
/// file: a missing or unreadable video, a missing depth list, a video with another frame count than the
/// depth stream, frames of another size than the intrinsics.
pub fn exploration_sequence(
    split_dir: &Path,
    scene: &str,
    tum_dir: &Path,
    cache_dir: &Path,
) -> Result<PathBuf, BaselineError> {
    let video = exploration_video(split_dir, scene);
    let out = cache_dir.join("frames").join(scene);
    let video_bytes = std::fs::metadata(&video).map_err(|e| BaselineError::io(&video, e))?.len();
    if let Ok(text) = std::fs::read_to_string(out.join(DONE))
        && let Ok(done) = serde_json::from_str::<Decoded>(&text)
        && done.video == video
        && done.video_bytes == video_bytes
    {
        return Ok(out);
    }
    let depth_list = tum_dir.join("depth.txt");
    let depth = read_depth_list(&depth_list, tum_dir)?;
    let calibration_path = tum_dir.join("calibration.yaml");
    let calibration = gst_io::read_calibration(&calibration_path)?;

    let partial = cache_dir.join("frames").join(format!(".{scene}.partial"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| BaselineError::io(&partial, e))?;
    }
    std::fs::create_dir_all(partial.join("rgb")).map_err(|e| BaselineError::io(&partial, e))?;
    let mut reader = gst_io::VideoReader::open(&video)?;
    let (width, height) = (calibration.camera.width, calibration.camera.height);
    if (reader.width(), reader.height()) != (width, height) {
        return Err(BaselineError::file(
            &video,
            format!(
                "frames are {}x{} but the intrinsics in {} are {width}x{height}",
                reader.width(),
                reader.height(),
                calibration_path.display()
            ),
        ));
    }
    let fps = reader.fps();
    let mut rgb_list =
        String::from("# colour frames decoded from the exploration video\n# timestamp filename\n");
    let mut frames = 0usize;
    while let Some(image) = reader.next_frame()? {
        let stamp = format!("{:.6}", frames as f64 / fps);
        let name = format!("rgb/{stamp}.png");
        gst_io::images::write_rgb_png(&partial.join(&name), &image)?;
        let _ = writeln!(rgb_list, "{stamp} {name}");
        frames += 1;
    }
    if frames != depth.len() {
        return Err(BaselineError::file(
            &video,
            format!(
                "the video has {frames} frames but the depth stream {} has {}",
                depth_list.display(),
                depth.len()
            ),
        ));
    }
    let mut depth_text =
        String::from("# the RGB-D track's depth stream (absolute paths)\n# timestamp filename\n");
    for (stamp, path) in &depth {
        let _ = writeln!(depth_text, "{stamp} {}", path.display());
    }
    let write = |name: &str, bytes: &[u8]| gst_io::atomic_write(&partial.join(name), bytes);
    write("rgb.txt", rgb_list.as_bytes())?;
    write("depth.txt", depth_text.as_bytes())?;
    let calibration_bytes =
        std::fs::read(&calibration_path).map_err(|e| BaselineError::io(&calibration_path, e))?;
    write("calibration.yaml", &calibration_bytes)?;
    let done = Decoded { video: video.clone(), video_bytes, frames, fps };
    gst_io::write_json(&partial.join(DONE), &done)?;
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| BaselineError::io(&out, e))?;
    }
    std::fs::rename(&partial, &out).map_err(|e| BaselineError::io(&out, e))?;
    tracing::debug!("{scene}: {frames} frames decoded from {}", video.display());
    Ok(out)
}

/// The lines of a TUM depth list as (timestamp text, absolute path).
fn read_depth_list(path: &Path, dir: &Path) -> Result<Vec<(String, PathBuf)>, BaselineError> {
    let text = std::fs::read_to_string(path).map_err(|e| BaselineError::io(path, e))?;
    let dir = std::path::absolute(dir).map_err(|e| BaselineError::io(dir, e))?;
    let mut entries = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(stamp), Some(name), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(BaselineError::file(
                path,
                format!("line {}: expected `timestamp filename`, got {line:?}", number + 1),
            ));
        };
        if stamp.parse::<f64>().map_or(true, |t| !t.is_finite()) {
            return Err(BaselineError::file(path, format!("line {}: bad timestamp {stamp:?}", number + 1)));
        }
        entries.push((stamp.to_string(), dir.join(name)));
    }
    if entries.is_empty() {
        return Err(BaselineError::file(path, "no depth images listed"));
    }
    Ok(entries)
}
