//! `gst scene`: generate a house and write its document, top-downs and a few views.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use rand::SeedableRng;
use serde::Serialize;

use gst_core::{Calibration, PinholeCamera, Pose3};
use gst_sim::geometry::build_render_scene;
use gst_sim::library::FurnitureLibrary;
use gst_sim::render::{RenderOptions, RenderScene, render};
use gst_sim::scene::{Scene, SceneConfig, generate_scene};
use gst_sim::topdown::{TopdownMapping, render_topdowns};
use gst_sim::walk::{FreeSpace, sample_room_views};

/// Depth PNG units per metre (TUM RGB-D convention: 1 unit = 0.2 mm).
pub const DEPTH_SCALE: f64 = 5000.0;

#[derive(Debug, clap::Args)]
pub struct SceneArgs {
    /// Seed of the house: the same seed gives byte-identical output.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
    /// Scene generator settings as JSON (a `SceneConfig`; missing fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Number of egocentric views to render (one per room, at most the room count).
    #[arg(long, default_value_t = 4)]
    pub views: usize,
}

#[derive(Debug, clap::Args)]
pub struct FurnitureArgs {
    /// Sweet Home 3D furniture catalog (.sh3f); default: the CC0 catalog of Debian's sweethome3d-furniture.
    #[arg(long, conflicts_with = "primitives")]
    pub catalog: Option<PathBuf>,
    /// Use procedural primitive furniture instead of the catalog.
    #[arg(long)]
    pub primitives: bool,
}

impl FurnitureArgs {
    pub fn library(&self) -> Result<FurnitureLibrary> {
        if self.primitives {
            return Ok(FurnitureLibrary::primitives_only());
        }
        Ok(FurnitureLibrary::open(self.catalog.as_deref())?)
    }
}

/// The `topdown.json` document: how to go between world coordinates, pixels and `<point>x y</point>`.
#[derive(Debug, Serialize)]
struct TopdownDocument<'a> {
    scene: &'a str,
    mapping: TopdownMapping,
    images: [&'static str; 3],
    conventions: &'static str,
}

const TOPDOWN_CONVENTIONS: &str = "pixel u = (x - min_x_m) / metres_per_pixel, v = (max_y_m - y) / metres_per_pixel \
(u right, v down, pixel c covers [c, c+1)); normalised point = floor(u / width * 1000), floor(v / height * 1000), \
clamped to [0, 999]; headings: 0 = towards the top of the image, counter-clockwise positive, degrees";

#[derive(Debug, Serialize)]
struct ViewRecord {
    name: String,
    world_from_camera: Pose3,
}

pub struct SceneSummary {
    pub scene: Scene,
    pub render_scene: RenderScene,
    pub seconds: f64,
}

fn read_config(path: Option<&Path>) -> Result<SceneConfig> {
    let Some(path) = path else { return Ok(SceneConfig::default()) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let config: SceneConfig =
        serde_json::from_str(&text).with_context(|| format!("malformed scene config {}", path.display()))?;
    config.validate().with_context(|| format!("invalid scene config {}", path.display()))?;
    Ok(config)
}

/// Generates a scene and writes everything `gst scene` promises into `out`.
pub fn write_scene_bundle(
    seed: u64,
    config: &SceneConfig,
    library: &FurnitureLibrary,
    out: &Path,
    views: usize,
) -> Result<SceneSummary> {
    let started = Instant::now();
    let scene = generate_scene(seed, config, library)?;
    let render_scene = build_render_scene(&scene, library)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    gst_io::atomic_write(&out.join("scene.json"), scene.to_json().as_bytes())?;

    let topdowns = render_topdowns(&scene, library)?;
    gst_io::write_rgb_png(&out.join("topdown_rendered.png"), &topdowns.rendered)?;
    gst_io::write_rgb_png(&out.join("topdown_semantic.png"), &topdowns.semantic)?;
    gst_io::write_gray_png(&out.join("topdown_binary.png"), &topdowns.binary)?;
    gst_io::write_json(
        &out.join("topdown.json"),
        &TopdownDocument {
            scene: &scene.name,
            mapping: topdowns.mapping,
            images: ["topdown_rendered.png", "topdown_semantic.png", "topdown_binary.png"],
            conventions: TOPDOWN_CONVENTIONS,
        },
    )?;

    let camera = PinholeCamera::gst_benchmark();
    let calibration =
        Calibration { camera, depth_scale: Some(DEPTH_SCALE), camera_name: Some("gst-640x512".into()) };
    gst_io::atomic_write(&out.join("camera.yaml"), calibration.to_file_storage_yaml().as_bytes())?;
    let free = FreeSpace::new(&scene, 0.3);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x005E_ED0F_71E5);
    let poses = sample_room_views(&scene, &free, views, &mut rng);
    let mut records = Vec::new();
    for (k, pose) in poses.iter().enumerate() {
        let frame = render(&render_scene, &camera, pose, &RenderOptions::default());
        let name = format!("view_{k:02}");
        let dir = out.join("views");
        gst_io::write_rgb_png(&dir.join(format!("{name}_rgb.png")), &frame.rgb)?;
        gst_io::write_depth_png(&dir.join(format!("{name}_depth.png")), &frame.depth, DEPTH_SCALE)?;
        gst_io::write_instance_png(&dir.join(format!("{name}_ids.png")), &frame.instances)?;
        records.push(ViewRecord { name, world_from_camera: *pose });
    }
    if !records.is_empty() {
        gst_io::write_json(&out.join("views/poses.json"), &records)?;
    }
    Ok(SceneSummary { scene, render_scene, seconds: started.elapsed().as_secs_f64() })
}

pub fn run_scene(args: &SceneArgs) -> Result<()> {
    let config = read_config(args.config.as_deref())?;
    let library = args.furniture.library()?;
    let summary = write_scene_bundle(args.seed, &config, &library, &args.out, args.views)?;
    print_summary(&summary, &args.out);
    Ok(())
}

fn print_summary(summary: &SceneSummary, out: &Path) {
    let scene = &summary.scene;
    let rooms: Vec<String> =
        scene.plan.rooms.iter().map(|r| format!("{} ({:.1} m²)", r.room_type, r.area_m2())).collect();
    #[allow(clippy::print_stdout)] // the command's report
    {
        println!("{}: {} rooms: {}", scene.name, rooms.len(), rooms.join(", "));
        println!(
            "  {} doors, {} windows, {} furniture instances from the {}, {} triangles",
            scene.plan.doors.len(),
            scene.plan.windows.len(),
            scene.instances.len(),
            scene.furniture_source,
            summary.render_scene.triangle_count()
        );
        println!("  written to {} in {:.1} s", out.display(), summary.seconds);
    }
}
