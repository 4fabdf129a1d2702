//! Furniture placement: groups by room type (bed + nightstands, sofa + coffee table + TV, table + chairs),
//! against walls or around a centre, on a 5 cm occupancy grid per room that keeps door approaches free and
//! every door reachable by a walker of [`FurnishConfig::walker_radius_m`].
//!
//! Yaws are multiples of 90°, so footprints are axis-aligned: a furniture model's local frame has its front
//! towards -y, and yaw 0 places an item against a wall on the room's +y side.

use std::f64::consts::{FRAC_PI_2, PI};

use nalgebra::Vector3;
use rand::Rng;
use serde::{Deserialize, Serialize};

use gst_core::{InstanceId, ObjectClass, OrientedBox3, Pose3, RoomType};

use crate::SimError;
use crate::library::{FurnitureLibrary, ModelSplit};
use crate::plan::{Axis, Plan, Rect};

/// One placed piece of furniture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneInstance {
    pub id: InstanceId,
    pub class: ObjectClass,
    /// The model's name, for example "Oak chair".
    pub name: String,
    /// The library key of the model ("catalog:oakChair" or "primitive:chair").
    pub model: String,
    /// Index of the room it stands in.
    pub room: usize,
    /// Heading of the model's front, radians; 0 = the front faces -y.
    pub yaw: f64,
    /// Height of the model's bottom above the floor (non-zero for a TV on a stand), metres.
    pub elevation_m: f64,
    pub bbox: OrientedBox3,
}

impl SceneInstance {
    /// The transform from the model's local frame (bottom centre origin) to the world.
    pub fn world_from_model(&self) -> Pose3 {
        let c = self.bbox.center();
        let rotation = nalgebra::UnitQuaternion::from_axis_angle(&Vector3::z_axis(), self.yaw);
        Pose3::from_parts(Vector3::new(c.x, c.y, self.elevation_m), rotation)
    }

    /// The axis-aligned footprint on the floor (yaws are multiples of 90°).
    pub fn footprint(&self) -> Rect {
        let c = self.bbox.center();
        let [w, d, _] = self.bbox.size_m;
        let (hx, hy) = if quarter_turns(self.yaw) % 2 == 0 { (w / 2.0, d / 2.0) } else { (d / 2.0, w / 2.0) };
        Rect::new(c.x - hx, c.y - hy, c.x + hx, c.y + hy)
    }

    pub fn instance(&self) -> gst_core::Instance {
        gst_core::Instance { id: self.id, class: self.class, name: self.name.clone(), bbox: self.bbox }
    }
}

fn quarter_turns(yaw: f64) -> i64 {
    (yaw / FRAC_PI_2).round() as i64 % 4
}

/// Settings of furniture placement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FurnishConfig {
    /// Scales the probability of every optional item (0 = only the essentials, 1 = the usual amount).
    pub density: f64,
    /// Radius of the walker that must reach every door of a room, metres.
    pub walker_radius_m: f64,
    /// Depth of the free zone kept in front of each door on both sides, metres.
    pub door_clearance_m: f64,
    /// Placement tries per item before it is skipped.
    pub tries_per_item: usize,
    /// Which of the catalogue's models furnish the scene (default all; see [`ModelSplit`]).
    #[serde(skip_serializing_if = "ModelSplit::is_all")]
    pub models: ModelSplit,
}

impl Default for FurnishConfig {
    fn default() -> Self {
        Self {
            density: 1.0,
            walker_radius_m: 0.35,
            door_clearance_m: 0.9,
            tries_per_item: 40,
            models: ModelSplit::All,
        }
    }
}

impl FurnishConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        if !(0.0..=1.0).contains(&self.density) {
            return Err(SimError::Config(format!("furnish density {} is not in [0, 1]", self.density)));
        }
        if !(0.1..=0.5).contains(&self.walker_radius_m) {
            return Err(SimError::Config(format!(
                "walker_radius_m {} is not in [0.1, 0.5]",
                self.walker_radius_m
            )));
        }
        if !(0.3..=2.0).contains(&self.door_clearance_m) || self.tries_per_item == 0 {
            return Err(SimError::Config(
                "door_clearance_m must be in [0.3, 2] and tries_per_item > 0".into(),
            ));
        }
        Ok(())
    }
}

/// Cell size of the placement grid, metres.
const GRID_M: f64 = 0.05;
/// Gap between furniture and a wall, metres.
const WALL_GAP_M: f64 = 0.02;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Outside,
    Free,
    /// Floor that must stay empty (door approaches).
    Reserved,
    Furniture,
}

/// The occupancy grid of one room.
struct RoomGrid {
    origin: [f64; 2],
    nx: usize,
    ny: usize,
    cells: Vec<Cell>,
    /// Cells in front of each door, which must stay mutually reachable.
    door_cells: Vec<usize>,
}

impl RoomGrid {
    fn new(plan: &Plan, room: usize, config: &FurnishConfig) -> Self {
        let bounds = plan.rooms[room].bounds();
        let origin = bounds.min;
        let nx = (bounds.width() / GRID_M).ceil() as usize;
        let ny = (bounds.height() / GRID_M).ceil() as usize;
        let mut cells = vec![Cell::Outside; nx * ny];
        let walls: Vec<_> = plan.walls.iter().filter(|w| w.rooms.contains(&Some(room))).collect();
        for j in 0..ny {
            for i in 0..nx {
                let p = [origin[0] + (i as f64 + 0.5) * GRID_M, origin[1] + (j as f64 + 0.5) * GRID_M];
                if !plan.rooms[room].contains(p) {
                    continue;
                }
                let clear_of_walls = walls.iter().all(|w| {
                    let (across, along) = match w.axis {
                        Axis::X => (p[1] - w.offset_m, p[0]),
                        Axis::Y => (p[0] - w.offset_m, p[1]),
                    };
                    across.abs() >= w.thickness_m / 2.0 + WALL_GAP_M || along < w.start_m || along > w.end_m
                });
                if clear_of_walls {
                    cells[j * nx + i] = Cell::Free;
                }
            }
        }
        let mut grid = Self { origin, nx, ny, cells, door_cells: Vec::new() };
        for door in plan.doors.iter().filter(|d| d.rooms.contains(&room)) {
            let wall = &plan.walls[door.opening.wall];
            let side = if wall.rooms[0] == Some(room) { -1.0 } else { 1.0 };
            let half = door.opening.width_m / 2.0 + 0.15;
            let near = wall.thickness_m / 2.0;
            let far = near + config.door_clearance_m;
            let (a, b) = (door.opening.center_m - half, door.opening.center_m + half);
            let (lo, hi) = (wall.offset_m + side * near, wall.offset_m + side * far);
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            let zone = match wall.axis {
                Axis::X => Rect::new(a, lo, b, hi),
                Axis::Y => Rect::new(lo, a, hi, b),
            };
            grid.mark(&zone, Cell::Reserved, true);
            let approach = wall.point(door.opening.center_m);
            let approach = match wall.axis {
                Axis::X => [approach[0], approach[1] + side * (near + 0.45)],
                Axis::Y => [approach[0] + side * (near + 0.45), approach[1]],
            };
            if let Some(cell) = grid.cell_of(approach) {
                grid.door_cells.push(cell);
            }
        }
        grid
    }

    fn cell_of(&self, p: [f64; 2]) -> Option<usize> {
        let i = ((p[0] - self.origin[0]) / GRID_M).floor();
        let j = ((p[1] - self.origin[1]) / GRID_M).floor();
        (i >= 0.0 && j >= 0.0 && (i as usize) < self.nx && (j as usize) < self.ny)
            .then(|| j as usize * self.nx + i as usize)
    }

    /// Cell index ranges covered by a rectangle (cells whose centres lie inside).
    fn range(&self, rect: &Rect) -> (usize, usize, usize, usize) {
        let to_index =
            |v: f64, o: f64, n: usize| ((v - o) / GRID_M - 0.5).ceil().clamp(0.0, n as f64) as usize;
        let to_index_hi =
            |v: f64, o: f64, n: usize| ((v - o) / GRID_M - 0.5).floor().clamp(-1.0, n as f64 - 1.0);
        let i0 = to_index(rect.min[0], self.origin[0], self.nx);
        let j0 = to_index(rect.min[1], self.origin[1], self.ny);
        let i1 = (to_index_hi(rect.max[0], self.origin[0], self.nx) + 1.0) as usize;
        let j1 = (to_index_hi(rect.max[1], self.origin[1], self.ny) + 1.0) as usize;
        (i0, i1, j0, j1)
    }

    fn mark(&mut self, rect: &Rect, value: Cell, only_free: bool) {
        let (i0, i1, j0, j1) = self.range(rect);
        for j in j0..j1 {
            for i in i0..i1 {
                let cell = &mut self.cells[j * self.nx + i];
                if !only_free || *cell == Cell::Free {
                    *cell = value;
                }
            }
        }
    }

    /// Whether a footprint lies on free floor, entirely inside the room.
    fn fits(&self, rect: &Rect) -> bool {
        let inside = rect.min[0] >= self.origin[0]
            && rect.min[1] >= self.origin[1]
            && rect.max[0] <= self.origin[0] + self.nx as f64 * GRID_M
            && rect.max[1] <= self.origin[1] + self.ny as f64 * GRID_M;
        if !inside {
            return false;
        }
        let (i0, i1, j0, j1) = self.range(rect);
        if i0 >= i1 || j0 >= j1 {
            return false;
        }
        (j0..j1).all(|j| (i0..i1).all(|i| self.cells[j * self.nx + i] == Cell::Free))
    }

    /// Whether every door approach can still reach every other for a walker of `radius_m`.
    fn doors_connected(&self, radius_m: f64) -> bool {
        if self.door_cells.is_empty() {
            return true;
        }
        let walkable = self.walkable(radius_m);
        let Some(&start) = self.door_cells.first() else { return true };
        if !walkable[start] {
            return false;
        }
        let mut seen = vec![false; walkable.len()];
        let mut stack = vec![start];
        seen[start] = true;
        let mut reached = 0usize;
        while let Some(c) = stack.pop() {
            reached += 1;
            let (i, j) = (c % self.nx, c / self.nx);
            let mut visit = |n: usize| {
                if walkable[n] && !seen[n] {
                    seen[n] = true;
                    stack.push(n);
                }
            };
            if i > 0 {
                visit(c - 1);
            }
            if i + 1 < self.nx {
                visit(c + 1);
            }
            if j > 0 {
                visit(c - self.nx);
            }
            if j + 1 < self.ny {
                visit(c + self.nx);
            }
        }
        // Every door reachable, and the walker can reach most of the room's open floor (no sealed pockets
        // big enough to matter for exploration).
        let open = walkable.iter().filter(|w| **w).count();
        self.door_cells.iter().all(|&d| seen[d]) && reached * 10 >= open * 8
    }

    /// Cells whose distance to any obstacle (outside or furniture) is at least `radius_m`, by a two-pass
    /// chamfer distance transform.
    fn walkable(&self, radius_m: f64) -> Vec<bool> {
        const STRAIGHT: f32 = 1.0;
        const DIAGONAL: f32 = std::f32::consts::SQRT_2;
        let (nx, ny) = (self.nx, self.ny);
        let mut dist: Vec<f32> = self
            .cells
            .iter()
            .map(|c| if matches!(c, Cell::Free | Cell::Reserved) { f32::INFINITY } else { 0.0 })
            .collect();
        for j in 0..ny {
            for i in 0..nx {
                let k = j * nx + i;
                let mut d = dist[k];
                if i == 0 || j == 0 {
                    d = d.min(STRAIGHT); // the grid border is an obstacle
                } else {
                    d = d
                        .min(dist[k - 1] + STRAIGHT)
                        .min(dist[k - nx] + STRAIGHT)
                        .min(dist[k - nx - 1] + DIAGONAL);
                }
                if j > 0 && i + 1 < nx {
                    d = d.min(dist[k - nx + 1] + DIAGONAL);
                }
                dist[k] = d;
            }
        }
        for j in (0..ny).rev() {
            for i in (0..nx).rev() {
                let k = j * nx + i;
                let mut d = dist[k];
                if i + 1 == nx || j + 1 == ny {
                    d = d.min(STRAIGHT);
                } else {
                    d = d
                        .min(dist[k + 1] + STRAIGHT)
                        .min(dist[k + nx] + STRAIGHT)
                        .min(dist[k + nx + 1] + DIAGONAL);
                }
                if j + 1 < ny && i > 0 {
                    d = d.min(dist[k + nx - 1] + DIAGONAL);
                }
                dist[k] = d;
            }
        }
        let threshold = (radius_m / GRID_M) as f32;
        dist.iter().map(|d| *d >= threshold).collect()
    }

    /// A random free point at least `margin_m` from every obstacle.
    fn random_open_point(&self, margin_m: f64, rng: &mut impl Rng) -> Option<[f64; 2]> {
        let open = self.walkable(margin_m);
        let candidates: Vec<usize> =
            (0..open.len()).filter(|&k| open[k] && self.cells[k] == Cell::Free).collect();
        let &k = candidates.get(rng.gen_range(0..candidates.len().max(1)))?;
        Some([
            self.origin[0] + ((k % self.nx) as f64 + 0.5) * GRID_M,
            self.origin[1] + ((k / self.nx) as f64 + 0.5) * GRID_M,
        ])
    }
}

/// A wall side that furniture can stand against.
#[derive(Clone, Copy, Debug)]
struct WallSide {
    axis: Axis,
    /// Coordinate of the wall's room-facing surface.
    surface_m: f64,
    start_m: f64,
    end_m: f64,
    /// +1 when the room lies on the positive side of the wall.
    into_room: f64,
    /// Window spans on this wall (along the axis).
    windows: [Option<(f64, f64)>; 2],
}

impl WallSide {
    /// Yaw that turns an item's back (+y local) towards this wall.
    fn yaw(&self) -> f64 {
        match (self.axis, self.into_room > 0.0) {
            (Axis::X, false) => 0.0,        // wall on the room's +y side
            (Axis::X, true) => PI,          // wall on the -y side
            (Axis::Y, false) => -FRAC_PI_2, // wall on +x
            (Axis::Y, true) => FRAC_PI_2,   // wall on -x
        }
    }
}

fn wall_sides(plan: &Plan, room: usize) -> Vec<WallSide> {
    plan.walls
        .iter()
        .enumerate()
        .filter(|(_, w)| w.rooms.contains(&Some(room)))
        .map(|(index, w)| {
            let into_room = if w.rooms[1] == Some(room) { 1.0 } else { -1.0 };
            let mut windows = [None, None];
            for (slot, window) in plan.windows.iter().filter(|o| o.wall == index).take(2).enumerate() {
                windows[slot] = Some((window.start_m(), window.end_m()));
            }
            WallSide {
                axis: w.axis,
                surface_m: w.offset_m + into_room * w.thickness_m / 2.0,
                start_m: w.start_m,
                end_m: w.end_m,
                into_room,
                windows,
            }
        })
        .collect()
}

/// One furniture model chosen for placement, with its size.
struct Choice {
    class: ObjectClass,
    key: String,
    name: String,
    size_m: [f64; 3],
}

fn choose(
    library: &FurnitureLibrary,
    models: ModelSplit,
    class: ObjectClass,
    rng: &mut impl Rng,
) -> Option<Choice> {
    let variants = library.variants_in(class, models);
    if variants.is_empty() {
        return None;
    }
    let v = &variants[rng.gen_range(0..variants.len())];
    Some(Choice { class, key: v.key.clone(), name: v.name.clone(), size_m: v.size_m })
}

fn footprint_at(center: [f64; 2], size_m: [f64; 3], yaw: f64) -> Rect {
    let (hx, hy) = if quarter_turns(yaw) % 2 == 0 {
        (size_m[0] / 2.0, size_m[1] / 2.0)
    } else {
        (size_m[1] / 2.0, size_m[0] / 2.0)
    };
    Rect::new(center[0] - hx, center[1] - hy, center[0] + hx, center[1] + hy)
}

/// Places furniture in one room, appending to `out`.
struct RoomFurnisher<'a, R: Rng> {
    plan: &'a Plan,
    room: usize,
    grid: RoomGrid,
    sides: Vec<WallSide>,
    library: &'a FurnitureLibrary,
    config: &'a FurnishConfig,
    rng: &'a mut R,
    out: &'a mut Vec<SceneInstance>,
}

impl<R: Rng> RoomFurnisher<'_, R> {
    fn maybe(&mut self, probability: f64) -> bool {
        self.rng.gen_bool((probability * self.config.density).clamp(0.0, 1.0))
    }

    /// Commits an item if its footprint fits and the room stays walkable.
    fn try_commit(&mut self, choice: &Choice, center: [f64; 2], yaw: f64, elevation_m: f64) -> Option<usize> {
        let rect = footprint_at(center, choice.size_m, yaw);
        if elevation_m == 0.0 {
            if !self.grid.fits(&rect) {
                return None;
            }
            let saved = self.grid.cells.clone();
            self.grid.mark(&rect, Cell::Furniture, false);
            if !self.grid.doors_connected(self.config.walker_radius_m) {
                self.grid.cells = saved;
                return None;
            }
        }
        let rotation = nalgebra::UnitQuaternion::from_axis_angle(&Vector3::z_axis(), yaw);
        let bbox = OrientedBox3 {
            world_from_box: Pose3::from_parts(
                Vector3::new(center[0], center[1], elevation_m + choice.size_m[2] / 2.0),
                rotation,
            ),
            size_m: choice.size_m,
        };
        let id = InstanceId(self.out.len() as u16 + 1);
        self.out.push(SceneInstance {
            id,
            class: choice.class,
            name: choice.name.clone(),
            model: choice.key.clone(),
            room: self.room,
            yaw,
            elevation_m,
            bbox,
        });
        Some(self.out.len() - 1)
    }

    /// Places an item with its back against a random wall; `tall` items avoid windows.
    fn against_wall(&mut self, class: ObjectClass) -> Option<usize> {
        let choice = choose(self.library, self.config.models, class, self.rng)?;
        let tall = choice.size_m[2] > 0.85;
        for _ in 0..self.config.tries_per_item {
            let side = self.sides[self.rng.gen_range(0..self.sides.len())];
            let half_width = choice.size_m[0] / 2.0;
            if side.end_m - side.start_m < choice.size_m[0] + 0.1 {
                continue;
            }
            let along = self.rng.gen_range(side.start_m + half_width..=side.end_m - half_width);
            if tall
                && side
                    .windows
                    .iter()
                    .flatten()
                    .any(|(a, b)| along + half_width > *a && along - half_width < *b)
            {
                continue;
            }
            let across = side.surface_m + side.into_room * (WALL_GAP_M + choice.size_m[1] / 2.0);
            let center = match side.axis {
                Axis::X => [along, across],
                Axis::Y => [across, along],
            };
            if let Some(index) = self.try_commit(&choice, center, side.yaw(), 0.0) {
                return Some(index);
            }
        }
        None
    }

    /// Places `class` beside the item at `anchor` (same wall, same yaw), on the given side (-1 left, +1 right
    /// along the anchor's local x).
    fn beside(&mut self, anchor: usize, class: ObjectClass, side: f64) -> Option<usize> {
        let choice = choose(self.library, self.config.models, class, self.rng)?;
        let a = self.out[anchor].clone();
        let offset_x = side * (a.bbox.size_m[0] / 2.0 + 0.05 + choice.size_m[0] / 2.0);
        // Align the backs: both stand against the same wall.
        let offset_y = (a.bbox.size_m[1] - choice.size_m[1]) / 2.0;
        let local = Vector3::new(offset_x, offset_y, 0.0);
        let world = a.world_from_model().transform_vector(&local);
        let c = a.bbox.center();
        self.try_commit(&choice, [c.x + world.x, c.y + world.y], a.yaw, 0.0)
    }

    /// Places `class` in front of the item at `anchor`, `gap_m` away, facing it when `facing` (else the
    /// same way as the anchor).
    fn in_front(&mut self, anchor: usize, class: ObjectClass, gap_m: f64, facing: bool) -> Option<usize> {
        let choice = choose(self.library, self.config.models, class, self.rng)?;
        let a = self.out[anchor].clone();
        let distance = a.bbox.size_m[1] / 2.0 + gap_m + choice.size_m[1] / 2.0;
        let world = a.world_from_model().transform_vector(&Vector3::new(0.0, -distance, 0.0));
        let c = a.bbox.center();
        let yaw = if facing { a.yaw + PI } else { a.yaw };
        self.try_commit(&choice, [c.x + world.x, c.y + world.y], normalize_yaw(yaw), 0.0)
    }

    /// Places `class` on top of the item at `anchor`.
    fn on_top(&mut self, anchor: usize, class: ObjectClass) -> Option<usize> {
        let choice = choose(self.library, self.config.models, class, self.rng)?;
        let a = self.out[anchor].clone();
        if choice.size_m[0] > a.bbox.size_m[0] * 1.2 {
            return None;
        }
        let back = (a.bbox.size_m[1] - choice.size_m[1]).max(0.0) / 2.0;
        let world = a.world_from_model().transform_vector(&Vector3::new(0.0, back, 0.0));
        let c = a.bbox.center();
        self.try_commit(&choice, [c.x + world.x, c.y + world.y], a.yaw, a.elevation_m + a.bbox.size_m[2])
    }

    /// A table in open floor with chairs along its long sides, facing it.
    fn table_with_chairs(&mut self, table_class: ObjectClass, chairs: usize) -> Option<usize> {
        let choice = choose(self.library, self.config.models, table_class, self.rng)?;
        let chair = choose(self.library, self.config.models, ObjectClass::Chair, self.rng)?;
        let clearance = choice.size_m[0].max(choice.size_m[1]) / 2.0 + chair.size_m[1] + 0.35;
        for _ in 0..self.config.tries_per_item / 4 {
            let center = self.grid.random_open_point(clearance, self.rng)?;
            let yaw = if self.rng.gen_bool(0.5) { 0.0 } else { FRAC_PI_2 };
            let Some(table) = self.try_commit(&choice, center, yaw, 0.0) else { continue };
            let per_side =
                chairs.div_ceil(2).min(((choice.size_m[0] + 0.1) / (chair.size_m[0] + 0.1)).floor() as usize);
            let t = self.out[table].clone();
            for (k, side) in [1.0, -1.0].into_iter().enumerate() {
                let count = if k == 0 { per_side } else { (chairs - per_side).min(per_side) };
                for n in 0..count {
                    let x = (n as f64 + 0.5) / count as f64 * t.bbox.size_m[0] - t.bbox.size_m[0] / 2.0;
                    let y = side * (t.bbox.size_m[1] / 2.0 + chair.size_m[1] / 2.0 + 0.03);
                    let world = t.world_from_model().transform_vector(&Vector3::new(x, y, 0.0));
                    let c = t.bbox.center();
                    // A chair on the table's +y side faces -y (yaw of the table), on the -y side it turns round.
                    let chair_yaw = if side > 0.0 { t.yaw } else { normalize_yaw(t.yaw + PI) };
                    let chair = choose(self.library, self.config.models, ObjectClass::Chair, self.rng)?;
                    let _ = self.try_commit(&chair, [c.x + world.x, c.y + world.y], chair_yaw, 0.0);
                }
            }
            return Some(table);
        }
        None
    }

    fn furnish(&mut self) {
        use ObjectClass as C;
        match self.plan.rooms[self.room].room_type {
            RoomType::Bedroom => {
                if let Some(bed) = self.against_wall(C::Bed) {
                    self.beside(bed, C::Nightstand, -1.0);
                    if self.maybe(0.8) {
                        self.beside(bed, C::Nightstand, 1.0);
                    }
                }
                self.against_wall(C::Wardrobe);
                if self.maybe(0.6) {
                    self.against_wall(C::Dresser);
                }
                if self.maybe(0.3)
                    && let Some(desk) = self.against_wall(C::Desk)
                {
                    self.in_front(desk, C::OfficeChair, 0.05, true);
                }
                if self.maybe(0.5) {
                    self.against_wall(C::Plant);
                }
            }
            RoomType::LivingRoom => {
                if let Some(sofa) = self.against_wall(C::Sofa) {
                    self.in_front(sofa, C::CoffeeTable, 0.45, false);
                    if let Some(stand) = self.in_front(sofa, C::TvStand, 2.2, true) {
                        self.on_top(stand, C::Television);
                    } else if let Some(stand) = self.against_wall(C::TvStand) {
                        self.on_top(stand, C::Television);
                    }
                }
                if self.maybe(0.7) {
                    self.against_wall(C::Armchair);
                }
                if self.maybe(0.8) {
                    self.against_wall(C::Bookshelf);
                }
                if self.maybe(0.7) {
                    self.against_wall(C::Plant);
                }
                if self.maybe(0.5) {
                    self.against_wall(C::FloorLamp);
                }
                if self.maybe(0.2) {
                    self.against_wall(C::Piano);
                }
                if self.maybe(0.3) {
                    self.against_wall(C::Fireplace);
                }
            }
            RoomType::Kitchen => {
                self.against_wall(C::Refrigerator);
                if let Some(sink) = self.against_wall(C::Sink) {
                    self.beside(sink, C::KitchenCabinet, -1.0);
                    if self.maybe(0.5) {
                        self.beside(sink, C::Dishwasher, 1.0);
                    }
                }
                if let Some(stove) = self.against_wall(C::Stove) {
                    self.beside(stove, C::KitchenCabinet, 1.0);
                }
                if self.maybe(0.6) {
                    self.table_with_chairs(C::DiningTable, 2);
                }
            }
            RoomType::Bathroom => {
                self.against_wall(C::Toilet);
                self.against_wall(C::Washbasin);
                if self.rng.gen_bool(0.5) {
                    self.against_wall(C::Shower);
                } else {
                    self.against_wall(C::Bathtub);
                }
                if self.maybe(0.4) {
                    self.against_wall(C::WashingMachine);
                }
            }
            RoomType::Office => {
                if let Some(desk) = self.against_wall(C::Desk) {
                    self.on_top(desk, C::Computer);
                    self.in_front(desk, C::OfficeChair, 0.05, true);
                }
                self.against_wall(C::Bookshelf);
                if self.maybe(0.5) {
                    self.against_wall(C::Cabinet);
                }
                if self.maybe(0.5) {
                    self.against_wall(C::Plant);
                }
            }
            RoomType::DiningRoom => {
                let chairs = self.rng.gen_range(4..=6);
                self.table_with_chairs(C::DiningTable, chairs);
                if self.maybe(0.7) {
                    self.against_wall(C::Cabinet);
                }
                if self.maybe(0.5) {
                    self.against_wall(C::Shelf);
                }
                if self.maybe(0.5) {
                    self.against_wall(C::Plant);
                }
            }
            RoomType::Corridor => {
                if self.maybe(0.5) {
                    self.against_wall(C::Plant);
                }
                if self.maybe(0.3) {
                    self.against_wall(C::Bench);
                }
            }
        }
    }
}

fn normalize_yaw(yaw: f64) -> f64 {
    let turns = ((yaw / FRAC_PI_2).round() as i64).rem_euclid(4);
    match turns {
        0 => 0.0,
        1 => FRAC_PI_2,
        2 => PI,
        _ => -FRAC_PI_2,
    }
}

/// Furnishes every room of a plan. Ids are 1, 2, … in placement order.
pub fn furnish(
    plan: &Plan,
    library: &FurnitureLibrary,
    config: &FurnishConfig,
    rng: &mut impl Rng,
) -> Result<Vec<SceneInstance>, SimError> {
    config.validate()?;
    let mut out = Vec::new();
    for room in 0..plan.rooms.len() {
        let grid = RoomGrid::new(plan, room, config);
        let sides = wall_sides(plan, room);
        if sides.is_empty() {
            continue;
        }
        let mut furnisher = RoomFurnisher { plan, room, grid, sides, library, config, rng, out: &mut out };
        furnisher.furnish();
    }
    if out.len() >= usize::from(u16::MAX) {
        return Err(SimError::Config(format!("{} instances exceed the u16 id space", out.len())));
    }
    Ok(out)
}
