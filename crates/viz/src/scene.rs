//! The ground-truth scene of a generated house: walls, furniture, rooms, doors and windows (static, in
//! [`paths::WORLD`]).

use gst_sim::plan::{Axis, Opening, WallSegment};
use gst_sim::scene::Scene;

use crate::convert::{rgb, rgba};
use crate::{Recorder, VizError, paths};

const WALL_COLOR: [u8; 3] = [214, 210, 204];
const DOOR_COLOR: [u8; 3] = [235, 180, 40];
const WINDOW_COLOR: [u8; 3] = [120, 190, 255];
/// Room outlines are drawn this far above the floor so that they are not hidden in it, metres.
const OUTLINE_LIFT_M: f64 = 0.01;
const OUTLINE_RADIUS_M: f32 = 0.02;

/// An axis-aligned box: centre and half extents.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Block {
    center: [f32; 3],
    half: [f32; 3],
}

/// The box of `wall` between `along` (metres along its axis) and heights `z` (metres above the floor).
fn wall_block(wall: &WallSegment, along: [f64; 2], z: [f64; 2]) -> Block {
    let mid = (along[0] + along[1]) / 2.0;
    let half_along = ((along[1] - along[0]) / 2.0) as f32;
    let half_across = (wall.thickness_m / 2.0) as f32;
    let half_up = ((z[1] - z[0]) / 2.0) as f32;
    let zc = ((z[0] + z[1]) / 2.0) as f32;
    match wall.axis {
        Axis::X => {
            Block { center: [mid as f32, wall.offset_m as f32, zc], half: [half_along, half_across, half_up] }
        }
        Axis::Y => {
            Block { center: [wall.offset_m as f32, mid as f32, zc], half: [half_across, half_along, half_up] }
        }
    }
}

/// The solid pieces of a wall of height `height_m` with its openings cut out: full-height pieces between
/// openings, the parapet under a window and the lintel over every opening.
fn wall_pieces(wall: &WallSegment, openings: &[&Opening], height_m: f64) -> Vec<Block> {
    let mut openings: Vec<[f64; 4]> = openings
        .iter()
        .map(|o| [o.start_m().max(wall.start_m), o.end_m().min(wall.end_m), o.bottom_m, o.top_m])
        .filter(|o| o[1] > o[0])
        .collect();
    openings.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut pieces = Vec::new();
    let mut cursor = wall.start_m;
    for [start, end, bottom, top] in openings {
        if start > cursor {
            pieces.push(wall_block(wall, [cursor, start], [0.0, height_m]));
        }
        if bottom > 0.0 {
            pieces.push(wall_block(wall, [start, end], [0.0, bottom.min(height_m)]));
        }
        if top < height_m {
            pieces.push(wall_block(wall, [start, end], [top.max(0.0), height_m]));
        }
        cursor = cursor.max(end);
    }
    if wall.end_m > cursor {
        pieces.push(wall_block(wall, [cursor, wall.end_m], [0.0, height_m]));
    }
    pieces
}

fn boxes(blocks: &[Block]) -> rerun::Boxes3D {
    rerun::Boxes3D::from_centers_and_half_sizes(
        blocks.iter().map(|b| b.center),
        blocks.iter().map(|b| b.half),
    )
}

impl Recorder {
    /// Logs a generated scene (static): wall pieces, furniture boxes labelled by class, room outlines, doors
    /// and windows, and the annotation context that names instance ids in segmentation images.
    pub fn log_scene(&self, scene: &Scene) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let plan = &scene.plan;
        let height = plan.wall_height_m;
        let mut walls = Vec::new();
        for (k, wall) in plan.walls.iter().enumerate() {
            let openings: Vec<&Opening> = plan
                .doors
                .iter()
                .map(|d| &d.opening)
                .chain(plan.windows.iter())
                .filter(|o| o.wall == k)
                .collect();
            walls.extend(wall_pieces(wall, &openings, height));
        }
        let opening_block = |o: &Opening| {
            plan.walls
                .get(o.wall)
                .map(|wall| wall_block(wall, [o.start_m(), o.end_m()], [o.bottom_m, o.top_m]))
        };
        let doors: Vec<(Block, String)> = plan
            .doors
            .iter()
            .filter_map(|d| {
                let name = |r: usize| {
                    plan.rooms
                        .get(r)
                        .map_or_else(|| format!("room {r}"), |room| format!("{} {r}", room.room_type))
                };
                opening_block(&d.opening)
                    .map(|b| (b, format!("door: {} – {}", name(d.rooms[0]), name(d.rooms[1]))))
            })
            .collect();
        let windows: Vec<Block> = plan.windows.iter().filter_map(opening_block).collect();

        let instances = &scene.instances;
        let centers: Vec<[f32; 3]> =
            instances.iter().map(|i| crate::convert::point3(i.bbox.center().into())).collect();
        let half_sizes: Vec<[f32; 3]> =
            instances.iter().map(|i| i.bbox.size_m.map(|s| (s / 2.0) as f32)).collect();
        let rotations: Vec<rerun::Quaternion> = instances
            .iter()
            .map(|i| {
                let q = i.bbox.world_from_box.rotation();
                rerun::Quaternion::from_xyzw([q.i as f32, q.j as f32, q.k as f32, q.w as f32])
            })
            .collect();

        let rooms: Vec<Vec<[f32; 3]>> = plan
            .rooms
            .iter()
            .map(|room| {
                let mut strip: Vec<[f32; 3]> =
                    room.polygon.iter().map(|p| [p[0] as f32, p[1] as f32, OUTLINE_LIFT_M as f32]).collect();
                if let Some(first) = strip.first().copied() {
                    strip.push(first);
                }
                strip
            })
            .collect();

        let classes: Vec<_> = instances.iter().map(|i| (i.id, i.class)).collect();
        self.log_instance_classes(&classes)?;
        let Some(stream) = self.untimed() else { return Ok(()) };
        stream.log_static(
            paths::SCENE_WALLS,
            &boxes(&walls).with_colors([rgba(WALL_COLOR, 255)]).with_fill_mode(rerun::FillMode::Solid),
        )?;
        stream.log_static(
            paths::SCENE_FURNITURE,
            &rerun::Boxes3D::from_centers_and_half_sizes(centers, half_sizes)
                .with_quaternions(rotations)
                .with_labels(instances.iter().map(|i| i.class.text()))
                .with_colors(instances.iter().map(|i| rgb(i.class.color())))
                .with_class_ids(instances.iter().map(|i| i.id.0)),
        )?;
        stream.log_static(
            paths::SCENE_ROOMS,
            &rerun::LineStrips3D::new(rooms)
                .with_labels(
                    plan.rooms.iter().enumerate().map(|(k, r)| format!("{} (room {k})", r.room_type)),
                )
                .with_colors(plan.rooms.iter().map(|r| rgb(r.room_type.color())))
                .with_radii([OUTLINE_RADIUS_M]),
        )?;
        let door_blocks: Vec<Block> = doors.iter().map(|(b, _)| *b).collect();
        stream.log_static(
            paths::SCENE_DOORS,
            &boxes(&door_blocks)
                .with_labels(doors.iter().map(|(_, label)| label.as_str()))
                .with_colors([rgb(DOOR_COLOR)]),
        )?;
        stream.log_static(paths::SCENE_WINDOWS, &boxes(&windows).with_colors([rgb(WINDOW_COLOR)]))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall() -> WallSegment {
        WallSegment {
            axis: Axis::X,
            offset_m: 2.0,
            start_m: 0.0,
            end_m: 4.0,
            rooms: [Some(0), None],
            thickness_m: 0.2,
        }
    }

    #[test]
    fn a_wall_with_a_door_and_a_window_keeps_lintels_and_parapet() {
        let door = Opening { wall: 0, center_m: 1.0, width_m: 0.8, bottom_m: 0.0, top_m: 2.0 };
        let window = Opening { wall: 0, center_m: 3.0, width_m: 1.0, bottom_m: 0.9, top_m: 2.1 };
        let pieces = wall_pieces(&wall(), &[&window, &door], 2.5);
        // Before the door, lintel, between, parapet, lintel over the window, after the window.
        assert_eq!(pieces.len(), 6);
        let volume: f32 = pieces.iter().map(|b| 8.0 * b.half[0] * b.half[1] * b.half[2]).sum();
        let expected = 0.2 * (4.0 * 2.5 - 0.8 * 2.0 - 1.0 * 1.2);
        assert!((volume - expected).abs() < 1e-4, "{volume} vs {expected}");
        // Every piece lies on the wall line y = 2 and inside its extent.
        for b in &pieces {
            assert!((b.center[1] - 2.0).abs() < 1e-6);
            assert!(b.center[0] - b.half[0] >= -1e-6 && b.center[0] + b.half[0] <= 4.0 + 1e-6);
        }
    }
}
