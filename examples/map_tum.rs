//! Map a TUM RGB-D sequence: SLAM for the poses, then the semantic map (occupancy, rooms, doors).
//!
//! ```sh
//! cargo run --release --example map_tum -- rgbd_dataset_freiburg1_room out/fr1-map
//! ```
//! The folder needs a `calibration.yaml` (copy one from `calibration/`); `gst map` is the full command.
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::bail;
use gst_io::TumSequence;
use gst_map::{MapConfig, NoPerception, map_sequence, poses_per_frame};
use gst_slam::{SlamConfig, run_slam};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, out] = args.as_slice() else { bail!("usage: map_tum TUM_DIR OUT_DIR") };
    let (input, out) = (Path::new(input), Path::new(out));

    // SLAM over every frame (reading, feature extraction and tracking run on their own threads).
    let mut source = gst_io::open_source(input, None)?;
    let slam = run_slam(source.as_mut(), &SlamConfig::default(), &mut |_| {})?;
    println!(
        "SLAM: {} of {} frames tracked, {} keyframes",
        slam.trajectory.len(),
        slam.stats.frames,
        slam.keyframes.len()
    );

    // The semantic map from the sequence's depth at SLAM's poses, one pose per frame by timestamp.
    let sequence = TumSequence::open(input, None)?;
    let poses = poses_per_frame(&sequence, &slam.trajectory);
    let map = map_sequence(&sequence, &poses, MapConfig::default(), &mut NoPerception)?;
    map.save(out)?;
    println!("map: {} rooms, {} doors; wrote {}", map.rooms.len(), map.doors.len(), out.display());
    Ok(())
}
