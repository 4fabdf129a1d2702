//! `gst render`: one view of a scene as rgb.png, depth.png and ids.png.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use nalgebra::Vector3;
use rand::SeedableRng;

use gst_core::{Calibration, PinholeCamera, Pose3};
use gst_sim::geometry::build_render_scene;
use gst_sim::noise::DepthNoise;
use gst_sim::render::{RenderOptions, render};
use gst_sim::scene::Scene;

use crate::scene_cmd::{DEPTH_SCALE, FurnitureArgs};

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The scene document written by `gst scene`.
    #[arg(long)]
    pub scene: PathBuf,
    /// Camera pose "x y z yaw_deg pitch_deg": position in metres (z up), heading (0 = +x, counter-clockwise)
    /// and pitch (positive looks up) in degrees.
    #[arg(long, allow_hyphen_values = true)]
    pub pose: String,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Camera calibration (OpenCV FileStorage YAML); default: the benchmark camera, 640x512, 90° HFOV.
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// Apply the Kinect-like depth-noise model with this seed.
    #[arg(long)]
    pub depth_noise_seed: Option<u64>,
    #[command(flatten)]
    pub furniture: FurnitureArgs,
}

/// Parses "x y z yaw_deg pitch_deg" into `world_from_camera`.
pub fn parse_pose(text: &str) -> Result<Pose3> {
    let values: Vec<f64> = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<f64>().with_context(|| format!("pose value {s:?} is not a number")))
        .collect::<Result<_>>()?;
    let [x, y, z, yaw_deg, pitch_deg] = values[..] else {
        bail!("--pose needs 5 numbers \"x y z yaw_deg pitch_deg\", got {}", values.len());
    };
    if values.iter().any(|v| !v.is_finite()) {
        bail!("--pose values must be finite");
    }
    if pitch_deg.abs() >= 90.0 {
        bail!("pitch_deg {pitch_deg} must be within (-90, 90)");
    }
    Ok(Pose3::world_from_camera_yaw_pitch(
        Vector3::new(x, y, z),
        yaw_deg.to_radians(),
        pitch_deg.to_radians(),
    ))
}

pub fn run(args: &RenderArgs) -> Result<()> {
    // Everything the user typed is checked before any file is opened.
    let world_from_camera = parse_pose(&args.pose)?;
    let calibration = match &args.calib {
        Some(path) => Calibration::from_file(path)?,
        None => Calibration {
            camera: PinholeCamera::gst_benchmark(),
            depth_scale: Some(DEPTH_SCALE),
            camera_name: None,
        },
    };
    let scene = Scene::load(&args.scene)?;
    let library = args.furniture.library()?;
    let render_scene = build_render_scene(&scene, &library)?;
    let mut frame = render(&render_scene, &calibration.camera, &world_from_camera, &RenderOptions::default());
    if let Some(seed) = args.depth_noise_seed {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        frame.depth = DepthNoise::default().apply(&frame.depth, &mut rng);
    }
    let scale = calibration.depth_scale.unwrap_or(DEPTH_SCALE);
    gst_io::write_rgb_png(&args.out.join("rgb.png"), &frame.rgb)?;
    gst_io::write_depth_png(&args.out.join("depth.png"), &frame.depth, scale)?;
    gst_io::write_instance_png(&args.out.join("ids.png"), &frame.instances)?;
    gst_io::write_json(&args.out.join("pose.json"), &world_from_camera)?;
    tracing::info!("rendered {} to {}", args.scene.display(), args.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poses_parse_with_units_and_reject_nonsense() -> Result<()> {
        let pose = parse_pose("1 2 1.4 90 -10")?;
        assert!((pose.translation() - Vector3::new(1.0, 2.0, 1.4)).norm() < 1e-12);
        assert!((pose.camera_yaw().to_degrees() - 90.0).abs() < 1e-9);
        assert!((pose.camera_pitch().to_degrees() + 10.0).abs() < 1e-9);
        assert!(parse_pose("1 2 3").is_err());
        assert!(parse_pose("1 2 3 x 0").is_err());
        assert!(parse_pose("1 2 3 0 95").is_err());
        Ok(())
    }
}
