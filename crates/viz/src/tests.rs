//! Logging synthetic data into the memory sink and reading back what landed where.

use std::collections::BTreeMap;

use nalgebra::{Point3, Vector3};

use gst_core::{Image, InstanceId, ObjectClass, PinholeCamera, Pose3, RgbImage, TimedPose, Trajectory};
use gst_map::{
    CellState, Door, GridFrame, MapStats, ObjectLandmark, OccupancyGrid, Room, SemanticMap, TrajectorySample,
    YawBox,
};
use gst_sim::library::FurnitureLibrary;
use gst_sim::scene::{SceneConfig, generate_scene};
use gst_slam::TrackingState;

use crate::inspect::{RecordingSummary, summarize};
use crate::*;

/// A two-room map (rooms side by side along x, one door, one chair), built from its public fields.
pub(crate) fn two_room_map() -> SemanticMap {
    let frame = GridFrame { origin_x_m: 0.0, origin_y_m: 0.0, resolution_m: 0.1, width: 40, height: 20 };
    let mut cells = vec![CellState::Unknown; frame.len()];
    let mut labels = vec![0u32; frame.len()];
    for row in 0..frame.height {
        for col in 0..frame.width {
            let i = frame.index(col, row);
            let border = row == 0 || row == frame.height - 1 || col == 0 || col == frame.width - 1;
            let wall = col == 20 && !(8..12).contains(&row);
            cells[i] = if border || wall { CellState::Occupied } else { CellState::Free };
            if cells[i] == CellState::Free {
                labels[i] = if col < 20 { 1 } else { 2 };
            }
        }
    }
    let room = |id: usize, x0: f64| Room {
        id,
        area_m2: 3.0,
        centroid_m: [x0 + 1.0, 1.0],
        polygon_m: vec![[x0, 0.1], [x0 + 1.9, 0.1], [x0 + 1.9, 1.9], [x0, 1.9]],
        objects: if id == 0 { vec![0] } else { vec![] },
    };
    let chair = ObjectLandmark {
        id: 0,
        class: Some(ObjectClass::Chair),
        class_votes: BTreeMap::from([(ObjectClass::Chair, 3)]),
        label: Some(7),
        centroid_m: [1.0, 1.0, 0.45],
        bbox: YawBox { center_m: [1.0, 1.0, 0.45], size_m: [0.5, 0.5, 0.9], yaw_rad: 0.3 },
        observations: 3,
        first_frame: 0,
        last_frame: 2,
        best_frame: 1,
        voxels: 40,
    };
    SemanticMap {
        map_from_world: Pose3::identity(),
        occupancy: OccupancyGrid {
            frame,
            structure: cells.iter().map(|c| *c == CellState::Occupied).collect(),
            cells,
            filled: Vec::new(),
            floor_z_m: 0.0,
            ceiling_z_m: 2.6,
        },
        room_labels: labels,
        rooms: vec![room(0, 0.1), room(1, 2.1)],
        doors: vec![Door { id: 0, rooms: [0, 1], position_m: [2.0, 1.0], width_m: 0.4 }],
        objects: vec![chair],
        candidates: Vec::new(),
        trajectory: (0..3)
            .map(|k| TrajectorySample {
                frame: k,
                timestamp_s: k as f64 * 0.1,
                position_m: [0.5 + k as f64, 1.0, 1.4],
                yaw_rad: 0.0,
            })
            .collect(),
        stats: MapStats::default(),
    }
}

pub(crate) fn trajectory(n: usize) -> Trajectory {
    let poses = (0..n)
        .map(|k| TimedPose {
            timestamp_s: 100.0 + k as f64 * 0.1,
            world_from_camera: Pose3::world_from_camera_yaw_pitch(
                Vector3::new(k as f64 * 0.1, 1.0, 1.4),
                0.1 * k as f64,
                0.0,
            ),
        })
        .collect();
    Trajectory::new(poses).unwrap_or_default()
}

pub(crate) fn gradient(width: u32, height: u32) -> RgbImage {
    let data = (0..width * height).map(|i| [(i % width) as u8, (i / width) as u8, 128]).collect();
    Image::from_vec(width, height, data).unwrap_or_else(|_| Image::filled(1, 1, [0; 3]))
}

/// Logs one of everything: scene, camera and frames, trajectories, metrics, map, question.
pub(crate) fn log_everything(recorder: &Recorder) -> Result<(), VizError> {
    let scene = generate_scene(3, &SceneConfig::default(), &FurnitureLibrary::primitives_only())
        .map_err(|e| VizError::Invalid(e.to_string()))?;
    recorder.log_scene(&scene)?;
    let camera =
        PinholeCamera::from_horizontal_fov(64, 48, 90.0).map_err(|e| VizError::Invalid(e.to_string()))?;
    recorder.log_camera_model(&camera)?;
    let estimate = trajectory(3);
    for (k, pose) in estimate.poses().iter().enumerate() {
        let time = FrameTime::new(k, pose.timestamp_s);
        recorder.log_camera_pose(&time, &pose.world_from_camera)?;
        recorder.log_groundtruth_pose(&time, &pose.world_from_camera)?;
        recorder.log_rgb(&time, &gradient(64, 48))?;
        recorder.log_depth(&time, &Image::filled(64, 48, 2.5f32))?;
        recorder.log_instances(&time, &Image::filled(64, 48, 3u16))?;
        let state = if k == 1 { TrackingState::Lost } else { TrackingState::Tracking };
        recorder.log_tracking(&time, state, 100 + k, k == 0)?;
        recorder.log_ate(&time, 0.01 * k as f64)?;
    }
    recorder.log_trajectory(TrajectoryKind::Estimate, &estimate)?;
    recorder.log_trajectory(TrajectoryKind::GroundTruth, &estimate)?;
    recorder.log_world_from_slam(&Pose3::identity())?;
    recorder.log_map_points([Point3::new(1.0, 2.0, 0.5), Point3::new(f64::NAN, 0.0, 0.0)])?;
    recorder.log_semantic_map(&two_room_map(), None)?;
    let texts = vec!["Which direction is the chair?".to_string()];
    let view = gradient(64, 48);
    let topdown = gradient(80, 64);
    recorder.log_question(
        0,
        &QuestionLog {
            uid: "scene_3_ed_0",
            task: "Object_Localization_Egocentric_Direction_semantic",
            texts: &texts,
            prediction: "-40",
            ground_truth: "-35",
            images: vec![
                NamedImage { name: "current view", image: &view },
                NamedImage { name: "top-down", image: &topdown },
            ],
            current_view: Some(CurrentView {
                slam_from_camera: Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, 1.0, 1.4), 0.0, 0.0),
                camera,
                image: Some(&view),
            }),
            target: Some([1.0, 1.0, 0.45]),
            predicted: Some([1.2, 1.1, 0.45]),
            truth: Some([1.0, 1.0, 0.45]),
            topdown: Some(TopdownAnswer {
                image: &topdown,
                predicted: Some([400.0, 500.0]),
                truth: Some([420.0, 510.0]),
                predicted_heading_deg: Some(30.0),
                truth_heading_deg: None,
            }),
        },
    )?;
    Ok(())
}

fn memory_summary(images: ImageSettings) -> RecordingSummary {
    let (recorder, storage) = Recorder::memory("gst_test").unwrap();
    let recorder = recorder.with_images(images).unwrap();
    log_everything(&recorder).unwrap();
    recorder.flush().unwrap();
    summarize(&storage.take()).unwrap()
}

#[test]
fn every_documented_path_is_logged() {
    let summary = memory_summary(ImageSettings::compact());
    let missing: Vec<&str> = paths::ALL.iter().copied().filter(|p| !summary.has(p)).collect();
    assert!(
        missing.is_empty(),
        "not logged: {missing:?}; logged: {:?}",
        summary.entities.keys().collect::<Vec<_>>()
    );
    for k in 0..2 {
        assert!(summary.has(&format!("{}/{k}", paths::QUESTION_IMAGES)));
    }
    // Nothing outside the documented tree.
    let documented = |p: &str| {
        paths::ALL.contains(&p)
            || p.starts_with(paths::QUESTION_IMAGES)
            || p == paths::QUESTION
            || p == paths::QUESTION_3D
    };
    let extra: Vec<&String> = summary.entities.keys().filter(|p| !documented(p)).collect();
    assert!(extra.is_empty(), "undocumented paths: {extra:?}");
    assert!(summary.blueprint_messages > 0 && summary.blueprint_activated, "the default blueprint is sent");
}

#[test]
fn archetypes_static_data_and_timelines_are_where_the_docs_say() {
    let summary = memory_summary(ImageSettings::compact());
    for (path, archetype) in [
        (paths::WORLD, "ViewCoordinates"),
        (paths::WORLD, "AnnotationContext"),
        (paths::SCENE_WALLS, "Boxes3D"),
        (paths::SCENE_FURNITURE, "Boxes3D"),
        (paths::SCENE_ROOMS, "LineStrips3D"),
        (paths::CAMERA, "Transform3D"),
        (paths::CAMERA_IMAGE, "Pinhole"),
        (paths::CAMERA_RGB, "EncodedImage"),
        (paths::CAMERA_DEPTH, "EncodedDepthImage"),
        (paths::CAMERA_INSTANCES, "SegmentationImage"),
        (paths::SLAM_TRAJECTORY, "LineStrips3D"),
        (paths::SLAM_POINTS, "Points3D"),
        (paths::MAP, "Transform3D"),
        (paths::MAP_OBJECTS, "Boxes3D"),
        (paths::TOPDOWN_OCCUPANCY, "Image"),
        (paths::ROOM_GRAPH, "GraphNodes"),
        (paths::ROOM_GRAPH, "GraphEdges"),
        (paths::METRICS_TRACKING_STATE, "Scalars"),
        (paths::METRICS_ATE, "Scalars"),
        (paths::LOG_TRACKING, "TextLog"),
        (paths::QUESTION_TEXT, "TextDocument"),
        (paths::QUESTION_TOPDOWN_PREDICTED, "Points2D"),
        (paths::QUESTION_TOPDOWN_PREDICTED, "Arrows2D"),
        (paths::QUESTION_PREDICTED, "Arrows3D"),
        (paths::QUESTION_CAMERA_IMAGE, "Pinhole"),
    ] {
        assert!(
            summary.has_archetype(path, archetype),
            "{path} has no {archetype}: {:?}",
            summary.entities.get(path)
        );
    }
    let entity = |p: &str| summary.entities.get(p).cloned().unwrap_or_default();
    for path in [paths::SCENE_FURNITURE, paths::SLAM_TRAJECTORY, paths::MAP_OCCUPANCY, paths::CAMERA_IMAGE] {
        assert!(entity(path).has_static && entity(path).timelines.is_empty(), "{path} is static");
    }
    let camera = entity(paths::CAMERA);
    assert!(!camera.has_static && camera.timelines.contains("frame") && camera.timelines.contains("time"));
    assert_eq!(camera.rows, 3);
    assert!(entity(paths::QUESTION_TEXT).timelines.contains("question"));
    // Wall-clock timelines are off.
    assert!(
        summary
            .entities
            .values()
            .all(|e| !e.timelines.contains("log_time") && !e.timelines.contains("log_tick"))
    );
    // Tracking went tracking → lost → tracking: three state changes in the text log.
    assert_eq!(entity(paths::LOG_TRACKING).rows, 3);
}

#[test]
fn lossless_settings_log_raw_images() {
    let summary = memory_summary(ImageSettings::lossless());
    assert!(summary.has_archetype(paths::CAMERA_RGB, "Image"));
    assert!(summary.has_archetype(paths::CAMERA_DEPTH, "DepthImage"));
    let summary = memory_summary(ImageSettings {
        depth: DepthEncoding::U16Mm,
        downscale: 4,
        ..ImageSettings::lossless()
    });
    assert!(summary.has_archetype(paths::CAMERA_DEPTH, "DepthImage"));
}

#[test]
fn the_off_recorder_logs_nothing_and_finish_turns_a_recorder_off() {
    let off = Recorder::off();
    assert!(!off.is_on() && off.stream().is_none());
    log_everything(&off).unwrap();
    off.flush().unwrap();
    off.finish().unwrap();

    let (recorder, storage) = Recorder::memory("gst_test").unwrap();
    recorder.finish().unwrap();
    assert!(!recorder.is_on());
    let before = summarize(&storage.take()).unwrap();
    log_everything(&recorder).unwrap();
    let after = summarize(&storage.take()).unwrap();
    assert!(
        after.entities.is_empty(),
        "logged after finish: {:?}",
        after.entities.keys().collect::<Vec<_>>()
    );
    // Only the view coordinates were logged before finishing.
    assert_eq!(before.entities.keys().collect::<Vec<_>>(), vec![paths::WORLD]);
}

#[test]
fn instance_classes_skip_the_structure_id() {
    let (recorder, storage) = Recorder::memory("gst_test").unwrap();
    recorder
        .log_instance_classes(&[(InstanceId(0), ObjectClass::Bed), (InstanceId(5), ObjectClass::Sofa)])
        .unwrap();
    let summary = summarize(&storage.take()).unwrap();
    assert!(summary.has_archetype(paths::WORLD, "AnnotationContext"));
}

#[test]
fn bad_image_settings_are_refused() {
    let (recorder, _storage) = Recorder::memory("gst_test").unwrap();
    assert!(recorder.with_images(ImageSettings { downscale: 0, ..ImageSettings::compact() }).is_err());
}

#[test]
fn viewer_addresses_become_proxy_urls_and_bad_ones_are_refused() {
    let url = |addr: &str| connect_url(addr).map(|(url, _)| url);
    assert_eq!(url("127.0.0.1:9876").ok().as_deref(), Some("rerun+http://127.0.0.1:9876/proxy"));
    assert_eq!(
        url("rerun+http://robot.local:9000/proxy").ok().as_deref(),
        Some("rerun+http://robot.local:9000/proxy")
    );
    assert_eq!(url("http://10.0.0.2:9876").ok().as_deref(), Some("rerun+http://10.0.0.2:9876/proxy"));
    for bad in ["localhost", "localhost:0", "localhost:99999", "ftp://a:1", "rerun+http://a:1/other", ":9876"]
    {
        assert!(matches!(connect_url(bad), Err(VizError::Invalid(_))), "{bad} should be refused");
    }
}

#[test]
fn connecting_where_no_viewer_listens_fails_at_once_with_the_address() {
    // A port that was free a moment ago: nothing listens there.
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr.port(),
        Err(e) => panic!("cannot find a free port: {e}"),
    };
    let started = std::time::Instant::now();
    let addr = format!("127.0.0.1:{port}");
    match Recorder::connect("gst-test", Some(&addr)) {
        Err(VizError::Connect { url, message }) => {
            assert!(url.contains(&addr), "{url}");
            assert!(message.contains("start a viewer"), "{message}");
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "took {:?}", started.elapsed());
}

/// With the viewer in `.venv` (`rerun --serve-grpc`, headless), a connected recorder streams and finishes.
#[test]
fn a_connected_recorder_streams_to_a_running_viewer() {
    let Ok(viewer) = find_viewer() else {
        eprintln!("skipped: no Rerun viewer in .venv or PATH");
        return;
    };
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(addr) => addr.port(),
        Err(e) => panic!("cannot find a free port: {e}"),
    };
    let child = std::process::Command::new(&viewer)
        .args(["--serve-grpc", "--port", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skipped: cannot start {}", viewer.display());
        return;
    };
    let addr = format!("127.0.0.1:{port}");
    let mut recorder = Err(VizError::Invalid("not tried".into()));
    for _ in 0..100 {
        recorder = Recorder::connect("gst-test", Some(&addr));
        if recorder.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let result = recorder.and_then(|recorder| {
        recorder.log_camera_model(&PinholeCamera::gst_benchmark())?;
        recorder.log_camera_pose(&FrameTime::new(0, 0.0), &Pose3::identity())?;
        recorder.finish()
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = result {
        panic!("streaming to {addr}: {e}");
    }
}
