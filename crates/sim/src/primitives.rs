//! Furniture built from boxes, cylinders and ellipsoids: the hermetic stand-in when no furniture catalog is
//! installed (tests, CI, machines without the Debian package) and for classes the catalog lacks.
//!
//! Each class gets a shape a viewer (or a VLM) can name — a bed has a headboard and pillows, a chair a
//! back, a TV a dark screen on a foot — and plausible diffuse colours. Models are in the same local frame
//! as catalog models (see [`crate::catalog`]): z up, the front towards -y, bounds exactly the requested
//! size, centred on x and y, bottom at z = 0. Parts are laid out in metres from the requested size (leg
//! and panel thicknesses stay realistic when a piece is stretched), and the result is fitted to the size
//! exactly at the end. Faces are wound counter-clockwise seen from outside and carry planar texture
//! coordinates in metres, so a renderer may add a procedural texture later.

use gst_core::ObjectClass;

use crate::catalog::fit_to_size;
use crate::mesh::{Material, TriangleMesh};

/// Smallest side accepted by [`primitive_model`]; smaller (or non-finite) sizes are raised to it.
pub const MIN_SIDE_M: f64 = 0.01;

/// Segments around cylinders and ellipsoids: round enough at room scale, cheap to draw.
const ROUND_SEGMENTS: usize = 16;

/// Typical width (x), depth (y) and height (z) of a class in metres, used when no catalog model gives a
/// size. Width is along the front: a bathtub is placed with its long side against a wall.
pub fn nominal_size_m(class: ObjectClass) -> [f64; 3] {
    use ObjectClass as C;
    match class {
        C::Bed => [1.6, 2.1, 1.0],
        C::Nightstand => [0.5, 0.4, 0.55],
        C::Wardrobe => [1.2, 0.6, 2.0],
        C::Dresser => [1.0, 0.5, 0.85],
        C::Sofa => [2.0, 0.9, 0.85],
        C::Armchair => [0.85, 0.85, 0.85],
        C::CoffeeTable => [1.1, 0.6, 0.45],
        C::TvStand => [1.5, 0.45, 0.5],
        C::Television => [1.1, 0.25, 0.7],
        C::Bookshelf => [0.9, 0.35, 1.9],
        C::DiningTable => [1.6, 0.9, 0.75],
        C::Chair => [0.45, 0.5, 0.9],
        C::Desk => [1.3, 0.65, 0.75],
        C::OfficeChair => [0.65, 0.65, 1.05],
        C::Refrigerator => [0.7, 0.7, 1.8],
        C::Stove => [0.6, 0.6, 0.9],
        C::KitchenCabinet => [0.6, 0.6, 0.9],
        C::Sink => [0.8, 0.6, 1.1],
        C::Dishwasher => [0.6, 0.6, 0.85],
        C::Toilet => [0.4, 0.7, 0.8],
        C::Bathtub => [1.7, 0.75, 0.6],
        C::Shower => [0.9, 0.9, 2.0],
        C::Washbasin => [0.6, 0.45, 0.9],
        C::WashingMachine => [0.6, 0.6, 0.85],
        C::Plant => [0.5, 0.5, 1.0],
        C::FloorLamp => [0.4, 0.4, 1.6],
        C::Piano => [1.5, 0.6, 1.25],
        C::Bench => [1.2, 0.4, 0.45],
        C::Cabinet => [0.8, 0.45, 1.0],
        C::Shelf => [0.8, 0.35, 0.8],
        C::Fireplace => [1.4, 0.45, 1.1],
        C::Computer => [0.55, 0.3, 0.45],
    }
}

/// A recognisable box-and-cylinder model of `class` whose bounds are exactly `size_m` (width, depth,
/// height in metres) in the furniture local frame.
pub fn primitive_model(class: ObjectClass, size_m: [f64; 3]) -> TriangleMesh {
    let size = size_m.map(|s| if s.is_finite() { s.max(MIN_SIDE_M) } else { MIN_SIDE_M });
    let mut b = Builder::new(size);
    build(class, &mut b);
    let mut mesh = b.mesh;
    fit_to_size(&mut mesh, size);
    mesh
}

// Palette (linear diffuse, [0, 1]).
const WOOD: [f32; 3] = [0.55, 0.36, 0.2];
const DARK_WOOD: [f32; 3] = [0.3, 0.18, 0.1];
const LIGHT_WOOD: [f32; 3] = [0.76, 0.6, 0.42];
const WHITE: [f32; 3] = [0.92, 0.92, 0.9];
const CERAMIC: [f32; 3] = [0.95, 0.95, 0.97];
const LINEN: [f32; 3] = [0.9, 0.88, 0.82];
const BLACK: [f32; 3] = [0.06, 0.06, 0.07];
const SCREEN: [f32; 3] = [0.1, 0.12, 0.16];
const STEEL: [f32; 3] = [0.7, 0.72, 0.74];
const DARK_GREY: [f32; 3] = [0.25, 0.25, 0.27];
const GLASS: [f32; 3] = [0.75, 0.85, 0.9];
const LEAF: [f32; 3] = [0.2, 0.5, 0.18];
const TERRACOTTA: [f32; 3] = [0.7, 0.35, 0.22];
const FABRIC_BLUE: [f32; 3] = [0.25, 0.35, 0.6];
const FABRIC_GREY: [f32; 3] = [0.45, 0.45, 0.48];
const CUSHION_GREY: [f32; 3] = [0.58, 0.58, 0.6];
const FABRIC_RED: [f32; 3] = [0.6, 0.2, 0.18];
const CUSHION_RED: [f32; 3] = [0.72, 0.3, 0.26];
const FABRIC_GREEN: [f32; 3] = [0.35, 0.45, 0.3];
const LAMPSHADE: [f32; 3] = [0.95, 0.9, 0.75];
const BRICK: [f32; 3] = [0.6, 0.3, 0.22];
const STONE: [f32; 3] = [0.75, 0.72, 0.66];
const FIRE: [f32; 3] = [0.9, 0.45, 0.1];

/// Axis of a cylinder.
#[derive(Clone, Copy, Debug)]
enum Axis {
    Y,
    Z,
}

/// Accumulates parts into one mesh, with one material per distinct colour.
struct Builder {
    mesh: TriangleMesh,
    /// Half width, half depth, height: the parts' frame is x ∈ [-hw, hw], y ∈ [-hd, hd], z ∈ [0, h].
    hw: f64,
    hd: f64,
    h: f64,
}

impl Builder {
    fn new(size: [f64; 3]) -> Self {
        Self { mesh: TriangleMesh::default(), hw: size[0] / 2.0, hd: size[1] / 2.0, h: size[2] }
    }

    fn material(&mut self, colour: [f32; 3]) -> u16 {
        if let Some(index) = self.mesh.materials.iter().position(|m| m.diffuse == colour) {
            return index as u16;
        }
        let name = format!("primitive-{}", self.mesh.materials.len());
        self.mesh.materials.push(Material::plain(&name, colour));
        (self.mesh.materials.len() - 1) as u16
    }

    fn vertex(&mut self, p: [f64; 3], uv: [f64; 2]) -> u32 {
        self.mesh.positions.push(p.map(|c| c as f32));
        self.mesh.uvs.push(uv.map(|c| c as f32));
        (self.mesh.positions.len() - 1) as u32
    }

    fn triangle(&mut self, t: [u32; 3], material: u16) {
        self.mesh.triangles.push(t);
        self.mesh.triangle_materials.push(material);
    }

    /// An axis-aligned box; corners are ordered per axis, whatever order they come in.
    fn cuboid(&mut self, a: [f64; 3], b: [f64; 3], colour: [f32; 3]) {
        let lo: [f64; 3] = std::array::from_fn(|i| a[i].min(b[i]));
        let hi: [f64; 3] = std::array::from_fn(|i| a[i].max(b[i]));
        let material = self.material(colour);
        // Each face: the fixed axis, its side, and two in-plane axes (u, v) with u x v = outward normal.
        for (axis, positive) in [(0, false), (0, true), (1, false), (1, true), (2, false), (2, true)] {
            let (u, v) = match (axis, positive) {
                (0, true) => (1, 2),
                (0, false) => (2, 1),
                (1, true) => (2, 0),
                (1, false) => (0, 2),
                (_, true) => (0, 1),
                (_, false) => (1, 0),
            };
            let fixed = if positive { hi[axis] } else { lo[axis] };
            let corners = [(lo[u], lo[v]), (hi[u], lo[v]), (hi[u], hi[v]), (lo[u], hi[v])];
            let indices = corners.map(|(cu, cv)| {
                let mut p = [0.0; 3];
                p[axis] = fixed;
                p[u] = cu;
                p[v] = cv;
                self.vertex(p, [cu, cv])
            });
            self.triangle([indices[0], indices[1], indices[2]], material);
            self.triangle([indices[0], indices[2], indices[3]], material);
        }
    }

    /// A capped cylinder (or frustum) along `axis` from `from` to `to` (coordinates along the axis), centred
    /// at `centre` (the two other coordinates, in x, y, z order), with radii at both ends.
    fn cylinder(
        &mut self,
        axis: Axis,
        centre: [f64; 2],
        from: f64,
        to: f64,
        radius_from: f64,
        radius_to: f64,
        colour: [f32; 3],
    ) {
        let material = self.material(colour);
        let (a, u, v) = match axis {
            Axis::Y => (1, 2, 0),
            Axis::Z => (2, 0, 1),
        };
        let point = |along: f64, radius: f64, angle: f64| {
            let mut p = [0.0; 3];
            p[a] = along;
            p[u] = centre[usize::from(u > v)] + radius * angle.cos();
            p[v] = centre[usize::from(v > u)] + radius * angle.sin();
            p
        };
        let (lo, hi, r_lo, r_hi) =
            if from <= to { (from, to, radius_from, radius_to) } else { (to, from, radius_to, radius_from) };
        let n = ROUND_SEGMENTS;
        let mut bottom = Vec::with_capacity(n);
        let mut top = Vec::with_capacity(n);
        for k in 0..n {
            let angle = std::f64::consts::TAU * k as f64 / n as f64;
            let s = k as f64 / n as f64;
            bottom.push(self.vertex(point(lo, r_lo, angle), [s, lo]));
            top.push(self.vertex(point(hi, r_hi, angle), [s, hi]));
        }
        let bottom_centre = self.vertex(point(lo, 0.0, 0.0), [0.0, lo]);
        let top_centre = self.vertex(point(hi, 0.0, 0.0), [0.0, hi]);
        for k in 0..n {
            let next = (k + 1) % n;
            // (u, v, a) is right-handed, so increasing angle runs counter-clockwise seen from +a.
            self.triangle([bottom[k], bottom[next], top[next]], material);
            self.triangle([bottom[k], top[next], top[k]], material);
            self.triangle([top_centre, top[k], top[next]], material);
            self.triangle([bottom_centre, bottom[next], bottom[k]], material);
        }
    }

    /// A vertical cylinder standing on `z0` up to `z1`.
    fn post(&mut self, x: f64, y: f64, z0: f64, z1: f64, radius: f64, colour: [f32; 3]) {
        self.cylinder(Axis::Z, [x, y], z0, z1, radius, radius, colour);
    }

    /// An axis-aligned ellipsoid.
    fn ellipsoid(&mut self, centre: [f64; 3], radii: [f64; 3], colour: [f32; 3]) {
        let material = self.material(colour);
        let rings = ROUND_SEGMENTS / 2;
        let segments = ROUND_SEGMENTS;
        let first = self.mesh.positions.len() as u32;
        for ring in 0..=rings {
            let theta = std::f64::consts::PI * ring as f64 / rings as f64;
            for segment in 0..segments {
                let phi = std::f64::consts::TAU * segment as f64 / segments as f64;
                let p = [
                    centre[0] + radii[0] * theta.sin() * phi.cos(),
                    centre[1] + radii[1] * theta.sin() * phi.sin(),
                    centre[2] + radii[2] * theta.cos(),
                ];
                self.vertex(p, [segment as f64 / segments as f64, ring as f64 / rings as f64]);
            }
        }
        let segments = segments as u32;
        for ring in 0..rings as u32 {
            for segment in 0..segments {
                let a = first + ring * segments + segment;
                let b = first + ring * segments + (segment + 1) % segments;
                let (c, d) = (a + segments, b + segments);
                if ring > 0 {
                    self.triangle([a, c, b], material);
                }
                if ring + 1 < rings as u32 {
                    self.triangle([b, c, d], material);
                }
            }
        }
    }

    /// Four legs of side (or diameter) `thickness` at the corners of the footprint inset by `inset`.
    fn legs(&mut self, inset: f64, thickness: f64, height: f64, colour: [f32; 3]) {
        let (hw, hd) = (self.hw, self.hd);
        for (sx, sy) in [(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)] {
            let x = sx * (hw - inset - thickness / 2.0);
            let y = sy * (hd - inset - thickness / 2.0);
            let t = thickness / 2.0;
            self.cuboid([x - t, y - t, 0.0], [x + t, y + t, height], colour);
        }
    }

    /// A thin dark strip on the front face (y = -hd) for door gaps, drawer lines and handles.
    fn front_strip(&mut self, x0: f64, x1: f64, z0: f64, z1: f64, colour: [f32; 3]) {
        let proud = (0.01f64).min(self.hd * 0.05);
        self.cuboid([x0, -self.hd, z0], [x1, -self.hd + proud, z1], colour);
    }

    /// A cabinet body with doors (`doors` side by side) or drawers (`drawers` stacked) drawn on its front
    /// as dark gaps and handles, set back by the strip depth so that the front is the bounds' front.
    fn cabinet(&mut self, z0: f64, z1: f64, doors: usize, drawers: usize, body: [f32; 3], lines: [f32; 3]) {
        let (hw, hd) = (self.hw, self.hd);
        let proud = (0.01f64).min(hd * 0.05);
        self.cuboid([-hw, -hd + proud, z0], [hw, hd, z1], body);
        let gap = 0.006f64.min(hw * 0.05);
        let handle = 0.012f64.min(hw * 0.1);
        if doors > 1 {
            for k in 1..doors {
                let x = -hw + 2.0 * hw * k as f64 / doors as f64;
                self.front_strip(x - gap, x + gap, z0 + 0.01, z1 - 0.01, lines);
            }
        }
        if doors > 0 {
            for k in 0..doors {
                let left = -hw + 2.0 * hw * k as f64 / doors as f64;
                let right = left + 2.0 * hw / doors as f64;
                // Handles next to the meeting edge of each door pair (or the right edge of a single door).
                let x = if doors == 1 || k % 2 == 1 {
                    left + 0.06f64.min(hw * 0.2)
                } else {
                    right - 0.06f64.min(hw * 0.2)
                };
                let zc = z0 + (z1 - z0) * 0.55;
                let half = (0.08f64).min((z1 - z0) * 0.15);
                self.front_strip(x - handle, x + handle, zc - half, zc + half, lines);
            }
        }
        for k in 1..=drawers {
            let z = z0 + (z1 - z0) * k as f64 / (drawers + 1) as f64;
            self.front_strip(-hw + 0.01, hw - 0.01, z - gap, z + gap, lines);
            let zc = z + (z1 - z0) / (drawers + 1) as f64 * 0.5;
            let half_width = (0.08f64).min(hw * 0.3);
            self.front_strip(-half_width, half_width, zc - handle, zc + handle, lines);
        }
    }

    /// Appends a mesh built by another builder, merging materials of equal colour.
    fn append(&mut self, mesh: &TriangleMesh) {
        let remap: Vec<u16> = mesh.materials.iter().map(|m| self.material(m.diffuse)).collect();
        let offset = self.mesh.positions.len() as u32;
        self.mesh.positions.extend_from_slice(&mesh.positions);
        self.mesh.uvs.extend_from_slice(&mesh.uvs);
        self.mesh.triangles.extend(mesh.triangles.iter().map(|t| t.map(|v| v + offset)));
        self.mesh.triangle_materials.extend(mesh.triangle_materials.iter().map(|&m| remap[m as usize]));
    }
}

/// Lays out the parts of one class in the builder's box.
fn build(class: ObjectClass, b: &mut Builder) {
    use ObjectClass as C;
    let (hw, hd, h) = (b.hw, b.hd, b.h);
    match class {
        C::Bed => {
            let head = 0.06f64.min(hd * 0.1);
            let base_top = 0.28f64.min(0.3 * h);
            let mattress_top = (base_top + 0.22).min(0.6 * h);
            b.cuboid([-hw, -hd, 0.0], [hw, hd - head, base_top], WOOD);
            b.cuboid([-hw + 0.02, -hd + 0.02, base_top], [hw - 0.02, hd - head, mattress_top], LINEN);
            // Blanket over the front two thirds, slightly proud of the mattress.
            let blanket_top = mattress_top + 0.02f64.min(0.05 * h);
            b.cuboid(
                [-hw + 0.01, -hd + 0.01, base_top + 0.05],
                [hw - 0.01, -hd + 1.3 * hd, blanket_top],
                FABRIC_BLUE,
            );
            let pillows = if hw > 0.55 { 2 } else { 1 };
            let pillow_width = 2.0 * hw / pillows as f64;
            for k in 0..pillows {
                let cx = -hw + pillow_width * (k as f64 + 0.5);
                b.ellipsoid(
                    [cx, hd - head - 0.25f64.min(0.15 * hd), mattress_top + 0.04f64.min(0.05 * h)],
                    [pillow_width * 0.4, 0.18f64.min(0.12 * hd), 0.06f64.min(0.07 * h)],
                    WHITE,
                );
            }
            b.cuboid([-hw, hd - head, 0.0], [hw, hd, h], DARK_WOOD);
        }
        C::Nightstand => {
            b.legs(0.0, 0.04f64.min(hw * 0.2), 0.1 * h, DARK_WOOD);
            b.cabinet(0.1 * h, h, 0, 2, WOOD, DARK_WOOD);
        }
        C::Wardrobe => {
            b.cuboid([-hw, -hd, 0.0], [hw, hd, 0.06f64.min(0.05 * h)], DARK_WOOD);
            b.cabinet(0.06f64.min(0.05 * h), h, 2, 0, LIGHT_WOOD, DARK_WOOD);
        }
        C::Dresser => {
            b.legs(0.0, 0.05f64.min(hw * 0.15), 0.1 * h, DARK_WOOD);
            b.cabinet(0.1 * h, h, 0, 3, WOOD, DARK_WOOD);
        }
        C::Sofa | C::Armchair => {
            // Cushions a shade lighter than the frame, so that seat and back read apart from the front.
            let (fabric, cushion) =
                if class == C::Sofa { (FABRIC_GREY, CUSHION_GREY) } else { (FABRIC_RED, CUSHION_RED) };
            let arm = 0.18f64.min(hw * 0.25);
            let back = 0.22f64.min(hd * 0.35);
            let seat = 0.45 * h;
            let feet = 0.06f64.min(0.1 * h);
            b.legs(0.03f64.min(hw * 0.1), 0.05f64.min(hw * 0.1), feet, DARK_WOOD);
            b.cuboid([-hw, -hd, feet], [hw, hd, seat - 0.12 * h], fabric);
            // Seat cushions.
            let cushions =
                if class == C::Sofa { ((2.0 * (hw - arm)) / 0.6).round().max(1.0) as usize } else { 1 };
            let width = 2.0 * (hw - arm) / cushions as f64;
            for k in 0..cushions {
                let x0 = -hw + arm + width * k as f64;
                b.cuboid([x0 + 0.005, -hd, seat - 0.12 * h], [x0 + width - 0.005, hd - back, seat], cushion);
                let lean = 0.12f64.min(0.2 * hd);
                b.cuboid(
                    [x0 + 0.005, hd - back - lean, seat],
                    [x0 + width - 0.005, hd - back, 0.9 * h],
                    cushion,
                );
            }
            b.cuboid([-hw, hd - back, feet], [hw, hd, h], fabric);
            for side in [-1.0, 1.0] {
                let x_out = side * hw;
                let x_in = side * (hw - arm);
                b.cuboid([x_out, -hd, feet], [x_in, hd - back, 0.68 * h], fabric);
            }
        }
        C::CoffeeTable | C::DiningTable | C::Desk => {
            let top = 0.035f64.min(0.1 * h);
            let colour = if class == C::Desk { LIGHT_WOOD } else { WOOD };
            b.cuboid([-hw, -hd, h - top], [hw, hd, h], colour);
            let leg = 0.05f64.min(hw * 0.15).min(hd * 0.3);
            b.legs(0.03f64.min(hw * 0.1), leg, h - top, DARK_WOOD);
            if class == C::Desk {
                // A drawer pedestal under the right half.
                let pedestal = 0.4f64.min(hw * 0.7);
                let mut drawers = Builder::new([pedestal, 2.0 * hd * 0.95, h - top]);
                drawers.cabinet(0.0, h - top, 0, 3, colour, DARK_WOOD);
                let offset = (hw - pedestal / 2.0 - 0.02f64.min(hw * 0.05)) as f32;
                drawers.mesh.transform_positions(|p| [p[0] + offset, p[1], p[2]]);
                b.append(&drawers.mesh);
            }
            if class == C::CoffeeTable {
                b.cuboid(
                    [-hw + leg, -hd + leg, 0.1 * h],
                    [hw - leg, hd - leg, 0.1 * h + top * 0.6],
                    DARK_WOOD,
                );
            }
        }
        C::TvStand => {
            b.legs(0.02f64.min(hw * 0.05), 0.04f64.min(hw * 0.1), 0.12 * h, BLACK);
            b.cabinet(0.12 * h, h, 2, 0, DARK_WOOD, BLACK);
        }
        C::Television => {
            let panel = 0.05f64.min(hd * 0.4);
            let foot = 0.12 * h;
            // Screen on the front, dark frame behind.
            b.cuboid([-hw, -panel / 2.0, foot], [hw, panel / 2.0, h], BLACK);
            b.cuboid(
                [-hw + 0.02, -panel / 2.0 - 0.003, foot + 0.02],
                [hw - 0.02, -panel / 2.0, h - 0.02],
                SCREEN,
            );
            b.cuboid(
                [-0.04f64.min(hw * 0.2), -panel / 2.0, 0.02f64.min(foot)],
                [0.04f64.min(hw * 0.2), panel / 2.0, foot],
                DARK_GREY,
            );
            b.cuboid([-hw * 0.35, -hd, 0.0], [hw * 0.35, hd, 0.02f64.min(foot)], DARK_GREY);
        }
        C::Bookshelf | C::Shelf => {
            let board = 0.02f64.min(hw * 0.1).min(0.1 * h);
            let colour = if class == C::Bookshelf { WOOD } else { WHITE };
            b.cuboid([-hw, -hd, 0.0], [-hw + board, hd, h], colour);
            b.cuboid([hw - board, -hd, 0.0], [hw, hd, h], colour);
            b.cuboid([-hw, hd - board.min(hd * 0.2), 0.0], [hw, hd, h], colour);
            let shelves = ((h / 0.35).round() as usize).max(2);
            let pitch = (h - board) / shelves as f64;
            let book_colours = [FABRIC_RED, FABRIC_BLUE, FABRIC_GREEN, LINEN, DARK_GREY];
            for k in 0..=shelves {
                let z = k as f64 * pitch;
                b.cuboid([-hw + board, -hd, z], [hw - board, hd - board, z + board], colour);
                if k < shelves && class == C::Bookshelf {
                    // A row of books on every shelf, heights and colours varying deterministically.
                    let inner = 2.0 * (hw - board);
                    let books = ((inner / 0.04) as usize).clamp(1, 40);
                    let book_width = inner * 0.7 / books as f64;
                    for n in 0..books {
                        let x = -hw + board + n as f64 * book_width;
                        let height = (pitch - board) * (0.65 + 0.25 * ((n * 7 + k * 3) % 5) as f64 / 4.0);
                        b.cuboid(
                            [x, -hd + 0.03f64.min(hd * 0.2), z + board],
                            [x + book_width * 0.95, hd - board, z + board + height],
                            book_colours[(n + k) % book_colours.len()],
                        );
                    }
                }
            }
            if class == C::Shelf {
                // Doors on the bottom compartment.
                b.front_strip(-hw + board, hw - board, board, pitch, LIGHT_WOOD);
            }
        }
        C::Chair | C::OfficeChair => {
            let seat = 0.46f64.min(0.5 * h);
            let thick = 0.05f64.min(0.08 * h);
            let back = 0.05f64.min(hd * 0.15);
            if class == C::Chair {
                b.legs(0.0, 0.04f64.min(hw * 0.15), seat - thick, WOOD);
                b.cuboid([-hw, -hd, seat - thick], [hw, hd, seat], WOOD);
                b.cuboid([-hw, hd - back, seat], [hw, hd, h], WOOD);
                b.cuboid(
                    [-hw + 0.05f64.min(hw * 0.2), hd - back - 0.005, seat + 0.3 * (h - seat)],
                    [hw - 0.05f64.min(hw * 0.2), hd - back, 0.8 * h],
                    DARK_WOOD,
                );
            } else {
                // Five-star base (two crossed bars and a front one), gas lift, seat, back and arm rests.
                let foot = 0.05f64.min(0.06 * h);
                b.cuboid([-hw, -0.025, 0.0], [hw, 0.025, foot], BLACK);
                b.cuboid([-0.025, -hd, 0.0], [0.025, hd, foot], BLACK);
                b.post(0.0, 0.0, foot, seat - thick, 0.025f64.min(hw * 0.1), STEEL);
                b.cuboid([-hw * 0.8, -hd * 0.85, seat - thick], [hw * 0.8, hd * 0.7, seat], BLACK);
                b.cuboid([-hw * 0.75, hd * 0.7, seat - thick], [hw * 0.75, hd * 0.7 + back, h], BLACK);
                for side in [-1.0, 1.0] {
                    b.cuboid(
                        [side * hw * 0.8, -hd * 0.5, seat],
                        [side * hw, hd * 0.4, seat + 0.22 * (h - seat)],
                        DARK_GREY,
                    );
                    b.cuboid(
                        [side * hw * 0.85, -hd * 0.2, seat],
                        [side * hw * 0.95, hd * 0.2, seat + 0.2 * (h - seat)],
                        DARK_GREY,
                    );
                }
                b.cuboid([-hw * 0.6, hd - back, seat], [hw * 0.6, hd, seat + 0.1], BLACK);
            }
        }
        C::Refrigerator => {
            b.cabinet(0.0, h, 0, 0, WHITE, DARK_GREY);
            let split = 0.62 * h;
            b.front_strip(-hw, hw, split - 0.005, split + 0.005, DARK_GREY);
            let x = hw - 0.06f64.min(hw * 0.2);
            b.front_strip(x - 0.012, x + 0.012, split + 0.05, split + 0.35 * (h - split), STEEL);
            b.front_strip(x - 0.012, x + 0.012, split - 0.3 * split, split - 0.05, STEEL);
        }
        C::Stove => {
            let top = 0.03f64.min(0.05 * h);
            b.cabinet(0.0, h - top, 0, 0, WHITE, DARK_GREY);
            b.cuboid([-hw, -hd, h - top], [hw, hd, h - top / 2.0], BLACK);
            for (sx, sy) in [(-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)] {
                b.post(sx * hw, sy * hd, h - top / 2.0, h, 0.09f64.min(hw * 0.35), DARK_GREY);
            }
            // Oven door window and control knobs.
            b.front_strip(-hw * 0.75, hw * 0.75, 0.25 * h, 0.6 * h, SCREEN);
            for k in 0..4 {
                let x = -hw * 0.6 + hw * 1.2 * k as f64 / 3.0;
                b.front_strip(x - 0.015, x + 0.015, 0.78 * h, 0.82 * h, BLACK);
            }
        }
        C::KitchenCabinet | C::Dishwasher | C::WashingMachine => {
            let top = 0.04f64.min(0.06 * h);
            let plinth = 0.1f64.min(0.12 * h);
            let body = if class == C::KitchenCabinet { WHITE } else { CERAMIC };
            b.cuboid([-hw + 0.01, -hd + 0.05f64.min(hd * 0.2), 0.0], [hw - 0.01, hd, plinth], DARK_GREY);
            match class {
                C::KitchenCabinet => {
                    b.cuboid([-hw, -hd, h - top], [hw, hd, h], STONE);
                    // Two doors under a drawer.
                    let drawer = h - top - 0.15f64.min(0.2 * (h - top - plinth));
                    b.cabinet(plinth, drawer, 2, 0, body, DARK_GREY);
                    b.cabinet(drawer, h - top, 0, 0, body, DARK_GREY);
                    b.front_strip(-hw, hw, drawer, drawer + 0.006f64.min(0.01 * h), DARK_GREY);
                    let handle_z = (drawer + h - top) / 2.0;
                    let half = 0.08f64.min(hw * 0.3);
                    b.front_strip(-half, half, handle_z - 0.01, handle_z + 0.01, DARK_GREY);
                }
                C::Dishwasher => {
                    b.cabinet(plinth, h, 0, 0, body, DARK_GREY);
                    b.front_strip(-hw, hw, h - 0.1f64.min(0.15 * h), h, DARK_GREY);
                    b.front_strip(
                        -hw * 0.3,
                        hw * 0.3,
                        h - 0.2f64.min(0.3 * h),
                        h - 0.17f64.min(0.25 * h),
                        STEEL,
                    );
                }
                _ => {
                    // Washing machine: a round door with a glass porthole and a control panel.
                    b.cabinet(plinth, h, 0, 0, body, DARK_GREY);
                    let r = 0.2f64.min(hw * 0.7).min((h - plinth) * 0.3);
                    let zc = plinth + (h - plinth) * 0.45;
                    let door = -hd + 0.02f64.min(hd * 0.1);
                    b.cylinder(Axis::Y, [0.0, zc], -hd, door, r, r, DARK_GREY);
                    b.cylinder(Axis::Y, [0.0, zc], -hd - 0.001, door, r * 0.75, r * 0.75, GLASS);
                    b.front_strip(-hw, hw, h - 0.12f64.min(0.15 * h), h - 0.02f64.min(0.02 * h), STEEL);
                }
            }
        }
        C::Sink => {
            let counter = 0.85f64.min(0.8 * h);
            let top = 0.04f64.min(0.05 * h);
            b.cabinet(0.0, counter - top, 2, 0, WHITE, DARK_GREY);
            b.cuboid([-hw, -hd, counter - top], [hw, hd, counter], STONE);
            b.cuboid([-hw * 0.6, -hd * 0.7, counter], [hw * 0.6, hd * 0.4, counter + 0.01], STEEL);
            // Faucet: post and spout at the back.
            b.post(0.0, hd * 0.65, counter, h, 0.02f64.min(hw * 0.1), STEEL);
            b.cuboid([-0.015, hd * 0.1, h - 0.03f64.min(0.2 * (h - counter))], [0.015, hd * 0.65, h], STEEL);
        }
        C::Toilet => {
            // Pedestal and bowl in front, seat on the bowl, cistern against the wall (+y).
            let tank = 0.2f64.min(hd * 0.5);
            let bowl_top = 0.42f64.min(0.55 * h);
            let bowl_length = 2.0 * hd - tank;
            let bowl_y = -hd + bowl_length / 2.0;
            b.cylinder(
                Axis::Z,
                [0.0, bowl_y + 0.1 * bowl_length],
                0.0,
                0.7 * bowl_top,
                hw * 0.45,
                hw * 0.6,
                CERAMIC,
            );
            b.ellipsoid(
                [0.0, bowl_y, 0.75 * bowl_top],
                [hw * 0.95, bowl_length / 2.0, 0.25 * bowl_top],
                CERAMIC,
            );
            let seat = 0.02f64.min(0.05 * h);
            b.cuboid(
                [-hw * 0.85, -hd + 0.03f64.min(0.1 * hd), bowl_top],
                [hw * 0.85, hd - tank, bowl_top + seat],
                WHITE,
            );
            b.cuboid([-hw, hd - tank, 0.6 * bowl_top], [hw, hd, h], CERAMIC);
        }
        C::Bathtub => {
            let wall = 0.06f64.min(hw * 0.1).min(hd * 0.2);
            b.cuboid([-hw, -hd, 0.0], [hw, hd, 0.1 * h], CERAMIC);
            b.cuboid([-hw, -hd, 0.0], [hw, -hd + wall, h], CERAMIC);
            b.cuboid([-hw, hd - wall, 0.0], [hw, hd, h], CERAMIC);
            b.cuboid([-hw, -hd, 0.0], [-hw + wall, hd, h], CERAMIC);
            b.cuboid([hw - wall, -hd, 0.0], [hw, hd, h], CERAMIC);
            // Water, and a spout on the back rim.
            b.cuboid([-hw + wall, -hd + wall, 0.1 * h], [hw - wall, hd - wall, 0.3 * h], GLASS);
            b.cuboid(
                [hw - 4.0 * wall, hd - wall, 0.8 * h],
                [hw - 3.0 * wall, hd - 2.0 * wall, 0.9 * h],
                STEEL,
            );
        }
        C::Shower => {
            let tray = 0.06f64.min(0.05 * h);
            let glass = 0.01f64.min(hw * 0.05);
            b.cuboid([-hw, -hd, 0.0], [hw, hd, tray], CERAMIC);
            b.cuboid([-hw, -hd, tray], [hw, -hd + glass, h], GLASS);
            b.cuboid([-hw, -hd, tray], [-hw + glass, hd, h], GLASS);
            for (x, y) in [(-hw, -hd), (hw - glass * 2.0, -hd)] {
                b.cuboid([x, y, tray], [x + glass * 2.0, y + glass * 2.0, h], STEEL);
            }
            // Riser pipe and head on the back wall.
            b.post(hw * 0.5, hd - 0.03f64.min(hd * 0.1), tray, h * 0.95, 0.012f64.min(hw * 0.05), STEEL);
            b.cylinder(
                Axis::Z,
                [hw * 0.5, hd - 0.15f64.min(hd * 0.4)],
                h * 0.9,
                h * 0.92,
                0.1f64.min(hw * 0.2),
                0.1f64.min(hw * 0.2),
                STEEL,
            );
            b.cuboid(
                [hw * 0.5 - 0.01, hd - 0.15f64.min(hd * 0.4), h * 0.92],
                [hw * 0.5 + 0.01, hd, h * 0.94],
                STEEL,
            );
            b.cuboid([hw - glass, hd - glass, tray], [hw, hd, h], GLASS);
        }
        C::Washbasin => {
            let basin = 0.16f64.min(0.25 * h);
            let rim = 0.8f64.min(0.88 * h);
            b.cylinder(Axis::Z, [0.0, hd * 0.2], 0.0, rim - basin, hw * 0.25, hw * 0.3, CERAMIC);
            b.ellipsoid([0.0, 0.0, rim - basin * 0.5], [hw, hd, basin * 0.5], CERAMIC);
            b.cuboid([-hw * 0.8, -hd * 0.7, rim - 0.02], [hw * 0.8, hd * 0.6, rim], WHITE);
            b.post(0.0, hd * 0.8, rim - basin * 0.5, h, 0.015f64.min(hw * 0.1), STEEL);
            b.cuboid([-0.01, hd * 0.4, h - 0.02f64.min(0.1 * h)], [0.01, hd * 0.8, h], STEEL);
        }
        C::Plant => {
            let pot = 0.3 * h;
            let r = hw.min(hd);
            b.cylinder(Axis::Z, [0.0, 0.0], 0.0, pot, r * 0.45, r * 0.6, TERRACOTTA);
            b.post(0.0, 0.0, pot, 0.6 * h, 0.015f64.min(r * 0.1), DARK_WOOD);
            b.ellipsoid([0.0, 0.0, 0.62 * h], [hw, hd, 0.38 * h], LEAF);
            b.ellipsoid([hw * 0.3, -hd * 0.2, 0.5 * h], [hw * 0.6, hd * 0.6, 0.2 * h], LEAF);
        }
        C::FloorLamp => {
            let r = hw.min(hd);
            b.cylinder(Axis::Z, [0.0, 0.0], 0.0, 0.03f64.min(0.05 * h), r * 0.6, r * 0.6, DARK_GREY);
            b.post(0.0, 0.0, 0.0, 0.8 * h, 0.015f64.min(r * 0.1), STEEL);
            // The shade is a frustum of radius `r`: fitting stretches it to the depth if that differs.
            b.cylinder(Axis::Z, [0.0, 0.0], 0.75 * h, h, r, r * 0.65, LAMPSHADE);
        }
        C::Piano => {
            // Upright piano: case, protruding keyboard at the front, legs under the keyboard.
            let case = 0.6 * hd.min(1.0);
            let keys_z = 0.58f64.min(0.55 * h);
            b.cuboid([-hw, hd - 2.0 * case, 0.0], [hw, hd, h], BLACK);
            b.cuboid([-hw, -hd, keys_z], [hw, hd - 2.0 * case, keys_z + 0.1f64.min(0.1 * h)], BLACK);
            b.cuboid(
                [-hw * 0.9, -hd, keys_z + 0.1f64.min(0.1 * h)],
                [hw * 0.9, -hd + (2.0 * hd - 2.0 * case) * 0.8, keys_z + 0.12f64.min(0.12 * h)],
                WHITE,
            );
            for side in [-1.0, 1.0] {
                b.cuboid(
                    [side * hw, -hd, 0.0],
                    [side * (hw - 0.06f64.min(hw * 0.1)), -hd + 0.06f64.min(hd * 0.2), keys_z],
                    BLACK,
                );
            }
        }
        C::Bench => {
            let top = 0.05f64.min(0.15 * h);
            b.cuboid([-hw, -hd, h - top], [hw, hd, h], LIGHT_WOOD);
            for side in [-1.0, 1.0] {
                let x = side * (hw - 0.05f64.min(hw * 0.15));
                b.cuboid(
                    [x - 0.03f64.min(hw * 0.05), -hd * 0.9, 0.0],
                    [x + 0.03f64.min(hw * 0.05), hd * 0.9, h - top],
                    DARK_GREY,
                );
            }
        }
        C::Cabinet => {
            b.legs(0.02f64.min(hw * 0.05), 0.04f64.min(hw * 0.1), 0.08 * h, DARK_WOOD);
            b.cabinet(0.08 * h, h, 2, 0, LIGHT_WOOD, DARK_WOOD);
        }
        C::Fireplace => {
            let mantel = 0.08f64.min(0.1 * h);
            b.cuboid([-hw, -hd, h - mantel], [hw, hd, h], STONE);
            b.cuboid([-hw * 0.95, -hd * 0.7, 0.0], [hw * 0.95, hd, h - mantel], BRICK);
            b.cuboid([-hw * 0.95, -hd, 0.0], [hw * 0.95, -hd * 0.7, 0.05f64.min(0.1 * h)], STONE);
            b.cuboid([-hw * 0.5, -hd * 0.7 - 0.005, 0.1 * h], [hw * 0.5, -hd * 0.7, 0.65 * h], BLACK);
            b.ellipsoid([0.0, -hd * 0.6, 0.2 * h], [hw * 0.3, hd * 0.1, 0.1 * h], FIRE);
        }
        C::Computer => {
            // Monitor on a foot at the back, keyboard in front.
            let panel = 0.03f64.min(hd * 0.2);
            let y = hd * 0.4;
            b.cuboid([-hw, y - panel, 0.3 * h], [hw, y, h], BLACK);
            b.cuboid([-hw * 0.95, y - panel - 0.002, 0.33 * h], [hw * 0.95, y - panel, h * 0.97], SCREEN);
            b.cuboid([-0.03f64.min(hw * 0.1), y, 0.0], [0.03f64.min(hw * 0.1), y + 0.02, 0.3 * h], DARK_GREY);
            b.cuboid([-hw * 0.4, y - 0.05, 0.0], [hw * 0.4, hd, 0.015f64.min(0.05 * h)], DARK_GREY);
            b.cuboid(
                [-hw * 0.8, -hd, 0.0],
                [hw * 0.8, -hd + 0.15f64.min(hd * 0.6), 0.025f64.min(0.06 * h)],
                DARK_GREY,
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_non_empty_with_exact_bounds() {
        for &class in ObjectClass::ALL {
            for size in [nominal_size_m(class), [0.3, 1.7, 2.2], [2.5, 0.2, 0.4]] {
                let mesh = primitive_model(class, size);
                assert!(mesh.triangle_count() >= 12, "{class}");
                assert!(mesh.triangle_count() <= 2000, "{class}: {}", mesh.triangle_count());
                assert_eq!(mesh.uvs.len(), mesh.positions.len());
                assert_eq!(mesh.triangle_materials.len(), mesh.triangles.len());
                assert!(mesh.triangle_materials.iter().all(|&m| (m as usize) < mesh.materials.len()));
                assert!(mesh.triangles.iter().flatten().all(|&v| (v as usize) < mesh.positions.len()));
                assert!(mesh.materials.iter().all(|m| m.texture.is_none()));
                let (lo, hi) = mesh.bounds().expect("non-empty");
                for i in 0..3 {
                    let extent = f64::from(hi[i] - lo[i]);
                    assert!((extent - size[i]).abs() < 1e-4, "{class} axis {i}: {extent} vs {}", size[i]);
                }
                assert!(lo[2].abs() < 1e-6, "{class}: bottom at {}", lo[2]);
                assert!((lo[0] + hi[0]).abs() < 1e-4 && (lo[1] + hi[1]).abs() < 1e-4, "{class}: not centred");
            }
        }
    }

    #[test]
    fn every_class_has_more_than_one_colour_and_nominal_sizes_are_plausible() {
        for &class in ObjectClass::ALL {
            let mesh = primitive_model(class, nominal_size_m(class));
            assert!(mesh.materials.len() >= 2, "{class}");
            let size = nominal_size_m(class);
            assert!(size.iter().all(|&s| (0.1..=2.5).contains(&s)), "{class}: {size:?}");
        }
    }

    #[test]
    fn boxes_are_wound_outwards() {
        let mut b = Builder::new([2.0, 2.0, 2.0]);
        b.cuboid([-1.0, -1.0, 0.0], [1.0, 1.0, 2.0], WHITE);
        let centre = [0.0f32, 0.0, 1.0];
        for t in &b.mesh.triangles {
            let [a, p, q] = t.map(|v| b.mesh.positions[v as usize]);
            let e1 = [p[0] - a[0], p[1] - a[1], p[2] - a[2]];
            let e2 = [q[0] - a[0], q[1] - a[1], q[2] - a[2]];
            let n =
                [e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]];
            let out = [a[0] - centre[0], a[1] - centre[1], a[2] - centre[2]];
            assert!(n[0] * out[0] + n[1] * out[1] + n[2] * out[2] > 0.0, "{t:?}");
        }
    }

    #[test]
    fn degenerate_sizes_are_raised_to_the_minimum() {
        let mesh = primitive_model(ObjectClass::Chair, [0.0, f64::NAN, -1.0]);
        let (lo, hi) = mesh.bounds().expect("non-empty");
        for i in 0..3 {
            assert!((f64::from(hi[i] - lo[i]) - MIN_SIDE_M).abs() < 1e-5);
        }
    }
}
