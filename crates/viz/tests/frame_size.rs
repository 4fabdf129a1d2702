//! Recording size and logging time per 640x512 frame for each image setting, on frames rendered from a
//! generated house. A measurement, not a check: run it with
//! `cargo test --release -p gst-viz --test frame_size -- --ignored --nocapture`.
// The helpers panic like the tests they serve: a failure is a test failure with its message.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Instant;

use nalgebra::Vector3;

use gst_core::{PinholeCamera, Pose3};
use gst_sim::geometry::build_render_scene;
use gst_sim::library::FurnitureLibrary;
use gst_sim::render::{RenderOptions, render};
use gst_sim::scene::{SceneConfig, generate_scene};
use gst_viz::{DepthEncoding, FrameTime, ImageEncoding, ImageSettings, Recorder};

const FRAMES: usize = 30;

#[test]
#[ignore = "a measurement; run with --ignored --nocapture"]
fn recording_size_and_time_per_frame() {
    let library = FurnitureLibrary::open(None).unwrap_or_else(|_| FurnitureLibrary::primitives_only());
    let scene = generate_scene(11, &SceneConfig::default(), &library).unwrap();
    let render_scene = build_render_scene(&scene, &library).unwrap();
    let camera = PinholeCamera::gst_benchmark();
    let [cx, cy] = scene.plan.rooms[0].centroid();
    let frames: Vec<_> = (0..FRAMES)
        .map(|k| {
            let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(cx, cy, 1.4), 0.2 * k as f64, -0.1);
            (pose, render(&render_scene, &camera, &pose, &RenderOptions::default()))
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let empty = {
        let path = dir.path().join("empty.rrd");
        let recorder = Recorder::to_file("gst_measure", &path).unwrap();
        recorder.log_camera_model(&camera).unwrap();
        recorder.finish().unwrap();
        std::fs::metadata(&path).unwrap().len()
    };
    let settings = [
        ("lossless (raw RGB, f32 depth)", ImageSettings::lossless()),
        ("raw RGB, u16 mm depth", ImageSettings { depth: DepthEncoding::U16Mm, ..ImageSettings::lossless() }),
        ("compact (JPEG 85, PNG mm depth)", ImageSettings::compact()),
        (
            "JPEG 85 only (no depth)",
            ImageSettings { rgb: ImageEncoding::Jpeg { quality: 85 }, ..ImageSettings::compact() },
        ),
        ("compact, downscale 2", ImageSettings { downscale: 2, ..ImageSettings::compact() }),
    ];
    for (k, (name, images)) in settings.into_iter().enumerate() {
        let path = dir.path().join(format!("run{k}.rrd"));
        let recorder = Recorder::to_file("gst_measure", &path).unwrap().with_images(images).unwrap();
        recorder.log_camera_model(&camera).unwrap();
        let depth = !name.contains("no depth");
        let started = Instant::now();
        for (index, (pose, frame)) in frames.iter().enumerate() {
            let time = FrameTime::new(index, index as f64 * 0.1);
            recorder.log_camera_pose(&time, pose).unwrap();
            recorder.log_rgb(&time, &frame.rgb).unwrap();
            if depth {
                recorder.log_depth(&time, &frame.depth).unwrap();
            }
        }
        let log_ms = 1e3 * started.elapsed().as_secs_f64() / FRAMES as f64;
        recorder.finish().unwrap();
        let bytes = std::fs::metadata(&path).unwrap().len().saturating_sub(empty);
        eprintln!(
            "{name:34} {:8.1} kB/frame  {log_ms:6.2} ms/frame to log (encoding included)",
            bytes as f64 / FRAMES as f64 / 1e3
        );
    }
    let off = Recorder::off();
    let started = Instant::now();
    for (index, (pose, frame)) in frames.iter().enumerate() {
        let time = FrameTime::new(index, 0.0);
        off.log_camera_pose(&time, pose).unwrap();
        off.log_rgb(&time, &frame.rgb).unwrap();
        off.log_depth(&time, &frame.depth).unwrap();
    }
    eprintln!("off: {:.3} µs/frame", 1e6 * started.elapsed().as_secs_f64() / FRAMES as f64);
}
