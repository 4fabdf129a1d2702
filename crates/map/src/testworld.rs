//! Hand-built worlds for tests: plans drawn straight into occupancy grids, and a tiny ray caster that renders
//! depth images of axis-aligned boxes (walls with lintels, furniture) between a floor and a ceiling.

use nalgebra::{Point2, Vector3};

use gst_core::{DepthImage, PinholeCamera, Pose3};

use crate::grid::GridFrame;
use crate::occupancy::{CellState, OccupancyGrid};

/// An axis-aligned box, metres.
#[derive(Clone, Copy, Debug)]
pub struct Aabb {
    pub min: [f64; 3],
    pub max: [f64; 3],
}

/// Floor height, ceiling height and solid boxes.
#[derive(Clone, Debug)]
pub struct BoxWorld {
    pub floor_z: f64,
    pub ceiling_z: f64,
    pub boxes: Vec<Aabb>,
}

impl BoxWorld {
    /// Depth (z along the optical axis) seen by `camera` at `world_from_camera`.
    pub fn render(&self, camera: &PinholeCamera, world_from_camera: &Pose3) -> DepthImage {
        let origin = world_from_camera.translation();
        let mut data = Vec::with_capacity((camera.width * camera.height) as usize);
        for v in 0..camera.height {
            for u in 0..camera.width {
                let ray_c = camera.ray(&Point2::new(f64::from(u), f64::from(v)));
                let dir = world_from_camera.transform_vector(&ray_c);
                let t = self.hit(&origin, &dir);
                // ray_c has z = 1, so the parameter t along it is the depth.
                data.push(t.map_or(0.0, |t| t as f32));
            }
        }
        DepthImage::from_vec(camera.width, camera.height, data)
            .unwrap_or_else(|_| DepthImage::filled(1, 1, 0.0))
    }

    fn hit(&self, o: &Vector3<f64>, d: &Vector3<f64>) -> Option<f64> {
        let mut best = f64::INFINITY;
        if d.z < -1e-9 {
            best = best.min((self.floor_z - o.z) / d.z);
        }
        if d.z > 1e-9 {
            best = best.min((self.ceiling_z - o.z) / d.z);
        }
        for b in &self.boxes {
            let (mut t0, mut t1) = (0.0f64, f64::INFINITY);
            let mut miss = false;
            for a in 0..3 {
                if d[a].abs() < 1e-12 {
                    if o[a] < b.min[a] || o[a] > b.max[a] {
                        miss = true;
                    }
                    continue;
                }
                let (mut ta, mut tb) = ((b.min[a] - o[a]) / d[a], (b.max[a] - o[a]) / d[a]);
                if ta > tb {
                    std::mem::swap(&mut ta, &mut tb);
                }
                t0 = t0.max(ta);
                t1 = t1.min(tb);
            }
            if !miss && t0 <= t1 && t0 > 0.0 {
                best = best.min(t0);
            }
        }
        best.is_finite().then_some(best)
    }
}

/// A plan for grid tests: rooms as unions of rectangles (x0, y0, x1, y1, metres; neighbours share edges)
/// and doors (centre, width) on walls between rooms; the lintel above a door keeps it in the structure mask.
#[derive(Clone, Debug)]
pub struct GridPlan {
    pub rooms: Vec<Vec<[f64; 4]>>,
    pub doors: Vec<([f64; 2], f64)>,
}

/// Draws a plan into an occupancy grid at `res`: room interiors free, walls (within 0.06 m of a room's
/// outline) occupied and structure, door openings free at floor level but still structure (the lintel).
pub fn grid_from_plan(plan: &GridPlan, res: f64) -> OccupancyGrid {
    let (mut min, mut max) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for r in plan.rooms.iter().flatten() {
        min = [min[0].min(r[0]), min[1].min(r[1])];
        max = [max[0].max(r[2]), max[1].max(r[3])];
    }
    let origin = [min[0] - 0.5, min[1] - 0.5];
    let width = ((max[0] - min[0] + 1.0) / res).ceil() as u32;
    let height = ((max[1] - min[1] + 1.0) / res).ceil() as u32;
    let frame = GridFrame { origin_x_m: origin[0], origin_y_m: origin[1], resolution_m: res, width, height };
    let mut cells = vec![CellState::Unknown; frame.len()];
    let mut structure = vec![false; frame.len()];
    let half_wall = 0.06;
    let in_room = |room: &Vec<[f64; 4]>, x: f64, y: f64| {
        room.iter().any(|r| x > r[0] && x < r[2] && y > r[1] && y < r[3])
    };
    for row in 0..height {
        for col in 0..width {
            let [x, y] = frame.world_from_cell(col, row);
            let i = frame.index(col, row);
            let probes =
                [[x, y], [x + half_wall, y], [x - half_wall, y], [x, y + half_wall], [x, y - half_wall]];
            let mut wall = false;
            let mut inside = false;
            for room in &plan.rooms {
                let hits = probes.iter().filter(|p| in_room(room, p[0], p[1])).count();
                wall |= hits > 0 && hits < probes.len();
                inside |= hits == probes.len();
            }
            let in_door = plan.doors.iter().any(|(c, w)| {
                ((x - c[0]).abs() < w / 2.0 && (y - c[1]).abs() <= half_wall + res)
                    || ((y - c[1]).abs() < w / 2.0 && (x - c[0]).abs() <= half_wall + res)
            });
            if wall {
                structure[i] = true;
                cells[i] = if in_door { CellState::Free } else { CellState::Occupied };
            } else if inside {
                cells[i] = CellState::Free;
            }
        }
    }
    OccupancyGrid { frame, cells, structure, filled: Vec::new(), floor_z_m: 0.0, ceiling_z_m: 2.6 }
}
