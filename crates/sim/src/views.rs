//! Current views: camera poses off the exploration trajectory from which self-localisation and
//! object-localisation questions are asked ("Your current view is: …").
//!
//! GST-Bench keeps a current view only if it is informative: taken away from where the video went, not
//! staring into a wall, showing some depth and a few objects. Candidates are drawn room by room (rooms in a
//! seeded random order, one accepted view per room in turn, so that views spread over the house), each
//! rendered and measured, and kept only if it passes every test of [`ViewConfig`].
//!
//! "Mostly filled by one surface" is measured on the rendered depth and instance ids. The plan's structure
//! is axis-aligned (walls run along x or y; floors and ceilings are horizontal), so every structure plane is
//! a thin slab of constant world x, y or z: structure pixels (id 0) are back-projected to the world and
//! histogrammed per axis in [`SURFACE_BIN_M`] bins; the most populated window of [`SURFACE_WINDOW_BINS`]
//! bins is the largest plane. A furniture instance filling the view counts as one surface too (its
//! pixel count). The fraction is of all image pixels.

use std::collections::HashMap;

use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use gst_core::{InstanceId, PinholeCamera, Pose3};

use crate::SimError;
use crate::render::{Frame, RenderOptions, RenderScene, render_into};
use crate::scene::Scene;
use crate::walk::{FreeSpace, camera_pose};

/// Bin width of the structure-plane histogram, metres. Rendered depth is exact up to float rounding, so
/// the points of one plane fall in one or two bins.
pub const SURFACE_BIN_M: f64 = 0.02;
/// Bins summed into one plane (6 cm): wide enough that a plane straddling a bin edge is counted whole,
/// far narrower than the gap between parallel surfaces (walls are ≥ 10 cm thick).
pub const SURFACE_WINDOW_BINS: usize = 3;

/// How current views are sampled and which are kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ViewConfig {
    /// Least distance from the camera position to the exploration path (the polyline through its
    /// positions), metres. Default 0.5 (GST-Bench: current views are novel viewpoints, not video frames).
    pub min_distance_from_path_m: f64,
    /// Least median depth of the view, metres. Default 1.0: a view into a nearby wall or corner shows too
    /// little of the scene to localise from.
    pub min_median_depth_m: f64,
    /// Largest fraction of the image one surface may fill (one structure plane: a wall, the floor, the
    /// ceiling; or one furniture instance). Default 0.6: over random views in generated houses the largest
    /// surface fills 45 % at the median and 60 % at the 70th–80th percentile; beyond that the camera faces a
    /// wall (or a wardrobe) with little else in view.
    pub max_single_surface_fraction: f64,
    /// Fewest instances that must show at least `min_object_pixels`. Default 2: the view must show objects
    /// to relate to the map.
    pub min_visible_objects: usize,
    /// Pixels an instance must show to count as visible for `min_visible_objects`. Default 800 (about
    /// 28x28 px, 0.25 % of a 640x512 image): recognisable at the benchmark's resolution. Scale with the
    /// image area for other cameras.
    pub min_object_pixels: u32,
    /// Range of camera heights above the floor, metres. Default [1.2, 1.6], as the exploration videos.
    pub camera_height_m: [f64; 2],
    /// Range of camera pitch, degrees, positive looking up. Default [-15, 0]: near-level views, slightly
    /// down so that floor-standing furniture is in view.
    pub pitch_deg: [f64; 2],
    /// Candidates rendered per room visit before the room is given up (each costs one render, ~40 ms at
    /// 640x512). Default 40. With the defaults about half the candidates pass (measured: 50–70 % in
    /// primitive-furnished houses, 20–55 % with catalog furniture), so a room that fails 40 in a row has
    /// no good view.
    pub tries: usize,
}

impl Default for ViewConfig {
    fn default() -> Self {
        Self {
            min_distance_from_path_m: 0.5,
            min_median_depth_m: 1.0,
            max_single_surface_fraction: 0.6,
            min_visible_objects: 2,
            min_object_pixels: 800,
            camera_height_m: [1.2, 1.6],
            pitch_deg: [-15.0, 0.0],
            tries: 40,
        }
    }
}

impl ViewConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        let err = |message: String| Err(SimError::Config(format!("current views: {message}")));
        for (name, value) in [
            ("min_distance_from_path_m", self.min_distance_from_path_m),
            ("min_median_depth_m", self.min_median_depth_m),
        ] {
            if !(value >= 0.0 && value.is_finite()) {
                return err(format!("{name} = {value} must be finite and non-negative"));
            }
        }
        if !(self.max_single_surface_fraction > 0.0 && self.max_single_surface_fraction <= 1.0) {
            return err(format!(
                "max_single_surface_fraction = {} is not in (0, 1]",
                self.max_single_surface_fraction
            ));
        }
        let [h0, h1] = self.camera_height_m;
        if !(h0 > 0.0 && h0 <= h1 && h1.is_finite()) {
            return err(format!("camera_height_m = [{h0}, {h1}] must be positive and ascending"));
        }
        let [p0, p1] = self.pitch_deg;
        if !(p0 > -90.0 && p0 <= p1 && p1 < 90.0) {
            return err(format!("pitch_deg = [{p0}, {p1}] must be ascending within (-90, 90)"));
        }
        if self.tries == 0 {
            return err("tries must be at least 1".into());
        }
        Ok(())
    }

    /// Checks a measured view against the image criteria (the path distance is checked apart).
    pub fn judge(&self, measured: &ViewMeasurements) -> Result<(), ViewRejection> {
        if !(measured.median_depth_m >= self.min_median_depth_m) {
            return Err(ViewRejection::Shallow { median_depth_m: measured.median_depth_m });
        }
        if measured.largest_surface_fraction > self.max_single_surface_fraction {
            return Err(ViewRejection::OneSurface { fraction: measured.largest_surface_fraction });
        }
        let objects = measured.visible.iter().filter(|(_, pixels)| *pixels >= self.min_object_pixels).count();
        if objects < self.min_visible_objects {
            return Err(ViewRejection::FewObjects { objects });
        }
        Ok(())
    }
}

/// Why a candidate view was turned down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ViewRejection {
    /// Median depth below [`ViewConfig::min_median_depth_m`].
    Shallow { median_depth_m: f64 },
    /// One surface fills more than [`ViewConfig::max_single_surface_fraction`] of the image.
    OneSurface { fraction: f64 },
    /// Fewer than [`ViewConfig::min_visible_objects`] instances show enough pixels.
    FewObjects { objects: usize },
}

/// A current view.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentView {
    pub world_from_camera: Pose3,
    /// Index of the room the camera stands in.
    pub room: usize,
    /// Every instance with at least one visible pixel and its pixel count, sorted by id.
    pub visible: Vec<(InstanceId, u32)>,
}

/// What the quality tests look at in one rendered view.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewMeasurements {
    /// Median depth over pixels where something is seen; 0 if nothing is.
    pub median_depth_m: f64,
    /// Fraction of the image filled by the largest single surface (structure plane or instance).
    pub largest_surface_fraction: f64,
    /// Every instance with at least one visible pixel and its pixel count, sorted by id.
    pub visible: Vec<(InstanceId, u32)>,
}

/// Measures a rendered view (see the module documentation for the surface measure).
pub fn measure_view(frame: &Frame, camera: &PinholeCamera, world_from_camera: &Pose3) -> ViewMeasurements {
    let (width, height) = (frame.depth.width(), frame.depth.height());
    let total = (width as usize * height as usize).max(1) as f64;

    let mut depths: Vec<f32> =
        frame.depth.data().iter().copied().filter(|d| *d > 0.0 && d.is_finite()).collect();
    let median_depth_m = if depths.is_empty() {
        0.0
    } else {
        let mid = depths.len() / 2;
        let (_, median, _) = depths.select_nth_unstable_by(mid, f32::total_cmp);
        f64::from(*median)
    };

    let mut counts: HashMap<u16, u32> = HashMap::new();
    for &id in frame.instances.data().iter().filter(|id| **id != 0) {
        *counts.entry(id).or_insert(0) += 1;
    }
    let mut visible: Vec<(InstanceId, u32)> = counts.into_iter().map(|(id, n)| (InstanceId(id), n)).collect();
    visible.sort_unstable();
    let largest_instance = visible.iter().map(|(_, n)| *n).max().unwrap_or(0);

    let largest_plane = largest_structure_plane(frame, camera, world_from_camera);
    ViewMeasurements {
        median_depth_m,
        largest_surface_fraction: f64::from(largest_instance.max(largest_plane)) / total,
        visible,
    }
}

/// Pixels of the most populated axis-aligned structure plane (see the module documentation).
fn largest_structure_plane(frame: &Frame, camera: &PinholeCamera, world_from_camera: &Pose3) -> u32 {
    let rotation = world_from_camera.rotation_matrix();
    let translation = world_from_camera.translation();
    let width = frame.depth.width() as usize;
    let mut coordinates: [Vec<f64>; 3] = Default::default();
    for (k, (&depth, &id)) in frame.depth.data().iter().zip(frame.instances.data()).enumerate() {
        if id != 0 || !(depth > 0.0 && depth.is_finite()) {
            continue;
        }
        let (x, y) = ((k % width) as f64, (k / width) as f64);
        let d = f64::from(depth);
        let camera_point =
            nalgebra::Vector3::new((x - camera.cx) / camera.fx * d, (y - camera.cy) / camera.fy * d, d);
        let world = rotation * camera_point + translation;
        for axis in 0..3 {
            coordinates[axis].push(world[axis]);
        }
    }
    let mut largest = 0u32;
    for values in &coordinates {
        let Some(min) = values.iter().copied().reduce(f64::min) else { continue };
        let max = values.iter().copied().fold(min, f64::max);
        let bins = ((max - min) / SURFACE_BIN_M) as usize + 1;
        let mut histogram = vec![0u32; bins];
        for v in values {
            let bin = (((v - min) / SURFACE_BIN_M) as usize).min(bins - 1);
            histogram[bin] += 1;
        }
        let window = SURFACE_WINDOW_BINS.min(bins);
        let best = histogram.windows(window).map(|w| w.iter().sum::<u32>()).max().unwrap_or(0);
        largest = largest.max(best);
    }
    largest
}

/// Segments of a polyline bucketed into square cells, for "is this point within `radius` of the path".
struct PathIndex<'a> {
    path: &'a [[f64; 2]],
    radius_m: f64,
    cell_m: f64,
    /// Cell → indices `i` of the segments `path[i]..path[i + 1]` (or of the lone point) whose
    /// `radius`-inflated bounds touch the cell.
    cells: HashMap<(i64, i64), Vec<usize>>,
}

impl<'a> PathIndex<'a> {
    fn new(path: &'a [[f64; 2]], radius_m: f64) -> Self {
        let cell_m = radius_m.max(0.25);
        let mut cells: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
        let segments = path.len().saturating_sub(1).max(usize::from(!path.is_empty()));
        for i in 0..segments {
            let (a, b) = (path[i], path[(i + 1).min(path.len() - 1)]);
            let cell = |v: f64| (v / cell_m).floor() as i64;
            let (x0, x1) = (cell(a[0].min(b[0]) - radius_m), cell(a[0].max(b[0]) + radius_m));
            let (y0, y1) = (cell(a[1].min(b[1]) - radius_m), cell(a[1].max(b[1]) + radius_m));
            for cy in y0..=y1 {
                for cx in x0..=x1 {
                    cells.entry((cx, cy)).or_default().push(i);
                }
            }
        }
        Self { path, radius_m, cell_m, cells }
    }

    fn is_near(&self, p: [f64; 2]) -> bool {
        let key = ((p[0] / self.cell_m).floor() as i64, (p[1] / self.cell_m).floor() as i64);
        let Some(segments) = self.cells.get(&key) else { return false };
        segments.iter().any(|&i| {
            let (a, b) = (self.path[i], self.path[(i + 1).min(self.path.len() - 1)]);
            distance_to_segment(p, a, b) < self.radius_m
        })
    }
}

fn distance_to_segment(p: [f64; 2], a: [f64; 2], b: [f64; 2]) -> f64 {
    let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
    let length2 = dx * dx + dy * dy;
    let t = if length2 > 0.0 {
        (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / length2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    ((p[0] - a[0] - t * dx).powi(2) + (p[1] - a[1] - t * dy).powi(2)).sqrt()
}

/// Samples up to `count` current views off the trajectory `path_xy` (camera positions on the floor, in
/// order; distances are taken to the polyline through them, so sparse waypoints work too).
///
/// Candidates stand on `free` (so the caller's clearance keeps them out of walls and furniture) at least
/// [`ViewConfig::min_distance_from_path_m`] from the path, with a uniformly random heading, height and
/// pitch from the configured ranges; each is rendered with `camera` and kept if it passes
/// [`ViewConfig::judge`]. Rooms take turns in a seeded random order; a room that yields nothing in
/// [`ViewConfig::tries`] candidates is dropped. Fewer than `count` views come back when the rooms run out
/// (tiny rooms wholly near the path have no candidates at all). The same `rng` state gives the same views.
pub fn sample_current_views(
    scene: &Scene,
    render_scene: &RenderScene,
    camera: &PinholeCamera,
    free: &FreeSpace,
    path_xy: &[[f64; 2]],
    count: usize,
    config: &ViewConfig,
    rng: &mut impl Rng,
) -> Result<Vec<CurrentView>, SimError> {
    config.validate()?;
    camera.validate().map_err(|e| SimError::Config(format!("current views: {e}")))?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let near_path = PathIndex::new(path_xy, config.min_distance_from_path_m);
    let mut candidates: Vec<Vec<[f64; 2]>> = vec![Vec::new(); scene.plan.rooms.len()];
    for p in free.free_points() {
        if near_path.is_near(p) {
            continue;
        }
        if let Some(room) = scene.plan.rooms.iter().position(|r| r.contains(p)) {
            candidates[room].push(p);
        }
    }
    let mut rooms: Vec<usize> = (0..candidates.len()).filter(|r| !candidates[*r].is_empty()).collect();
    rooms.shuffle(rng);

    let options = RenderOptions::default();
    let mut frame = Frame::empty(camera.width, camera.height, options.background);
    let mut views = Vec::with_capacity(count);
    let mut cursor = 0;
    let (mut rendered, mut rejected) = (0usize, [0usize; 3]);
    while views.len() < count && !rooms.is_empty() {
        let slot = cursor % rooms.len();
        let room = rooms[slot];
        let mut found = None;
        for _ in 0..config.tries {
            let position = candidates[room][rng.gen_range(0..candidates[room].len())];
            let yaw = rng.gen_range(-std::f64::consts::PI..std::f64::consts::PI);
            let height = rng.gen_range(config.camera_height_m[0]..=config.camera_height_m[1]);
            let pitch = rng.gen_range(config.pitch_deg[0]..=config.pitch_deg[1]).to_radians();
            let world_from_camera = camera_pose(position, height, yaw, pitch);
            render_into(render_scene, camera, &world_from_camera, &options, &mut frame);
            rendered += 1;
            let measured = measure_view(&frame, camera, &world_from_camera);
            match config.judge(&measured) {
                Ok(()) => {
                    found = Some(CurrentView { world_from_camera, room, visible: measured.visible });
                    break;
                }
                Err(ViewRejection::Shallow { .. }) => rejected[0] += 1,
                Err(ViewRejection::OneSurface { .. }) => rejected[1] += 1,
                Err(ViewRejection::FewObjects { .. }) => rejected[2] += 1,
            }
        }
        match found {
            Some(view) => {
                views.push(view);
                cursor = slot + 1;
            }
            None => {
                tracing::debug!(room, "no acceptable current view in {} tries; room dropped", config.tries);
                rooms.remove(slot);
                cursor = slot;
            }
        }
    }
    tracing::debug!(
        views = views.len(),
        rendered,
        shallow = rejected[0],
        one_surface = rejected[1],
        few_objects = rejected[2],
        "current views sampled"
    );
    Ok(views)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, OnceLock};

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::geometry::build_render_scene;
    use crate::library::FurnitureLibrary;
    use crate::mesh::{Material, TriangleMesh};
    use crate::render::{RenderObject, render};
    use crate::scene::{SceneConfig, generate_scene};
    use crate::walk::random_walk;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    struct Fixture {
        scene: Scene,
        render_scene: RenderScene,
        free: FreeSpace,
        path_xy: Vec<[f64; 2]>,
    }

    /// One primitives-only scene and a walk through it, shared by the tests of this module.
    fn fixture() -> Result<&'static Fixture, String> {
        static FIXTURE: OnceLock<Result<Fixture, String>> = OnceLock::new();
        FIXTURE
            .get_or_init(|| {
                let library = FurnitureLibrary::primitives_only();
                let scene =
                    generate_scene(2, &SceneConfig::default(), &library).map_err(|e| e.to_string())?;
                let render_scene = build_render_scene(&scene, &library).map_err(|e| e.to_string())?;
                let free = FreeSpace::new(&scene, 0.3);
                let walk = random_walk(&free, 400, 0.1, &mut ChaCha8Rng::seed_from_u64(5));
                let path_xy = walk.iter().map(|p| [p.translation().x, p.translation().y]).collect();
                Ok(Fixture { scene, render_scene, free, path_xy })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn sample(fixture: &Fixture, count: usize, seed: u64) -> Result<Vec<CurrentView>, SimError> {
        sample_current_views(
            &fixture.scene,
            &fixture.render_scene,
            &PinholeCamera::gst_benchmark(),
            &fixture.free,
            &fixture.path_xy,
            count,
            &ViewConfig::default(),
            &mut ChaCha8Rng::seed_from_u64(seed),
        )
    }

    #[test]
    fn views_pass_every_criterion_when_rendered_again() -> TestResult {
        let fixture = fixture()?;
        let config = ViewConfig::default();
        let camera = PinholeCamera::gst_benchmark();
        let count = 6;
        let views = sample(fixture, count, 11)?;
        assert_eq!(views.len(), count);
        let rooms: std::collections::BTreeSet<usize> = views.iter().map(|v| v.room).collect();
        assert!(
            rooms.len() >= count.min(fixture.scene.plan.rooms.len()) - 1,
            "views bunch in rooms {rooms:?}"
        );
        for view in &views {
            let t = view.world_from_camera.translation();
            let xy = [t.x, t.y];
            // Off the path, on free floor, in its room, within the configured height and pitch.
            let nearest = fixture
                .path_xy
                .iter()
                .map(|p| ((p[0] - xy[0]).powi(2) + (p[1] - xy[1]).powi(2)).sqrt())
                .fold(f64::INFINITY, f64::min);
            assert!(nearest >= config.min_distance_from_path_m, "view {xy:?} is {nearest} m from the path");
            assert!(fixture.free.is_free(xy));
            assert!(fixture.scene.plan.rooms[view.room].contains(xy));
            assert!((config.camera_height_m[0]..=config.camera_height_m[1]).contains(&t.z));
            let pitch_deg = view.world_from_camera.camera_pitch().to_degrees();
            assert!(pitch_deg >= config.pitch_deg[0] - 1e-6 && pitch_deg <= config.pitch_deg[1] + 1e-6);

            let frame =
                render(&fixture.render_scene, &camera, &view.world_from_camera, &RenderOptions::default());
            // Median depth, recomputed plainly.
            let mut depths: Vec<f32> = frame.depth.data().iter().copied().filter(|d| *d > 0.0).collect();
            depths.sort_by(f32::total_cmp);
            assert!(f64::from(depths[depths.len() / 2]) >= config.min_median_depth_m);
            // Objects, recounted from the instance image.
            let mut pixels = std::collections::BTreeMap::new();
            for &id in frame.instances.data().iter().filter(|id| **id != 0) {
                *pixels.entry(id).or_insert(0u32) += 1;
            }
            let listed: Vec<(InstanceId, u32)> = pixels.iter().map(|(id, n)| (InstanceId(*id), *n)).collect();
            assert_eq!(view.visible, listed);
            assert!(
                pixels.values().filter(|n| **n >= config.min_object_pixels).count()
                    >= config.min_visible_objects
            );
            // And the surface test.
            let measured = measure_view(&frame, &camera, &view.world_from_camera);
            assert!(measured.largest_surface_fraction <= config.max_single_surface_fraction);
            assert_eq!(config.judge(&measured), Ok(()));
        }
        Ok(())
    }

    #[test]
    fn views_are_deterministic_for_a_seed() -> TestResult {
        let fixture = fixture()?;
        let a = sample(fixture, 3, 4)?;
        let b = sample(fixture, 3, 4)?;
        assert_eq!(a, b);
        assert_eq!(serde_json::to_string(&a)?, serde_json::to_string(&b)?);
        let c = sample(fixture, 3, 5)?;
        assert_ne!(a, c);
        Ok(())
    }

    #[test]
    fn no_views_when_the_path_covers_everything() -> TestResult {
        let fixture = fixture()?;
        let config = ViewConfig { min_distance_from_path_m: 100.0, ..ViewConfig::default() };
        let views = sample_current_views(
            &fixture.scene,
            &fixture.render_scene,
            &PinholeCamera::gst_benchmark(),
            &fixture.free,
            &fixture.path_xy,
            3,
            &config,
            &mut ChaCha8Rng::seed_from_u64(1),
        )?;
        assert!(views.is_empty());
        Ok(())
    }

    /// A vertical wall of structure on the plane `x = x_m`, 40 m wide and high (it fills any view of it).
    fn wall_x(x_m: f32) -> RenderObject {
        let mesh = TriangleMesh {
            positions: vec![[x_m, -20.0, -20.0], [x_m, 20.0, -20.0], [x_m, 20.0, 20.0], [x_m, -20.0, 20.0]],
            uvs: vec![[0.0; 2]; 4],
            triangles: vec![[0, 1, 2], [0, 2, 3]],
            triangle_materials: vec![0, 0],
            materials: vec![Material::plain("wall", [0.8, 0.8, 0.8])],
        };
        RenderObject { mesh: Arc::new(mesh), instance_id: 0 }
    }

    /// A vertical wall of structure on the plane `y = y_m`.
    fn wall_y(y_m: f32) -> RenderObject {
        let mesh = TriangleMesh {
            positions: vec![[-20.0, y_m, -20.0], [20.0, y_m, -20.0], [20.0, y_m, 20.0], [-20.0, y_m, 20.0]],
            uvs: vec![[0.0; 2]; 4],
            triangles: vec![[0, 1, 2], [0, 2, 3]],
            triangle_materials: vec![0, 0],
            materials: vec![Material::plain("wall", [0.6, 0.7, 0.8])],
        };
        RenderObject { mesh: Arc::new(mesh), instance_id: 0 }
    }

    #[test]
    fn one_wall_filling_the_view_is_one_surface_even_seen_obliquely() {
        let camera = PinholeCamera::gst_benchmark();
        let config = ViewConfig::default();
        let scene = RenderScene::new(vec![wall_x(3.0)]);
        for yaw_deg in [0.0f64, 25.0, -30.0] {
            let pose = camera_pose([0.0, 0.0], 1.5, yaw_deg.to_radians(), 0.0);
            let frame = render(&scene, &camera, &pose, &RenderOptions::default());
            let measured = measure_view(&frame, &camera, &pose);
            assert!(measured.median_depth_m >= 3.0 - 1e-3);
            assert!(measured.largest_surface_fraction > 0.95, "{yaw_deg}°: {measured:?}");
            assert!(matches!(config.judge(&measured), Err(ViewRejection::OneSurface { .. })));
        }
        // Into a corner: two walls, neither filling the view.
        let corner = RenderScene::new(vec![wall_x(3.0), wall_y(3.0)]);
        let pose = camera_pose([0.0, 0.0], 1.5, 45f64.to_radians(), 0.0);
        let frame = render(&corner, &camera, &pose, &RenderOptions::default());
        let measured = measure_view(&frame, &camera, &pose);
        assert!(
            (0.4..=0.6).contains(&measured.largest_surface_fraction),
            "corner: {}",
            measured.largest_surface_fraction
        );
        // Nothing seen: median depth 0.
        let empty = RenderScene::new(Vec::new());
        let frame = render(&empty, &camera, &pose, &RenderOptions::default());
        let measured = measure_view(&frame, &camera, &pose);
        assert_eq!((measured.median_depth_m, measured.largest_surface_fraction), (0.0, 0.0));
        assert!(matches!(config.judge(&measured), Err(ViewRejection::Shallow { .. })));
    }

    #[test]
    fn path_index_agrees_with_brute_force() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let path: Vec<[f64; 2]> =
            (0..40).map(|_| [rng.gen_range(0.0..8.0), rng.gen_range(0.0..6.0)]).collect();
        for radius in [0.3, 0.5, 1.2] {
            let index = PathIndex::new(&path, radius);
            for _ in 0..2000 {
                let p = [rng.gen_range(-1.0..9.0), rng.gen_range(-1.0..7.0)];
                let nearest =
                    path.windows(2).map(|w| distance_to_segment(p, w[0], w[1])).fold(f64::INFINITY, f64::min);
                assert_eq!(index.is_near(p), nearest < radius, "{p:?} at {nearest} m, radius {radius}");
            }
        }
        // A single position, and no path at all.
        let lone = [[1.0, 1.0]];
        assert!(PathIndex::new(&lone, 0.5).is_near([1.3, 1.0]));
        assert!(!PathIndex::new(&lone, 0.5).is_near([1.6, 1.0]));
        assert!(!PathIndex::new(&[], 0.5).is_near([1.0, 1.0]));
    }

    #[test]
    fn view_config_has_defaults_and_rejects_unknown_or_bad_fields() -> TestResult {
        let config: ViewConfig = serde_json::from_str("{}")?;
        assert_eq!(config, ViewConfig::default());
        config.validate()?;
        assert!(serde_json::from_str::<ViewConfig>(r#"{"tires": 3}"#).is_err());
        let bad = [
            ViewConfig { min_distance_from_path_m: -1.0, ..ViewConfig::default() },
            ViewConfig { max_single_surface_fraction: 0.0, ..ViewConfig::default() },
            ViewConfig { camera_height_m: [1.6, 1.2], ..ViewConfig::default() },
            ViewConfig { pitch_deg: [-95.0, 0.0], ..ViewConfig::default() },
            ViewConfig { tries: 0, ..ViewConfig::default() },
            ViewConfig { min_median_depth_m: f64::NAN, ..ViewConfig::default() },
        ];
        for config in bad {
            assert!(config.validate().is_err(), "{config:?}");
        }
        Ok(())
    }
}
