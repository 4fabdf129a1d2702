//! What `gst slam` writes, in documented formats:
//!
//! - `trajectory.tum`: one line per tracked frame, `timestamp tx ty tz qx qy qz qw`, camera-to-world (TUM).
//! - `keyframes.json`: `{ "camera": {...}, "keyframes": [{ "id", "frame_index", "timestamp_s",
//!   "world_from_camera": [tx, ty, tz, qx, qy, qz, qw], "features", "map_points" }], "edges": [{ "a", "b",
//!   "kind": "odometry" | "loop" }] }` — the keyframe graph after the final optimisation.
//! - `map_points.ply`: ASCII PLY of the map points (`x y z` in metres, world frame, and `found`, the number
//!   of frames that matched the point) for any point-cloud viewer.
//! - `stats.json`: the run's counters ([`crate::SlamStats`]).
//! - `map.gstslam`: the relocalisation map (keyframes with ORB keypoints and descriptors, map points), binary,
//!   format in [`crate::map_file`]; `SlamMap::load` reads it back for relocalising images later.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::pose_graph::EdgeKind;
use crate::{SlamError, SlamOutput};

#[derive(Serialize)]
struct KeyframeRecord {
    id: u32,
    frame_index: usize,
    timestamp_s: f64,
    world_from_camera: [f64; 7],
    features: usize,
    map_points: usize,
}

#[derive(Serialize)]
struct EdgeRecord {
    a: u32,
    b: u32,
    kind: &'static str,
}

#[derive(Serialize)]
struct KeyframeFile<'a> {
    camera: &'a gst_core::PinholeCamera,
    keyframes: Vec<KeyframeRecord>,
    edges: Vec<EdgeRecord>,
}

/// Writes the five files into `dir` (created if needed), each atomically.
pub fn write_outputs(dir: &Path, output: &SlamOutput) -> Result<(), SlamError> {
    std::fs::create_dir_all(dir).map_err(|source| SlamError::File { path: dir.into(), source })?;
    gst_io::write_trajectory_tum(&dir.join("trajectory.tum"), &output.trajectory)?;
    let keyframes = output
        .keyframes
        .iter()
        .map(|k| {
            let t = k.world_from_camera.translation.vector;
            let q = k.world_from_camera.rotation;
            KeyframeRecord {
                id: k.id,
                frame_index: k.frame_index,
                timestamp_s: k.timestamp_s,
                world_from_camera: [t.x, t.y, t.z, q.i, q.j, q.k, q.w],
                features: k.features.len(),
                map_points: k.points.iter().flatten().count(),
            }
        })
        .collect();
    let edges = output
        .edges
        .iter()
        .map(|&(a, b, kind)| EdgeRecord {
            a,
            b,
            kind: match kind {
                EdgeKind::Odometry => "odometry",
                EdgeKind::Loop => "loop",
            },
        })
        .collect();
    gst_io::write_json(
        &dir.join("keyframes.json"),
        &KeyframeFile { camera: &output.camera, keyframes, edges },
    )?;
    let mut ply = String::new();
    let _ = write!(
        ply,
        "ply\nformat ascii 1.0\ncomment gst slam map points (world frame, metres)\nelement vertex {}\n\
         property float x\nproperty float y\nproperty float z\nproperty uint found\nend_header\n",
        output.map_points.len()
    );
    for p in &output.map_points {
        let _ = writeln!(ply, "{:.4} {:.4} {:.4} {}", p.position.x, p.position.y, p.position.z, p.found);
    }
    gst_io::atomic_write(&dir.join("map_points.ply"), ply.as_bytes())?;
    gst_io::write_json(&dir.join("stats.json"), &output.stats)?;
    crate::SlamMap::from_output(output).save(&dir.join(crate::MAP_FILE))?;
    Ok(())
}
