//! Settings of map building, with documented defaults (tuned on generated houses at 640x512).

use serde::{Deserialize, Serialize};

use crate::MapError;

/// How the map builder turns posed depth into occupancy, rooms and objects.
///
/// Every field has a default (see [`MapConfig::default`]); a JSON config may give any subset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MapConfig {
    /// Side of an occupancy cell, metres (default 0.05).
    pub resolution_m: f64,
    /// Depth pixels are sampled every `pixel_stride` columns and rows (default 4: 20k points per 640x512
    /// frame). Larger is faster and sparser.
    pub pixel_stride: u32,
    /// Integrate every `frame_stride`-th frame only (default 1). Object observations are still taken from
    /// the frames that are integrated.
    pub frame_stride: usize,
    /// Depth readings farther than this are ignored, metres (default 8.0, a structured-light sensor's
    /// range: depth noise grows with z², but far readings mostly add floor seen through doorways and walls
    /// above door height, and the surface test below averages their noise out of obstacle boundaries).
    pub max_range_m: f64,
    /// Depth readings nearer than this are ignored, metres (default 0.2).
    pub min_range_m: f64,
    /// A point within this height of the floor is floor, metres (default 0.05).
    pub floor_tolerance_m: f64,
    /// Obstacles start this far above the floor, metres (default 0.1).
    pub obstacle_min_height_m: f64,
    /// Obstacles end this far above the camera, metres (default 0.3).
    pub obstacle_above_camera_m: f64,
    /// Structure (walls above door lintels) starts this far above the floor, metres (default 2.2: the
    /// generator's doors and windows end at 2.1 m). Rooms are separated where it is seen.
    pub structure_min_height_m: f64,
    /// Structure ends this far below the estimated ceiling, metres (default 0.1).
    pub structure_below_ceiling_m: f64,
    /// Height assumed for the ceiling above the floor when none is seen, metres (default 2.5).
    pub default_ceiling_height_m: f64,
    /// A cell is occupied when seen as obstacle in at least this many frames (default 2)...
    pub min_obstacle_frames: u32,
    /// ...and in at least this fraction of the frames that saw it free (default 0.25)...
    pub obstacle_free_ratio: f64,
    /// ...and behind the fused obstacle surface: obstacle points are fused into a truncated signed distance
    /// along their rays (voxels `resolution_m` across and twice that tall over the obstacle band), and a cell is occupied only
    /// where one of its voxels has a negative mean distance. The mean over many noisy readings puts a wall's
    /// face within a voxel where single readings scatter by centimetres (depth noise grows with z²).
    /// Distances are truncated at this, metres (default 0.1; 0 turns the surface test off). Larger
    /// values tolerate more noise and fatten objects seen from above by up to this much beyond their far
    /// edges.
    pub surface_truncation_m: f64,
    /// Unknown floor enclosed by the map is filled as free when it is at most this large, square metres
    /// (default 4.0; 0 turns filling off)... A camera that pans in place or passes close to furniture
    /// never sees some floor (beyond its sweep, below its field of view, behind a chair), and the holes
    /// it leaves are floor the camera is surrounded by; a hole that touches the grid's edge is not
    /// enclosed and stays unknown.
    pub hole_fill_max_area_m2: f64,
    /// ...and when at least this fraction of its border is free floor, the rest occupied (default 0.4).
    /// The inside of a wardrobe or an unseen room behind its walls is bordered by occupied cells only
    /// and stays unknown.
    pub hole_fill_min_free_border: f64,
    /// Unknown floor inside a room's rectangle (along the map's Manhattan axes, spanned by its seen floor) is
    /// completed as the room's floor when it is at most this share of the seen floor (default 1.0; 0 turns
    /// completion off; see [`crate::completion`])...
    pub room_completion_max_share: f64,
    /// ...and when at most this much wall (structure) was seen inside the rectangle, metres (default 0.5): more
    /// means the room is not a rectangle (an L's inner corner) and is left as seen.
    pub room_completion_max_wall_m: f64,
    /// Rooms smaller than this are not rooms (their cells join a neighbour), square metres (default 1.0:
    /// counted on the room's seed, free floor away from walls and passages, so a room seen only through
    /// its door still counts).
    pub min_room_area_m2: f64,
    /// Structure is grown by this much before rooms are split along it, metres (default 0.1).
    pub structure_dilation_m: f64,
    /// Free space narrower than twice this is a passage: room seeds stay this far from obstacles, so that
    /// doors whose lintel was never seen still separate rooms, metres (default 0.2; larger values lose the
    /// seeds of cluttered rooms, 0.2–0.3 measured best on generated houses).
    pub passage_clearance_m: f64,
    /// A seed region whose floor farther than this from walls and obstacles falls into two or more parts of
    /// at least `min_room_area_m2` is split into those parts, metres (default 0.45: doors up to 0.9 m wide
    /// separate rooms even where the wall above them was never seen; 0 turns it off). The parts grow back
    /// over the floor between them, and rooms that then meet along more than `max_door_width_m` are one
    /// room again.
    pub door_clearance_m: f64,
    /// Rooms that meet along a boundary longer than this are one room (no door is that wide), metres
    /// (default 1.4).
    pub max_door_width_m: f64,
    /// An object observation joins the nearest landmark of a compatible class within this distance of its
    /// centre, metres (default 0.6).
    pub association_radius_m: f64,
    /// Observations with fewer valid depth points are dropped (default 20).
    pub min_object_points: usize,
}

impl Default for MapConfig {
    fn default() -> Self {
        Self {
            resolution_m: 0.05,
            pixel_stride: 4,
            frame_stride: 1,
            max_range_m: 8.0,
            min_range_m: 0.2,
            floor_tolerance_m: 0.05,
            obstacle_min_height_m: 0.1,
            obstacle_above_camera_m: 0.3,
            structure_min_height_m: 2.2,
            structure_below_ceiling_m: 0.1,
            default_ceiling_height_m: 2.5,
            min_obstacle_frames: 2,
            obstacle_free_ratio: 0.25,
            surface_truncation_m: 0.1,
            hole_fill_max_area_m2: 4.0,
            hole_fill_min_free_border: 0.4,
            room_completion_max_share: 1.0,
            room_completion_max_wall_m: 0.5,
            min_room_area_m2: 1.0,
            structure_dilation_m: 0.1,
            passage_clearance_m: 0.2,
            door_clearance_m: 0.45,
            max_door_width_m: 1.4,
            association_radius_m: 0.6,
            min_object_points: 20,
        }
    }
}

impl MapConfig {
    /// Checks every field; called before any input is opened.
    pub fn validate(&self) -> Result<(), MapError> {
        let bad = |m: String| Err(MapError::InvalidConfig(m));
        if !(self.resolution_m > 0.005 && self.resolution_m <= 1.0) {
            return bad(format!("resolution_m {} must be in (0.005, 1] m", self.resolution_m));
        }
        if self.pixel_stride == 0 || self.frame_stride == 0 {
            return bad("pixel_stride and frame_stride must be at least 1".into());
        }
        if !(self.min_range_m >= 0.0 && self.min_range_m < self.max_range_m) {
            return bad(format!("range [{}, {}] m is empty", self.min_range_m, self.max_range_m));
        }
        if !(self.floor_tolerance_m > 0.0 && self.floor_tolerance_m < self.obstacle_min_height_m) {
            return bad("floor_tolerance_m must be positive and below obstacle_min_height_m".into());
        }
        if !(self.obstacle_above_camera_m >= 0.0) {
            return bad("obstacle_above_camera_m must not be negative".into());
        }
        if !(self.structure_min_height_m > 0.0
            && self.structure_below_ceiling_m >= 0.0
            && self.default_ceiling_height_m > self.structure_min_height_m)
        {
            return bad("structure band: need 0 < structure_min_height_m < default_ceiling_height_m".into());
        }
        if !(self.surface_truncation_m >= 0.0 && self.surface_truncation_m <= 1.0) {
            return bad(format!("surface_truncation_m {} must be in [0, 1] m", self.surface_truncation_m));
        }
        if !(self.hole_fill_max_area_m2 >= 0.0 && (0.0..=1.0).contains(&self.hole_fill_min_free_border)) {
            return bad(format!(
                "hole_fill_max_area_m2 {} must not be negative and hole_fill_min_free_border {} must be in [0, 1]",
                self.hole_fill_max_area_m2, self.hole_fill_min_free_border
            ));
        }
        if !(self.room_completion_max_share >= 0.0 && self.room_completion_max_wall_m >= 0.0) {
            return bad(format!(
                "room_completion_max_share {} and room_completion_max_wall_m {} must not be negative",
                self.room_completion_max_share, self.room_completion_max_wall_m
            ));
        }
        if self.min_obstacle_frames == 0 || !(self.obstacle_free_ratio >= 0.0) {
            return bad("min_obstacle_frames must be ≥ 1 and obstacle_free_ratio ≥ 0".into());
        }
        if !(self.min_room_area_m2 >= 0.0 && self.structure_dilation_m >= 0.0) {
            return bad("min_room_area_m2 and structure_dilation_m must not be negative".into());
        }
        if !(self.door_clearance_m >= 0.0) {
            return bad(format!("door_clearance_m {} must not be negative", self.door_clearance_m));
        }
        if !(self.passage_clearance_m >= 0.0 && self.max_door_width_m > 0.0) {
            return bad(
                "passage_clearance_m must not be negative and max_door_width_m must be positive".into()
            );
        }
        if !(self.association_radius_m > 0.0) {
            return bad("association_radius_m must be positive".into());
        }
        Ok(())
    }
}
