//! Frame sources on data written here: TUM RGB-D directories (through `TumWriter`), generated-split
//! layouts, image folders and videos, and the errors of each on bad input.

use std::path::{Path, PathBuf};

use gst_core::{Calibration, DepthImage, Distortion, Image, PinholeCamera, Pose3, RgbImage, RgbdFrame};
use gst_io::{
    FrameSource, FrameTiming, ImageFolderSource, IoError, SourceKind, SourceOptions, TumSource, TumWriter,
    VideoWriter, generated_episode_dir, open_generated_episode, open_source, open_source_with,
    write_depth_png, write_rgb_png,
};
use nalgebra::Vector3;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WIDTH: u32 = 32;
const HEIGHT: u32 = 24;

fn camera() -> PinholeCamera {
    PinholeCamera {
        width: WIDTH,
        height: HEIGHT,
        fx: 30.0,
        fy: 30.0,
        cx: 15.5,
        cy: 11.5,
        distortion: Distortion::default(),
    }
}

fn calibration() -> Calibration {
    Calibration { camera: camera(), depth_scale: Some(5000.0), camera_name: Some("test".into()) }
}

fn rgb(index: usize) -> RgbImage {
    let mut image = Image::filled(WIDTH, HEIGHT, [0u8; 3]);
    for (i, pixel) in image.data_mut().iter_mut().enumerate() {
        *pixel = [(i % 256) as u8, (index * 40 % 256) as u8, (i / 7 % 256) as u8];
    }
    image
}

fn depth(index: usize) -> DepthImage {
    let mut image = Image::filled(WIDTH, HEIGHT, 0.0f32);
    for (i, value) in image.data_mut().iter_mut().enumerate() {
        *value = if i % 11 == 0 { 0.0 } else { 0.5 + 0.01 * (i % 97) as f32 + index as f32 };
    }
    image
}

fn pose(index: usize) -> Pose3 {
    Pose3::world_from_camera_yaw_pitch(Vector3::new(0.1 * index as f64, 0.0, 1.4), 0.2 * index as f64, 0.0)
}

/// Writes a TUM sequence of `frames` frames at 10 Hz starting at t = 100 s.
fn write_tum(dir: &Path, calibration: &Calibration, frames: usize, with_poses: bool) -> Result<(), IoError> {
    let mut writer = TumWriter::create(dir, calibration)?;
    for index in 0..frames {
        let pose = pose(index);
        writer.add_frame(
            100.0 + 0.1 * index as f64,
            &rgb(index),
            &depth(index),
            with_poses.then_some(&pose),
        )?;
    }
    writer.finish()
}

fn collect(source: &mut dyn FrameSource) -> Result<Vec<RgbdFrame>, IoError> {
    let mut frames = Vec::new();
    while let Some(frame) = source.next_frame()? {
        frames.push(frame);
    }
    Ok(frames)
}

fn error_text<T>(result: Result<T, IoError>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn tum_round_trip_through_tum_writer() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("seq");
    write_tum(&tum, &calibration(), 5, true)?;

    let mut source = open_source(&tum, None)?;
    assert_eq!(source.kind(), SourceKind::Tum);
    assert_eq!(source.len(), Some(5));
    assert!(source.has_depth());
    assert_eq!(source.calibration(), &calibration());
    assert!(source.name().contains("seq"));
    let frames = collect(&mut source)?;
    assert_eq!(frames.len(), 5);
    for (index, frame) in frames.iter().enumerate() {
        assert_eq!(frame.index, index);
        assert!((frame.timestamp_s - (100.0 + 0.1 * index as f64)).abs() < 1e-6);
        assert_eq!(frame.rgb, rgb(index));
        let read_depth = frame.depth.as_ref().ok_or("depth")?;
        for (a, b) in read_depth.data().iter().zip(depth(index).data()) {
            assert!((a - b).abs() <= 1e-4, "{a} vs {b}");
        }
        let ground_truth = frame.ground_truth.ok_or("ground truth")?;
        let error = (ground_truth.inverse() * pose(index)).translation().norm();
        assert!(error < 1e-6, "frame {index}: {error}");
    }
    assert!(source.next_frame()?.is_none(), "stays at the end");
    Ok(())
}

#[test]
fn tum_association_and_ground_truth_interpolation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("seq");
    write_tum(&tum, &calibration(), 3, false)?;
    // Depth 10 ms after colour pairs (associate.py: < 20 ms); a colour image with no depth is dropped.
    std::fs::write(
        tum.join("rgb.txt"),
        "# color\n# file\n# ts\n100.000000 rgb/100.000000.png\n100.100000 rgb/100.100000.png\n100.200000 rgb/100.200000.png\n",
    )?;
    std::fs::write(
        tum.join("depth.txt"),
        "# depth\n# file\n# ts\n100.010000 depth/100.000000.png\n100.215000 depth/100.200000.png\n",
    )?;
    // Ground truth at 100 Hz around the first frame only, moving along x at 1 m/s.
    let mut groundtruth = String::from("# timestamp tx ty tz qx qy qz qw\n");
    for k in 0..5 {
        let t = 99.98 + 0.01 * f64::from(k);
        groundtruth += &format!("{t:.6} {:.6} 0 0 0 0 0 1\n", t - 100.0);
    }
    std::fs::write(tum.join("groundtruth.txt"), groundtruth)?;

    let mut source = TumSource::open(&tum, &SourceOptions::default())?;
    assert_eq!(source.len(), Some(2));
    let frames = collect(&mut source)?;
    assert_eq!(
        frames.iter().map(|f| (f.timestamp_s * 10.0).round() as i64).collect::<Vec<_>>(),
        [1000, 1002]
    );
    let first = frames[0].ground_truth.ok_or("the first frame has ground truth")?;
    assert!(first.translation().x.abs() < 1e-9, "{}", first.translation());
    assert!(frames[1].ground_truth.is_none(), "no ground truth near 100.2 s");
    Ok(())
}

#[test]
fn distorted_calibration_is_undistorted_unless_turned_off() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("seq");
    let distorted = Calibration {
        camera: PinholeCamera { distortion: Distortion { k1: 0.1, ..Distortion::default() }, ..camera() },
        ..calibration()
    };
    write_tum(&tum, &distorted, 2, false)?;

    let mut source = open_source(&tum, None)?;
    assert!(source.calibration().camera.distortion.is_zero(), "delivers the undistorted camera");
    assert_eq!(source.calibration().camera.fx, 30.0);
    let frame = source.next_frame()?.ok_or("a frame")?;
    assert_ne!(frame.rgb, rgb(0), "the image was resampled");
    // Nearest-neighbour depth: every value is one of the input's (or missing at the border).
    let input = depth(0);
    for value in frame.depth.as_ref().ok_or("depth")?.data() {
        assert!(*value == 0.0 || input.data().iter().any(|d| (d - value).abs() < 1e-3), "{value}");
    }

    let options = SourceOptions { undistort: false, ..SourceOptions::default() };
    let mut raw = open_source_with(&tum, &options)?;
    assert_eq!(raw.calibration().camera, distorted.camera);
    assert_eq!(raw.next_frame()?.ok_or("a frame")?.rgb, rgb(0));
    Ok(())
}

#[test]
fn tum_calibration_comes_from_the_caller_or_the_directory() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("rgbd_dataset_freiburg1_xyz");
    write_tum(&tum, &calibration(), 2, false)?;
    // A ROS camera_info file given by the caller wins over the directory's file.
    let ros = dir.path().join("camera_info.yaml");
    std::fs::write(
        &ros,
        "image_width: 32\nimage_height: 24\ncamera_matrix:\n  rows: 3\n  cols: 3\n  data: [40, 0, 16, 0, 40, 12, 0, 0, 1]\n",
    )?;
    let source = open_source(&tum, Some(&ros))?;
    assert_eq!(source.calibration().camera.fx, 40.0);
    assert_eq!(source.calibration().depth_scale, Some(5000.0), "the directory's depth scale");

    // Without any calibration: an error that names the directory and suggests the shipped file.
    std::fs::remove_file(tum.join("calibration.yaml"))?;
    let error = error_text(open_source(&tum, None));
    assert!(error.contains("rgbd_dataset_freiburg1_xyz") && error.contains("tum-fr1.yaml"), "{error}");
    // A calibration of another size: the frame's error names the image.
    let wrong = dir.path().join("wrong.yaml");
    let mut big = calibration();
    big.camera.width = 64;
    std::fs::write(&wrong, big.to_file_storage_yaml())?;
    let mut source = open_source(&tum, Some(&wrong))?;
    let error = error_text(source.next_frame());
    assert!(
        error.contains("100.000000.png") && error.contains("32x24") && error.contains("wrong.yaml"),
        "{error}"
    );
    Ok(())
}

#[test]
fn bad_tum_frames_are_errors_naming_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tum = dir.path().join("seq");
    write_tum(&tum, &calibration(), 3, false)?;
    std::fs::write(tum.join("rgb/100.000000.png"), b"\x89PNG\r\n\x1a\nnot really")?;
    std::fs::remove_file(tum.join("depth/100.100000.png"))?;

    let mut source = open_source(&tum, None)?;
    let error = error_text(source.next_frame());
    assert!(error.contains("rgb/100.000000.png"), "{error}");
    let error = error_text(source.next_frame());
    assert!(error.contains("depth/100.100000.png"), "{error}");
    let frame = source.next_frame()?.ok_or("the third frame is fine")?;
    assert_eq!(frame.index, 2);
    assert!(source.next_frame()?.is_none());

    // Malformed lists name the file and line.
    std::fs::write(tum.join("depth.txt"), "# d\n100.0 depth/a.png extra\n")?;
    let error = error_text(open_source(&tum, None));
    assert!(error.contains("depth.txt") && error.contains("line 2"), "{error}");
    Ok(())
}

/// Lays out a `gst generate` split: questions/, scenes/<scene>/, tum/<scene>/.
fn write_split(split: &Path, scenes: &[&str]) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(split.join("questions"))?;
    for scene in scenes {
        std::fs::create_dir_all(split.join("scenes").join(scene))?;
        write_tum(&split.join("tum").join(scene), &calibration(), 2, true)?;
    }
    Ok(())
}

#[test]
fn generated_episodes_resolve_from_the_split() -> TestResult {
    let dir = tempfile::tempdir()?;
    let split = dir.path().join("test");
    write_split(&split, &["scene_000", "scene_001"])?;

    let episode = generated_episode_dir(&split, "scene_001")?;
    assert_eq!(episode, split.join("tum/scene_001"));
    let mut source = open_generated_episode(&split, "scene_001", &SourceOptions::default())?;
    assert_eq!(source.kind(), SourceKind::GeneratedEpisode);
    assert!(source.name().contains("scene_001"), "{}", source.name());
    assert!(source.next_frame()?.ok_or("a frame")?.ground_truth.is_some());

    // The TUM directory itself, or a scene's folder of the split, open as the episode.
    for path in [split.join("tum/scene_000"), split.join("scenes/scene_000")] {
        let source = open_source(&path, None)?;
        assert_eq!(source.kind(), SourceKind::GeneratedEpisode);
        assert_eq!(source.path(), split.join("tum/scene_000"));
    }
    // The split with several scenes: an error that lists them.
    let error = error_text(open_source(&split, None));
    assert!(error.contains("scene_000, scene_001") && error.contains("test"), "{error}");
    let error = error_text(generated_episode_dir(&split, "scene_009"));
    assert!(error.contains("scene_009") && error.contains("scene_000, scene_001"), "{error}");

    // A split with one scene opens as that scene.
    let single = dir.path().join("train");
    write_split(&single, &["scene_100"])?;
    assert_eq!(open_source(&single, None)?.path(), single.join("tum/scene_100"));
    Ok(())
}

/// Writes an image folder: rgb/<stem>.png, depth/<stem>.png, calibration.yaml.
fn write_folder(dir: &Path, stems: &[&str], with_depth: bool) -> Result<(), IoError> {
    for (index, stem) in stems.iter().enumerate() {
        write_rgb_png(&dir.join("rgb").join(format!("{stem}.png")), &rgb(index))?;
        if with_depth {
            write_depth_png(&dir.join("depth").join(format!("{stem}.png")), &depth(index), 5000.0)?;
        }
    }
    gst_io::atomic_write(&dir.join("calibration.yaml"), calibration().to_file_storage_yaml().as_bytes())
}

#[test]
fn image_folder_with_timestamp_stems_and_depth() -> TestResult {
    let dir = tempfile::tempdir()?;
    let folder = dir.path().join("run");
    // Written out of order: frames come back in time order.
    write_folder(&folder, &["12.500", "10.250", "11.000"], true)?;
    let mut source = open_source(&folder, None)?;
    assert_eq!(source.kind(), SourceKind::ImageFolder);
    assert!(source.has_depth());
    let frames = collect(&mut source)?;
    assert_eq!(frames.iter().map(|f| f.timestamp_s).collect::<Vec<_>>(), [10.25, 11.0, 12.5]);
    assert_eq!(frames[0].rgb, rgb(1), "10.250 was the second image written");
    assert!(frames.iter().all(|f| f.depth.is_some() && f.ground_truth.is_none()));

    // Nanosecond stems (ROS, EuRoC).
    let ns = dir.path().join("ns");
    write_folder(&ns, &["1403636579763555584", "1403636579813555456"], false)?;
    let source = ImageFolderSource::open(&ns, &SourceOptions::default())?;
    assert_eq!(source.timing(), FrameTiming::StemNanoseconds);
    assert!(!source.has_depth());
    Ok(())
}

#[test]
fn image_folder_with_frame_numbers_uses_the_frame_rate() -> TestResult {
    let dir = tempfile::tempdir()?;
    let folder = dir.path().join("run");
    write_folder(&folder, &["frame2", "frame10", "frame1"], false)?;
    let options = SourceOptions { fps: Some(5.0), ..SourceOptions::default() };
    let mut source = open_source_with(&folder, &options)?;
    let frames = collect(&mut source)?;
    assert_eq!(frames.iter().map(|f| f.timestamp_s).collect::<Vec<_>>(), [0.0, 0.2, 0.4]);
    // Natural order: frame1, frame2, frame10 (written as images 2, 0, 1).
    assert_eq!(frames.iter().map(|f| f.rgb.clone()).collect::<Vec<_>>(), [rgb(2), rgb(0), rgb(1)]);
    let source = ImageFolderSource::open(&folder, &SourceOptions::default())?;
    assert_eq!(source.timing(), FrameTiming::Fps(gst_io::DEFAULT_IMAGE_FOLDER_FPS));
    Ok(())
}

#[test]
fn bad_image_folders_are_errors_naming_the_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let folder = dir.path().join("run");
    write_folder(&folder, &["1.0", "2.0", "3.0"], true)?;
    std::fs::remove_file(folder.join("depth/2.0.png"))?;
    let error = error_text(open_source(&folder, None));
    assert!(error.contains("depth/2.0.png") && error.contains("missing"), "{error}");

    write_depth_png(&folder.join("depth/2.0.png"), &depth(0), 5000.0)?;
    std::fs::write(folder.join("rgb/3.0.png"), b"garbage")?;
    let mut source = open_source(&folder, None)?;
    source.next_frame()?;
    source.next_frame()?;
    let error = error_text(source.next_frame());
    assert!(error.contains("rgb/3.0.png"), "{error}");

    std::fs::remove_file(folder.join("calibration.yaml"))?;
    let error = error_text(open_source(&folder, None));
    assert!(error.contains("run") && error.contains("no calibration"), "{error}");

    let bad_fps = SourceOptions { fps: Some(0.0), ..SourceOptions::default() };
    assert!(error_text(open_source_with(&folder, &bad_fps)).contains("frame rate"));
    Ok(())
}

#[test]
fn video_source_reads_frames_at_the_container_rate() -> TestResult {
    let dir = tempfile::tempdir()?;
    let video = dir.path().join("clip.mp4");
    let mut writer = VideoWriter::create(&video, WIDTH, HEIGHT, 10.0)?;
    for index in 0..4 {
        writer.write(&rgb(index))?;
    }
    writer.finish()?;

    let error = error_text(open_source(&video, None));
    assert!(error.contains("clip.mp4") && error.contains("no calibration"), "{error}");

    let calibration_path = dir.path().join("camera.yaml");
    std::fs::write(&calibration_path, calibration().to_file_storage_yaml())?;
    let mut source = open_source(&video, Some(&calibration_path))?;
    assert_eq!(source.kind(), SourceKind::Video);
    assert!(!source.has_depth());
    assert_eq!(source.len(), None);
    let frames = collect(&mut source)?;
    assert_eq!(frames.len(), 4);
    assert!(frames.iter().all(|f| f.depth.is_none()));
    assert_eq!(frames.iter().map(|f| f.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!((frames[3].timestamp_s - 0.3).abs() < 1e-9);

    // A calibration of another size is refused at open, naming the video.
    let mut big = calibration();
    big.camera.height = 48;
    std::fs::write(&calibration_path, big.to_file_storage_yaml())?;
    let error = error_text(open_source(&video, Some(&calibration_path)));
    assert!(error.contains("clip.mp4") && error.contains("32x24"), "{error}");
    Ok(())
}

#[test]
fn unknown_paths_are_refused_with_what_was_looked_for() -> TestResult {
    let dir = tempfile::tempdir()?;
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty)?;
    let error = error_text(open_source(&empty, None));
    assert!(
        error.contains("empty") && error.contains("neither a TUM RGB-D directory (no rgb.txt/depth.txt)"),
        "{error}"
    );

    let missing: PathBuf = dir.path().join("missing");
    assert!(error_text(open_source(&missing, None)).contains("missing"));

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello")?;
    assert!(error_text(open_source(&text, None)).contains("notes.txt"));

    let corrupt = dir.path().join("corrupt.mp4");
    std::fs::write(&corrupt, b"\0\0\0\x18ftypisom not a video")?;
    let calibration_path = dir.path().join("calibration.yaml");
    std::fs::write(&calibration_path, calibration().to_file_storage_yaml())?;
    assert!(error_text(open_source(&corrupt, None)).contains("corrupt.mp4"));
    Ok(())
}

#[test]
fn sources_are_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Box<dyn FrameSource + Send>>();
    assert_send::<TumSource>();
    assert_send::<ImageFolderSource>();
    assert_send::<gst_io::VideoSource>();
}
