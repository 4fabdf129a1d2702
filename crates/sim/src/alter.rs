//! Plausible but wrong versions of a scene, for GST's hard top-down selection: the same house mirrored, with
//! a room removed, or with a room added, each with its doors placed anew. A distractor must differ visibly
//! from the truth: callers check the binary top-downs' IoU.

use rand::Rng;

use gst_core::RoomType;

use crate::plan::{
    Axis, PlanConfig, PlanRoom, Rect, place_doors, place_windows, rectilinear_outline, wall_segments,
};
use crate::scene::Scene;

/// One way of altering a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alteration {
    /// Mirror the house left-right (furniture follows; the image is the truth's, flipped).
    MirrorX,
    /// Mirror the house top-bottom.
    MirrorY,
    /// Remove one room (and its furniture); doors are placed anew.
    RemoveRoom,
    /// Add an empty room against an exterior wall; doors are placed anew.
    AddRoom,
}

impl Alteration {
    pub const ALL: [Alteration; 4] =
        [Alteration::MirrorX, Alteration::MirrorY, Alteration::RemoveRoom, Alteration::AddRoom];
}

/// The plan settings a scene was built with, recovered from its walls (thicknesses) where it matters.
fn config_of(scene: &Scene) -> PlanConfig {
    let thickest = scene.plan.walls.iter().map(|w| w.thickness_m).fold(0.0, f64::max);
    let thinnest = scene.plan.walls.iter().map(|w| w.thickness_m).fold(f64::INFINITY, f64::min);
    let defaults = PlanConfig::default();
    PlanConfig {
        interior_wall_thickness_m: if thinnest.is_finite() {
            thinnest
        } else {
            defaults.interior_wall_thickness_m
        },
        exterior_wall_thickness_m: if thickest > 0.0 { thickest } else { defaults.exterior_wall_thickness_m },
        ..defaults
    }
}

/// Rebuilds walls, doors and windows for new rooms; `None` if the doors cannot connect every room.
fn with_rooms(scene: &Scene, rooms: Vec<PlanRoom>, rng: &mut impl Rng) -> Option<Scene> {
    let config = config_of(scene);
    let walls = wall_segments(&rooms, &config);
    let doors = place_doors(&rooms, &walls, &config, rng)?;
    let windows = place_windows(&walls, &doors, &config, rng);
    let mut altered = scene.clone();
    altered.plan.rooms = rooms;
    altered.plan.walls = walls;
    altered.plan.doors = doors;
    altered.plan.windows = windows;
    Some(altered)
}

/// Applies an alteration; `None` when it does not apply to this scene (say, no room can be removed
/// without disconnecting the rest).
pub fn alter_scene(scene: &Scene, alteration: Alteration, rng: &mut impl Rng) -> Option<Scene> {
    match alteration {
        Alteration::MirrorX | Alteration::MirrorY => Some(mirror(scene, alteration == Alteration::MirrorX)),
        Alteration::RemoveRoom => remove_room(scene, rng),
        Alteration::AddRoom => add_room(scene, rng),
    }
}

fn mirror(scene: &Scene, along_x: bool) -> Scene {
    let b = crate::topdown::scene_bounds(scene);
    let flip_rect = |r: &Rect| {
        if along_x {
            Rect::new(b.min[0] + b.max[0] - r.max[0], r.min[1], b.min[0] + b.max[0] - r.min[0], r.max[1])
        } else {
            Rect::new(r.min[0], b.min[1] + b.max[1] - r.max[1], r.max[0], b.min[1] + b.max[1] - r.min[1])
        }
    };
    let mut altered = scene.clone();
    for room in &mut altered.plan.rooms {
        room.rects = room.rects.iter().map(flip_rect).collect();
        room.polygon = rectilinear_outline(&room.rects);
    }
    for wall in &mut altered.plan.walls {
        let flips_offset = (wall.axis == Axis::Y) == along_x;
        let (lo, hi) = if along_x { (b.min[0], b.max[0]) } else { (b.min[1], b.max[1]) };
        if flips_offset {
            wall.offset_m = lo + hi - wall.offset_m;
            wall.rooms.swap(0, 1);
        } else {
            let (start, end) = (lo + hi - wall.end_m, lo + hi - wall.start_m);
            wall.start_m = start;
            wall.end_m = end;
        }
    }
    for opening in
        altered.plan.doors.iter_mut().map(|d| &mut d.opening).chain(altered.plan.windows.iter_mut())
    {
        let wall = &altered.plan.walls[opening.wall];
        let (lo, hi) = if along_x { (b.min[0], b.max[0]) } else { (b.min[1], b.max[1]) };
        let flips_offset = (wall.axis == Axis::Y) == along_x;
        if !flips_offset {
            opening.center_m = lo + hi - opening.center_m;
        }
    }
    for instance in &mut altered.instances {
        let mut pose = instance.bbox.world_from_box.0;
        let t = &mut pose.translation.vector;
        if along_x {
            t.x = b.min[0] + b.max[0] - t.x;
            instance.yaw = normalize(std::f64::consts::PI - instance.yaw);
        } else {
            t.y = b.min[1] + b.max[1] - t.y;
            instance.yaw = normalize(-instance.yaw);
        }
        pose.rotation = nalgebra::UnitQuaternion::from_axis_angle(&nalgebra::Vector3::z_axis(), instance.yaw);
        instance.bbox.world_from_box = gst_core::Pose3(pose);
    }
    altered
}

fn normalize(yaw: f64) -> f64 {
    let quarter = std::f64::consts::FRAC_PI_2;
    ((yaw / quarter).round() as i64).rem_euclid(4) as f64 * quarter
}

fn remove_room(scene: &Scene, rng: &mut impl Rng) -> Option<Scene> {
    let n = scene.plan.rooms.len();
    if n <= 3 {
        return None;
    }
    let total: f64 = scene.plan.rooms.iter().map(PlanRoom::area_m2).sum();
    // Big enough rooms, tried in random order.
    let mut candidates: Vec<usize> = (0..n)
        .filter(|&r| {
            scene.plan.rooms[r].area_m2() >= 0.12 * total
                && scene.plan.rooms[r].room_type != RoomType::Corridor
        })
        .collect();
    for k in (1..candidates.len()).rev() {
        candidates.swap(k, rng.gen_range(0..=k));
    }
    for removed in candidates {
        let rooms: Vec<PlanRoom> = scene
            .plan
            .rooms
            .iter()
            .enumerate()
            .filter(|(r, _)| *r != removed)
            .map(|(_, room)| room.clone())
            .collect();
        let Some(mut altered) = with_rooms(scene, rooms, rng) else { continue };
        altered.room_styles.remove(removed);
        altered.instances.retain(|i| i.room != removed);
        for instance in &mut altered.instances {
            if instance.room > removed {
                instance.room -= 1;
            }
        }
        return Some(altered);
    }
    None
}

fn add_room(scene: &Scene, rng: &mut impl Rng) -> Option<Scene> {
    let total: f64 = scene.plan.rooms.iter().map(PlanRoom::area_m2).sum();
    let mut exterior: Vec<usize> = (0..scene.plan.walls.len())
        .filter(|&w| scene.plan.walls[w].is_exterior() && scene.plan.walls[w].length_m() >= 2.6)
        .collect();
    for k in (1..exterior.len()).rev() {
        exterior.swap(k, rng.gen_range(0..=k));
    }
    let snap = |v: f64| (v / crate::plan::SNAP_M).round() * crate::plan::SNAP_M;
    for w in exterior {
        let wall = &scene.plan.walls[w];
        // Snapping can round the length past the wall's; keep it within (the range below must not be empty).
        let length = snap(rng.gen_range(2.6..=wall.length_m().min(5.0))).min(wall.length_m());
        let depth = snap(((0.15 * total) / length).max(2.6));
        let last_start = (wall.end_m - length).max(wall.start_m);
        let start = snap(rng.gen_range(wall.start_m..=last_start)).clamp(wall.start_m, last_start);
        // The outside lies on the side whose room is None.
        let outward = if wall.rooms[0].is_none() { -1.0 } else { 1.0 };
        let (a, b) = (wall.offset_m, wall.offset_m + outward * depth);
        let rect = match wall.axis {
            Axis::X => Rect::new(start, a.min(b), start + length, a.max(b)),
            Axis::Y => Rect::new(a.min(b), start, a.max(b), start + length),
        };
        let overlaps = scene
            .plan
            .rooms
            .iter()
            .flat_map(|r| &r.rects)
            .any(|r| r.inflate(-1e-6).intersects(&rect.inflate(-1e-6)));
        if overlaps {
            continue;
        }
        let mut rooms = scene.plan.rooms.clone();
        rooms.push(PlanRoom {
            room_type: RoomType::Bedroom,
            rects: vec![rect],
            polygon: rectilinear_outline(&[rect]),
        });
        let Some(mut altered) = with_rooms(scene, rooms, rng) else { continue };
        let style = scene.room_styles[rng.gen_range(0..scene.room_styles.len())];
        altered.room_styles.push(style);
        return Some(altered);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::FurnitureLibrary;
    use crate::scene::{SceneConfig, generate_scene};
    use rand::SeedableRng;

    /// Regression: a snapped room length past the wall's length made the start range empty and panicked
    /// (`gst generate --seed 7`, third scene).
    #[test]
    fn adding_rooms_never_panics() -> Result<(), crate::SimError> {
        let library = FurnitureLibrary::primitives_only();
        let mut added = 0;
        for seed in 0..12 {
            let scene = generate_scene(seed, &SceneConfig::default(), &library)?;
            for draw in 0..8 {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(draw);
                if let Some(altered) = alter_scene(&scene, Alteration::AddRoom, &mut rng) {
                    assert_eq!(altered.plan.rooms.len(), scene.plan.rooms.len() + 1);
                    added += 1;
                }
            }
        }
        assert!(added > 0);
        Ok(())
    }
}
