//! The semantic map: occupancy, rooms, doors and objects in 3D (in the map frame, [`paths::MAP`]), the
//! occupancy grid as a top-down image ([`paths::TOPDOWN`]) and the room graph ([`paths::ROOM_GRAPH`]).

use gst_core::Image;
use gst_map::render::room_color;
use gst_map::{CellState, GridFrame, SemanticMap};

use crate::convert::{rgb, transform};
use crate::{FrameTime, Recorder, VizError, paths};

const OCCUPIED_COLOR: [u8; 3] = [40, 40, 40];
const FREE_COLOR: [u8; 3] = [235, 235, 235];
const UNKNOWN_COLOR: [u8; 3] = [128, 128, 128];
const DOOR_COLOR: [u8; 3] = [235, 180, 40];
const OBJECT_COLOR: [u8; 3] = [200, 200, 200];
const TRAJECTORY_COLOR: [u8; 3] = [40, 90, 255];
const OUTLINE_RADIUS_M: f32 = 0.02;
const DOOR_RADIUS_M: f32 = 0.08;
/// Outline widths in the top-down image, pixels (= cells).
const TOPDOWN_LINE_PX: f32 = 0.6;
const TOPDOWN_DOOR_PX: f32 = 2.0;
/// Room-graph layout: node position = room centroid (map x, −y) times this, so that a house spans a few
/// hundred of the graph view's units.
const GRAPH_UNITS_PER_M: f32 = 40.0;

/// The colour of a cell in the map images: free cells take their room's colour (as `semantic.png`).
fn cell_color(state: CellState, room_label: u32) -> [u8; 3] {
    match state {
        CellState::Occupied => OCCUPIED_COLOR,
        CellState::Unknown => UNKNOWN_COLOR,
        CellState::Free if room_label > 0 => room_color(room_label as usize - 1),
        CellState::Free => FREE_COLOR,
    }
}

/// Pixel of a map point in the top-down image: one pixel per cell, column = x, row 0 = the largest y (the
/// map's +y is up in the image), pixel corners at integer coordinates as in Rerun's 2D space.
fn topdown_pixel(grid: &GridFrame, xy: [f64; 2]) -> [f32; 2] {
    let u = (xy[0] - grid.origin_x_m) / grid.resolution_m;
    let v = f64::from(grid.height) - (xy[1] - grid.origin_y_m) / grid.resolution_m;
    [u as f32, v as f32]
}

/// The corners of a yawed box's footprint, closed.
fn footprint(center: [f64; 3], size: [f64; 3], yaw_rad: f64) -> [[f64; 2]; 5] {
    let (s, c) = yaw_rad.sin_cos();
    let corner = |a: f64, b: f64| {
        let (x, y) = (a * size[0] / 2.0, b * size[1] / 2.0);
        [center[0] + c * x - s * y, center[1] + s * x + c * y]
    };
    [corner(-1.0, -1.0), corner(1.0, -1.0), corner(1.0, 1.0), corner(-1.0, 1.0), corner(-1.0, -1.0)]
}

fn object_label(class: Option<gst_core::ObjectClass>, id: usize) -> String {
    match class {
        Some(class) => format!("{} #{id}", class.text()),
        None => format!("object #{id}"),
    }
}

impl Recorder {
    /// Logs a semantic map: static, or at a frame when `time` is given (a map growing during a run). The
    /// map frame is placed under the estimate's world by `map_from_world` (inverted, at [`paths::MAP`]).
    pub fn log_semantic_map(&self, map: &SemanticMap, time: Option<&FrameTime>) -> Result<(), VizError> {
        if !self.is_on() {
            return Ok(());
        }
        let grid = &map.occupancy;
        let frame = grid.frame;
        let floor_z = grid.floor_z_m as f32;
        let label_at = |i: usize| map.room_labels.get(i).copied().unwrap_or(0);

        // 3D cells at floor height, unknown ones left out.
        let mut cell_positions = Vec::new();
        let mut cell_colors = Vec::new();
        // Top-down image, row 0 = the grid's last row (largest y).
        let mut pixels = Vec::with_capacity(frame.len());
        for row in (0..frame.height).rev() {
            for col in 0..frame.width {
                let i = frame.index(col, row);
                let state = grid.cells.get(i).copied().unwrap_or(CellState::Unknown);
                let color = cell_color(state, label_at(i));
                pixels.push(color);
                if state != CellState::Unknown {
                    let [x, y] = frame.world_from_cell(col, row);
                    cell_positions.push([x as f32, y as f32, floor_z]);
                    cell_colors.push(rgb(color));
                }
            }
        }
        let topdown = Image::from_vec(frame.width, frame.height, pixels)
            .map_err(|e| VizError::Invalid(format!("occupancy grid: {e}")))?;

        let room_names: Vec<String> =
            map.rooms.iter().map(|r| format!("room {} ({:.1} m²)", r.id, r.area_m2)).collect();
        let closed = |polygon: &[[f64; 2]]| -> Vec<[f64; 2]> {
            let mut strip = polygon.to_vec();
            if let Some(first) = strip.first().copied() {
                strip.push(first);
            }
            strip
        };
        let room_strips_3d: Vec<Vec<[f32; 3]>> = map
            .rooms
            .iter()
            .map(|r| {
                closed(&r.polygon_m).iter().map(|p| [p[0] as f32, p[1] as f32, floor_z + 0.01]).collect()
            })
            .collect();
        let room_strips_2d: Vec<Vec<[f32; 2]>> = map
            .rooms
            .iter()
            .map(|r| closed(&r.polygon_m).iter().map(|p| topdown_pixel(&frame, *p)).collect())
            .collect();
        let room_colors: Vec<rerun::Color> = map.rooms.iter().map(|r| rgb(room_color(r.id))).collect();
        let room_index = |id: usize| map.rooms.iter().position(|r| r.id == id);

        let objects = &map.objects;
        let object_labels: Vec<String> = objects.iter().map(|o| object_label(o.class, o.id)).collect();
        let object_colors: Vec<rerun::Color> =
            objects.iter().map(|o| rgb(o.class.map_or(OBJECT_COLOR, |c| c.color()))).collect();

        let stream = match time {
            Some(time) => self.at_frame(time),
            None => self.untimed(),
        };
        let Some(stream) = stream else { return Ok(()) };
        let is_static = time.is_none();
        let log = |path: &str, what: &dyn rerun::AsComponents| stream.log_with_static(path, is_static, what);

        log(paths::MAP, &transform(&map.map_from_world.inverse()))?;
        log(
            paths::MAP_OCCUPANCY,
            &rerun::Points3D::new(cell_positions)
                .with_colors(cell_colors)
                .with_radii([(frame.resolution_m / 2.0) as f32]),
        )?;
        log(
            paths::MAP_ROOMS,
            &rerun::LineStrips3D::new(room_strips_3d)
                .with_labels(room_names.iter().map(String::as_str))
                .with_colors(room_colors.clone())
                .with_radii([OUTLINE_RADIUS_M]),
        )?;
        log(
            paths::MAP_DOORS,
            &rerun::Points3D::new(
                map.doors.iter().map(|d| [d.position_m[0] as f32, d.position_m[1] as f32, floor_z + 0.05]),
            )
            .with_labels(
                map.doors.iter().map(|d| format!("door {}: rooms {} – {}", d.id, d.rooms[0], d.rooms[1])),
            )
            .with_colors([rgb(DOOR_COLOR)])
            .with_radii([DOOR_RADIUS_M]),
        )?;
        log(
            paths::MAP_OBJECTS,
            &rerun::Boxes3D::from_centers_and_half_sizes(
                objects.iter().map(|o| crate::convert::point3(o.bbox.center_m)),
                objects.iter().map(|o| o.bbox.size_m.map(|s| (s / 2.0) as f32)),
            )
            .with_quaternions(objects.iter().map(|o| {
                let half = o.bbox.yaw_rad / 2.0;
                rerun::Quaternion::from_xyzw([0.0, 0.0, half.sin() as f32, half.cos() as f32])
            }))
            .with_labels(object_labels.iter().map(String::as_str))
            .with_colors(object_colors.clone()),
        )?;

        log(
            paths::TOPDOWN_OCCUPANCY,
            &rerun::Image::from_rgb24(
                topdown.data().iter().flatten().copied().collect::<Vec<u8>>(),
                [frame.width, frame.height],
            ),
        )?;
        log(
            paths::TOPDOWN_ROOMS,
            &rerun::LineStrips2D::new(room_strips_2d)
                .with_labels(room_names.iter().map(String::as_str))
                .with_colors(room_colors.clone())
                .with_radii([TOPDOWN_LINE_PX]),
        )?;
        log(
            paths::TOPDOWN_DOORS,
            &rerun::Points2D::new(map.doors.iter().map(|d| topdown_pixel(&frame, d.position_m)))
                .with_colors([rgb(DOOR_COLOR)])
                .with_radii([TOPDOWN_DOOR_PX]),
        )?;
        log(
            paths::TOPDOWN_OBJECTS,
            &rerun::LineStrips2D::new(objects.iter().map(|o| {
                footprint(o.bbox.center_m, o.bbox.size_m, o.bbox.yaw_rad).map(|p| topdown_pixel(&frame, p))
            }))
            .with_labels(object_labels.iter().map(String::as_str))
            .with_colors(object_colors)
            .with_radii([TOPDOWN_LINE_PX]),
        )?;
        log(
            paths::TOPDOWN_TRAJECTORY,
            &rerun::LineStrips2D::new([map
                .trajectory
                .iter()
                .map(|s| topdown_pixel(&frame, [s.position_m[0], s.position_m[1]]))
                .collect::<Vec<_>>()])
            .with_colors([rgb(TRAJECTORY_COLOR)])
            .with_radii([TOPDOWN_LINE_PX]),
        )?;

        let node_ids: Vec<String> = map.rooms.iter().map(|r| format!("room{}", r.id)).collect();
        let edges: Vec<(String, String)> = map
            .doors
            .iter()
            .filter(|d| room_index(d.rooms[0]).is_some() && room_index(d.rooms[1]).is_some())
            .map(|d| (format!("room{}", d.rooms[0]), format!("room{}", d.rooms[1])))
            .collect();
        log(
            paths::ROOM_GRAPH,
            &rerun::GraphNodes::new(node_ids)
                .with_positions(map.rooms.iter().map(|r| {
                    [
                        r.centroid_m[0] as f32 * GRAPH_UNITS_PER_M,
                        -(r.centroid_m[1] as f32) * GRAPH_UNITS_PER_M,
                    ]
                }))
                .with_labels(room_names.iter().map(String::as_str))
                .with_colors(room_colors),
        )?;
        log(
            paths::ROOM_GRAPH,
            &rerun::GraphEdges::new(edges).with_graph_type(rerun::components::GraphType::Undirected),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topdown_pixels_put_the_map_y_axis_up() {
        let grid = GridFrame { origin_x_m: -1.0, origin_y_m: 2.0, resolution_m: 0.5, width: 4, height: 6 };
        // The grid's lower-left corner is the image's bottom-left corner.
        assert_eq!(topdown_pixel(&grid, [-1.0, 2.0]), [0.0, 6.0]);
        // The centre of cell (col 1, row 0) is in image row 5 (the last one).
        let [x, y] = grid.world_from_cell(1, 0);
        assert_eq!(topdown_pixel(&grid, [x, y]), [1.5, 5.5]);
    }

    #[test]
    fn a_footprint_is_a_closed_rotated_rectangle() {
        let f = footprint([1.0, 1.0, 0.5], [2.0, 1.0, 1.0], std::f64::consts::FRAC_PI_2);
        assert_eq!(f[0], f[4]);
        // Rotated by 90°, the 2 m side runs along y.
        let extent_y =
            f.iter().map(|p| p[1]).fold(f64::MIN, f64::max) - f.iter().map(|p| p[1]).fold(f64::MAX, f64::min);
        assert!((extent_y - 2.0).abs() < 1e-9);
    }
}
