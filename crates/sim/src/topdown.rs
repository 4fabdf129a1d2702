//! The benchmark's top-down images (640x512 in GST-Bench) and the mapping between world coordinates,
//! pixels and the normalised [0, 999] coordinates of `<point>x y</point>` answers.
//!
//! Three styles come from one orthographic render with the ceiling cut away:
//! - rendered: the textured house seen from above;
//! - semantic: floors coloured by room type, furniture by class, walls dark grey, outside black;
//! - binary: white where the floor is free (visible from above inside the house), black for walls,
//!   furniture and outside, like GST-Bench's `topdown` images.
//!
//! Orientation follows the image: +x (east) is right, +y (north) is up.

use serde::{Deserialize, Serialize};

use gst_core::{Image, ObjectClass, RgbImage};

use crate::SimError;
use crate::geometry::{WALL_TOP_GAP_M, build_topdown_scene};
use crate::library::FurnitureLibrary;
use crate::plan::Rect;
use crate::render::{OrthoView, RenderOptions, render_topdown};
use crate::scene::Scene;

/// Size of GST-Bench's top-down images.
pub const TOPDOWN_WIDTH: u32 = 640;
pub const TOPDOWN_HEIGHT: u32 = 512;
/// Empty border around the house, pixels.
pub const TOPDOWN_MARGIN_PX: f64 = 24.0;
/// A visible surface lower than this (metres) is floor.
pub const FLOOR_HEIGHT_TOLERANCE_M: f32 = 0.03;

/// The similarity between world (x, y) and top-down pixels: pixel column `c` covers
/// `u ∈ [c, c + 1)` with `u = (x - min_x_m) / metres_per_pixel`, row `r` covers `v ∈ [r, r + 1)` with
/// `v = (max_y_m - y) / metres_per_pixel`.
///
/// Normalised coordinates are `n = floor(u / width · 1000)` clamped to [0, 999] (and likewise for v), the
/// convention of the `<point>x y</point>` answers; a normalised value maps back to the centre of its bin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopdownMapping {
    pub width: u32,
    pub height: u32,
    pub min_x_m: f64,
    pub max_y_m: f64,
    pub metres_per_pixel: f64,
}

impl TopdownMapping {
    /// The mapping that fits `bounds` into the image with a margin, preserving aspect, centred.
    pub fn fit(bounds: &Rect, width: u32, height: u32, margin_px: f64) -> Self {
        let usable_w = f64::from(width) - 2.0 * margin_px;
        let usable_h = f64::from(height) - 2.0 * margin_px;
        let metres_per_pixel = (bounds.width() / usable_w).max(bounds.height() / usable_h);
        let [cx, cy] = bounds.center();
        Self {
            width,
            height,
            min_x_m: cx - f64::from(width) / 2.0 * metres_per_pixel,
            max_y_m: cy + f64::from(height) / 2.0 * metres_per_pixel,
            metres_per_pixel,
        }
    }

    /// Continuous pixel coordinates (u right, v down) of a world point.
    pub fn pixel_from_world(&self, world_xy: [f64; 2]) -> [f64; 2] {
        [
            (world_xy[0] - self.min_x_m) / self.metres_per_pixel,
            (self.max_y_m - world_xy[1]) / self.metres_per_pixel,
        ]
    }

    pub fn world_from_pixel(&self, pixel: [f64; 2]) -> [f64; 2] {
        [self.min_x_m + pixel[0] * self.metres_per_pixel, self.max_y_m - pixel[1] * self.metres_per_pixel]
    }

    pub fn normalized_from_pixel(&self, pixel: [f64; 2]) -> [u32; 2] {
        let n = |v: f64, size: u32| (v / f64::from(size) * 1000.0).floor().clamp(0.0, 999.0) as u32;
        [n(pixel[0], self.width), n(pixel[1], self.height)]
    }

    pub fn pixel_from_normalized(&self, normalized: [u32; 2]) -> [f64; 2] {
        let p = |n: u32, size: u32| (f64::from(n.min(999)) + 0.5) / 1000.0 * f64::from(size);
        [p(normalized[0], self.width), p(normalized[1], self.height)]
    }

    pub fn normalized_from_world(&self, world_xy: [f64; 2]) -> [u32; 2] {
        self.normalized_from_pixel(self.pixel_from_world(world_xy))
    }

    pub fn world_from_normalized(&self, normalized: [u32; 2]) -> [f64; 2] {
        self.world_from_pixel(self.pixel_from_normalized(normalized))
    }

    /// The heading on the top-down image, degrees in (-180, 180]: 0 = towards the top of the image, counter-
    /// clockwise positive, from a world yaw (radians, 0 = +x, counter-clockwise).
    pub fn heading_deg_from_world_yaw(world_yaw: f64) -> f64 {
        let deg = world_yaw.to_degrees() - 90.0;
        let wrapped = (deg + 180.0).rem_euclid(360.0) - 180.0;
        if wrapped == -180.0 { 180.0 } else { wrapped }
    }

    fn ortho_view(&self, max_z_m: f64) -> OrthoView {
        OrthoView {
            min_x_m: self.min_x_m,
            max_y_m: self.max_y_m,
            metres_per_pixel: self.metres_per_pixel,
            width: self.width,
            height: self.height,
            max_z_m,
        }
    }
}

/// The three top-down images of a scene and their mapping.
#[derive(Clone, Debug, PartialEq)]
pub struct TopdownImages {
    pub mapping: TopdownMapping,
    pub rendered: RgbImage,
    pub semantic: RgbImage,
    /// 255 = free floor, 0 = anything else.
    pub binary: Image<u8>,
}

/// Bounds of the house (room rectangles plus exterior wall thickness).
pub fn scene_bounds(scene: &Scene) -> Rect {
    let mut b = scene.plan.rooms[0].bounds();
    for room in &scene.plan.rooms[1..] {
        let r = room.bounds();
        b = Rect::new(
            b.min[0].min(r.min[0]),
            b.min[1].min(r.min[1]),
            b.max[0].max(r.max[0]),
            b.max[1].max(r.max[1]),
        );
    }
    let exterior = scene.plan.walls.iter().map(|w| w.thickness_m).fold(0.0, f64::max);
    b.inflate(exterior / 2.0)
}

/// Renders the top-down images of a scene at GST-Bench's 640x512.
pub fn render_topdowns(scene: &Scene, library: &FurnitureLibrary) -> Result<TopdownImages, SimError> {
    let render_scene = build_topdown_scene(scene, library)?;
    let mapping = TopdownMapping::fit(&scene_bounds(scene), TOPDOWN_WIDTH, TOPDOWN_HEIGHT, TOPDOWN_MARGIN_PX);
    // Cut between the wall tops and the ceiling: walls stay, the ceiling goes.
    let view = mapping.ortho_view(scene.plan.wall_height_m - WALL_TOP_GAP_M / 2.0);
    let options = RenderOptions { background: [0, 0, 0], ..RenderOptions::default() };
    let frame = render_topdown(&render_scene, &view, &options);

    let class_of: std::collections::BTreeMap<u16, ObjectClass> =
        scene.instances.iter().map(|i| (i.id.0, i.class)).collect();
    let (w, h) = (mapping.width, mapping.height);
    let mut semantic = Vec::with_capacity((w * h) as usize);
    let mut binary = Vec::with_capacity((w * h) as usize);
    for row in 0..h {
        for col in 0..w {
            let world = mapping.world_from_pixel([f64::from(col) + 0.5, f64::from(row) + 0.5]);
            let room = scene.plan.rooms.iter().find(|r| r.contains(world));
            let id = frame.instances.get(col, row).copied().unwrap_or(0);
            let height = frame.depth.get(col, row).copied().unwrap_or(0.0);
            let is_floor = room.is_some() && id == 0 && height < FLOOR_HEIGHT_TOLERANCE_M;
            binary.push(if is_floor { 255 } else { 0 });
            let color = match (room, id) {
                (_, id) if id != 0 => class_of.get(&id).map(|c| c.color()).unwrap_or([255, 255, 255]),
                (Some(room), _) if is_floor => room.room_type.color(),
                (Some(_), _) => [60, 60, 60],
                (None, _) if height > FLOOR_HEIGHT_TOLERANCE_M => [60, 60, 60], // exterior wall halves
                (None, _) => [0, 0, 0],
            };
            semantic.push(color);
        }
    }
    Ok(TopdownImages {
        mapping,
        rendered: frame.rgb,
        // Both buffers have exactly width × height entries.
        semantic: Image::from_vec(w, h, semantic).unwrap_or_else(|_| Image::filled(w, h, [0, 0, 0])),
        binary: Image::from_vec(w, h, binary).unwrap_or_else(|_| Image::filled(w, h, 0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_round_trips_and_normalises() {
        let mapping = TopdownMapping::fit(&Rect::new(0.0, 0.0, 12.0, 8.0), 640, 512, 24.0);
        let p = mapping.pixel_from_world([3.0, 5.0]);
        let back = mapping.world_from_pixel(p);
        assert!((back[0] - 3.0).abs() < 1e-12 && (back[1] - 5.0).abs() < 1e-12);
        // The house centre is the image centre; north is up.
        let c = mapping.pixel_from_world([6.0, 4.0]);
        assert!((c[0] - 320.0).abs() < 1e-9 && (c[1] - 256.0).abs() < 1e-9);
        assert!(mapping.pixel_from_world([6.0, 5.0])[1] < c[1]);
        assert_eq!(mapping.normalized_from_pixel([0.0, 0.0]), [0, 0]);
        assert_eq!(mapping.normalized_from_pixel([640.0, 512.0]), [999, 999]);
        assert_eq!(mapping.normalized_from_pixel([320.0, 256.0]), [500, 500]);
        let n = mapping.normalized_from_world([3.0, 5.0]);
        let w = mapping.world_from_normalized(n);
        // A normalised unit is 0.64 px wide here, so the round trip is within one bin.
        assert!(
            (w[0] - 3.0).abs() <= mapping.metres_per_pixel && (w[1] - 5.0).abs() <= mapping.metres_per_pixel
        );
    }

    #[test]
    fn headings_point_up_for_north_and_turn_counter_clockwise() {
        let h = TopdownMapping::heading_deg_from_world_yaw;
        assert!((h(std::f64::consts::FRAC_PI_2)).abs() < 1e-9); // north → up → 0
        assert!((h(0.0) + 90.0).abs() < 1e-9); // east → right → -90
        assert!((h(std::f64::consts::PI) - 90.0).abs() < 1e-9); // west → left → +90
        assert!((h(-std::f64::consts::FRAC_PI_2) - 180.0).abs() < 1e-9); // south → down
    }
}
