//! Rooms, doors and the room graph from the occupancy grid.
//!
//! Rooms are split along *structure*: walls seen above door height. Door openings end at the lintel, so in
//! a map of structure every room is closed, while at floor level rooms connect through their doors.
//! Room seeds are the connected components of free floor away from (dilated) structure that are large
//! enough to be rooms; every free cell then joins the seed it reaches first by a breadth-first wavefront
//! through free cells (a geodesic Voronoi partition, as the wavefront step of ipa_room_segmentation).
//! Doors are the boundaries where the wavefronts of two rooms meet.

use std::collections::{BTreeMap, VecDeque};

use petgraph::graph::{NodeIndex, UnGraph};
use serde::{Deserialize, Serialize};

use crate::MapConfig;
use crate::grid::{GridFrame, distance_transform, neighbours4};
use crate::occupancy::{CellState, OccupancyGrid};

/// A room of the map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Room {
    pub id: usize,
    /// Free floor area, square metres.
    pub area_m2: f64,
    /// Centroid of the free floor, map frame, metres.
    pub centroid_m: [f64; 2],
    /// Outline (convex hull of the room's cells, counter-clockwise), map frame, metres.
    pub polygon_m: Vec<[f64; 2]>,
    /// Ids of the object landmarks in the room.
    pub objects: Vec<usize>,
}

/// A passage between two rooms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Door {
    pub id: usize,
    /// The two rooms, smaller id first.
    pub rooms: [usize; 2],
    /// Centre of the boundary between the rooms, map frame, metres.
    pub position_m: [f64; 2],
    /// Length of the boundary between the rooms, metres.
    pub width_m: f64,
}

/// The segmentation: a room label per cell (`None` outside every room) and the rooms and doors.
#[derive(Clone, Debug, PartialEq)]
pub struct RoomSegmentation {
    /// Per cell of the occupancy grid: the room id + 1, 0 for none.
    pub labels: Vec<u32>,
    pub rooms: Vec<Room>,
    pub doors: Vec<Door>,
}

/// The room graph: nodes are rooms, edges are doors.
pub type RoomGraph = UnGraph<Room, Door>;

/// Builds the petgraph room graph (node `i` is room `i`).
pub fn room_graph(rooms: &[Room], doors: &[Door]) -> RoomGraph {
    let mut graph = RoomGraph::new_undirected();
    for room in rooms {
        graph.add_node(room.clone());
    }
    for door in doors {
        if door.rooms[0] < rooms.len() && door.rooms[1] < rooms.len() {
            graph.add_edge(NodeIndex::new(door.rooms[0]), NodeIndex::new(door.rooms[1]), door.clone());
        }
    }
    graph
}

/// Segments the free space of a grid into rooms.
pub fn segment_rooms(grid: &OccupancyGrid, config: &MapConfig) -> RoomSegmentation {
    let frame = grid.frame;
    let n = frame.len();
    if n == 0 {
        return RoomSegmentation { labels: Vec::new(), rooms: Vec::new(), doors: Vec::new() };
    }
    let (w, h) = (frame.width as usize, frame.height as usize);
    let free: Vec<bool> = grid.cells.iter().map(|c| *c == CellState::Free).collect();
    let near_structure: Vec<bool> = if config.structure_dilation_m > 0.0 {
        let dt = distance_transform(w, h, &grid.structure);
        let r = (config.structure_dilation_m / frame.resolution_m) as f32;
        dt.iter().map(|d| *d <= r).collect()
    } else {
        grid.structure.clone()
    };
    // Seeds: components of seen free cells away from structure and out of narrow passages. Rooms are
    // segmented on seen floor only: filled holes are floor no frame saw, which would widen passages (a hole
    // beside a door joins the rooms on either side) and which a wall whose far face was never seen lets
    // into the wrong room; they stay free but belong to no room.
    let seen_free: Vec<bool> = (0..n).map(|i| free[i] && !grid.is_filled(i)).collect();
    let clearance = distance_transform(w, h, &seen_free.iter().map(|f| !f).collect::<Vec<_>>());
    let min_clearance = (config.passage_clearance_m / frame.resolution_m) as f32;
    let seedable: Vec<bool> =
        (0..n).map(|i| seen_free[i] && !near_structure[i] && clearance[i] > min_clearance).collect();
    let (mut component, mut sizes) = components(&frame, &seedable);
    let min_cells = (config.min_room_area_m2 / frame.cell_area_m2()).ceil() as usize;
    // Doors whose lintel was never seen: split seeds that only a door-wide passage joins.
    let door = config.door_clearance_m;
    if door > 0.0 {
        split_at_doors(
            &frame,
            &clearance,
            (door / frame.resolution_m) as f32,
            min_cells.max(1),
            &mut component,
            &mut sizes,
        );
    }
    let mut room_of_component = vec![0u32; sizes.len()];
    let mut rooms = 0u32;
    for (c, &size) in sizes.iter().enumerate().skip(1) {
        if size >= min_cells.max(1) {
            rooms += 1;
            room_of_component[c] = rooms;
        }
    }
    // Wavefront through free cells from every seed at once.
    let mut labels = vec![0u32; n];
    let mut queue = VecDeque::new();
    for i in 0..n {
        if component[i] != 0 && room_of_component[component[i] as usize] != 0 {
            labels[i] = room_of_component[component[i] as usize];
            queue.push_back(i);
        }
    }
    while let Some(i) = queue.pop_front() {
        for j in neighbours4(&frame, i) {
            if seen_free[j] && labels[j] == 0 {
                labels[j] = labels[i];
                queue.push_back(j);
            }
        }
    }
    // Rooms meeting along a boundary wider than any door are one room (doors are found on seen floor).
    let mut count = rooms as usize;
    loop {
        let doors = find_doors(&frame, &labels);
        let Some(wide) = doors.iter().find(|d| d.width_m > config.max_door_width_m) else {
            let rooms_out = describe_rooms(&frame, &labels, count);
            return RoomSegmentation { labels, rooms: rooms_out, doors };
        };
        let (keep, merge) = (wide.rooms[0] as u32 + 1, wide.rooms[1] as u32 + 1);
        for l in &mut labels {
            if *l == merge {
                *l = keep;
            } else if *l > merge {
                *l -= 1;
            }
        }
        count -= 1;
    }
}

/// 4-connected components of the `mask` cells, numbered from 1 in scan order (0 outside the mask), and their
/// sizes (`sizes[0]` unused).
fn components(frame: &GridFrame, mask: &[bool]) -> (Vec<u32>, Vec<usize>) {
    let mut labels = vec![0u32; mask.len()];
    let mut sizes = vec![0usize];
    let mut queue = VecDeque::new();
    for start in 0..mask.len() {
        if !mask[start] || labels[start] != 0 {
            continue;
        }
        let id = sizes.len() as u32;
        sizes.push(0);
        labels[start] = id;
        queue.push_back(start);
        while let Some(i) = queue.pop_front() {
            sizes[id as usize] += 1;
            for j in neighbours4(frame, i) {
                if mask[j] && labels[j] == 0 {
                    labels[j] = id;
                    queue.push_back(j);
                }
            }
        }
    }
    (labels, sizes)
}

/// Splits each seed component whose cells farther than `door` from non-floor fall into two or more parts of at
/// least `min_cells`: the parts become the seeds (a door narrower than twice `door` joined them).
fn split_at_doors(
    frame: &GridFrame,
    clearance: &[f32],
    door: f32,
    min_cells: usize,
    component: &mut [u32],
    sizes: &mut Vec<usize>,
) {
    let n = component.len();
    let deep: Vec<bool> = (0..n).map(|i| component[i] != 0 && clearance[i] > door).collect();
    let (sub, sub_sizes) = components(frame, &deep);
    // Each part lies inside one component.
    let mut sub_parent = vec![0u32; sub_sizes.len()];
    for i in 0..n {
        sub_parent[sub[i] as usize] = component[i];
    }
    let mut big_parts = vec![0usize; sizes.len()];
    for (k, &size) in sub_sizes.iter().enumerate().skip(1) {
        if size >= min_cells {
            big_parts[sub_parent[k] as usize] += 1;
        }
    }
    let mut new_id = vec![0u32; sub_sizes.len()];
    for (k, &size) in sub_sizes.iter().enumerate().skip(1) {
        if size >= min_cells && big_parts[sub_parent[k] as usize] >= 2 {
            new_id[k] = sizes.len() as u32;
            sizes.push(size);
        }
    }
    for i in 0..n {
        let c = component[i] as usize;
        if c != 0 && big_parts[c] >= 2 {
            component[i] = new_id[sub[i] as usize];
        }
    }
    for (c, parts) in big_parts.iter().enumerate() {
        if *parts >= 2 {
            sizes[c] = 0;
        }
    }
}

pub(crate) fn describe_rooms(frame: &GridFrame, labels: &[u32], count: usize) -> Vec<Room> {
    let mut cells: Vec<Vec<[f64; 2]>> = vec![Vec::new(); count];
    for (i, &l) in labels.iter().enumerate() {
        if l > 0 {
            let (c, r) = ((i % frame.width as usize) as u32, (i / frame.width as usize) as u32);
            cells[l as usize - 1].push(frame.world_from_cell(c, r));
        }
    }
    let half = frame.resolution_m / 2.0;
    cells
        .into_iter()
        .enumerate()
        .map(|(id, pts)| {
            let k = pts.len().max(1) as f64;
            let centroid = pts.iter().fold([0.0, 0.0], |a, p| [a[0] + p[0] / k, a[1] + p[1] / k]);
            let corners: Vec<[f64; 2]> = pts
                .iter()
                .flat_map(|p| {
                    [[-half, -half], [half, -half], [half, half], [-half, half]]
                        .map(|d| [p[0] + d[0], p[1] + d[1]])
                })
                .collect();
            Room {
                id,
                area_m2: pts.len() as f64 * frame.cell_area_m2(),
                centroid_m: centroid,
                polygon_m: convex_hull(corners),
                objects: Vec::new(),
            }
        })
        .collect()
}

/// Doors: 4-adjacent cells of two different rooms, grouped per room pair into connected clusters.
fn find_doors(frame: &GridFrame, labels: &[u32]) -> Vec<Door> {
    let w = frame.width as usize;
    let mut boundary: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (i, &a) in labels.iter().enumerate() {
        if a == 0 {
            continue;
        }
        for j in neighbours4(frame, i) {
            let b = labels[j];
            if b != 0 && b != a && j > i {
                boundary.entry((a.min(b), a.max(b))).or_default().extend([i, j]);
            }
        }
    }
    let mut doors = Vec::new();
    for ((a, b), mut cells) in boundary {
        cells.sort_unstable();
        cells.dedup();
        // Clusters: cells within two cells of each other (8-neighbourhood grown by one).
        let mut cluster = vec![usize::MAX; cells.len()];
        let mut next = 0;
        for s in 0..cells.len() {
            if cluster[s] != usize::MAX {
                continue;
            }
            cluster[s] = next;
            let mut stack = vec![s];
            while let Some(k) = stack.pop() {
                let (kx, ky) = ((cells[k] % w) as i64, (cells[k] / w) as i64);
                for (m, &cm) in cells.iter().enumerate() {
                    if cluster[m] == usize::MAX {
                        let (mx, my) = ((cm % w) as i64, (cm / w) as i64);
                        if (mx - kx).abs() <= 2 && (my - ky).abs() <= 2 {
                            cluster[m] = next;
                            stack.push(m);
                        }
                    }
                }
            }
            next += 1;
        }
        for c in 0..next {
            let pts: Vec<[f64; 2]> = cells
                .iter()
                .zip(&cluster)
                .filter(|(_, k)| **k == c)
                .map(|(&i, _)| frame.world_from_cell((i % w) as u32, (i / w) as u32))
                .collect();
            let k = pts.len() as f64;
            let centre = pts.iter().fold([0.0, 0.0], |a, p| [a[0] + p[0] / k, a[1] + p[1] / k]);
            // Width: the extent of the boundary along its longer axis.
            let (mut min, mut max) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
            for p in &pts {
                min = [min[0].min(p[0]), min[1].min(p[1])];
                max = [max[0].max(p[0]), max[1].max(p[1])];
            }
            let width = (max[0] - min[0]).max(max[1] - min[1]) + frame.resolution_m;
            doors.push(Door {
                id: doors.len(),
                rooms: [a as usize - 1, b as usize - 1],
                position_m: centre,
                width_m: width,
            });
        }
    }
    doors
}

/// Convex hull (Andrew's monotone chain), counter-clockwise, without repeated points.
pub fn convex_hull(mut points: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
    points.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
    points.dedup();
    if points.len() < 3 {
        return points;
    }
    let cross =
        |o: [f64; 2], a: [f64; 2], b: [f64; 2]| (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
    let mut lower: Vec<[f64; 2]> = Vec::new();
    for &p in &points {
        while lower.len() >= 2 && cross(lower[lower.len() - 2], lower[lower.len() - 1], p) <= 0.0 {
            lower.pop();
        }
        lower.push(p);
    }
    let mut upper: Vec<[f64; 2]> = Vec::new();
    for &p in points.iter().rev() {
        while upper.len() >= 2 && cross(upper[upper.len() - 2], upper[upper.len() - 1], p) <= 0.0 {
            upper.pop();
        }
        upper.push(p);
    }
    lower.pop();
    upper.pop();
    lower.extend(upper);
    lower
}

/// The room holding a map point: the label of its cell, or of the nearest labelled cell within `radius_m`.
pub fn room_at(frame: &GridFrame, labels: &[u32], x: f64, y: f64, radius_m: f64) -> Option<usize> {
    let r = (radius_m / frame.resolution_m).ceil() as i64;
    let col = ((x - frame.origin_x_m) / frame.resolution_m).floor() as i64;
    let row = ((y - frame.origin_y_m) / frame.resolution_m).floor() as i64;
    let mut best: Option<(i64, usize)> = None;
    for dr in -r..=r {
        for dc in -r..=r {
            let (c, rr) = (col + dc, row + dr);
            if c < 0 || rr < 0 || c >= i64::from(frame.width) || rr >= i64::from(frame.height) {
                continue;
            }
            let l = labels.get(rr as usize * frame.width as usize + c as usize).copied().unwrap_or(0);
            let d = dc * dc + dr * dr;
            if l > 0 && d <= r * r && best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, l as usize - 1));
            }
        }
    }
    best.map(|(_, l)| l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::{GridPlan, grid_from_plan};

    fn edges(seg: &RoomSegmentation) -> Vec<[usize; 2]> {
        let mut e: Vec<[usize; 2]> = seg.doors.iter().map(|d| d.rooms).collect();
        e.sort_unstable();
        e.dedup();
        e
    }

    /// The room (by id) whose area contains a point.
    fn room_of(seg: &RoomSegmentation, grid: &OccupancyGrid, x: f64, y: f64) -> usize {
        room_at(&grid.frame, &seg.labels, x, y, 0.2).unwrap()
    }

    /// Two rooms, 4 m x 3 m and 3 m x 3 m, and a door of `width` in the wall between them at (4, 1.5).
    fn two_rooms(door_width_m: f64) -> OccupancyGrid {
        let plan = GridPlan {
            rooms: vec![vec![[0.0, 0.0, 4.0, 3.0]], vec![[4.0, 0.0, 7.0, 3.0]]],
            doors: vec![([4.0, 1.5], door_width_m)],
        };
        grid_from_plan(&plan, 0.05)
    }

    #[test]
    fn two_rectangles_and_a_door() {
        let grid = two_rooms(0.9);
        let seg = segment_rooms(&grid, &MapConfig::default());
        assert_eq!(seg.rooms.len(), 2);
        assert_eq!(edges(&seg), vec![[0, 1]]);
        let door = &seg.doors[0];
        assert!(
            (door.position_m[0] - 4.0).abs() < 0.15 && (door.position_m[1] - 1.5).abs() < 0.15,
            "{door:?}"
        );
        assert!(door.width_m > 0.6 && door.width_m < 1.1, "{door:?}");
        let a = room_of(&seg, &grid, 2.0, 1.5);
        assert!((seg.rooms[a].area_m2 - 12.0).abs() < 1.5, "{:?}", seg.rooms[a]);
        let graph = room_graph(&seg.rooms, &seg.doors);
        assert_eq!((graph.node_count(), graph.edge_count()), (2, 1));
    }

    #[test]
    fn filled_floor_beside_a_door_neither_joins_rooms_nor_joins_a_room() {
        let mut grid = two_rooms(0.9);
        // The wall on either side of the door never seen and filled as floor: read as seen floor, the rooms
        // would meet along 2 m, wider than any door.
        let frame = grid.frame;
        let mut filled = vec![false; frame.len()];
        for (i, cell) in grid.cells.iter_mut().enumerate() {
            let [x, y] =
                frame.world_from_cell((i % frame.width as usize) as u32, (i / frame.width as usize) as u32);
            if *cell == CellState::Occupied && (x - 4.0).abs() < 0.2 && (y - 1.5).abs() < 1.0 {
                *cell = CellState::Free;
                grid.structure[i] = false;
                filled[i] = true;
            }
        }
        grid.filled = filled.clone();
        let seg = segment_rooms(&grid, &MapConfig::default());
        assert_eq!(seg.rooms.len(), 2);
        assert_eq!(edges(&seg), vec![[0, 1]]);
        assert!(filled.iter().zip(&seg.labels).all(|(f, l)| !f || *l == 0), "filled cells have no room");
        // Read as seen floor, the same grid is one room.
        grid.filled.clear();
        assert_eq!(segment_rooms(&grid, &MapConfig::default()).rooms.len(), 1);
    }

    #[test]
    fn a_door_whose_lintel_was_never_seen_still_separates_rooms() {
        let mut grid = two_rooms(0.8);
        grid.structure = vec![false; grid.frame.len()];
        let off = MapConfig { door_clearance_m: 0.0, ..MapConfig::default() };
        assert_eq!(segment_rooms(&grid, &off).rooms.len(), 1, "joined through the door without the split");
        let seg = segment_rooms(&grid, &MapConfig::default());
        assert_eq!(seg.rooms.len(), 2);
        assert_eq!(edges(&seg), vec![[0, 1]]);
        let (a, b) = (room_of(&seg, &grid, 2.0, 1.5), room_of(&seg, &grid, 5.5, 1.5));
        assert_ne!(a, b);
        assert!((seg.rooms[a].area_m2 - 12.0).abs() < 1.5 && (seg.rooms[b].area_m2 - 9.0).abs() < 1.5);
    }

    #[test]
    fn an_l_shaped_room_stays_one_room() {
        let plan = GridPlan {
            rooms: vec![vec![[0.0, 0.0, 5.0, 2.5], [0.0, 2.5, 2.5, 6.0]], vec![[2.5, 2.5, 5.0, 6.0]]],
            doors: vec![([3.75, 2.5], 0.9)],
        };
        let grid = grid_from_plan(&plan, 0.05);
        let seg = segment_rooms(&grid, &MapConfig::default());
        assert_eq!(seg.rooms.len(), 2, "{:?}", seg.rooms);
        assert_eq!(edges(&seg), vec![[0, 1]]);
        assert_eq!(room_of(&seg, &grid, 4.5, 1.0), room_of(&seg, &grid, 1.0, 5.5));
        assert_ne!(room_of(&seg, &grid, 4.0, 4.0), room_of(&seg, &grid, 1.0, 5.5));
    }

    #[test]
    fn corridor_with_several_doors() {
        // A 1.2 m corridor along the bottom, three rooms above it, each with a door onto it, and one door
        // between the first two rooms.
        let plan = GridPlan {
            rooms: vec![
                vec![[0.0, 0.0, 9.0, 1.2]],
                vec![[0.0, 1.2, 3.0, 4.5]],
                vec![[3.0, 1.2, 6.0, 4.5]],
                vec![[6.0, 1.2, 9.0, 4.5]],
            ],
            doors: vec![([1.5, 1.2], 0.8), ([4.5, 1.2], 0.9), ([7.5, 1.2], 1.0), ([3.0, 3.0], 0.8)],
        };
        let grid = grid_from_plan(&plan, 0.05);
        let seg = segment_rooms(&grid, &MapConfig::default());
        assert_eq!(seg.rooms.len(), 4, "{:?}", seg.rooms);
        let corridor = room_of(&seg, &grid, 4.5, 0.6);
        let rooms = [1.5, 4.5, 7.5].map(|x| room_of(&seg, &grid, x, 3.0));
        let mut expected: Vec<[usize; 2]> =
            rooms.iter().map(|&r| [r.min(corridor), r.max(corridor)]).collect();
        expected.push([rooms[0].min(rooms[1]), rooms[0].max(rooms[1])]);
        expected.sort_unstable();
        assert_eq!(edges(&seg), expected);
    }

    #[test]
    fn an_empty_grid_has_no_rooms() {
        let seg = segment_rooms(&OccupancyGrid::empty(0.05), &MapConfig::default());
        assert!(seg.rooms.is_empty() && seg.doors.is_empty());
    }
}
