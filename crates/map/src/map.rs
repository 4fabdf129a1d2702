//! The semantic map and its builder: posed frames in, occupancy + rooms + room graph + objects out;
//! saving and loading (`map.json`), and the scene-graph JSON a VLM is given.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use gst_core::{DepthImage, PinholeCamera, Pose3, RgbImage};

use crate::candidates::{CandidateAccumulator, ObjectCandidate};
use crate::completion::complete_rooms;
use crate::grid::GridFrame;
use crate::objects::{ObjectLandmark, ObjectMap, Observation};
use crate::occupancy::{CellState, DepthSample, OccupancyAccumulator, OccupancyGrid, SampleRays};
use crate::rooms::{Door, Room, RoomGraph, room_at, room_graph, segment_rooms};
use crate::{MapConfig, MapError};

/// Version of `map.json`, raised whenever what a map holds changes, so that cached maps of an older build
/// are rebuilt (3: occupancy with the surface test and 8 m range; 2: object candidates).
pub const MAP_FORMAT_VERSION: u32 = 3;
/// Landmarks seen fewer times are not reported.
const MIN_LANDMARK_OBSERVATIONS: u32 = 2;
/// Objects farther than this from every room cell are in no room, metres.
const OBJECT_ROOM_RADIUS_M: f64 = 1.0;

/// One posed frame for the map builder.
#[derive(Clone, Copy, Debug)]
pub struct PosedFrame<'a> {
    pub index: usize,
    pub timestamp_s: f64,
    /// The camera's pose in the world of the trajectory (e.g. SLAM's).
    pub world_from_camera: Pose3,
    /// Depth in metres registered to the camera, when the frame has it.
    pub depth: Option<&'a DepthImage>,
    /// The colour image (registered to the depth), when given: it colours the object candidates.
    pub rgb: Option<&'a RgbImage>,
    /// Object observations of this frame (from a [`crate::Perception`]).
    pub observations: &'a [Observation],
}

/// The rotation `map_from_world` that turns the trajectory's world into a gravity-aligned map frame (z up),
/// estimated from the camera poses: a camera carried without roll keeps its x axis horizontal, so up is the
/// direction most nearly perpendicular to every camera x axis (the smallest eigenvector of their scatter);
/// its sign makes the cameras' -y axes point up on average. Identity for fewer than two distinct headings.
/// One pose per frame of `sequence` from `trajectory`, matched by timestamp (within 1 ms); `None` for frames
/// the trajectory lacks (SLAM reports only tracked frames).
pub fn poses_per_frame(
    sequence: &gst_io::TumSequence,
    trajectory: &gst_core::Trajectory,
) -> Vec<Option<Pose3>> {
    let stamps: Vec<f64> = trajectory.poses().iter().map(|p| p.timestamp_s).collect();
    sequence
        .entries()
        .iter()
        .map(|e| {
            let k = stamps.partition_point(|t| *t < e.timestamp_s - 1e-4);
            trajectory
                .poses()
                .get(k)
                .filter(|p| (p.timestamp_s - e.timestamp_s).abs() < 1e-3)
                .map(|p| p.world_from_camera)
        })
        .collect()
}

/// The map of a TUM RGB-D sequence: every `config.frame_stride`-th frame that has a pose in `frame_poses`
/// (colour, depth and `perception`'s observations), in the gravity-aligned frame of the poses, with the
/// sequence's calibration. What the map answerer and `gst train-objects` build (`gst map` adds progress and
/// recording to the same loop).
pub fn map_sequence(
    sequence: &gst_io::TumSequence,
    frame_poses: &[Option<Pose3>],
    config: MapConfig,
    perception: &mut dyn crate::Perception,
) -> Result<SemanticMap, MapError> {
    let camera = sequence.calibration().map(|c| c.camera).ok_or_else(|| MapError::InvalidInput {
        path: sequence.dir().into(),
        message: "no calibration.yaml".into(),
    })?;
    let known: Vec<Pose3> = frame_poses.iter().flatten().copied().collect();
    let stride = config.frame_stride.max(1);
    let mut builder = MapBuilder::new(config, camera, gst_core::gravity_alignment(&known))?;
    let wanted: Vec<(usize, Pose3)> = frame_poses
        .iter()
        .enumerate()
        .filter_map(|(k, pose)| pose.filter(|_| k.is_multiple_of(stride)).map(|pose| (k, pose)))
        .collect();
    // Frames are decoded on a thread of their own, a few ahead of the integration (decoding is about as
    // long as integrating a frame); they arrive in order, so the map is the same.
    std::thread::scope(|threads| -> Result<(), MapError> {
        let (send, receive) = std::sync::mpsc::sync_channel(4);
        let wanted = &wanted;
        threads.spawn(move || {
            for &(k, _) in wanted {
                let frame = sequence.frame(k);
                let failed = frame.is_err();
                if send.send(frame).is_err() || failed {
                    return;
                }
            }
        });
        for &(k, pose) in wanted {
            let frame = receive.recv().map_err(|_| MapError::InvalidInput {
                path: sequence.dir().into(),
                message: format!("frame {k}: the reader stopped"),
            })??;
            let observations = perception.observe(k, &frame.rgb)?;
            builder.add_frame(&PosedFrame {
                index: k,
                timestamp_s: frame.timestamp_s,
                world_from_camera: pose,
                depth: Some(&frame.depth),
                rgb: Some(&frame.rgb),
                observations: &observations,
            })?;
        }
        Ok(())
    })?;
    Ok(builder.finish())
}

/// Timing and counts of a build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapStats {
    pub frames: usize,
    pub integrated_frames: usize,
    pub frames_without_depth: usize,
    /// Time in `add_frame` (occupancy and objects), seconds.
    pub integrate_seconds: f64,
    /// Where `integrate_seconds` went: back-projecting the depth samples, the occupancy grid, the object
    /// candidates' colour voxels and the perception's object landmarks, seconds.
    #[serde(default)]
    pub stages: StageSeconds,
    /// Time in `finish` (rooms, landmarks), seconds.
    pub finish_seconds: f64,
}

/// Time per stage of [`MapBuilder::add_frame`], seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSeconds {
    pub sampling: f64,
    pub occupancy: f64,
    pub candidates: f64,
    pub objects: f64,
}

impl MapStats {
    pub fn ms_per_frame(&self) -> f64 {
        1e3 * self.integrate_seconds / self.frames.max(1) as f64
    }
}

/// A trajectory sample in the map frame.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrajectorySample {
    pub frame: usize,
    pub timestamp_s: f64,
    pub position_m: [f64; 3],
    /// Heading of the camera's optical axis in the map's floor plane, radians from +x, counter-clockwise.
    pub yaw_rad: f64,
}

/// The semantic map.
#[derive(Clone, Debug, PartialEq)]
pub struct SemanticMap {
    /// Gravity alignment: map frame (z up) from the world of the poses.
    pub map_from_world: Pose3,
    pub occupancy: OccupancyGrid,
    /// Per occupancy cell, room id + 1 (0 = none).
    pub room_labels: Vec<u32>,
    pub rooms: Vec<Room>,
    pub doors: Vec<Door>,
    pub objects: Vec<ObjectLandmark>,
    /// Class-agnostic object candidates from geometry and colour (frames given with colour only).
    pub candidates: Vec<ObjectCandidate>,
    pub trajectory: Vec<TrajectorySample>,
    pub stats: MapStats,
}

/// Builds a [`SemanticMap`] frame by frame.
#[derive(Debug)]
pub struct MapBuilder {
    config: MapConfig,
    camera: PinholeCamera,
    /// The camera's rays at the sampled pixels.
    rays: SampleRays,
    /// The current frame's depth samples, kept between frames for its allocation.
    samples: Vec<DepthSample>,
    map_from_world: Pose3,
    occupancy: OccupancyAccumulator,
    objects: ObjectMap,
    candidates: CandidateAccumulator,
    trajectory: Vec<TrajectorySample>,
    stats: MapStats,
}

impl MapBuilder {
    /// `map_from_world` is the gravity alignment of the poses' world ([`gravity_alignment`], or identity
    /// when the world is already z up).
    pub fn new(config: MapConfig, camera: PinholeCamera, map_from_world: Pose3) -> Result<Self, MapError> {
        config.validate()?;
        camera.validate()?;
        Ok(Self {
            occupancy: OccupancyAccumulator::new(&config),
            objects: ObjectMap::new(&config),
            candidates: CandidateAccumulator::new(),
            rays: SampleRays::new(&camera, config.pixel_stride as usize),
            samples: Vec::new(),
            config,
            camera,
            map_from_world,
            trajectory: Vec::new(),
            stats: MapStats::default(),
        })
    }

    pub fn config(&self) -> &MapConfig {
        &self.config
    }

    /// Adds one frame. Frames without depth only extend the trajectory.
    pub fn add_frame(&mut self, frame: &PosedFrame<'_>) -> Result<(), MapError> {
        let started = Instant::now();
        self.stats.frames += 1;
        let map_from_camera = self.map_from_world * frame.world_from_camera;
        let t = map_from_camera.translation();
        let forward = map_from_camera.rotation_matrix().column(2).into_owned();
        self.trajectory.push(TrajectorySample {
            frame: frame.index,
            timestamp_s: frame.timestamp_s,
            position_m: [t.x, t.y, t.z],
            yaw_rad: forward.y.atan2(forward.x),
        });
        match frame.depth {
            None => self.stats.frames_without_depth += 1,
            Some(depth) => {
                if (depth.width(), depth.height()) != (self.camera.width, self.camera.height) {
                    return Err(MapError::Invalid(format!(
                        "frame {}: depth is {}x{} but the camera is {}x{}",
                        frame.index,
                        depth.width(),
                        depth.height(),
                        self.camera.width,
                        self.camera.height
                    )));
                }
                if frame.index.is_multiple_of(self.config.frame_stride) {
                    let mut lap = Instant::now();
                    let mut stage = |seconds: &mut f64| {
                        let now = Instant::now();
                        *seconds += (now - lap).as_secs_f64();
                        lap = now;
                    };
                    let stages = &mut self.stats.stages;
                    let samples = &mut self.samples;
                    self.rays.sample_into(depth, &map_from_camera, samples);
                    let samples = &samples[..];
                    stage(&mut stages.sampling);
                    self.occupancy.integrate_samples(samples, &map_from_camera);
                    stage(&mut stages.occupancy);
                    // Colour of another size than the depth is ignored (the candidates need both).
                    if let (Some(rgb), Some(floor)) = (frame.rgb, self.occupancy.floor_z_m())
                        && (rgb.width(), rgb.height()) == (depth.width(), depth.height())
                    {
                        self.candidates.integrate(samples, rgb, floor);
                    }
                    stage(&mut stages.candidates);
                    self.objects.add_frame(
                        frame.index,
                        &self.camera,
                        depth,
                        &map_from_camera,
                        frame.observations,
                    );
                    stage(&mut stages.objects);
                    self.stats.integrated_frames += 1;
                }
            }
        }
        self.stats.integrate_seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// Segments rooms, fits object boxes and returns the map. An empty input gives an empty map (warned).
    pub fn finish(self) -> SemanticMap {
        let started = Instant::now();
        let mut occupancy = self.occupancy.finish();
        if occupancy.frame.is_empty() {
            tracing::warn!(frames = self.stats.frames, "no frame with usable depth: the map is empty");
        }
        let mut segmentation = segment_rooms(&occupancy, &self.config);
        complete_rooms(&mut occupancy, &mut segmentation, &self.occupancy.glimpsed(), &self.config);
        let mut rooms = segmentation.rooms;
        let objects = self.objects.landmarks(MIN_LANDMARK_OBSERVATIONS);
        let candidates = self.candidates.finish(&occupancy);
        for object in &objects {
            let [x, y, _] = object.centroid_m;
            if let Some(room) = room_at(&occupancy.frame, &segmentation.labels, x, y, OBJECT_ROOM_RADIUS_M)
                && let Some(r) = rooms.get_mut(room)
            {
                r.objects.push(object.id);
            }
        }
        let mut stats = self.stats;
        stats.finish_seconds = started.elapsed().as_secs_f64();
        SemanticMap {
            map_from_world: self.map_from_world,
            occupancy,
            room_labels: segmentation.labels,
            rooms,
            doors: segmentation.doors,
            objects,
            candidates,
            trajectory: self.trajectory,
            stats,
        }
    }
}

impl SemanticMap {
    pub fn room_graph(&self) -> RoomGraph {
        room_graph(&self.rooms, &self.doors)
    }

    /// A point of the poses' world in the map frame.
    pub fn map_from_world_point(&self, world: [f64; 3]) -> [f64; 3] {
        let p = self.map_from_world.transform_point(&nalgebra::Point3::from(world));
        [p.x, p.y, p.z]
    }

    /// The room holding a map-frame point (within 1 m of a room cell).
    pub fn room_at(&self, x: f64, y: f64) -> Option<usize> {
        room_at(&self.occupancy.frame, &self.room_labels, x, y, OBJECT_ROOM_RADIUS_M)
    }

    /// The scene graph: the text form of the map.
    pub fn scene_graph(&self) -> SceneGraph {
        let mut neighbours: Vec<Vec<usize>> = vec![Vec::new(); self.rooms.len()];
        for d in &self.doors {
            if d.rooms[0] < neighbours.len() && d.rooms[1] < neighbours.len() {
                neighbours[d.rooms[0]].push(d.rooms[1]);
                neighbours[d.rooms[1]].push(d.rooms[0]);
            }
        }
        for n in &mut neighbours {
            n.sort_unstable();
            n.dedup();
        }
        let round = |v: f64| (v * 100.0).round() / 100.0;
        let mut visited: Vec<usize> = Vec::new();
        for s in &self.trajectory {
            if let Some(room) = self.room_at(s.position_m[0], s.position_m[1])
                && visited.last() != Some(&room)
            {
                visited.push(room);
            }
        }
        let length: f64 = self
            .trajectory
            .windows(2)
            .map(|p| {
                ((p[1].position_m[0] - p[0].position_m[0]).powi(2)
                    + (p[1].position_m[1] - p[0].position_m[1]).powi(2))
                .sqrt()
            })
            .sum();
        SceneGraph {
            format: SCENE_GRAPH_FORMAT.into(),
            frame: "map: x, y on the floor plane, z up, metres; floor at floor_z_m".into(),
            floor_z_m: round(self.occupancy.floor_z_m),
            ceiling_z_m: round(self.occupancy.ceiling_z_m),
            free_area_m2: round(self.occupancy.free_area_m2()),
            rooms: self
                .rooms
                .iter()
                .map(|r| SceneRoom {
                    id: r.id,
                    area_m2: round(r.area_m2),
                    centroid: r.centroid_m.map(round),
                    polygon: r.polygon_m.iter().map(|p| p.map(round)).collect(),
                    objects: r.objects.clone(),
                    neighbours: neighbours.get(r.id).cloned().unwrap_or_default(),
                })
                .collect(),
            doors: self
                .doors
                .iter()
                .map(|d| SceneDoor {
                    id: d.id,
                    rooms: d.rooms,
                    position: d.position_m.map(round),
                    width_m: round(d.width_m),
                })
                .collect(),
            objects: self
                .objects
                .iter()
                .map(|o| SceneObject {
                    id: o.id,
                    class: o.class.map(|c| c.text().to_string()),
                    centroid: o.centroid_m.map(round),
                    size_m: o.bbox.size_m.map(round),
                    yaw_deg: o.bbox.yaw_rad.to_degrees().round(),
                    room: self.room_at(o.centroid_m[0], o.centroid_m[1]),
                    observations: o.observations,
                    first_frame: o.first_frame,
                    last_frame: o.last_frame,
                })
                .collect(),
            trajectory: SceneTrajectory {
                frames: self.trajectory.len(),
                duration_s: round(match (self.trajectory.first(), self.trajectory.last()) {
                    (Some(a), Some(b)) => b.timestamp_s - a.timestamp_s,
                    _ => 0.0,
                }),
                length_m: round(length),
                start: self.trajectory.first().map(|s| [round(s.position_m[0]), round(s.position_m[1])]),
                end: self.trajectory.last().map(|s| [round(s.position_m[0]), round(s.position_m[1])]),
                rooms_visited: visited,
            },
        }
    }

    /// Writes `map.json` (everything, loadable with [`SemanticMap::load`]) and `scene_graph.json` into `dir`.
    pub fn save(&self, dir: &Path) -> Result<(), MapError> {
        std::fs::create_dir_all(dir).map_err(|source| MapError::Io { path: dir.into(), source })?;
        gst_io::write_json(&dir.join(MAP_FILE), &MapRecord::from_map(self))?;
        gst_io::write_json(&dir.join(SCENE_GRAPH_FILE), &self.scene_graph())?;
        Ok(())
    }

    /// Reads `dir/map.json`.
    pub fn load(dir: &Path) -> Result<Self, MapError> {
        let path = dir.join(MAP_FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|source| MapError::Io { path: path.clone(), source })?;
        let record: MapRecord =
            serde_json::from_str(&text).map_err(|source| MapError::Json { path: path.clone(), source })?;
        record.into_map().map_err(|message| MapError::InvalidInput { path, message })
    }
}

/// File names in a map directory.
pub const MAP_FILE: &str = "map.json";
pub const SCENE_GRAPH_FILE: &str = "scene_graph.json";
/// The `format` field of `scene_graph.json`.
pub const SCENE_GRAPH_FORMAT: &str = "gst-scene-graph/1";

/// `scene_graph.json`: the map as text for a VLM. All positions are in the map frame (metres, z up), rounded
/// to centimetres. Schema:
///
/// - `rooms[]`: `id`, `area_m2` (free floor), `centroid` [x, y], `polygon` [[x, y], …] (convex outline),
///   `objects` (object ids), `neighbours` (room ids joined by a door);
/// - `doors[]`: `id`, `rooms` [a, b], `position` [x, y], `width_m`;
/// - `objects[]`: `id`, `class` (or null), `centroid` [x, y, z], `size_m` [along yaw, across, height],
///   `yaw_deg`, `room` (or null), `observations`, `first_frame`, `last_frame`;
/// - `trajectory`: `frames`, `duration_s`, `length_m`, `start`/`end` [x, y], `rooms_visited` (room ids in
///   the order the camera entered them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneGraph {
    pub format: String,
    pub frame: String,
    pub floor_z_m: f64,
    pub ceiling_z_m: f64,
    pub free_area_m2: f64,
    pub rooms: Vec<SceneRoom>,
    pub doors: Vec<SceneDoor>,
    pub objects: Vec<SceneObject>,
    pub trajectory: SceneTrajectory,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneRoom {
    pub id: usize,
    pub area_m2: f64,
    pub centroid: [f64; 2],
    pub polygon: Vec<[f64; 2]>,
    pub objects: Vec<usize>,
    pub neighbours: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneDoor {
    pub id: usize,
    pub rooms: [usize; 2],
    pub position: [f64; 2],
    pub width_m: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneObject {
    pub id: usize,
    pub class: Option<String>,
    pub centroid: [f64; 3],
    pub size_m: [f64; 3],
    pub yaw_deg: f64,
    pub room: Option<usize>,
    pub observations: u32,
    pub first_frame: usize,
    pub last_frame: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneTrajectory {
    pub frames: usize,
    pub duration_s: f64,
    pub length_m: f64,
    pub start: Option<[f64; 2]>,
    pub end: Option<[f64; 2]>,
    pub rooms_visited: Vec<usize>,
}

/// `map.json`: grids run-length encoded as `[value, run]` pairs, row-major (cells: 0 unknown, 1 free,
/// 2 occupied).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MapRecord {
    format_version: u32,
    map_from_world: Pose3,
    grid: GridFrame,
    floor_z_m: f64,
    ceiling_z_m: f64,
    cells: Vec<[u32; 2]>,
    structure: Vec<[u32; 2]>,
    /// Free cells inferred by hole filling (1) rather than seen (0); absent in maps without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    filled: Vec<[u32; 2]>,
    room_labels: Vec<[u32; 2]>,
    rooms: Vec<Room>,
    doors: Vec<Door>,
    objects: Vec<ObjectLandmark>,
    candidates: Vec<ObjectCandidate>,
    trajectory: Vec<TrajectorySample>,
    stats: MapStats,
}

fn run_length(values: impl Iterator<Item = u32>) -> Vec<[u32; 2]> {
    let mut out: Vec<[u32; 2]> = Vec::new();
    for v in values {
        match out.last_mut() {
            Some(last) if last[0] == v => last[1] += 1,
            _ => out.push([v, 1]),
        }
    }
    out
}

fn expand(runs: &[[u32; 2]], len: usize, what: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::with_capacity(len);
    for r in runs {
        out.extend(std::iter::repeat_n(r[0], r[1] as usize));
    }
    if out.len() != len {
        return Err(format!("{what} has {} cells, the grid {len}", out.len()));
    }
    Ok(out)
}

impl MapRecord {
    fn from_map(map: &SemanticMap) -> Self {
        let o = &map.occupancy;
        Self {
            format_version: MAP_FORMAT_VERSION,
            map_from_world: map.map_from_world,
            grid: o.frame,
            floor_z_m: o.floor_z_m,
            ceiling_z_m: o.ceiling_z_m,
            cells: run_length(o.cells.iter().map(|c| match c {
                CellState::Unknown => 0,
                CellState::Free => 1,
                CellState::Occupied => 2,
            })),
            structure: run_length(o.structure.iter().map(|s| u32::from(*s))),
            filled: run_length(o.filled.iter().map(|s| u32::from(*s))),
            room_labels: run_length(map.room_labels.iter().copied()),
            rooms: map.rooms.clone(),
            doors: map.doors.clone(),
            objects: map.objects.clone(),
            candidates: map.candidates.clone(),
            trajectory: map.trajectory.clone(),
            stats: map.stats.clone(),
        }
    }

    fn into_map(self) -> Result<SemanticMap, String> {
        if self.format_version != MAP_FORMAT_VERSION {
            return Err(format!(
                "format_version {} (this build reads {MAP_FORMAT_VERSION})",
                self.format_version
            ));
        }
        let n = self.grid.len();
        let cells = expand(&self.cells, n, "cells")?
            .into_iter()
            .map(|v| match v {
                0 => Ok(CellState::Unknown),
                1 => Ok(CellState::Free),
                2 => Ok(CellState::Occupied),
                other => Err(format!("cell value {other} is not 0, 1 or 2")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let structure = expand(&self.structure, n, "structure")?.into_iter().map(|v| v != 0).collect();
        let filled = if self.filled.is_empty() {
            Vec::new()
        } else {
            expand(&self.filled, n, "filled")?.into_iter().map(|v| v != 0).collect()
        };
        let room_labels = expand(&self.room_labels, n, "room_labels")?;
        if let Some(bad) = room_labels.iter().find(|l| **l as usize > self.rooms.len()) {
            return Err(format!("room label {bad} but only {} rooms", self.rooms.len()));
        }
        Ok(SemanticMap {
            map_from_world: self.map_from_world,
            occupancy: OccupancyGrid {
                frame: self.grid,
                cells,
                structure,
                filled,
                floor_z_m: self.floor_z_m,
                ceiling_z_m: self.ceiling_z_m,
            },
            room_labels,
            rooms: self.rooms,
            doors: self.doors,
            objects: self.objects,
            candidates: self.candidates,
            trajectory: self.trajectory,
            stats: self.stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::Region;
    use crate::testworld::{Aabb, BoxWorld};
    use gst_core::PinholeCamera;
    use gst_core::gravity_alignment;
    use nalgebra::{UnitQuaternion, Vector3};

    const FLOOR: f64 = 0.3;

    /// Two rooms, x ∈ [0, 4] and [4, 7], y ∈ [0, 3], a door (0.9 m, lintel at floor + 2.1 m) between
    /// them, a cabinet in the first room. The floor is at z = 0.3 so that its estimation is exercised.
    fn two_rooms() -> BoxWorld {
        let (t, top) = (0.06, FLOOR + 2.6);
        let wall_x =
            |x: f64, y0: f64, y1: f64, z0: f64, z1: f64| Aabb { min: [x - t, y0, z0], max: [x + t, y1, z1] };
        let wall_y = |y: f64, x0: f64, x1: f64| Aabb { min: [x0, y - t, FLOOR], max: [x1, y + t, top] };
        BoxWorld {
            floor_z: FLOOR,
            ceiling_z: top,
            boxes: vec![
                wall_x(0.0, 0.0, 3.0, FLOOR, top),
                wall_x(7.0, 0.0, 3.0, FLOOR, top),
                wall_y(0.0, 0.0, 7.0),
                wall_y(3.0, 0.0, 7.0),
                wall_x(4.0, 0.0, 1.05, FLOOR, top),
                wall_x(4.0, 1.95, 3.0, FLOOR, top),
                wall_x(4.0, 1.05, 1.95, FLOOR + 2.1, top),
                Aabb { min: [0.5, 2.3, FLOOR], max: [1.5, 2.9, FLOOR + 0.8] },
            ],
        }
    }

    fn camera() -> PinholeCamera {
        PinholeCamera::from_horizontal_fov(160, 128, 90.0).unwrap()
    }

    /// Turns on the spot in both rooms and walks through the door.
    fn poses() -> Vec<Pose3> {
        let mut out = Vec::new();
        let z = FLOOR + 1.4;
        for (x, y) in [(2.0, 1.2), (5.5, 1.5)] {
            for k in 0..24 {
                let yaw = f64::from(k) * 15f64.to_radians();
                out.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(x, y, z), yaw, -10f64.to_radians()));
            }
        }
        for k in 0..10 {
            let x = 3.0 + 0.2 * f64::from(k);
            out.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(x, 1.5, z), 0.0, -10f64.to_radians()));
        }
        out
    }

    fn build(with_cabinet_observations: bool) -> SemanticMap {
        let world = two_rooms();
        let camera = camera();
        let poses = poses();
        let mut builder = MapBuilder::new(MapConfig::default(), camera, gravity_alignment(&poses)).unwrap();
        for (k, pose) in poses.iter().enumerate() {
            let depth = world.render(&camera, pose);
            // Perception stand-in: the cabinet's pixels, found by depth against a render without it.
            let observations = if with_cabinet_observations {
                let mut empty = world.clone();
                empty.boxes.pop();
                let without = empty.render(&camera, pose);
                let mask: Vec<u32> = (0..depth.data().len())
                    .filter(|&i| (depth.data()[i] - without.data()[i]).abs() > 0.05)
                    .map(|i| i as u32)
                    .collect();
                if mask.len() > 30 {
                    vec![Observation {
                        class: Some(gst_core::ObjectClass::parse("cabinet").unwrap()),
                        label: None,
                        region: Region::Mask(mask),
                    }]
                } else {
                    Vec::new()
                }
            } else {
                Vec::new()
            };
            builder
                .add_frame(&PosedFrame {
                    index: k,
                    timestamp_s: k as f64 * 0.1,
                    world_from_camera: *pose,
                    depth: Some(&depth),
                    rgb: None,
                    observations: &observations,
                })
                .unwrap();
        }
        builder.finish()
    }

    #[test]
    fn gravity_alignment_is_identity_for_a_z_up_world_and_recovers_a_tilt() {
        let poses = poses();
        let identity = gravity_alignment(&poses);
        assert!(identity.rotation().angle() < 1e-6, "{identity:?}");
        // The same poses in a world rotated 30° about x: alignment must bring up back to z.
        let tilt =
            Pose3::from_parts(Vector3::new(1.0, 2.0, 3.0), UnitQuaternion::from_euler_angles(0.5, 0.0, 0.0));
        let tilted: Vec<Pose3> = poses.iter().map(|p| tilt * *p).collect();
        let alignment = gravity_alignment(&tilted);
        let up = (alignment * tilt).rotation() * Vector3::z();
        assert!((up - Vector3::z()).norm() < 1e-6, "{up}");
    }

    #[test]
    fn two_room_depth_world_gives_floor_rooms_door_and_object() {
        let map = build(true);
        assert!((map.occupancy.floor_z_m - FLOOR).abs() < 0.02, "floor {}", map.occupancy.floor_z_m);
        // The ceiling is barely seen by a camera looking down in small rooms: estimate or default.
        assert!(map.occupancy.ceiling_z_m > FLOOR + 2.4, "ceiling {}", map.occupancy.ceiling_z_m);
        assert_eq!(map.rooms.len(), 2, "{:?}", map.rooms);
        assert_eq!(map.doors.len(), 1, "{:?}", map.doors);
        let door = &map.doors[0];
        assert!(
            (door.position_m[0] - 4.0).abs() < 0.2 && (door.position_m[1] - 1.5).abs() < 0.25,
            "{door:?}"
        );
        // Free floor against the truth: the two interiors minus the cabinet.
        let g = &map.occupancy.frame;
        let (mut inter, mut union) = (0, 0);
        for (i, c) in map.occupancy.cells.iter().enumerate() {
            let [x, y] = g.world_from_cell((i % g.width as usize) as u32, (i / g.width as usize) as u32);
            let inside = (x > 0.1 && x < 3.9 || x > 4.1 && x < 6.9) && y > 0.1 && y < 2.9;
            let cabinet = x > 0.45 && x < 1.55 && y > 2.25;
            let truth = inside && !cabinet;
            let ours = *c == CellState::Free;
            inter += usize::from(truth && ours);
            union += usize::from(truth || ours);
        }
        let iou = inter as f64 / union as f64;
        assert!(iou > 0.85, "free-space IoU {iou}");
        let footprint: Vec<CellState> = (0..10)
            .flat_map(|i| (0..5).map(move |j| (0.55 + 0.1 * f64::from(i), 2.35 + 0.1 * f64::from(j))))
            .map(|(x, y)| map.occupancy.state_at(x, y))
            .collect();
        let occupied = footprint.iter().filter(|c| **c == CellState::Occupied).count();
        let free = footprint.iter().filter(|c| **c == CellState::Free).count();
        // Small test images (160x128, every 4th pixel) leave gaps; none of the footprint may be free.
        assert!(
            occupied * 5 >= footprint.len() * 2 && free == 0,
            "{occupied} occupied, {free} free of {}",
            footprint.len()
        );
        assert_eq!(map.objects.len(), 1, "{:?}", map.objects);
        let cabinet = &map.objects[0];
        let c = cabinet.centroid_m;
        assert!(
            (c[0] - 1.0).abs() < 0.1 && (c[1] - 2.6).abs() < 0.15 && (c[2] - (FLOOR + 0.4)).abs() < 0.1,
            "{cabinet:?}"
        );
        let room = map.room_at(c[0], c[1]).unwrap();
        assert_eq!(map.rooms[room].objects, vec![0]);
        assert_eq!(map.room_at(5.5, 1.5).map(|r| map.rooms[r].objects.len()), Some(0));
    }

    #[test]
    fn map_and_scene_graph_round_trip() {
        let mut map = build(true);
        // Some free cells marked as filled, so that the mask travels too.
        let o = &mut map.occupancy;
        o.filled = o.cells.iter().enumerate().map(|(i, c)| *c == CellState::Free && i % 7 == 0).collect();
        assert!(map.occupancy.filled.iter().any(|f| *f));
        let dir = tempfile::tempdir().unwrap();
        map.save(dir.path()).unwrap();
        let loaded = SemanticMap::load(dir.path()).unwrap();
        // Floats go through decimal text: compare the structure exactly and numbers to 1e-9.
        assert!(
            loaded.occupancy.cells == map.occupancy.cells
                && loaded.occupancy.structure == map.occupancy.structure
                && loaded.occupancy.filled == map.occupancy.filled
        );
        assert!(loaded.room_labels == map.room_labels && loaded.doors.len() == map.doors.len());
        assert_eq!(loaded.occupancy.frame.width, map.occupancy.frame.width);
        assert!((loaded.occupancy.frame.origin_x_m - map.occupancy.frame.origin_x_m).abs() < 1e-9);
        assert_eq!(loaded.objects.len(), map.objects.len());
        for (a, b) in loaded.objects.iter().zip(&map.objects) {
            assert!((0..3).all(|k| (a.centroid_m[k] - b.centroid_m[k]).abs() < 1e-9) && a.class == b.class);
        }
        assert_eq!(loaded.scene_graph(), map.scene_graph());
        let text = std::fs::read_to_string(dir.path().join(SCENE_GRAPH_FILE)).unwrap();
        let graph: SceneGraph = serde_json::from_str(&text).unwrap();
        assert_eq!(graph, map.scene_graph());
        assert_eq!(graph.rooms.len(), 2);
        assert_eq!(graph.rooms[0].neighbours, vec![1]);
        assert_eq!(graph.objects[0].class.as_deref(), Some("cabinet"));
        assert_eq!(graph.trajectory.frames, poses().len());
    }

    #[test]
    fn corrupt_map_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(MAP_FILE), "{\"format_version\": 1").unwrap();
        let error = SemanticMap::load(dir.path()).unwrap_err().to_string();
        assert!(error.contains("map.json"), "{error}");
        assert!(SemanticMap::load(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn degenerate_input_gives_an_empty_or_partial_map() {
        let camera = camera();
        // No depth at all.
        let mut builder = MapBuilder::new(MapConfig::default(), camera, Pose3::identity()).unwrap();
        for k in 0..3 {
            builder
                .add_frame(&PosedFrame {
                    index: k,
                    timestamp_s: 0.0,
                    world_from_camera: Pose3::identity(),
                    depth: None,
                    rgb: None,
                    observations: &[],
                })
                .unwrap();
        }
        let map = builder.finish();
        assert!(map.rooms.is_empty() && map.occupancy.cells.is_empty() && map.trajectory.len() == 3);
        assert!(map.scene_graph().rooms.is_empty());
        // All-missing depth, and a single frame of a featureless corridor.
        let mut builder = MapBuilder::new(MapConfig::default(), camera, Pose3::identity()).unwrap();
        let zeros = DepthImage::filled(160, 128, 0.0);
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, 0.5, 1.4), 0.0, -0.2);
        builder
            .add_frame(&PosedFrame {
                index: 0,
                timestamp_s: 0.0,
                world_from_camera: pose,
                depth: Some(&zeros),
                rgb: None,
                observations: &[],
            })
            .unwrap();
        let corridor = BoxWorld {
            floor_z: 0.0,
            ceiling_z: 2.5,
            boxes: vec![
                Aabb { min: [0.0, -0.1, 0.0], max: [30.0, 0.0, 2.5] },
                Aabb { min: [0.0, 1.0, 0.0], max: [30.0, 1.1, 2.5] },
            ],
        };
        let depth = corridor.render(&camera, &pose);
        builder
            .add_frame(&PosedFrame {
                index: 1,
                timestamp_s: 0.1,
                world_from_camera: pose,
                depth: Some(&depth),
                rgb: None,
                observations: &[],
            })
            .unwrap();
        let map = builder.finish();
        assert!(map.occupancy.free_area_m2() > 0.1, "{}", map.occupancy.free_area_m2());
        // Wrong-sized depth is an error, not a panic.
        let mut builder = MapBuilder::new(MapConfig::default(), camera, Pose3::identity()).unwrap();
        let small = DepthImage::filled(10, 10, 1.0);
        assert!(
            builder
                .add_frame(&PosedFrame {
                    index: 0,
                    timestamp_s: 0.0,
                    world_from_camera: pose,
                    depth: Some(&small),
                    rgb: None,
                    observations: &[]
                })
                .is_err()
        );
    }

    #[test]
    fn config_validation_rejects_nonsense() {
        assert!(MapConfig { resolution_m: 0.0, ..MapConfig::default() }.validate().is_err());
        assert!(MapConfig { pixel_stride: 0, ..MapConfig::default() }.validate().is_err());
        assert!(serde_json::from_str::<MapConfig>("{\"resolution\": 0.1}").is_err());
        let partial: MapConfig = serde_json::from_str("{\"resolution_m\": 0.1}").unwrap();
        assert_eq!(partial.pixel_stride, MapConfig::default().pixel_stride);
    }
}
