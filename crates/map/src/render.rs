//! Rendering the map in the benchmark's top-down styles: a binary image (white = free floor, black =
//! anything else) and a semantic image (rooms coloured and numbered, objects outlined in their class colour
//! and numbered as in `scene_graph.json`, doors, the trajectory).

use serde::{Deserialize, Serialize};

use gst_core::{Image, RgbImage};

use crate::SemanticMap;
use crate::occupancy::CellState;

/// Empty border around the map, pixels (as the benchmark's top-down images).
pub const VIEW_MARGIN_PX: f64 = 24.0;

/// The pixel mapping of a rendered view, in the convention of GST-Bench's top-downs: `u = (x − min_x) /
/// metres_per_pixel` right, `v = (max_y − y) / metres_per_pixel` down (+y of the map is up in the image).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopdownView {
    pub width: u32,
    pub height: u32,
    pub min_x_m: f64,
    pub max_y_m: f64,
    pub metres_per_pixel: f64,
}

impl TopdownView {
    /// The view that fits the map's free space into `width` x `height` with the margin, centred.
    pub fn fit(map: &SemanticMap, width: u32, height: u32) -> Self {
        let g = &map.occupancy.frame;
        let (mut min, mut max) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
        for (i, c) in map.occupancy.cells.iter().enumerate() {
            if *c == CellState::Free {
                let p = g.world_from_cell((i % g.width as usize) as u32, (i / g.width as usize) as u32);
                min = [min[0].min(p[0]), min[1].min(p[1])];
                max = [max[0].max(p[0]), max[1].max(p[1])];
            }
        }
        if !min[0].is_finite() {
            (min, max) = ([-1.0, -1.0], [1.0, 1.0]);
        }
        let usable = (f64::from(width) - 2.0 * VIEW_MARGIN_PX, f64::from(height) - 2.0 * VIEW_MARGIN_PX);
        let mpp = ((max[0] - min[0] + g.resolution_m) / usable.0)
            .max((max[1] - min[1] + g.resolution_m) / usable.1);
        let (cx, cy) = ((min[0] + max[0]) / 2.0, (min[1] + max[1]) / 2.0);
        Self {
            width,
            height,
            min_x_m: cx - f64::from(width) / 2.0 * mpp,
            max_y_m: cy + f64::from(height) / 2.0 * mpp,
            metres_per_pixel: mpp,
        }
    }

    pub fn pixel_from_map(&self, xy: [f64; 2]) -> [f64; 2] {
        [(xy[0] - self.min_x_m) / self.metres_per_pixel, (self.max_y_m - xy[1]) / self.metres_per_pixel]
    }

    pub fn map_from_pixel(&self, uv: [f64; 2]) -> [f64; 2] {
        [self.min_x_m + uv[0] * self.metres_per_pixel, self.max_y_m - uv[1] * self.metres_per_pixel]
    }
}

/// White (255) where the map is free floor, black (0) elsewhere; each pixel samples the cell under its
/// centre.
pub fn render_binary(map: &SemanticMap, view: &TopdownView) -> Image<u8> {
    let mut img = Image::filled(view.width, view.height, 0u8);
    for v in 0..view.height {
        for u in 0..view.width {
            let [x, y] = view.map_from_pixel([f64::from(u) + 0.5, f64::from(v) + 0.5]);
            if map.occupancy.state_at(x, y) == CellState::Free
                && let Some(p) = img.get_mut(u, v)
            {
                *p = 255;
            }
        }
    }
    img
}

/// A pastel colour per room id.
pub fn room_color(id: usize) -> [u8; 3] {
    const PALETTE: [[u8; 3]; 10] = [
        [141, 211, 199],
        [255, 255, 179],
        [190, 186, 218],
        [251, 128, 114],
        [128, 177, 211],
        [253, 180, 98],
        [179, 222, 105],
        [252, 205, 229],
        [217, 217, 217],
        [188, 128, 189],
    ];
    PALETTE[id % PALETTE.len()]
}

/// The semantic view.
pub fn render_semantic(map: &SemanticMap, view: &TopdownView) -> RgbImage {
    let mut img = Image::filled(view.width, view.height, [0u8, 0, 0]);
    let g = &map.occupancy.frame;
    for v in 0..view.height {
        for u in 0..view.width {
            let [x, y] = view.map_from_pixel([f64::from(u) + 0.5, f64::from(v) + 0.5]);
            let color = match g.cell_from_world(x, y) {
                None => continue,
                Some((c, r)) => {
                    let i = g.index(c, r);
                    match (map.occupancy.cells[i], map.room_labels.get(i).copied().unwrap_or(0)) {
                        (CellState::Free, 0) => [200, 200, 200],
                        (CellState::Free, l) => room_color(l as usize - 1),
                        (CellState::Occupied, _) => [70, 70, 70],
                        (CellState::Unknown, _) => continue,
                    }
                }
            };
            if let Some(p) = img.get_mut(u, v) {
                *p = color;
            }
        }
    }
    // Trajectory.
    for pair in map.trajectory.windows(2) {
        let a = view.pixel_from_map([pair[0].position_m[0], pair[0].position_m[1]]);
        let b = view.pixel_from_map([pair[1].position_m[0], pair[1].position_m[1]]);
        draw_line(&mut img, a, b, [40, 90, 220]);
    }
    // Objects: footprint outline in the class colour, id next to it.
    for o in &map.objects {
        let color = o.class.map(|c| c.color()).unwrap_or([255, 255, 255]);
        let (c, s) = (o.bbox.yaw_rad.cos(), o.bbox.yaw_rad.sin());
        let (hx, hy) = (o.bbox.size_m[0] / 2.0, o.bbox.size_m[1] / 2.0);
        let corners: Vec<[f64; 2]> = [[-hx, -hy], [hx, -hy], [hx, hy], [-hx, hy]]
            .iter()
            .map(|d| {
                view.pixel_from_map([
                    o.centroid_m[0] + c * d[0] - s * d[1],
                    o.centroid_m[1] + s * d[0] + c * d[1],
                ])
            })
            .collect();
        for k in 0..4 {
            draw_line(&mut img, corners[k], corners[(k + 1) % 4], color);
        }
        let p = view.pixel_from_map([o.centroid_m[0], o.centroid_m[1]]);
        draw_number(&mut img, p, o.id, [255, 255, 255], 1);
    }
    for d in &map.doors {
        let p = view.pixel_from_map(d.position_m);
        fill_square(&mut img, p, 3, [255, 215, 0]);
    }
    for r in &map.rooms {
        let p = view.pixel_from_map(r.centroid_m);
        draw_number(&mut img, p, r.id, [0, 0, 0], 3);
    }
    img
}

fn put(img: &mut RgbImage, x: i64, y: i64, color: [u8; 3]) {
    if x >= 0
        && y >= 0
        && let Some(p) = img.get_mut(x as u32, y as u32)
    {
        *p = color;
    }
}

fn fill_square(img: &mut RgbImage, p: [f64; 2], half: i64, color: [u8; 3]) {
    let (x, y) = (p[0].floor() as i64, p[1].floor() as i64);
    for dy in -half..=half {
        for dx in -half..=half {
            put(img, x + dx, y + dy, color);
        }
    }
}

/// Draws a line of one pixel (DDA).
pub(crate) fn draw_line(img: &mut RgbImage, a: [f64; 2], b: [f64; 2], color: [u8; 3]) {
    let steps = (b[0] - a[0]).abs().max((b[1] - a[1]).abs()).ceil().clamp(1.0, 10_000.0) as usize;
    for k in 0..=steps {
        let t = k as f64 / steps as f64;
        put(img, (a[0] + t * (b[0] - a[0])).floor() as i64, (a[1] + t * (b[1] - a[1])).floor() as i64, color);
    }
}

/// 3x5 digit glyphs, one row per 3 bits (top row first).
const DIGITS: [[u8; 5]; 10] = [
    [0b111, 0b101, 0b101, 0b101, 0b111],
    [0b010, 0b110, 0b010, 0b010, 0b111],
    [0b111, 0b001, 0b111, 0b100, 0b111],
    [0b111, 0b001, 0b111, 0b001, 0b111],
    [0b101, 0b101, 0b111, 0b001, 0b001],
    [0b111, 0b100, 0b111, 0b001, 0b111],
    [0b111, 0b100, 0b111, 0b101, 0b111],
    [0b111, 0b001, 0b010, 0b010, 0b010],
    [0b111, 0b101, 0b111, 0b101, 0b111],
    [0b111, 0b101, 0b111, 0b001, 0b111],
];

/// Writes a number centred on `p` with glyphs scaled by `scale`.
fn draw_number(img: &mut RgbImage, p: [f64; 2], number: usize, color: [u8; 3], scale: i64) {
    let text = number.to_string();
    let glyph_w = 4 * scale;
    let total_w = glyph_w * text.len() as i64 - scale;
    let (x0, y0) = (p[0].floor() as i64 - total_w / 2, p[1].floor() as i64 - 5 * scale / 2);
    for (k, ch) in text.bytes().enumerate() {
        let glyph = DIGITS[(ch - b'0') as usize % 10];
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..3 {
                if bits >> (2 - col) & 1 == 1 {
                    for sy in 0..scale {
                        for sx in 0..scale {
                            put(
                                img,
                                x0 + k as i64 * glyph_w + col * scale + sx,
                                y0 + row as i64 * scale + sy,
                                color,
                            );
                        }
                    }
                }
            }
        }
    }
}
