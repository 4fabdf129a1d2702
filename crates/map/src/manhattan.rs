//! The Manhattan axes of a map: the two horizontal wall directions at right angles that indoor buildings are
//! laid out along, read from the occupancy grid's occupied cells. [`manhattan_yaw`] takes the yaw whose two
//! projections of the cells (onto the axis and onto its perpendicular) are most peaked: walls are lines of
//! cells. Room completion squares rooms along these axes; the compass reads a view's heading against them.

use crate::occupancy::{CellState, OccupancyGrid};

/// Yaw step of the map's axis search, degrees.
const MAP_YAW_STEP_DEG: f64 = 0.25;
/// Histogram bins of the map's axis search, in cells.
const HISTOGRAM_BIN_CELLS: f64 = 2.0;
/// Fewest occupied cells for the map's axes.
const MIN_OCCUPIED_CELLS: usize = 50;
/// The map's Manhattan axes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ManhattanFrame {
    /// Yaw of one horizontal axis in the map frame, radians in [0, π/2); the other is a quarter turn on.
    pub yaw_rad: f64,
    /// How much more peaked the cells' projections are along these axes than at 45° from them (≥ 1).
    pub sharpness: f64,
}

/// The map's Manhattan axes from its occupied cells, or `None` with too few of them.
pub fn manhattan_yaw(grid: &OccupancyGrid) -> Option<ManhattanFrame> {
    let frame = &grid.frame;
    let cells: Vec<[f64; 2]> = grid
        .cells
        .iter()
        .enumerate()
        .filter(|(_, state)| **state == CellState::Occupied)
        .map(|(i, _)| {
            frame.world_from_cell((i % frame.width as usize) as u32, (i / frame.width as usize) as u32)
        })
        .collect();
    if cells.len() < MIN_OCCUPIED_CELLS {
        return None;
    }
    // Bins of two cells, each cell shared linearly between its two nearest: on bins of one cell, the
    // projection along the grid's own axes gathers every row of cells into one bin whatever the walls do.
    let bin_m = HISTOGRAM_BIN_CELLS * frame.resolution_m;
    let reach = f64::from(frame.width.max(frame.height)) * frame.resolution_m * 1.5
        + frame.origin_x_m.abs().max(frame.origin_y_m.abs());
    let bins = (2.0 * reach / bin_m).ceil() as usize + 2;
    let peakedness = |yaw: f64| {
        let (s, c) = yaw.sin_cos();
        let mut along = vec![0.0f64; bins];
        let mut across = vec![0.0f64; bins];
        let add = |histogram: &mut [f64], w: f64| {
            let f = ((w + reach) / bin_m).clamp(0.0, (bins - 2) as f64);
            let lower = f.floor();
            let k = lower as usize;
            histogram[k] += 1.0 - (f - lower);
            histogram[k + 1] += f - lower;
        };
        for [x, y] in &cells {
            add(&mut along, x * c + y * s);
            add(&mut across, -x * s + y * c);
        }
        along.iter().chain(&across).map(|n| n * n).sum::<f64>()
    };
    let steps = (90.0 / MAP_YAW_STEP_DEG).round() as usize;
    let scores: Vec<f64> =
        (0..steps).map(|k| peakedness((k as f64 * MAP_YAW_STEP_DEG).to_radians())).collect();
    let (best, best_score) = scores.iter().copied().enumerate().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let opposite = scores[(best + steps / 2) % steps];
    Some(ManhattanFrame {
        yaw_rad: (best as f64 * MAP_YAW_STEP_DEG).to_radians(),
        sharpness: if opposite > 0.0 { best_score / opposite } else { f64::INFINITY },
    })
}

/// Fewest [`ManhattanFrame::sharpness`] for the map's axes to count.
pub const MIN_SHARPNESS: f64 = 1.2;
