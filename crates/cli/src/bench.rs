//! `gst bench render`: renderer throughput on a furnished 6-room house, and in the same run the same mesh's
//! depth through Open3D's `RaycastingScene` (the peer), with a depth cross-check between the two.
//! `gst bench slam` lives in [`crate::bench_slam`].

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use gst_core::{PinholeCamera, Pose3};
use gst_sim::geometry::build_render_scene;
use gst_sim::library::FurnitureLibrary;
use gst_sim::plan::PlanConfig;
use gst_sim::render::{Frame, RenderOptions, RenderScene, render, render_into};
use gst_sim::scene::{SceneConfig, generate_scene};
use gst_sim::walk::{FreeSpace, random_walk};

use crate::progress;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchKind,
}

#[derive(Debug, clap::Subcommand)]
pub enum BenchKind {
    /// Render throughput (RGB + depth + ids at 640x512) against Open3D's RaycastingScene depth.
    Render(RenderBenchArgs),
    /// SLAM accuracy (ATE, RPE), tracking rate and peak memory on generated explorations, clean and noisy
    /// depth, against Open3D's RGB-D odometry chained frame to frame.
    Slam(crate::bench_slam::SlamBenchArgs),
    /// Relocalisation of a generated split's current views (RGB only) against their true poses.
    Reloc(crate::bench_reloc::RelocBenchArgs),
    /// The semantic map on generated scenes (SLAM poses, noisy depth): occupancy, rooms, room graph, objects,
    /// marked targets, registration and mapping time against the targets.
    Map(crate::bench_map::MapBenchArgs),
    /// Bag reading: frame pairs/s of 640x480 rgb8 + 16UC1 from MCAP, and `gst slam`'s wall time on a bag
    /// against the TUM export of the same frames (`--input`).
    Bag(crate::bench_bag::BagBenchArgs),
    /// One run of our SLAM for `gst bench slam`, in its own process (peak memory per sequence).
    #[command(hide = true)]
    SlamRun(crate::bench_slam::SlamRunArgs),
}

#[derive(Debug, clap::Args)]
pub struct RenderBenchArgs {
    /// Output directory for the exported mesh, poses and bench.json.
    #[arg(long, default_value = "bench-out/render")]
    pub out: PathBuf,
    /// Frames to time.
    #[arg(long, default_value_t = 300)]
    pub frames: usize,
    /// Seed of the benchmark house.
    #[arg(long, default_value_t = 11)]
    pub seed: u64,
    /// Rooms in the benchmark house.
    #[arg(long, default_value_t = 6)]
    pub rooms: usize,
    /// Python with open3d for the peer; without it only our figure is measured.
    #[arg(long)]
    pub python: Option<PathBuf>,
}

/// What the Open3D script reports.
#[derive(Debug, Deserialize, Serialize)]
struct PeerReport {
    frames: usize,
    seconds: f64,
    fps: f64,
    threads: Option<usize>,
    open3d_version: String,
    /// Depth agreement with ours on the compared frames.
    compared_frames: usize,
    median_abs_depth_diff_m: f64,
    fraction_within_1mm: f64,
}

#[derive(Debug, Serialize)]
struct BenchReport {
    scene: String,
    rooms: usize,
    instances: usize,
    triangles: usize,
    width: u32,
    height: u32,
    frames: usize,
    threads: usize,
    gst_seconds: f64,
    gst_fps: f64,
    open3d: Option<PeerReport>,
    ratio_gst_over_open3d: Option<f64>,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    match &args.which {
        BenchKind::Render(args) => run_render(args),
        BenchKind::Slam(args) => crate::bench_slam::run(args),
        BenchKind::Reloc(args) => crate::bench_reloc::run(args),
        BenchKind::SlamRun(args) => crate::bench_slam::run_child(args),
        BenchKind::Map(args) => crate::bench_map::run(args),
        BenchKind::Bag(args) => crate::bench_bag::run(args),
    }
}

fn run_render(args: &RenderBenchArgs) -> Result<()> {
    if args.frames == 0 {
        bail!("--frames must be positive");
    }
    if !(3..=10).contains(&args.rooms) {
        bail!("--rooms must be in 3..=10");
    }
    let library = FurnitureLibrary::open(None)?;
    let config = SceneConfig {
        plan: PlanConfig { min_rooms: args.rooms, max_rooms: args.rooms, ..PlanConfig::default() },
        ..SceneConfig::default()
    };
    let scene = generate_scene(args.seed, &config, &library)?;
    let render_scene = build_render_scene(&scene, &library)?;
    let camera = PinholeCamera::gst_benchmark();
    let free = FreeSpace::new(&scene, 0.3);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let poses = random_walk(&free, args.frames, 0.15, &mut rng);
    if poses.len() != args.frames {
        bail!("the benchmark house has no free space for a walk");
    }
    let options = RenderOptions::default();
    // One frame buffer reused across the walk, as a video generator does.
    let mut frame = Frame::empty(camera.width, camera.height, options.background);
    for pose in poses.iter().take(10) {
        render_into(&render_scene, &camera, pose, &options, &mut frame);
    }
    let bar = progress::bar(poses.len() as u64, "rendering");
    let started = Instant::now();
    for pose in &poses {
        render_into(&render_scene, &camera, pose, &options, &mut frame);
        std::hint::black_box(&frame);
        bar.inc(1);
    }
    let gst_seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    write_ply(&args.out.join("scene.ply"), &render_scene)?;
    write_poses(&args.out.join("poses.json"), &camera, &poses)?;
    // Our depth on every 25th frame, as raw little-endian f32, for the cross-check.
    let compare: Vec<usize> = (0..poses.len()).step_by(25).collect();
    for &k in &compare {
        let frame = render(&render_scene, &camera, &poses[k], &options);
        let bytes: Vec<u8> = frame.depth.data().iter().flat_map(|d| d.to_le_bytes()).collect();
        gst_io::atomic_write(&args.out.join(format!("gst_depth_{k:05}.f32")), &bytes)?;
    }

    let open3d = match &args.python {
        Some(python) => Some(run_peer(python, &args.out)?),
        None => None,
    };
    let gst_fps = poses.len() as f64 / gst_seconds;
    let report = BenchReport {
        scene: scene.name.clone(),
        rooms: scene.plan.rooms.len(),
        instances: scene.instances.len(),
        triangles: render_scene.triangle_count(),
        width: camera.width,
        height: camera.height,
        frames: poses.len(),
        threads: rayon::current_num_threads(),
        gst_seconds,
        gst_fps,
        ratio_gst_over_open3d: open3d.as_ref().map(|p| gst_fps / p.fps),
        open3d,
    };
    gst_io::write_json(&args.out.join("bench.json"), &report)?;
    #[allow(clippy::print_stdout)] // the command's report
    {
        println!(
            "render bench: {} ({} rooms, {} instances, {} triangles), {} frames at {}x{}, {} threads",
            report.scene,
            report.rooms,
            report.instances,
            report.triangles,
            report.frames,
            report.width,
            report.height,
            report.threads
        );
        println!("  gst rasteriser (RGB + depth + ids): {:8.1} frames/s", report.gst_fps);
        match &report.open3d {
            Some(peer) => {
                println!(
                    "  Open3D {} RaycastingScene (depth):  {:8.1} frames/s",
                    peer.open3d_version, peer.fps
                );
                println!("  ratio gst / Open3D: {:.2}x", report.gst_fps / peer.fps);
                println!(
                    "  depth agreement on {} frames: median |Δ| {:.2e} m, {:.1}% of pixels within 1 mm",
                    peer.compared_frames,
                    peer.median_abs_depth_diff_m,
                    peer.fraction_within_1mm * 100.0
                );
            }
            None => println!("  (no --python given: Open3D peer not measured)"),
        }
        println!("  report: {}", args.out.join("bench.json").display());
    }
    Ok(())
}

fn run_peer(python: &Path, out: &Path) -> Result<PeerReport> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/bench_open3d_raycast.py");
    let status = Command::new(python)
        .arg(&script)
        .arg("--dir")
        .arg(out)
        .status()
        .with_context(|| format!("cannot run {} {}", python.display(), script.display()))?;
    if !status.success() {
        bail!("the Open3D peer failed ({status}); is open3d installed in that Python? (make setup-bench)");
    }
    let path = out.join("open3d.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("malformed peer report {}", path.display()))
}

/// Binary little-endian PLY of all triangles in world coordinates.
fn write_ply(path: &Path, scene: &RenderScene) -> Result<()> {
    let vertices: usize = scene.objects().iter().map(|o| o.mesh.positions.len()).sum();
    let faces: usize = scene.triangle_count();
    let mut bytes = format!(
        "ply\nformat binary_little_endian 1.0\nelement vertex {vertices}\nproperty float x\nproperty float y\nproperty float z\nelement face {faces}\nproperty list uchar int vertex_indices\nend_header\n"
    )
    .into_bytes();
    for object in scene.objects() {
        for p in &object.mesh.positions {
            for v in p {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let mut offset = 0i32;
    for object in scene.objects() {
        for t in &object.mesh.triangles {
            bytes.push(3);
            for i in t {
                bytes.extend_from_slice(&(offset + *i as i32).to_le_bytes());
            }
        }
        offset += object.mesh.positions.len() as i32;
    }
    gst_io::atomic_write(path, &bytes)?;
    Ok(())
}

#[derive(Serialize)]
struct PosesDocument {
    width: u32,
    height: u32,
    /// Row-major 3x3 intrinsics.
    intrinsics: [[f64; 3]; 3],
    /// Row-major 4x4 camera_from_world (Open3D's extrinsic convention).
    camera_from_world: Vec<[[f64; 4]; 4]>,
}

fn write_poses(path: &Path, camera: &PinholeCamera, poses: &[Pose3]) -> Result<()> {
    let document = PosesDocument {
        width: camera.width,
        height: camera.height,
        intrinsics: [[camera.fx, 0.0, camera.cx], [0.0, camera.fy, camera.cy], [0.0, 0.0, 1.0]],
        camera_from_world: poses
            .iter()
            .map(|p| {
                let m = p.inverse().0.to_homogeneous();
                [0, 1, 2, 3].map(|r| [0, 1, 2, 3].map(|c| m[(r, c)]))
            })
            .collect(),
    };
    gst_io::write_json(path, &document)?;
    Ok(())
}
