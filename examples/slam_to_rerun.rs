//! Run SLAM on a recording and log every tracked pose and frame to a Rerun recording.
//!
//! ```sh
//! cargo run --release --example slam_to_rerun -- data/gst/bench/tum/scene_000 out/run.rrd
//! gst view out/run.rrd
//! ```
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::bail;
use gst_slam::{Slam, SlamConfig, run_pipelined};
use gst_viz::{FrameTime, Recorder, TrajectoryKind};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, rrd] = args.as_slice() else { bail!("usage: slam_to_rerun INPUT OUT.rrd") };

    let mut source = gst_io::open_source(Path::new(input), None)?;
    let recorder = Recorder::to_file("gst-example", Path::new(rrd))?;
    recorder.log_camera_model(&source.calibration().camera)?;

    let mut slam = Slam::new(source.calibration(), SlamConfig::default())?;
    let mut logged = Ok(());
    run_pipelined(source.as_mut(), &mut slam, &mut |info, result| {
        let time = FrameTime::new(info.index, info.timestamp_s);
        if let (Some(pose), Ok(())) = (&result.world_from_camera, &logged) {
            logged = recorder.log_camera_pose(&time, pose);
        }
    })?;
    logged?;
    let output = slam.finish()?;
    recorder.log_trajectory(TrajectoryKind::Estimate, &output.trajectory)?;
    recorder.log_map_points(output.map_points.iter().map(|p| p.position))?;
    recorder.finish()?;
    println!("{} poses, {} map points; wrote {rrd}", output.trajectory.len(), output.map_points.len());
    Ok(())
}
