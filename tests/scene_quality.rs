//! Properties of generated scenes and their renders that later stages depend on: instance ids where the
//! boxes are, exact depth, top-downs that match the geometry, and enough texture for ORB.

mod common;

use nalgebra::{Point2, Point3, Vector3};
use opencv::core::{KeyPoint, Mat, Vector};
use opencv::features2d::ORB;
use opencv::prelude::*;
use rand::SeedableRng;

use gst_core::{ObjectClass, PinholeCamera, Pose3};
use gst_sim::geometry::build_render_scene;
use gst_sim::plan::{Axis, Rect};
use gst_sim::render::{RenderOptions, render};
use gst_sim::scene::{Scene, SceneConfig, generate_scene};
use gst_sim::topdown::render_topdowns;
use gst_sim::walk::{FreeSpace, random_walk, sample_room_views};

fn scene(seed: u64) -> (Scene, gst_sim::library::FurnitureLibrary) {
    let library = common::library();
    let scene = match generate_scene(seed, &SceneConfig::default(), &library) {
        Ok(scene) => scene,
        Err(error) => panic!("scene {seed}: {error}"),
    };
    (scene, library)
}

#[test]
fn scenes_have_3_to_10_rooms_and_varied_furniture() {
    let mut classes = std::collections::BTreeSet::new();
    for seed in 0..6 {
        let (scene, _) = scene(seed);
        assert!((3..=10).contains(&scene.plan.rooms.len()));
        assert!(scene.instances.len() >= scene.plan.rooms.len(), "seed {seed}: too few instances");
        classes.extend(scene.instances.iter().map(|i| i.class));
    }
    assert!(classes.len() >= 15, "only {} classes placed: {classes:?}", classes.len());
}

#[test]
fn box_corners_project_onto_their_instance_and_wall_depth_is_exact() -> anyhow::Result<()> {
    let camera = PinholeCamera::gst_benchmark();
    let mut checked_corners = 0;
    let mut checked_walls = 0;
    for seed in [1, 2, 3] {
        // Primitive furniture fills its box, so corners lie on surfaces (catalog models have rounded edges).
        let library = gst_sim::library::FurnitureLibrary::primitives_only();
        let scene = generate_scene(seed, &SceneConfig::default(), &library)?;
        let render_scene = build_render_scene(&scene, &library)?;
        let free = FreeSpace::new(&scene, 0.3);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut poses = sample_room_views(&scene, &free, 10, &mut rng);
        poses.extend(random_walk(&free, 20, 0.4, &mut rng));
        for pose in &poses {
            let frame = render(&render_scene, &camera, pose, &RenderOptions::default());
            let camera_from_world = pose.inverse();
            // Box-shaped furniture: its top front corners, pulled 2% towards the centre, lie on the model's
            // surface (the back ones touch the wall, the bottom ones the floor).
            for instance in scene.instances.iter().filter(|i| {
                matches!(
                    i.class,
                    ObjectClass::Wardrobe
                        | ObjectClass::Refrigerator
                        | ObjectClass::KitchenCabinet
                        | ObjectClass::Cabinet
                        | ObjectClass::Dresser
                )
            }) {
                let center = instance.bbox.center();
                let corners = instance.bbox.corners();
                for corner in [corners[4], corners[5]] {
                    let inward = center + (corner - center) * 0.98;
                    let p = camera_from_world.transform_point(&inward);
                    let Some(pixel) = camera.project(&p) else { continue };
                    if !camera.contains(&pixel) {
                        continue;
                    }
                    let (u, v) = (pixel.x.round() as u32, pixel.y.round() as u32);
                    let depth = f64::from(*frame.depth.get(u, v).unwrap_or(&0.0));
                    // Only corners that nothing hides: the rendered surface is at the corner's depth.
                    if (depth - p.z).abs() > 0.02 {
                        continue;
                    }
                    let id = *frame.instances.get(u, v).unwrap_or(&0);
                    assert_eq!(
                        id, instance.id.0,
                        "seed {seed}: corner of {} ({:?}) shows id {id}",
                        instance.id.0, instance.class
                    );
                    checked_corners += 1;
                }
            }
        }
        // Level views straight at each room's walls from the room's free points.
        let points = free.free_points();
        for (r, room) in scene.plan.rooms.iter().enumerate() {
            let Some(p) = points.iter().find(|p| room.contains(**p)) else { continue };
            for wall in scene.plan.walls.iter().filter(|w| w.rooms.contains(&Some(r))) {
                let into_room = if wall.rooms[1] == Some(r) { 1.0 } else { -1.0 };
                let surface = wall.offset_m + into_room * wall.thickness_m / 2.0;
                let (along, yaw, distance) = match wall.axis {
                    Axis::X => (
                        p[0],
                        if into_room > 0.0 {
                            -std::f64::consts::FRAC_PI_2
                        } else {
                            std::f64::consts::FRAC_PI_2
                        },
                        (p[1] - surface).abs(),
                    ),
                    Axis::Y => (
                        p[1],
                        if into_room > 0.0 { std::f64::consts::PI } else { 0.0 },
                        (p[0] - surface).abs(),
                    ),
                };
                if along < wall.start_m + 0.3 || along > wall.end_m - 0.3 {
                    continue;
                }
                let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(p[0], p[1], 1.4), yaw, 0.0);
                let frame = render(&render_scene, &camera, &pose, &RenderOptions::default());
                // The principal point is between pixels; use the four around it and the ray geometry.
                for (u, v) in [(319u32, 255u32), (320, 256)] {
                    if *frame.instances.get(u, v).unwrap_or(&1) != 0 {
                        continue; // furniture in front of the wall
                    }
                    let ray = camera.ray(&Point2::new(f64::from(u), f64::from(v)));
                    let hit = pose.transform_point(&Point3::from(ray * distance));
                    // Skip rays that pass through a door or window opening.
                    let opening =
                        scene.plan.doors.iter().map(|d| &d.opening).chain(&scene.plan.windows).any(|o| {
                            std::ptr::eq(&scene.plan.walls[o.wall], wall) && {
                                let a = if wall.axis == Axis::X { hit.x } else { hit.y };
                                a > o.start_m() - 0.05
                                    && a < o.end_m() + 0.05
                                    && hit.z > o.bottom_m - 0.05
                                    && hit.z < o.top_m + 0.05
                            }
                        });
                    if opening {
                        continue;
                    }
                    let depth = f64::from(*frame.depth.get(u, v).unwrap_or(&0.0));
                    assert!(
                        (depth - distance).abs() < 0.001,
                        "seed {seed}: wall depth {depth} vs analytic {distance}"
                    );
                    checked_walls += 1;
                }
            }
        }
    }
    assert!(checked_corners >= 20, "only {checked_corners} unoccluded corners were checked");
    assert!(checked_walls >= 10, "only {checked_walls} wall pixels were checked");
    Ok(())
}

/// IoU between the binary top-down's free pixels and the analytic floor (rooms minus walls, with door gaps)
/// minus the furniture's oriented-box footprints.
fn binary_topdown_iou(scene: &Scene, library: &gst_sim::library::FurnitureLibrary) -> anyhow::Result<f64> {
    let topdowns = render_topdowns(scene, library)?;
    let mapping = topdowns.mapping;
    let plan = &scene.plan;
    let footprints: Vec<Rect> = scene.instances.iter().map(|i| i.footprint()).collect();
    let (mut both, mut either) = (0usize, 0usize);
    for row in 0..mapping.height {
        for col in 0..mapping.width {
            let p = mapping.world_from_pixel([f64::from(col) + 0.5, f64::from(row) + 0.5]);
            let in_room = plan.rooms.iter().any(|r| r.contains(p));
            let in_wall = plan.walls.iter().enumerate().any(|(w, wall)| {
                let (across, along) = match wall.axis {
                    Axis::X => (p[1] - wall.offset_m, p[0]),
                    Axis::Y => (p[0] - wall.offset_m, p[1]),
                };
                let half = wall.thickness_m / 2.0;
                across.abs() < half
                    && along > wall.start_m - half
                    && along < wall.end_m + half
                    && !plan.doors.iter().any(|d| {
                        d.opening.wall == w && along > d.opening.start_m() && along < d.opening.end_m()
                    })
            });
            let analytic = in_room && !in_wall && !footprints.iter().any(|f| f.contains(p));
            let rendered = topdowns.binary.get(col, row).copied().unwrap_or(0) == 255;
            both += usize::from(analytic && rendered);
            either += usize::from(analytic || rendered);
        }
    }
    Ok(both as f64 / either.max(1) as f64)
}

#[test]
fn binary_topdown_free_space_matches_floor_minus_footprints() -> anyhow::Result<()> {
    let primitives = gst_sim::library::FurnitureLibrary::primitives_only();
    let catalog = common::library();
    for seed in [1, 4, 7] {
        // Primitive furniture fills its boxes, so the free space must match the box footprints closely.
        let scene = generate_scene(seed, &SceneConfig::default(), &primitives)?;
        let iou = binary_topdown_iou(&scene, &primitives)?;
        assert!(
            iou >= 0.98,
            "seed {seed}, primitives: binary top-down IoU with floor minus footprints is {iou:.4}"
        );
        // Catalog models are seen as their silhouettes (round tables, plants, bed legs), which cover less
        // than their boxes: a looser bound, still catching walls, doors or furniture in the wrong place.
        let scene = generate_scene(seed, &SceneConfig::default(), &catalog)?;
        let iou = binary_topdown_iou(&scene, &catalog)?;
        assert!(
            iou >= 0.95,
            "seed {seed}, catalog: binary top-down IoU with floor minus footprints is {iou:.4}"
        );
    }
    Ok(())
}

fn orb_keypoints(image: &gst_core::RgbImage) -> anyhow::Result<usize> {
    let grey: Vec<u8> = image
        .data()
        .iter()
        .map(|p| ((299 * u32::from(p[0]) + 587 * u32::from(p[1]) + 114 * u32::from(p[2])) / 1000) as u8)
        .collect();
    let mat = Mat::new_rows_cols_with_data(image.height() as i32, image.width() as i32, &grey)?;
    let mut orb = ORB::create_def()?;
    let mut keypoints = Vector::<KeyPoint>::new();
    orb.detect(&mat, &mut keypoints, &Mat::default())?;
    Ok(keypoints.len())
}

#[test]
fn frames_along_a_random_walk_have_enough_orb_keypoints() -> anyhow::Result<()> {
    let camera = PinholeCamera::gst_benchmark();
    let (mut frames, mut rich) = (0usize, 0usize);
    let mut poorest = usize::MAX;
    for seed in [2, 5, 8] {
        let (scene, library) = scene(seed);
        let render_scene = build_render_scene(&scene, &library)?;
        let free = FreeSpace::new(&scene, 0.3);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed + 100);
        for pose in random_walk(&free, 60, 0.25, &mut rng) {
            let frame = render(&render_scene, &camera, &pose, &RenderOptions::default());
            let count = orb_keypoints(&frame.rgb)?;
            frames += 1;
            rich += usize::from(count >= 300);
            poorest = poorest.min(count);
        }
    }
    let fraction = rich as f64 / frames as f64;
    assert!(fraction >= 0.95, "{rich}/{frames} frames have ≥ 300 ORB keypoints (poorest {poorest})");
    Ok(())
}
