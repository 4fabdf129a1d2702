//! Room completion: the floor of a room that no frame saw, inferred from the room's rectangle.
//!
//! An exploration that crosses a room rarely looks into every corner: the camera turns at the door, sweeps
//! one half and leaves, and the corners behind it stay unknown up to walls that were never seen either. The
//! enclosed-hole filling of [`crate::occupancy`] cannot reach them (the unknown runs on through the unseen
//! walls into the outside). Rooms are rectangles in most houses, and a room's seen floor usually reaches
//! each of its walls somewhere; so the rectangle spanned by its floor along the map's Manhattan axes
//! ([`crate::manhattan::manhattan_yaw`]) is the room, and unknown cells inside it, reached from its floor
//! without crossing a seen obstacle, are its floor too.
//!
//! A room's floor often runs on past its walls (into a door's opening, or through it where the wavefronts of
//! the segmentation met beyond the door), so walls seen *inside* the rectangle (structure above door height,
//! away from its edges) cut it, and the side with more of the room's floor stays; walls that hold no line
//! (the room is not a rectangle) leave the room as seen. Unknown cells where a frame glimpsed an obstacle
//! (too few readings to call it occupied) stop the completion, slivers thinner than a few cells are dropped,
//! as is a completion larger than [`MapConfig::room_completion_max_share`] of the seen floor, and a cell two
//! rooms' rectangles both reach stays unknown. Completed cells are free, marked in
//! [`OccupancyGrid::filled`] (no frame saw them) and labelled with their room. Furniture standing in an
//! unseen corner is not known, so its footprint is called floor: the price of the inference, measured by
//! `gst bench map` (README).

use std::collections::VecDeque;

use crate::MapConfig;
use crate::grid::{GridFrame, neighbours4};
use crate::manhattan::{MIN_SHARPNESS, manhattan_yaw};
use crate::occupancy::{CellState, OccupancyGrid};
use crate::rooms::{RoomSegmentation, describe_rooms};

/// Structure at least this far inside a room's rectangle is an inner wall, metres.
const INNER_WALL_MARGIN_M: f64 = 0.3;

/// Completed regions are opened (eroded, then dilated within themselves) by this many cells: slivers
/// thinner than twice it (an unseen wall's row between a door's floor and the rectangle's edge) are not
/// completed.
const OPENING_CELLS: usize = 2;

/// Completes every rectangular room of `segmentation` in `grid` (see the module documentation) and returns
/// the number of cells completed. `glimpsed` marks the cells where a frame saw an obstacle
/// ([`crate::occupancy::OccupancyAccumulator::glimpsed`]; empty: none). Room areas, centroids and outlines
/// are recomputed; doors are unchanged.
pub(crate) fn complete_rooms(
    grid: &mut OccupancyGrid,
    segmentation: &mut RoomSegmentation,
    glimpsed: &[bool],
    config: &MapConfig,
) -> usize {
    let frame = grid.frame;
    let n = frame.len();
    let rooms = segmentation.rooms.len();
    if config.room_completion_max_share <= 0.0 || rooms == 0 || segmentation.labels.len() != n {
        return 0;
    }
    let Some(axes) = manhattan_yaw(grid).filter(|a| a.sharpness >= MIN_SHARPNESS) else {
        tracing::debug!("room completion: the map has no clear Manhattan axes");
        return 0;
    };
    let (s, c) = axes.yaw_rad.sin_cos();
    let w = frame.width as usize;
    let along = |i: usize| {
        let [x, y] = frame.world_from_cell((i % w) as u32, (i / w) as u32);
        [x * c + y * s, -x * s + y * c]
    };
    // Each room's cells, and its floor along the axes.
    let mut room_cells: Vec<Vec<usize>> = vec![Vec::new(); rooms];
    for (i, &label) in segmentation.labels.iter().enumerate() {
        if label > 0 {
            room_cells[label as usize - 1].push(i);
        }
    }
    let floor: Vec<Vec<[f64; 2]>> =
        room_cells.iter().map(|cells| cells.iter().map(|&i| along(i)).collect()).collect();
    let wall = |i: usize| grid.structure.get(i).copied().unwrap_or(false);
    let walls: Vec<[f64; 2]> = (0..n).filter(|&i| wall(i)).map(along).collect();
    let max_inner_wall = (config.room_completion_max_wall_m / frame.resolution_m).ceil() as usize;
    let half = frame.resolution_m / 2.0;
    const NONE: u32 = 0;
    const CONTESTED: u32 = u32::MAX;
    let mut claim = vec![NONE; n];
    let mut reached = vec![false; n];
    let mut queue = VecDeque::new();
    let mut region = Vec::new();
    for (r, room_floor) in floor.iter().enumerate() {
        let Some(extent) = rectangle(room_floor, &walls, frame.resolution_m, max_inner_wall) else {
            tracing::debug!(room = r, "room completion: not a rectangle");
            continue;
        };
        let label = r as u32 + 1;
        region.clear();
        queue.clear();
        queue.extend(room_cells[r].iter().copied());
        while let Some(i) = queue.pop_front() {
            for j in neighbours4(&frame, i) {
                if !reached[j]
                    && grid.cells[j] == CellState::Unknown
                    && !wall(j)
                    && !glimpsed.get(j).copied().unwrap_or(false)
                    && segmentation.labels[j] == 0
                    && inside(&extent, along(j), -half)
                {
                    reached[j] = true;
                    region.push(j);
                    queue.push_back(j);
                }
            }
        }
        for &j in &region {
            reached[j] = false;
        }
        open_region(&frame, &mut region, OPENING_CELLS);
        let share = region.len() as f64 / room_floor.len().max(1) as f64;
        if share > config.room_completion_max_share {
            tracing::debug!(room = r, share, "room completion: more unknown than the room's share; skipped");
            continue;
        }
        for &j in &region {
            claim[j] = if claim[j] == NONE { label } else { CONTESTED };
        }
    }
    let mut completed = 0;
    for (i, &label) in claim.iter().enumerate() {
        if label == NONE || label == CONTESTED {
            continue;
        }
        if grid.filled.len() != n {
            grid.filled = vec![false; n];
        }
        grid.cells[i] = CellState::Free;
        grid.filled[i] = true;
        segmentation.labels[i] = label;
        completed += 1;
    }
    if completed > 0 {
        segmentation.rooms = describe_rooms(&frame, &segmentation.labels, rooms);
    }
    tracing::debug!(completed, area_m2 = completed as f64 * frame.cell_area_m2(), "rooms completed");
    completed
}

/// Whether `p` lies in `extent` (`[u_min, u_max, v_min, v_max]`) shrunk by `margin` (grown when negative).
fn inside(extent: &[f64; 4], p: [f64; 2], margin: f64) -> bool {
    p[0] >= extent[0] + margin
        && p[0] <= extent[1] - margin
        && p[1] >= extent[2] + margin
        && p[1] <= extent[3] - margin
}

/// Split attempts of [`rectangle`].
const MAX_SPLITS: usize = 4;

/// A room's rectangle `[u_min, u_max, v_min, v_max]` along the Manhattan axes: the extent of its floor
/// points, cut along walls seen inside it. While more than `max_inner_wall` wall points lie
/// [`INNER_WALL_MARGIN_M`] inside, the line (one cell wide, along either axis) holding most of them cuts the
/// rectangle and the side with more of the floor stays. `None` when the inner walls hold no such line (the
/// room is not a rectangle) or the floor is empty.
fn rectangle(floor: &[[f64; 2]], walls: &[[f64; 2]], cell_m: f64, max_inner_wall: usize) -> Option<[f64; 4]> {
    fn extent_of<'a>(points: impl Iterator<Item = &'a [f64; 2]>) -> [f64; 4] {
        points.fold([f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY], |e, p| {
            [e[0].min(p[0]), e[1].max(p[0]), e[2].min(p[1]), e[3].max(p[1])]
        })
    }
    let mut extent = extent_of(floor.iter());
    for _ in 0..=MAX_SPLITS {
        if extent[0] > extent[1] {
            return None;
        }
        let inner: Vec<&[f64; 2]> =
            walls.iter().filter(|p| inside(&extent, **p, INNER_WALL_MARGIN_M)).collect();
        if inner.len() <= max_inner_wall {
            return Some(extent);
        }
        // The fullest wall line across either axis.
        let mut best: Option<(usize, usize, f64)> = None;
        for axis in 0..2 {
            let mut bins: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
            for p in &inner {
                *bins.entry((p[axis] / cell_m).round() as i64).or_default() += 1;
            }
            for (&bin, &count) in &bins {
                if best.is_none_or(|b| count > b.1) {
                    best = Some((axis, count, bin as f64 * cell_m));
                }
            }
        }
        let (axis, count, at) = best?;
        if count <= max_inner_wall {
            return None;
        }
        let below = floor.iter().filter(|p| inside(&extent, **p, 0.0) && p[axis] < at).count();
        let above = floor.iter().filter(|p| inside(&extent, **p, 0.0) && p[axis] > at).count();
        let keep_below = below >= above;
        let kept = floor
            .iter()
            .filter(|p| inside(&extent, **p, 0.0) && (p[axis] < at) == keep_below && p[axis] != at);
        extent = extent_of(kept);
    }
    None
}

/// Morphological opening of a set of cells by `radius` cells (Chebyshev): the cells within `radius` of a cell
/// whose whole `radius` neighbourhood is in the set. `cells` is replaced by the opened set, sorted.
fn open_region(frame: &GridFrame, cells: &mut Vec<usize>, radius: usize) {
    if cells.is_empty() || radius == 0 {
        return;
    }
    let (w, h) = (frame.width as usize, frame.height as usize);
    let r = radius as i64;
    let mut member = vec![false; w * h];
    for &k in cells.iter() {
        member[k] = true;
    }
    let within = |k: usize, f: &dyn Fn(usize) -> bool| {
        let (col, row) = ((k % w) as i64, (k / w) as i64);
        (-r..=r).all(|dr| {
            (-r..=r).all(|dc| {
                let (c, rr) = (col + dc, row + dr);
                c >= 0 && rr >= 0 && (c as usize) < w && (rr as usize) < h && f(rr as usize * w + c as usize)
            })
        })
    };
    let core: Vec<usize> = cells.iter().copied().filter(|&k| within(k, &|m| member[m])).collect();
    let mut kept = vec![false; w * h];
    for &k in &core {
        let (col, row) = ((k % w) as i64, (k / w) as i64);
        for dr in -r..=r {
            for dc in -r..=r {
                let m = (row + dr) as usize * w + (col + dc) as usize;
                kept[m] = true;
            }
        }
    }
    cells.retain(|&k| kept[k]);
    cells.sort_unstable();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rooms::{room_at, segment_rooms};
    use crate::testworld::{GridPlan, grid_from_plan};

    /// Forgets every cell (state and structure) whose centre satisfies `unseen`, as if no frame saw it.
    fn forget(grid: &mut OccupancyGrid, unseen: impl Fn(f64, f64) -> bool) {
        let frame = grid.frame;
        for i in 0..frame.len() {
            let [x, y] =
                frame.world_from_cell((i % frame.width as usize) as u32, (i / frame.width as usize) as u32);
            if unseen(x, y) {
                grid.cells[i] = CellState::Unknown;
                grid.structure[i] = false;
            }
        }
    }

    /// Cells whose centre satisfies `which`: (free, filled, labelled with `room` + 1) counts, and their number.
    fn tally(
        grid: &OccupancyGrid,
        labels: &[u32],
        room: usize,
        which: impl Fn(f64, f64) -> bool,
    ) -> ([usize; 3], usize) {
        let frame = grid.frame;
        let (mut counts, mut total) = ([0; 3], 0);
        for (i, label) in labels.iter().enumerate() {
            let [x, y] =
                frame.world_from_cell((i % frame.width as usize) as u32, (i / frame.width as usize) as u32);
            if which(x, y) {
                total += 1;
                counts[0] += usize::from(grid.cells[i] == CellState::Free);
                counts[1] += usize::from(grid.is_filled(i));
                counts[2] += usize::from(*label == room as u32 + 1);
            }
        }
        (counts, total)
    }

    fn complete(grid: &mut OccupancyGrid, config: &MapConfig) -> (RoomSegmentation, usize) {
        let mut segmentation = segment_rooms(grid, config);
        let completed = complete_rooms(grid, &mut segmentation, &[], config);
        (segmentation, completed)
    }

    #[test]
    fn an_unseen_corner_of_a_rectangular_room_is_completed_up_to_its_walls() {
        // Two rooms, 4 m x 3 m and 3 m x 3 m, a door between them at (4, 1.5); the far corner of the first
        // (its floor and both walls there) never seen.
        let plan = GridPlan {
            rooms: vec![vec![[0.0, 0.0, 4.0, 3.0]], vec![[4.0, 0.0, 7.0, 3.0]]],
            doors: vec![([4.0, 1.5], 0.9)],
        };
        let mut grid = grid_from_plan(&plan, 0.05);
        let corner = |x: f64, y: f64| x < 1.5 && y > 1.8;
        forget(&mut grid, corner);
        let seen_free = grid.cells.iter().filter(|c| **c == CellState::Free).count();
        let off = MapConfig { room_completion_max_share: 0.0, ..MapConfig::default() };
        assert_eq!(complete(&mut grid.clone(), &off).1, 0, "0 turns completion off");

        let (segmentation, completed) = complete(&mut grid, &MapConfig::default());
        assert_eq!(segmentation.rooms.len(), 2);
        assert_eq!(segmentation.doors.len(), 1);
        let room = room_at(&grid.frame, &segmentation.labels, 2.0, 1.0, 0.1).unwrap();
        // The corner's floor inside the walls: completed, marked filled, in the room.
        let floor = |x: f64, y: f64| corner(x, y) && x > 0.1 && y < 2.9;
        let ([free, filled, labelled], total) = tally(&grid, &segmentation.labels, room, floor);
        assert!(total > 300);
        assert!(free as f64 > 0.9 * total as f64, "{free} of {total} completed");
        assert_eq!((filled, labelled), (free, free));
        // Nothing beyond the room's walls.
        let outside = |x: f64, y: f64| corner(x, y) && (x < -0.05 || y > 3.05);
        assert_eq!(tally(&grid, &segmentation.labels, room, outside).0, [0, 0, 0]);
        let now_free = grid.cells.iter().filter(|c| **c == CellState::Free).count();
        assert_eq!(now_free - seen_free, completed);
        assert!((segmentation.rooms[room].area_m2 - 12.0).abs() < 1.0, "{:?}", segmentation.rooms[room]);
    }

    #[test]
    fn walls_inside_the_rectangle_cut_it_and_keep_an_unseen_room_out() {
        // An L-shaped room around a 2.5 m x 3.5 m room that no frame entered: its walls were seen from the
        // L, its floor not (a door joins them at (3.75, 2.5)). The L's rectangle spans the unseen room.
        let plan = GridPlan {
            rooms: vec![vec![[0.0, 0.0, 5.0, 2.5], [0.0, 2.5, 2.5, 6.0]], vec![[2.5, 2.5, 5.0, 6.0]]],
            doors: vec![([3.75, 2.5], 0.9)],
        };
        let mut grid = grid_from_plan(&plan, 0.05);
        let unseen_room = |x: f64, y: f64| x > 2.62 && x < 4.88 && y > 2.62 && y < 5.88;
        let corner = |x: f64, y: f64| x < 1.2 && y > 4.8;
        forget(&mut grid, |x, y| unseen_room(x, y) || corner(x, y));
        let (segmentation, _) = complete(&mut grid, &MapConfig::default());
        assert_eq!(segmentation.rooms.len(), 1, "the unseen room has no floor to seed it");
        let ([free, ..], _) = tally(&grid, &segmentation.labels, 0, unseen_room);
        assert_eq!(free, 0, "the unseen room stays unknown");
        let floor = |x: f64, y: f64| corner(x, y) && x > 0.1 && y < 5.9;
        let ([free, filled, labelled], total) = tally(&grid, &segmentation.labels, 0, floor);
        assert!(free as f64 > 0.9 * total as f64, "{free} of {total} completed");
        assert_eq!((filled, labelled), (free, free));
    }

    #[test]
    fn glimpsed_obstacles_stop_completion() {
        let plan = GridPlan { rooms: vec![vec![[0.0, 0.0, 4.0, 3.0]]], doors: Vec::new() };
        let mut grid = grid_from_plan(&plan, 0.05);
        let corner = |x: f64, y: f64| x < 1.5 && y > 1.8;
        forget(&mut grid, corner);
        let frame = grid.frame;
        // Obstacles glimpsed along the front of the corner (too few readings to be occupied): what is behind
        // them may be furniture.
        let glimpsed: Vec<bool> = (0..frame.len())
            .map(|i| {
                let [x, y] = frame
                    .world_from_cell((i % frame.width as usize) as u32, (i / frame.width as usize) as u32);
                corner(x, y) && (y < 2.2 || x > 1.1)
            })
            .collect();
        let config = MapConfig::default();
        let mut segmentation = segment_rooms(&grid, &config);
        assert!(complete_rooms(&mut grid.clone(), &mut segmentation.clone(), &[], &config) > 300);
        assert_eq!(complete_rooms(&mut grid, &mut segmentation, &glimpsed, &config), 0);
    }

    #[test]
    fn opening_drops_slivers_and_keeps_blocks() {
        let frame = GridFrame { origin_x_m: 0.0, origin_y_m: 0.0, resolution_m: 0.05, width: 20, height: 20 };
        let w = 20;
        // A 10 x 8 block and a 2-cell-wide line.
        let mut cells: Vec<usize> = (2..10).flat_map(|r| (2..12).map(move |c| r * w + c)).collect();
        cells.extend((14..16).flat_map(|r| (0..20).map(move |c| r * w + c)));
        open_region(&frame, &mut cells, 2);
        assert_eq!(cells.len(), 80);
        assert!(cells.iter().all(|k| (2..10).contains(&(k / w)) && (2..12).contains(&(k % w))));
    }
}
