//! A CPU rasteriser: RGB, metric depth and instance ids from a pinhole camera, and orthographic top-down views.
//!
//! The simulator renders whole exploration episodes (thousands of frames) on an ordinary CPU, so the design
//! favours throughput and exactness over visual richness:
//!
//! * **Exact depth.** Depth is what the SLAM baseline measures, so every pixel stores the z (along the
//!   optical axis) of the true surface point on its ray. `1/z` is an affine function of the pixel
//!   coordinates over a planar triangle; we derive that function from the triangle's 3D plane in `f64`
//!   (not by interpolating projected vertices) and evaluate it directly at each pixel centre, so the depth of
//!   a wall equals the analytic distance to well below a millimetre, however the wall is tessellated.
//! * **Perspective-correct texturing** the same way: a texture coordinate is a linear function over the 3D
//!   triangle, so `u/z` is affine in the pixel coordinates.
//! * **Deferred shading.** The raster pass only keeps, per pixel, the nearest depth key and the index of the
//!   triangle that produced it; colour (texture lookup, lighting) is computed once per pixel afterwards.
//!   Overdraw costs a few comparisons, not a texture fetch.
//! * **Tiles.** Triangles are set up and binned once per frame into square screen tiles; each tile is then
//!   rasterised on its own (rayon, one row of tiles per task), owning its pixels, so no locks are needed and
//!   the tile's z-buffer stays in the L1 cache. Triangles are set up in a fixed order (object index, then
//!   triangle index) and each tile processes its bin in that order with a strict depth test, so equal depths
//!   are won by the earlier triangle and frames are byte-identical for any number of threads.
//! * **Watertight edges.** Edge functions are built so that the two triangles sharing an edge evaluate
//!   exactly negated values, and pixels centred exactly on an edge go to one triangle by a top-left style
//!   rule: meshes show no cracks and no double coverage.
//! * **Culling.** Objects and clusters of [`CLUSTER_TRIANGLES`] consecutive triangles are culled by their
//!   world-space bounding boxes against the view frustum; triangles wholly outside one frustum plane or not
//!   covering a pixel centre are dropped during setup. Back faces are drawn: catalog meshes are neither
//!   closed nor consistently wound.
//! * **Near-plane clipping.** Triangles crossing the near plane are clipped (not dropped), so a wall right in
//!   front of the camera still renders where it lies beyond the near plane.
//!
//! Shading is deliberately simple and flat per triangle: ambient, plus a sun term `|n·l|`, plus a mild
//! headlight `|n·v|` so that surfaces facing the camera stay readable. Absolute values make shading
//! independent of winding. Colours are combined in linear space and written with a 2.2 gamma
//! ("sRGB-ish"); material diffuse colours are linear (MTL `Kd`), texels are taken as gamma-encoded.
//!
//! The camera is an ideal pinhole: [`PinholeCamera::distortion`] is ignored (the simulator's cameras have
//! none; to emulate a distorting lens, render with a pinhole and remap). Pixel centres are at integer
//! coordinates: pixel `(u, v)` sees the ray through `((u - cx) / fx, (v - cy) / fy, 1)` (OpenCV).

use std::ops::Range;
use std::sync::Arc;

use gst_core::{DepthImage, Image, InstanceImage, PinholeCamera, Pose3, RgbImage};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::mesh::{Texture, TriangleMesh};

/// Triangles per culling cluster: consecutive triangles of a mesh are usually close to each other, so a
/// cluster's bounding box lets big meshes (a whole house's walls) be culled piecewise.
pub const CLUSTER_TRIANGLES: usize = 256;

/// Marks an empty pixel in a tile's triangle buffer.
const NO_TRIANGLE: u32 = u32::MAX;

/// Outcode bit of a vertex in front of the near plane (z < near).
const NEAR_BIT: u8 = 1;

/// Screen triangles with a smaller doubled area (pixels²) have no interior worth drawing.
const MIN_DOUBLE_AREA_PX2: f64 = 1e-9;

/// Display gamma applied to linear colours.
const GAMMA: f32 = 2.2;

/// Shading intensities above this saturate (the gamma table covers `[0, MAX_LIGHT]`).
const MAX_LIGHT: f32 = 2.0;

/// Entries of the gamma table over `[0, MAX_LIGHT]`, linearly interpolated.
const GAMMA_TABLE_SIZE: usize = 256;

/// Accepted range of [`RenderOptions::tile_size`]; values outside are clamped.
const TILE_SIZE_RANGE: (u32, u32) = (8, 256);

/// Material used when a triangle's material index is out of range.
const FALLBACK_DIFFUSE: [f32; 3] = [0.6, 0.6, 0.6];

/// One mesh to draw, already in world coordinates, with the instance id written to the instance image.
#[derive(Clone)]
pub struct RenderObject {
    pub mesh: Arc<TriangleMesh>,
    /// Value in the instance image; 0 is structure (walls, floor, ceiling).
    pub instance_id: u16,
}

impl std::fmt::Debug for RenderObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderObject")
            .field("instance_id", &self.instance_id)
            .field("triangles", &self.mesh.triangle_count())
            .finish()
    }
}

/// An axis-aligned box in world coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Aabb {
    min: [f32; 3],
    max: [f32; 3],
}

impl Aabb {
    fn empty() -> Self {
        Self { min: [f32::INFINITY; 3], max: [f32::NEG_INFINITY; 3] }
    }

    fn add_point(&mut self, p: [f32; 3]) {
        for i in 0..3 {
            self.min[i] = self.min[i].min(p[i]);
            self.max[i] = self.max[i].max(p[i]);
        }
    }

    fn add_box(&mut self, other: &Aabb) {
        self.add_point(other.min);
        self.add_point(other.max);
    }

    fn is_valid(&self) -> bool {
        (0..3).all(|i| self.min[i] <= self.max[i] && self.min[i].is_finite() && self.max[i].is_finite())
    }

    /// Whether the box lies wholly on the negative side of one of the planes `n·p + d ≥ 0`.
    fn outside_any(&self, planes: &[[f64; 4]]) -> bool {
        planes.iter().any(|plane| {
            // The corner farthest along the plane normal: if even it is outside, the whole box is.
            let mut value = plane[3];
            for i in 0..3 {
                let coordinate = if plane[i] >= 0.0 { self.max[i] } else { self.min[i] };
                value += plane[i] * f64::from(coordinate);
            }
            value < 0.0
        })
    }
}

/// A run of consecutive triangles of one object with its bounding box.
#[derive(Clone, Debug)]
struct Cluster {
    triangles: Range<usize>,
    bounds: Aabb,
}

/// What the renderer needs of a material, prepared once per scene.
#[derive(Clone, Copy, Debug)]
struct MaterialLook {
    /// Diffuse colour with the display gamma applied (a power law commutes with the lighting product).
    diffuse_gamma: [f32; 3],
    /// The material's texture is usable (non-empty and consistent with its size).
    textured: bool,
}

/// Everything that is drawn, with what can be prepared once: bounding boxes of objects and of triangle
/// clusters for frustum culling, and per-material colours.
pub struct RenderScene {
    objects: Vec<RenderObject>,
    /// Per object: its bounding box, `None` for an object without vertices.
    object_bounds: Vec<Option<Aabb>>,
    /// Per object: its clusters.
    object_clusters: Vec<Vec<Cluster>>,
    /// Per object, per material.
    materials: Vec<Vec<MaterialLook>>,
    triangle_count: usize,
    bounds: Option<Aabb>,
}

impl std::fmt::Debug for RenderScene {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RenderScene")
            .field("objects", &self.objects.len())
            .field("triangles", &self.triangle_count)
            .field("bounds", &self.bounds())
            .finish()
    }
}

impl RenderScene {
    /// Prepares objects for rendering. Malformed parts of a mesh (vertex or material indices out of range,
    /// textures whose texel count does not match their size) are not drawn or drawn untextured; they are
    /// reported with `tracing` here, once.
    pub fn new(objects: Vec<RenderObject>) -> Self {
        let mut object_bounds = Vec::with_capacity(objects.len());
        let mut object_clusters = Vec::with_capacity(objects.len());
        let mut materials = Vec::with_capacity(objects.len());
        let mut scene_bounds = Aabb::empty();
        let mut triangle_count = 0;
        for (index, object) in objects.iter().enumerate() {
            let mesh = &object.mesh;
            triangle_count += mesh.triangle_count();
            let mut clusters = Vec::new();
            let mut bounds = Aabb::empty();
            let mut bad_triangles = 0usize;
            for start in (0..mesh.triangles.len()).step_by(CLUSTER_TRIANGLES) {
                let triangles = start..(start + CLUSTER_TRIANGLES).min(mesh.triangles.len());
                let mut cluster_bounds = Aabb::empty();
                for triangle in &mesh.triangles[triangles.clone()] {
                    for &vertex in triangle {
                        match mesh.positions.get(vertex as usize) {
                            Some(&p) => cluster_bounds.add_point(p),
                            None => bad_triangles += 1,
                        }
                    }
                }
                if cluster_bounds.is_valid() {
                    bounds.add_box(&cluster_bounds);
                    clusters.push(Cluster { triangles, bounds: cluster_bounds });
                }
            }
            if bad_triangles > 0 {
                tracing::warn!(object = index, bad_triangles, "triangles with vertex indices out of range are skipped");
            }
            let looks = mesh
                .materials
                .iter()
                .map(|material| {
                    let textured = material.texture.as_deref().is_some_and(|texture| {
                        let usable = texture.width > 0
                            && texture.height > 0
                            && texture.texels.len() == texture.width as usize * texture.height as usize;
                        if !usable {
                            tracing::warn!(object = index, material = %material.name, "texture size does not match its texels; drawn untextured");
                        }
                        usable
                    });
                    MaterialLook { diffuse_gamma: gamma_encode(material.diffuse), textured }
                })
                .collect();
            if bounds.is_valid() {
                scene_bounds.add_box(&bounds);
                object_bounds.push(Some(bounds));
            } else {
                object_bounds.push(None);
            }
            object_clusters.push(clusters);
            materials.push(looks);
        }
        let bounds = scene_bounds.is_valid().then_some(scene_bounds);
        Self { objects, object_bounds, object_clusters, materials, triangle_count, bounds }
    }

    pub fn objects(&self) -> &[RenderObject] {
        &self.objects
    }

    /// Triangles over all objects.
    pub fn triangle_count(&self) -> usize {
        self.triangle_count
    }

    /// World-space bounds `(min, max)` of everything drawable; `None` for an empty scene.
    pub fn bounds(&self) -> Option<([f32; 3], [f32; 3])> {
        self.bounds.map(|b| (b.min, b.max))
    }
}

/// Lighting, clipping and tiling parameters of a render.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RenderOptions {
    /// Light every surface receives regardless of orientation, in [0, 1]. Default 0.35: rooms without
    /// direct light stay readable. Raise it for flatter, brighter images.
    pub ambient: f32,
    /// Direction towards the sun (or the dominant light) in the world frame; need not be unit length.
    /// Default: high and slightly oblique, so that the floor, and walls of different orientation, all get
    /// different shades. A zero vector disables the sun term.
    pub sun_direction_world: [f32; 3],
    /// Weight of the sun term `|n·l|`. Default 0.45.
    pub sun_intensity: f32,
    /// Weight of the headlight term `|n·v|` (light from the camera, `v` the viewing ray). Default 0.2: keeps
    /// surfaces facing the camera visible without washing out the sun's shading. 0 disables it.
    pub headlight_intensity: f32,
    /// Near clipping distance in metres along the optical axis. Default 0.05 m: walls a hand's breadth away
    /// still render. Smaller values cost nothing but depth precision near the camera.
    pub near_m: f32,
    /// Colour of pixels where nothing is seen. Default black (the benchmark's top-down maps draw the
    /// outside black).
    pub background: [u8; 3],
    /// Side of the square screen tiles in pixels, clamped to [8, 256]. Default 32: a tile's buffers fit in
    /// the L1 cache and a 640x512 frame gives 16 rows of tiles to spread over threads.
    pub tile_size: u32,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            ambient: 0.35,
            sun_direction_world: [0.35, 0.25, 0.9],
            sun_intensity: 0.45,
            headlight_intensity: 0.2,
            near_m: 0.05,
            background: [0, 0, 0],
            tile_size: 32,
        }
    }
}

/// One rendered view.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub rgb: RgbImage,
    /// Perspective views: z along the optical axis in metres. Top-down views: height of the visible
    /// surface in metres. 0 where nothing is seen.
    pub depth: DepthImage,
    /// Instance id of the visible surface; 0 for structure or nothing.
    pub instances: InstanceImage,
}

impl Frame {
    fn empty(width: u32, height: u32, background: [u8; 3]) -> Self {
        Self {
            rgb: Image::filled(width, height, background),
            depth: Image::filled(width, height, 0.0),
            instances: Image::filled(width, height, 0),
        }
    }
}

/// Renders RGB, depth and instance ids seen by an ideal pinhole camera (its distortion is ignored).
pub fn render(
    scene: &RenderScene,
    camera: &PinholeCamera,
    world_from_camera: &Pose3,
    options: &RenderOptions,
) -> Frame {
    let near_m = if options.near_m.is_finite() && options.near_m > 0.0 { options.near_m } else { 1e-3 };
    match Perspective::new(camera, world_from_camera, near_m) {
        Some(projection) => render_with(scene, &projection, options),
        None => {
            tracing::warn!(?camera, "camera with non-finite or non-positive intrinsics; rendered empty");
            Frame::empty(camera.width, camera.height, options.background)
        }
    }
}

/// An orthographic view straight down, for top-down images. Pixel `(col, row)` has its centre at world
/// `(min_x_m + (col + 0.5) * metres_per_pixel, max_y_m - (row + 0.5) * metres_per_pixel)`: +x is right and
/// +y is up in the image. Only geometry below `max_z_m` is drawn (this takes the ceiling off).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrthoView {
    /// World x of the left image border.
    pub min_x_m: f64,
    /// World y of the top image border.
    pub max_y_m: f64,
    pub metres_per_pixel: f64,
    pub width: u32,
    pub height: u32,
    /// Height of the horizontal cut: geometry above it is clipped away.
    pub max_z_m: f64,
}

/// Renders a top-down orthographic view. The depth channel holds the height (world z) of the visible surface
/// in metres, 0 where nothing is seen; lighting uses a headlight pointing straight down.
pub fn render_topdown(scene: &RenderScene, view: &OrthoView, options: &RenderOptions) -> Frame {
    match Orthographic::new(view) {
        Some(projection) => render_with(scene, &projection, options),
        None => {
            tracing::warn!(?view, "top-down view with non-finite or non-positive scale; rendered empty");
            Frame::empty(view.width, view.height, options.background)
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Projections.

/// `view = m · (world - origin)`, in `f32`: subtracting the origin first keeps the precision of coordinates
/// near the viewer.
#[derive(Clone, Copy, Debug)]
struct ViewTransform {
    m: [[f32; 3]; 3],
    origin: [f32; 3],
    m64: Matrix3<f64>,
    origin64: Vector3<f64>,
}

impl ViewTransform {
    fn new(m: Matrix3<f64>, origin: Vector3<f64>) -> Self {
        let rows = [0, 1, 2].map(|r| [0, 1, 2].map(|c| m[(r, c)] as f32));
        Self { m: rows, origin: [origin.x as f32, origin.y as f32, origin.z as f32], m64: m, origin64: origin }
    }

    #[inline]
    fn apply(&self, p: [f32; 3]) -> [f32; 3] {
        let d = [p[0] - self.origin[0], p[1] - self.origin[1], p[2] - self.origin[2]];
        self.m.map(|row| row[0] * d[0] + row[1] * d[1] + row[2] * d[2])
    }

    /// A view-space plane `n·v + d ≥ 0` expressed in world coordinates.
    fn plane_to_world(&self, plane: [f64; 4]) -> [f64; 4] {
        let n_view = Vector3::new(plane[0], plane[1], plane[2]);
        let n_world = self.m64.transpose() * n_view;
        [n_world.x, n_world.y, n_world.z, plane[3] - n_world.dot(&self.origin64)]
    }
}

/// How view space maps to the screen. View space has z pointing away from the viewer; the depth *key*
/// stored in the z-buffer is an affine function of the pixel coordinates over a triangle and grows towards
/// the viewer (`1/z` for a perspective view, the world height for a top-down view).
trait Projection: Sync {
    /// The key is `1/z` (and texture coordinates are interpolated as `u/z`); otherwise the key is the output
    /// depth itself and texture coordinates are affine.
    const PERSPECTIVE: bool;

    fn transform(&self) -> &ViewTransform;
    fn size(&self) -> (u32, u32);
    /// Minimum view z of drawn geometry.
    fn near(&self) -> f32;
    /// Frustum planes `n·v + d ≥ 0` in view space, with a pixel of margin; the near plane first.
    fn planes(&self) -> &[[f64; 4]; 5];
    /// Pixel coordinates of a view-space point with `z ≥ near`.
    fn screen(&self, v: [f32; 3]) -> [f32; 2];
    /// The key over the view-space plane `n·v = d`, as `[a, b, c]` with `key = a·x + b·y + c`.
    fn key_plane(&self, n: Vector3<f64>, d: f64) -> Option<[f64; 3]>;
    /// For `f(v) = g·v + h` on the plane whose key is `key`, the affine function of the pixel coordinates
    /// equal to `f·key` (perspective) or `f` (orthographic).
    fn weighted_plane(&self, g: Vector3<f64>, h: f64, key: &[f64; 3]) -> [f64; 3];
    /// Unit direction of the viewing ray through a view-space point.
    fn view_direction(&self, v: Vector3<f64>) -> Vector3<f64>;
}

struct Perspective {
    transform: ViewTransform,
    width: u32,
    height: u32,
    fx: f64,
    fy: f64,
    cx: f64,
    cy: f64,
    fx32: f32,
    fy32: f32,
    cx32: f32,
    cy32: f32,
    near: f32,
    planes: [[f64; 4]; 5],
}

impl Perspective {
    fn new(camera: &PinholeCamera, world_from_camera: &Pose3, near: f32) -> Option<Self> {
        let (fx, fy, cx, cy) = (camera.fx, camera.fy, camera.cx, camera.cy);
        if !(fx.is_finite() && fy.is_finite() && fx > 0.0 && fy > 0.0 && cx.is_finite() && cy.is_finite()) {
            return None;
        }
        let world_from_camera_rotation = world_from_camera.rotation_matrix();
        let position = world_from_camera.translation();
        if !position.iter().all(|v| v.is_finite()) {
            return None;
        }
        let transform = ViewTransform::new(world_from_camera_rotation.transpose(), position);
        // Frustum sides through the pixel borders, one pixel wider than the image.
        let (w, h) = (f64::from(camera.width), f64::from(camera.height));
        let left = (-1.5 - cx) / fx;
        let right = (w + 0.5 - cx) / fx;
        let top = (-1.5 - cy) / fy;
        let bottom = (h + 0.5 - cy) / fy;
        let planes = [
            [0.0, 0.0, 1.0, -f64::from(near)],
            [1.0, 0.0, -left, 0.0],
            [-1.0, 0.0, right, 0.0],
            [0.0, 1.0, -top, 0.0],
            [0.0, -1.0, bottom, 0.0],
        ];
        Some(Self {
            transform,
            width: camera.width,
            height: camera.height,
            fx,
            fy,
            cx,
            cy,
            fx32: fx as f32,
            fy32: fy as f32,
            cx32: cx as f32,
            cy32: cy as f32,
            near,
            planes,
        })
    }
}

impl Projection for Perspective {
    const PERSPECTIVE: bool = true;

    fn transform(&self) -> &ViewTransform {
        &self.transform
    }

    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn near(&self) -> f32 {
        self.near
    }

    fn planes(&self) -> &[[f64; 4]; 5] {
        &self.planes
    }

    #[inline]
    fn screen(&self, v: [f32; 3]) -> [f32; 2] {
        [self.fx32 * (v[0] / v[2]) + self.cx32, self.fy32 * (v[1] / v[2]) + self.cy32]
    }

    fn key_plane(&self, n: Vector3<f64>, d: f64) -> Option<[f64; 3]> {
        // The ray of pixel (x, y) is z·(xn, yn, 1) with xn = (x - cx)/fx; on the plane n·v = d,
        // 1/z = (n.x·xn + n.y·yn + n.z) / d.
        if d == 0.0 {
            return None;
        }
        let a = n.x / (self.fx * d);
        let b = n.y / (self.fy * d);
        let c = (n.z - n.x * self.cx / self.fx - n.y * self.cy / self.fy) / d;
        Some([a, b, c])
    }

    fn weighted_plane(&self, g: Vector3<f64>, h: f64, key: &[f64; 3]) -> [f64; 3] {
        // f/z = g·(xn, yn, 1) + h/z.
        [
            g.x / self.fx + h * key[0],
            g.y / self.fy + h * key[1],
            g.z - g.x * self.cx / self.fx - g.y * self.cy / self.fy + h * key[2],
        ]
    }

    fn view_direction(&self, v: Vector3<f64>) -> Vector3<f64> {
        v.try_normalize(0.0).unwrap_or_else(Vector3::z)
    }
}

/// View space of a top-down view: `(x, y, max_z - z)` of the world, so view z grows downwards from the cut.
struct Orthographic {
    transform: ViewTransform,
    width: u32,
    height: u32,
    min_x: f64,
    max_y: f64,
    metres_per_pixel: f64,
    max_z: f64,
    /// `screen = (x·scale + offset_x, -y·scale + offset_y)`.
    scale32: f32,
    offset_x32: f32,
    offset_y32: f32,
    planes: [[f64; 4]; 5],
}

impl Orthographic {
    fn new(view: &OrthoView) -> Option<Self> {
        let m = view.metres_per_pixel;
        if !(m.is_finite() && m > 0.0 && view.min_x_m.is_finite() && view.max_y_m.is_finite() && view.max_z_m.is_finite())
        {
            return None;
        }
        let transform =
            ViewTransform::new(Matrix3::from_diagonal(&Vector3::new(1.0, 1.0, -1.0)), Vector3::new(0.0, 0.0, view.max_z_m));
        let (w, h) = (f64::from(view.width), f64::from(view.height));
        let planes = [
            [0.0, 0.0, 1.0, 0.0],
            [1.0, 0.0, 0.0, -(view.min_x_m - m)],
            [-1.0, 0.0, 0.0, view.min_x_m + (w + 1.0) * m],
            [0.0, -1.0, 0.0, view.max_y_m + m],
            [0.0, 1.0, 0.0, -(view.max_y_m - (h + 1.0) * m)],
        ];
        Some(Self {
            transform,
            width: view.width,
            height: view.height,
            min_x: view.min_x_m,
            max_y: view.max_y_m,
            metres_per_pixel: m,
            max_z: view.max_z_m,
            scale32: (1.0 / m) as f32,
            offset_x32: (-view.min_x_m / m - 0.5) as f32,
            offset_y32: (view.max_y_m / m - 0.5) as f32,
            planes,
        })
    }

    /// World x and y at pixel coordinates (x, y) as affine functions `[a, b, c]`.
    fn world_xy_planes(&self) -> ([f64; 3], [f64; 3]) {
        let m = self.metres_per_pixel;
        ([m, 0.0, self.min_x + 0.5 * m], [0.0, -m, self.max_y - 0.5 * m])
    }
}

impl Projection for Orthographic {
    const PERSPECTIVE: bool = false;

    fn transform(&self) -> &ViewTransform {
        &self.transform
    }

    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn near(&self) -> f32 {
        0.0
    }

    fn planes(&self) -> &[[f64; 4]; 5] {
        &self.planes
    }

    #[inline]
    fn screen(&self, v: [f32; 3]) -> [f32; 2] {
        [v[0] * self.scale32 + self.offset_x32, self.offset_y32 - v[1] * self.scale32]
    }

    fn key_plane(&self, n: Vector3<f64>, d: f64) -> Option<[f64; 3]> {
        // On n·v = d: view z = (d - n.x·x - n.y·y) / n.z, and the key (world height) is max_z - view z.
        if n.z.abs() < f64::EPSILON * n.norm() {
            return None;
        }
        let (x, y) = self.world_xy_planes();
        Some([0, 1, 2].map(|i| {
            let constant = if i == 2 { self.max_z - d / n.z } else { 0.0 };
            constant + (n.x * x[i] + n.y * y[i]) / n.z
        }))
    }

    fn weighted_plane(&self, g: Vector3<f64>, h: f64, key: &[f64; 3]) -> [f64; 3] {
        // f = g.x·x + g.y·y + g.z·(max_z - key) + h.
        let (x, y) = self.world_xy_planes();
        [0, 1, 2].map(|i| {
            let constant = if i == 2 { g.z * self.max_z + h } else { 0.0 };
            constant + g.x * x[i] + g.y * y[i] - g.z * key[i]
        })
    }

    fn view_direction(&self, _v: Vector3<f64>) -> Vector3<f64> {
        Vector3::z()
    }
}

// ---------------------------------------------------------------------------------------------------------
// Per-frame setup.

/// A mesh vertex in view space, its pixel coordinates (when in front of the near plane) and the frustum
/// planes it is outside of (bit 0: near; bits 1-4: the sides).
#[derive(Clone, Copy, Debug)]
struct ViewVertex {
    view: [f32; 3],
    screen: [f32; 2],
    outcode: u8,
}

/// What the raster pass needs of a screen triangle. Edge `i` is `a·x + b·y + c`, positive inside; a pixel
/// is covered when every edge value is `≥ threshold` (0 or the smallest positive `f32`, by the tie rule).
#[derive(Clone, Copy, Debug)]
struct RasterTriangle {
    edge_a: [f32; 3],
    edge_b: [f32; 3],
    edge_c: [f32; 3],
    threshold: [f32; 3],
    /// Depth key `key[0]·x + key[1]·y + key[2]`, larger is nearer.
    key: [f32; 3],
    /// Inclusive pixel ranges `[x_lo, y_lo, x_hi, y_hi]` covered by the bounding box, inside the image.
    bbox: [i32; 4],
}

/// What shading needs of a triangle.
#[derive(Clone, Copy, Debug)]
struct ShadeTriangle<'a> {
    /// The depth key plane in f64: the output depth is recomputed from it once per pixel, because the f32
    /// z-buffer value loses about 1e-5 of relative precision to cancellation on surfaces seen at grazing
    /// angles.
    key: [f64; 3],
    texture: Option<&'a Texture>,
    /// Texture coordinates `u`, `v` as affine functions of the pixel coordinates (times the key when
    /// perspective).
    uv: [[f32; 3]; 2],
    /// Lit, gamma-encoded diffuse colour in [0, 1] (may exceed 1 under strong light), multiplied with
    /// texels.
    factor: [f32; 3],
    /// Output colour when untextured.
    flat: [u8; 3],
    instance: u16,
}

/// Per-frame lighting in view space.
struct Lighting {
    ambient: f64,
    sun_view: Vector3<f64>,
    headlight: f64,
    gamma_table: [f32; GAMMA_TABLE_SIZE + 1],
}

impl Lighting {
    fn new(options: &RenderOptions, transform: &ViewTransform) -> Self {
        let sun = Vector3::from(options.sun_direction_world.map(f64::from));
        let sun_view = match (transform.m64 * sun).try_normalize(0.0) {
            Some(direction) if direction.iter().all(|v| v.is_finite()) => {
                direction * finite_or_zero(options.sun_intensity)
            }
            _ => Vector3::zeros(),
        };
        let mut gamma_table = [0.0; GAMMA_TABLE_SIZE + 1];
        for (i, entry) in gamma_table.iter_mut().enumerate() {
            *entry = (i as f32 * MAX_LIGHT / GAMMA_TABLE_SIZE as f32).powf(1.0 / GAMMA);
        }
        Self {
            ambient: finite_or_zero(options.ambient),
            sun_view,
            headlight: finite_or_zero(options.headlight_intensity),
            gamma_table,
        }
    }

    /// `light^(1/γ)` by table lookup.
    fn gamma(&self, light: f64) -> f32 {
        let position = (light as f32).clamp(0.0, MAX_LIGHT) * (GAMMA_TABLE_SIZE as f32 / MAX_LIGHT);
        let index = (position as usize).min(GAMMA_TABLE_SIZE - 1);
        let fraction = position - index as f32;
        self.gamma_table[index] + fraction * (self.gamma_table[index + 1] - self.gamma_table[index])
    }
}

fn finite_or_zero(value: f32) -> f64 {
    if value.is_finite() { f64::from(value) } else { 0.0 }
}

fn gamma_encode(linear: [f32; 3]) -> [f32; 3] {
    linear.map(|c| if c.is_finite() { c.clamp(0.0, 1.0).powf(1.0 / GAMMA) } else { 0.0 })
}

fn render_with<P: Projection>(scene: &RenderScene, projection: &P, options: &RenderOptions) -> Frame {
    let (width, height) = projection.size();
    let mut frame = Frame::empty(width, height, options.background);
    if width == 0 || height == 0 {
        return frame;
    }
    let transform = projection.transform();
    let world_planes = projection.planes().map(|plane| transform.plane_to_world(plane));

    // Frustum culling of objects, then of their clusters.
    let mut visible_objects = Vec::new();
    let mut draw_list = Vec::new();
    for (object, bounds) in scene.object_bounds.iter().enumerate() {
        let Some(bounds) = bounds else { continue };
        if bounds.outside_any(&world_planes) {
            continue;
        }
        let slot = visible_objects.len();
        visible_objects.push(object);
        for (cluster_index, cluster) in scene.object_clusters[object].iter().enumerate() {
            if !cluster.bounds.outside_any(&world_planes) {
                draw_list.push((slot, cluster_index));
            }
        }
    }

    let view_planes = projection.planes().map(|p| p.map(|v| v as f32));
    let vertices: Vec<Vec<ViewVertex>> = visible_objects
        .par_iter()
        .map(|&object| transform_vertices(projection, &view_planes, &scene.objects[object].mesh))
        .collect();

    let lighting = Lighting::new(options, transform);
    let setups: Vec<(Vec<RasterTriangle>, Vec<ShadeTriangle<'_>>)> = draw_list
        .par_iter()
        .map(|&(slot, cluster_index)| {
            let object = visible_objects[slot];
            let cluster = &scene.object_clusters[object][cluster_index];
            let mut raster = Vec::new();
            let mut shade = Vec::new();
            let context = SetupContext { scene, object, vertices: &vertices[slot], lighting: &lighting };
            context.setup_triangles(projection, cluster.triangles.clone(), &mut raster, &mut shade);
            (raster, shade)
        })
        .collect();
    let total: usize = setups.iter().map(|(r, _)| r.len()).sum();
    let mut raster = Vec::with_capacity(total);
    let mut shade = Vec::with_capacity(total);
    for (r, s) in setups {
        raster.extend(r);
        shade.extend(s);
    }

    let tile_size = options.tile_size.clamp(TILE_SIZE_RANGE.0, TILE_SIZE_RANGE.1) as usize;
    let grid = TileGrid::new(width as usize, height as usize, tile_size);
    let bins = grid.bin(&raster);

    let band_len = tile_size * width as usize;
    let background = options.background;
    frame
        .rgb
        .data_mut()
        .par_chunks_mut(band_len)
        .zip(frame.depth.data_mut().par_chunks_mut(band_len))
        .zip(frame.instances.data_mut().par_chunks_mut(band_len))
        .enumerate()
        .for_each(|(tile_row, ((rgb, depth), instances))| {
            let mut tile = TileBuffers::new(tile_size);
            for tile_col in 0..grid.columns {
                let rect = grid.rect(tile_col, tile_row);
                tile.clear();
                for &index in &bins[tile_row * grid.columns + tile_col] {
                    tile.rasterise(&rect, &raster[index as usize], index);
                }
                let output = BandOutput { rgb: &mut *rgb, depth: &mut *depth, instances: &mut *instances, width };
                tile.shade::<P>(&rect, &shade, background, output);
            }
        });
    frame
}

fn transform_vertices<P: Projection>(projection: &P, planes: &[[f32; 4]; 5], mesh: &TriangleMesh) -> Vec<ViewVertex> {
    let transform = projection.transform();
    let near = projection.near();
    mesh.positions
        .iter()
        .map(|&p| {
            let view = transform.apply(p);
            let mut outcode = 0u8;
            if !(view[2] >= near) {
                outcode |= NEAR_BIT;
            }
            for (bit, plane) in planes.iter().enumerate().skip(1) {
                if plane[0] * view[0] + plane[1] * view[1] + plane[2] * view[2] + plane[3] < 0.0 {
                    outcode |= 1 << bit;
                }
            }
            let screen = if outcode & NEAR_BIT == 0 { projection.screen(view) } else { [0.0; 2] };
            ViewVertex { view, screen, outcode }
        })
        .collect()
}

struct SetupContext<'a, 'v> {
    scene: &'a RenderScene,
    object: usize,
    vertices: &'v [ViewVertex],
    lighting: &'v Lighting,
}

impl<'a> SetupContext<'a, '_> {
    /// Clips, projects and sets up the triangles `range` of the object, appending one raster and one shade
    /// record per screen triangle (a triangle clipped by the near plane may give two).
    fn setup_triangles<P: Projection>(
        &self,
        projection: &P,
        range: Range<usize>,
        raster: &mut Vec<RasterTriangle>,
        shade: &mut Vec<ShadeTriangle<'a>>,
    ) {
        let mesh = &self.scene.objects[self.object].mesh;
        let (width, height) = projection.size();
        let size = (width as i32, height as i32);
        let near = projection.near();
        for t in range {
            let Some(&[i0, i1, i2]) = mesh.triangles.get(t) else { continue };
            let (Some(v0), Some(v1), Some(v2)) =
                (self.vertices.get(i0 as usize), self.vertices.get(i1 as usize), self.vertices.get(i2 as usize))
            else {
                continue;
            };
            if v0.outcode & v1.outcode & v2.outcode != 0 {
                continue;
            }
            let corners = [v0, v1, v2];
            // Shading and the depth plane are computed once per mesh triangle, when a piece first survives.
            let mut look: Option<Option<([f32; 3], ShadeTriangle<'a>)>> = None;
            let mut emit = |edges: RasterTriangle, raster: &mut Vec<RasterTriangle>, shade: &mut Vec<_>| {
                let prepared = look.get_or_insert_with(|| self.shade_triangle(projection, t, [i0, i1, i2]));
                if let Some((key, shade_triangle)) = prepared {
                    raster.push(RasterTriangle { key: *key, ..edges });
                    shade.push(*shade_triangle);
                }
            };
            if (v0.outcode | v1.outcode | v2.outcode) & NEAR_BIT == 0 {
                if let Some(edges) = edge_setup([v0.screen, v1.screen, v2.screen], size) {
                    emit(edges, raster, shade);
                }
                continue;
            }
            // Clip against the near plane. An intersection is always interpolated from the vertex in front
            // to the vertex behind, so the two triangles sharing a clipped edge get the same point.
            let mut polygon = [[0.0f32; 2]; 4];
            let mut count = 0;
            for i in 0..3 {
                let (a, b) = (corners[i], corners[(i + 1) % 3]);
                let a_inside = a.outcode & NEAR_BIT == 0;
                let b_inside = b.outcode & NEAR_BIT == 0;
                if a_inside {
                    polygon[count] = a.screen;
                    count += 1;
                }
                if a_inside != b_inside {
                    let (inside, outside) = if a_inside { (a.view, b.view) } else { (b.view, a.view) };
                    let s = (near - inside[2]) / (outside[2] - inside[2]);
                    let point = [
                        inside[0] + s * (outside[0] - inside[0]),
                        inside[1] + s * (outside[1] - inside[1]),
                        near,
                    ];
                    polygon[count] = projection.screen(point);
                    count += 1;
                }
            }
            for k in 1..count.saturating_sub(1) {
                if let Some(edges) = edge_setup([polygon[0], polygon[k], polygon[k + 1]], size) {
                    emit(edges, raster, shade);
                }
            }
        }
    }

    /// The depth key plane and the shading record of mesh triangle `t`; `None` for a degenerate triangle.
    fn shade_triangle<P: Projection>(
        &self,
        projection: &P,
        t: usize,
        indices: [u32; 3],
    ) -> Option<([f32; 3], ShadeTriangle<'a>)> {
        let object = &self.scene.objects[self.object];
        let mesh = &object.mesh;
        // The plane is taken from the world positions in f64, not from the f32 view-space vertices: the
        // rounding of an f32 rotation tilts planes by ~1e-7 rad, which at grazing angles moves depth by
        // a tenth of a millimetre.
        let transform = projection.transform();
        let mut p = [Vector3::zeros(); 3];
        for (view, &index) in p.iter_mut().zip(&indices) {
            let world = Vector3::from(mesh.positions.get(index as usize)?.map(f64::from));
            *view = transform.m64 * (world - transform.origin64);
        }
        let e1 = p[1] - p[0];
        let e2 = p[2] - p[0];
        let normal = e1.cross(&e2);
        let normal_length = normal.norm();
        if !(normal_length > 0.0 && normal_length.is_finite()) {
            return None;
        }
        let key = projection.key_plane(normal, normal.dot(&p[0]))?;
        if !key.iter().all(|k| k.is_finite()) {
            return None;
        }

        let unit_normal = normal / normal_length;
        let centroid = (p[0] + p[1] + p[2]) / 3.0;
        let lighting = self.lighting;
        let light = lighting.ambient
            + unit_normal.dot(&lighting.sun_view).abs()
            + lighting.headlight * unit_normal.dot(&projection.view_direction(centroid)).abs();
        let brightness = lighting.gamma(light);

        let material_index = mesh.triangle_materials.get(t).map(|&m| usize::from(m));
        let look = material_index.and_then(|m| self.scene.materials[self.object].get(m));
        let diffuse = look.map_or_else(|| gamma_encode(FALLBACK_DIFFUSE), |l| l.diffuse_gamma);
        let factor = diffuse.map(|c| c * brightness);
        let texture = match (look, material_index) {
            (Some(l), Some(m)) if l.textured => mesh.materials.get(m).and_then(|mat| mat.texture.as_deref()),
            _ => None,
        };
        let mut uv = [[0.0f32; 3]; 2];
        if texture.is_some() {
            let uvs = indices.map(|i| mesh.uvs.get(i as usize).copied().unwrap_or([0.0; 2]));
            // Texture coordinates are linear over the triangle: f(v) = g·v + h with g in the triangle's
            // plane, from the Gram system g·e1 = Δf1, g·e2 = Δf2.
            let (a, b, c) = (e1.dot(&e1), e1.dot(&e2), e2.dot(&e2));
            let det = a * c - b * b;
            for (k, plane) in uv.iter_mut().enumerate() {
                let f = uvs.map(|uv| f64::from(uv[k]));
                let (df1, df2) = (f[1] - f[0], f[2] - f[0]);
                let g = if det > f64::EPSILON * a * c {
                    e1 * ((c * df1 - b * df2) / det) + e2 * ((a * df2 - b * df1) / det)
                } else {
                    Vector3::zeros()
                };
                let h = f[0] - g.dot(&p[0]);
                *plane = projection.weighted_plane(g, h, &key).map(|v| v as f32);
            }
        }
        let shade = ShadeTriangle {
            key,
            texture,
            uv,
            factor,
            flat: factor.map(|f| (f * 255.0 + 0.5).min(255.0) as u8),
            instance: object.instance_id,
        };
        Some((key.map(|k| k as f32), shade))
    }
}

/// Edge functions and pixel bounding box of a screen triangle; `None` when it covers no pixel centre. The
/// depth key is filled in by the caller.
fn edge_setup(s: [[f32; 2]; 3], (width, height): (i32, i32)) -> Option<RasterTriangle> {
    if !s.iter().all(|p| p[0].is_finite() && p[1].is_finite()) {
        return None;
    }
    let min_x = s[0][0].min(s[1][0]).min(s[2][0]);
    let max_x = s[0][0].max(s[1][0]).max(s[2][0]);
    let min_y = s[0][1].min(s[1][1]).min(s[2][1]);
    let max_y = s[0][1].max(s[1][1]).max(s[2][1]);
    // Pixel centres are at integers: the covered columns are ceil(min_x)..=floor(max_x).
    let x_lo = min_x.ceil().max(0.0) as i32;
    let x_hi = max_x.floor().min((width - 1) as f32) as i32;
    let y_lo = min_y.ceil().max(0.0) as i32;
    let y_hi = max_y.floor().min((height - 1) as f32) as i32;
    if x_lo > x_hi || y_lo > y_hi {
        return None;
    }
    let p = s.map(|v| [f64::from(v[0]), f64::from(v[1])]);
    let double_area = (p[1][0] - p[0][0]) * (p[2][1] - p[0][1]) - (p[1][1] - p[0][1]) * (p[2][0] - p[0][0]);
    if !(double_area.abs() > MIN_DOUBLE_AREA_PX2) {
        return None;
    }
    let sign = double_area.signum();
    let mut triangle = RasterTriangle {
        edge_a: [0.0; 3],
        edge_b: [0.0; 3],
        edge_c: [0.0; 3],
        threshold: [0.0; 3],
        key: [0.0; 3],
        bbox: [x_lo, y_lo, x_hi, y_hi],
    };
    for i in 0..3 {
        let (pi, pj) = (p[i], p[(i + 1) % 3]);
        // Differences and products of f32 values are exact in f64 and rounding is symmetric, so the
        // triangle on the other side of this edge gets exactly the negated coefficients.
        let a = (sign * (pi[1] - pj[1])) as f32;
        let b = (sign * (pj[0] - pi[0])) as f32;
        let c = (sign * (pi[0] * pj[1] - pj[0] * pi[1])) as f32;
        triangle.edge_a[i] = a;
        triangle.edge_b[i] = b;
        triangle.edge_c[i] = c;
        // Tie rule: a pixel centred exactly on an edge belongs to the side where (a, b) points "up-left" in
        // this sense; the neighbour has (-a, -b) and excludes it.
        let owns_edge = a > 0.0 || (a == 0.0 && b > 0.0);
        triangle.threshold[i] = if owns_edge { 0.0 } else { f32::from_bits(1) };
    }
    Some(triangle)
}

// ---------------------------------------------------------------------------------------------------------
// Tiles.

#[derive(Clone, Copy, Debug)]
struct TileGrid {
    width: usize,
    height: usize,
    tile_size: usize,
    columns: usize,
    rows: usize,
}

/// Pixel range of one tile: columns `x0..x1`, rows `y0..y1`.
#[derive(Clone, Copy, Debug)]
struct TileRect {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
}

impl TileGrid {
    fn new(width: usize, height: usize, tile_size: usize) -> Self {
        Self { width, height, tile_size, columns: width.div_ceil(tile_size), rows: height.div_ceil(tile_size) }
    }

    fn rect(&self, column: usize, row: usize) -> TileRect {
        let (x0, y0) = (column * self.tile_size, row * self.tile_size);
        TileRect { x0, y0, x1: (x0 + self.tile_size).min(self.width), y1: (y0 + self.tile_size).min(self.height) }
    }

    /// Indices of the triangles overlapping each tile, in increasing order.
    fn bin(&self, triangles: &[RasterTriangle]) -> Vec<Vec<u32>> {
        let mut bins = vec![Vec::new(); self.columns * self.rows];
        for (index, triangle) in triangles.iter().enumerate() {
            let [x_lo, y_lo, x_hi, y_hi] = triangle.bbox.map(|v| v as usize);
            let (c0, c1) = (x_lo / self.tile_size, x_hi / self.tile_size);
            let (r0, r1) = (y_lo / self.tile_size, y_hi / self.tile_size);
            if c0 == c1 && r0 == r1 {
                bins[r0 * self.columns + c0].push(index as u32);
                continue;
            }
            for row in r0..=r1 {
                for column in c0..=c1 {
                    let rect = self.rect(column, row);
                    let x_range = (x_lo.max(rect.x0) as f32, x_hi.min(rect.x1 - 1) as f32);
                    let y_range = (y_lo.max(rect.y0) as f32, y_hi.min(rect.y1 - 1) as f32);
                    if triangle_misses_rect(triangle, x_range, y_range) {
                        continue;
                    }
                    bins[row * self.columns + column].push(index as u32);
                }
            }
        }
        bins
    }
}

/// Whether some edge is negative at every pixel centre of the rectangle (conservatively: a small tolerance
/// keeps triangles whose edge merely touches the rectangle).
fn triangle_misses_rect(triangle: &RasterTriangle, x_range: (f32, f32), y_range: (f32, f32)) -> bool {
    (0..3).any(|i| {
        let (a, b, c) = (triangle.edge_a[i], triangle.edge_b[i], triangle.edge_c[i]);
        let x = if a > 0.0 { x_range.1 } else { x_range.0 };
        let y = if b > 0.0 { y_range.1 } else { y_range.0 };
        let best = a * x + b * y + c;
        let tolerance = 1e-5 * (a.abs() * x.abs() + b.abs() * y.abs() + c.abs());
        best < -tolerance
    })
}

/// A tile's z-buffer (depth keys) and triangle buffer, `tile_size²` each, row stride `tile_size`.
struct TileBuffers {
    size: usize,
    keys: Vec<f32>,
    triangles: Vec<u32>,
}

/// The rows of the output images that one row of tiles owns.
struct BandOutput<'o> {
    rgb: &'o mut [[u8; 3]],
    depth: &'o mut [f32],
    instances: &'o mut [u16],
    width: u32,
}

impl TileBuffers {
    fn new(size: usize) -> Self {
        Self { size, keys: vec![f32::NEG_INFINITY; size * size], triangles: vec![NO_TRIANGLE; size * size] }
    }

    fn clear(&mut self) {
        self.keys.fill(f32::NEG_INFINITY);
        self.triangles.fill(NO_TRIANGLE);
    }

    /// Depth-tests triangle `index` at the pixel centres of the tile it covers. Coverage and the key are
    /// evaluated directly at each pixel (row value plus `a·x`), never accumulated, so that values are exact
    /// to one rounding and independent of where a tile starts.
    #[inline]
    fn rasterise(&mut self, rect: &TileRect, triangle: &RasterTriangle, index: u32) {
        let [x_lo, y_lo, x_hi, y_hi] = triangle.bbox;
        let x_start = (x_lo as usize).max(rect.x0);
        let x_end = (x_hi as usize + 1).min(rect.x1);
        let y_start = (y_lo as usize).max(rect.y0);
        let y_end = (y_hi as usize + 1).min(rect.y1);
        if x_start >= x_end || y_start >= y_end {
            return;
        }
        let RasterTriangle { edge_a: a, edge_b: b, edge_c: c, threshold: t, key, .. } = *triangle;
        for y in y_start..y_end {
            let yf = y as f32;
            let row = [b[0] * yf + c[0], b[1] * yf + c[1], b[2] * yf + c[2]];
            let key_row = key[1] * yf + key[2];
            // Narrow the span to where every edge can be non-negative (one pixel of slack each side; the
            // exact test below decides).
            let (mut span_lo, mut span_hi) = (x_start as f32, (x_end - 1) as f32);
            for i in 0..3 {
                if a[i] > 0.0 {
                    span_lo = span_lo.max((-row[i] / a[i]).floor() - 1.0);
                } else if a[i] < 0.0 {
                    span_hi = span_hi.min((-row[i] / a[i]).ceil() + 1.0);
                } else if row[i] < t[i] {
                    span_hi = -1.0;
                }
            }
            if !(span_lo <= span_hi) {
                continue;
            }
            let (lo, hi) = (span_lo as usize, span_hi as usize + 1);
            let start = (y - rect.y0) * self.size + (lo - rect.x0);
            let end = start + (hi - lo);
            let keys = &mut self.keys[start..end];
            let triangles = &mut self.triangles[start..end];
            let mut xf = lo as f32;
            for (stored_key, stored_triangle) in keys.iter_mut().zip(triangles.iter_mut()) {
                let e0 = row[0] + a[0] * xf;
                let e1 = row[1] + a[1] * xf;
                let e2 = row[2] + a[2] * xf;
                let k = key_row + key[0] * xf;
                let hit = (e0 >= t[0]) & (e1 >= t[1]) & (e2 >= t[2]) & (k > *stored_key);
                *stored_key = if hit { k } else { *stored_key };
                *stored_triangle = if hit { index } else { *stored_triangle };
                xf += 1.0;
            }
        }
    }

    /// Shades the tile's pixels into the band's output rows.
    fn shade<P: Projection>(
        &self,
        rect: &TileRect,
        shade: &[ShadeTriangle<'_>],
        background: [u8; 3],
        output: BandOutput<'_>,
    ) {
        let width = output.width as usize;
        for y in rect.y0..rect.y1 {
            let tile_row = (y - rect.y0) * self.size;
            let out_row = (y - rect.y0) * width;
            let yf = y as f32;
            for x in rect.x0..rect.x1 {
                let local = tile_row + x - rect.x0;
                let out = out_row + x;
                let Some(triangle) = shade.get(self.triangles[local] as usize) else {
                    output.rgb[out] = background;
                    output.depth[out] = 0.0;
                    output.instances[out] = 0;
                    continue;
                };
                let key = self.keys[local];
                let [ka, kb, kc] = triangle.key;
                let exact_key = ka * x as f64 + kb * f64::from(yf) + kc;
                output.depth[out] = if P::PERSPECTIVE { 1.0 / exact_key } else { exact_key } as f32;
                output.instances[out] = triangle.instance;
                output.rgb[out] = match triangle.texture {
                    None => triangle.flat,
                    Some(texture) => {
                        let xf = x as f32;
                        let [pu, pv] = triangle.uv;
                        let mut u = pu[0] * xf + pu[1] * yf + pu[2];
                        let mut v = pv[0] * xf + pv[1] * yf + pv[2];
                        if P::PERSPECTIVE {
                            u /= key;
                            v /= key;
                        }
                        let texel = texture.sample(u, v);
                        let f = triangle.factor;
                        [
                            (f32::from(texel[0]) * f[0] + 0.5).min(255.0) as u8,
                            (f32::from(texel[1]) * f[1] + 0.5).min(255.0) as u8,
                            (f32::from(texel[2]) * f[2] + 0.5).min(255.0) as u8,
                        ]
                    }
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::Material;
    use nalgebra::{Point2, Point3};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn plain(diffuse: [f32; 3]) -> Material {
        Material::plain("plain", diffuse)
    }

    /// A parallelogram `origin + s·du + t·dv`, s, t in [0, 1], split into `n × n` cells of two triangles
    /// with alternating diagonals; texture coordinates are `uv_from_point(point)`.
    fn grid(
        origin: [f32; 3],
        du: [f32; 3],
        dv: [f32; 3],
        n: usize,
        material: Material,
        uv_from_point: impl Fn([f32; 3]) -> [f32; 2],
    ) -> TriangleMesh {
        let mut mesh = TriangleMesh { materials: vec![material], ..TriangleMesh::default() };
        for j in 0..=n {
            for i in 0..=n {
                let (s, t) = (i as f32 / n as f32, j as f32 / n as f32);
                let p = [0, 1, 2].map(|k| origin[k] + s * du[k] + t * dv[k]);
                mesh.positions.push(p);
                mesh.uvs.push(uv_from_point(p));
            }
        }
        let index = |i: usize, j: usize| (j * (n + 1) + i) as u32;
        for j in 0..n {
            for i in 0..n {
                let (a, b, c, d) = (index(i, j), index(i + 1, j), index(i + 1, j + 1), index(i, j + 1));
                if (i + j) % 2 == 0 {
                    mesh.triangles.extend([[a, b, c], [a, c, d]]);
                } else {
                    mesh.triangles.extend([[a, b, d], [b, c, d]]);
                }
                mesh.triangle_materials.extend([0, 0]);
            }
        }
        mesh
    }

    /// An axis-aligned box of 12 triangles, some wound inwards (the renderer must not care).
    fn axis_box(min: [f32; 3], max: [f32; 3], diffuse: [f32; 3]) -> TriangleMesh {
        let corner = |i: usize| [0, 1, 2].map(|k| if i >> k & 1 == 1 { max[k] } else { min[k] });
        let positions: Vec<[f32; 3]> = (0..8).map(corner).collect();
        let faces = [[0, 2, 6, 4], [1, 5, 7, 3], [0, 4, 5, 1], [2, 3, 7, 6], [0, 1, 3, 2], [4, 6, 7, 5]];
        let mut triangles = Vec::new();
        for [a, b, c, d] in faces {
            triangles.extend([[a, b, c], [a, c, d]]);
        }
        TriangleMesh {
            uvs: vec![[0.0; 2]; positions.len()],
            positions,
            triangle_materials: vec![0; triangles.len()],
            triangles,
            materials: vec![plain(diffuse)],
        }
    }

    fn object(mesh: TriangleMesh, instance_id: u16) -> RenderObject {
        RenderObject { mesh: Arc::new(mesh), instance_id }
    }

    fn checker_texture() -> Arc<Texture> {
        let (white, black) = ([255, 255, 255], [0, 0, 0]);
        Arc::new(Texture { width: 2, height: 2, texels: vec![white, black, black, white] })
    }

    fn depth_at(frame: &Frame, u: u32, v: u32) -> f32 {
        frame.depth.get(u, v).copied().unwrap_or(f32::NAN)
    }

    fn id_at(frame: &Frame, u: u32, v: u32) -> u16 {
        frame.instances.get(u, v).copied().unwrap_or(u16::MAX)
    }

    /// Renders a wall at x = `distance` (a 32x32 grid, so cracks between triangles would show) and compares
    /// every 3rd pixel's depth with the analytic z. Returns (pixels checked on the wall, pixels checked
    /// clipped by the near plane).
    fn check_wall_depth(distance: f32, yaw_deg: f64, pitch_deg: f64, near_m: f32) -> (usize, usize) {
        let half = 20.0;
        let wall = grid([distance, -half, -half], [0.0, 2.0 * half, 0.0], [0.0, 0.0, 2.0 * half], 32, plain([0.8; 3]), |_| {
            [0.0; 2]
        });
        let scene = RenderScene::new(vec![object(wall, 0)]);
        let camera = PinholeCamera::gst_benchmark();
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), yaw_deg.to_radians(), pitch_deg.to_radians());
        let options = RenderOptions { near_m, ..RenderOptions::default() };
        let frame = render(&scene, &camera, &pose, &options);
        let (mut on_wall, mut clipped) = (0, 0);
        let mut worst_error = 0.0f64;
        for v in (0..camera.height).step_by(3) {
            for u in (0..camera.width).step_by(3) {
                let ray_camera = camera.ray(&Point2::new(f64::from(u), f64::from(v)));
                let ray_world = pose.transform_vector(&ray_camera);
                let rendered = f64::from(depth_at(&frame, u, v));
                if ray_world.x <= 1e-9 {
                    assert_eq!(rendered, 0.0, "pixel ({u}, {v}) looks away from the wall");
                    continue;
                }
                // The ray has camera z = 1, so the ray parameter at the wall is the z of the hit.
                let z = f64::from(distance) / ray_world.x;
                let hit = ray_world * z;
                if hit.y.abs() > f64::from(half) - 0.5 || hit.z.abs() > f64::from(half) - 0.5 || z > 12.0 {
                    continue;
                }
                if z > f64::from(near_m) + 1e-4 {
                    worst_error = worst_error.max((rendered - z).abs());
                    assert!((rendered - z).abs() < 1e-3, "pixel ({u}, {v}): depth {rendered} vs {z}");
                    on_wall += 1;
                } else if z < f64::from(near_m) - 1e-4 {
                    assert_eq!(rendered, 0.0, "pixel ({u}, {v}) is in front of the near plane");
                    clipped += 1;
                }
            }
        }
        assert!(worst_error < 1e-5, "worst depth error {worst_error} m");
        (on_wall, clipped)
    }

    #[test]
    fn wall_depth_equals_analytic_z() {
        let (on_wall, _) = check_wall_depth(3.0, 25.0, 10.0, 0.05);
        assert!(on_wall > 10_000, "{on_wall}");
        let (on_wall, _) = check_wall_depth(2.0, -40.0, -25.0, 0.05);
        assert!(on_wall > 10_000, "{on_wall}");
    }

    #[test]
    fn wall_next_to_the_camera_is_clipped_not_dropped() {
        // 10 cm from the wall, looking at it obliquely: the whole visible wall is beyond the default near
        // plane and must render.
        let (on_wall, clipped) = check_wall_depth(0.1, -35.0, -20.0, 0.05);
        assert!(on_wall > 10_000 && clipped == 0, "{on_wall} {clipped}");
        // With the near plane at 10 cm, part of the wall is in front of it: that part is empty, the rest exact.
        let (on_wall, clipped) = check_wall_depth(0.1, 40.0, 0.0, 0.1);
        assert!(on_wall > 1_000 && clipped > 1_000, "{on_wall} {clipped}");
    }

    #[test]
    fn box_corners_land_on_the_box() {
        let (min, max) = ([2.0, -0.5, 0.2], [3.0, 0.6, 1.1]);
        let floor = grid([-5.0, -5.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0], 4, plain([0.5; 3]), |_| [0.0; 2]);
        let scene = RenderScene::new(vec![object(floor, 0), object(axis_box(min, max, [0.7, 0.2, 0.2]), 5)]);
        let camera = PinholeCamera::gst_benchmark();
        for (position, yaw, pitch) in [([0.0, 0.0, 1.2], 0.1, -0.2), ([0.5, 1.5, 1.6], -0.6, -0.3)] {
            let pose = Pose3::world_from_camera_yaw_pitch(Vector3::from(position), yaw, pitch);
            let frame = render(&scene, &camera, &pose, &RenderOptions::default());
            let camera_from_world = pose.inverse();
            let centre = Point3::from([0, 1, 2].map(|k| f64::from(min[k] + max[k]) / 2.0));
            for i in 0..8 {
                let corner = Point3::from([0, 1, 2].map(|k| f64::from(if i >> k & 1 == 1 { max[k] } else { min[k] })));
                let pulled = centre + (corner - centre) * 0.9;
                let Some(pixel) = camera.project(&camera_from_world.transform_point(&pulled)) else {
                    panic!("corner {i} is behind the camera");
                };
                assert!(camera.contains(&pixel), "corner {i} projects outside the image");
                let (u, v) = (pixel.x.round() as u32, pixel.y.round() as u32);
                assert_eq!(id_at(&frame, u, v), 5, "corner {i} at ({u}, {v})");
            }
        }
    }

    #[test]
    fn nearer_object_hides_farther_one() {
        let near_box = axis_box([2.0, -0.2, -0.2], [2.4, 0.2, 0.2], [0.9, 0.1, 0.1]);
        let far_box = axis_box([4.0, -1.0, -1.0], [5.0, 1.0, 1.0], [0.1, 0.1, 0.9]);
        // The far box first: the order of objects must not matter.
        let scene = RenderScene::new(vec![object(far_box, 2), object(near_box, 1)]);
        let camera = PinholeCamera::gst_benchmark();
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), 0.0, 0.0);
        let frame = render(&scene, &camera, &pose, &RenderOptions::default());
        // Pixel 320 is half a pixel right of the optical axis.
        assert_eq!(id_at(&frame, 320, 256), 1);
        assert!((depth_at(&frame, 320, 256) - 2.0).abs() < 1e-4);
        // 40 px to the side the ray passes the near box (|y| = 0.25 m at x = 2) and hits the far one.
        assert_eq!(id_at(&frame, 360, 256), 2);
        assert!((depth_at(&frame, 360, 256) - 4.0).abs() < 1e-4);
        assert_eq!(id_at(&frame, 10, 256), 0);
        assert_eq!(depth_at(&frame, 10, 256), 0.0);
    }

    #[test]
    fn texture_is_perspective_correct_on_a_grazing_floor() {
        // One 40 m floor quad: affine interpolation would be metres off in the distance.
        let mut material = plain([1.0; 3]);
        material.texture = Some(checker_texture());
        let texture = checker_texture();
        let uv_from_world = |x: f64, y: f64| [(x * 2.0) as f32, (y * 2.0) as f32];
        let floor = grid([0.0, -20.0, 0.0], [40.0, 0.0, 0.0], [0.0, 40.0, 0.0], 1, material, |p| {
            uv_from_world(f64::from(p[0]), f64::from(p[1]))
        });
        let scene = RenderScene::new(vec![object(floor, 0)]);
        let camera = PinholeCamera::gst_benchmark();
        let position = Vector3::new(0.0, 0.0, 1.0);
        let pose = Pose3::world_from_camera_yaw_pitch(position, 0.3, -15f64.to_radians());
        let frame = render(&scene, &camera, &pose, &RenderOptions::default());
        let expected_texel = |u: u32, v: u32| -> Option<[u8; 3]> {
            let ray = pose.transform_vector(&camera.ray(&Point2::new(f64::from(u), f64::from(v))));
            if ray.z >= -1e-6 {
                return None;
            }
            let hit = position + ray * (-position.z / ray.z);
            if !(0.5..39.0).contains(&hit.x) || hit.y.abs() > 19.0 || (hit - position).norm() > 15.0 {
                return None;
            }
            let [tu, tv] = uv_from_world(hit.x, hit.y);
            Some(texture.sample(tu, tv))
        };
        let (mut checked, mut white) = (0, 0);
        for v in (256..camera.height - 1).step_by(2) {
            for u in (1..camera.width - 1).step_by(2) {
                let Some(expected) = expected_texel(u, v) else { continue };
                // Skip pixels next to a checker border, where a rounding could flip the texel.
                let neighbours = [(u - 1, v), (u + 1, v), (u, v - 1), (u, v + 1)];
                if neighbours.iter().any(|&(nu, nv)| expected_texel(nu, nv) != Some(expected)) {
                    continue;
                }
                let rendered = frame.rgb.get(u, v).copied().unwrap_or_default();
                if expected[0] == 0 {
                    assert_eq!(rendered, [0, 0, 0], "pixel ({u}, {v}) should be a black square");
                } else {
                    assert!(rendered[0] > 100, "pixel ({u}, {v}) should be a white square, is {rendered:?}");
                    white += 1;
                }
                checked += 1;
            }
        }
        assert!(checked > 5_000 && white > checked / 4, "{checked} {white}");
    }

    /// A small textured room with a few objects, seen from inside.
    fn test_room() -> RenderScene {
        let mut wall_material = plain([0.9, 0.85, 0.8]);
        wall_material.texture = Some(checker_texture());
        let floor = grid([0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 4.0, 0.0], 6, wall_material.clone(), |p| [p[0], p[1]]);
        let ceiling = grid([0.0, 0.0, 2.5], [5.0, 0.0, 0.0], [0.0, 4.0, 0.0], 3, plain([0.9; 3]), |_| [0.0; 2]);
        let mut objects = vec![object(floor, 0), object(ceiling, 0)];
        let walls = [
            ([0.0, 0.0, 0.0], [5.0, 0.0, 0.0]),
            ([5.0, 0.0, 0.0], [0.0, 4.0, 0.0]),
            ([5.0, 4.0, 0.0], [-5.0, 0.0, 0.0]),
            ([0.0, 4.0, 0.0], [0.0, -4.0, 0.0]),
        ];
        for (origin, along) in walls {
            let wall = grid(origin, along, [0.0, 0.0, 2.5], 5, wall_material.clone(), |p| [p[0] + p[1], p[2]]);
            objects.push(object(wall, 0));
        }
        objects.push(object(axis_box([1.0, 1.0, 0.0], [1.8, 1.6, 0.9], [0.6, 0.3, 0.1]), 1));
        objects.push(object(axis_box([3.0, 2.5, 0.0], [4.2, 3.6, 0.5], [0.2, 0.5, 0.2]), 2));
        // Two boxes sharing a face: equal depths must be resolved the same way every time.
        objects.push(object(axis_box([2.0, 3.0, 0.0], [2.5, 3.5, 1.5], [0.3, 0.3, 0.8]), 3));
        objects.push(object(axis_box([2.0, 3.0, 0.0], [2.5, 3.5, 1.5], [0.8, 0.3, 0.3]), 4));
        RenderScene::new(objects)
    }

    #[test]
    fn frames_are_deterministic_across_threads_and_tiles() -> TestResult {
        let scene = test_room();
        let camera = PinholeCamera::gst_benchmark();
        let poses = [
            Pose3::world_from_camera_yaw_pitch(Vector3::new(0.5, 0.5, 1.4), 0.6, -0.2),
            Pose3::world_from_camera_yaw_pitch(Vector3::new(4.5, 3.5, 1.4), 3.6, -0.1),
        ];
        for pose in &poses {
            let options = RenderOptions::default();
            let reference = render(&scene, &camera, pose, &options);
            assert_eq!(reference, render(&scene, &camera, pose, &options));
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
                assert_eq!(reference, pool.install(|| render(&scene, &camera, pose, &options)), "{threads} threads");
            }
            for tile_size in [8, 16, 64] {
                let options = RenderOptions { tile_size, ..RenderOptions::default() };
                assert_eq!(reference, render(&scene, &camera, pose, &options), "tile size {tile_size}");
            }
            // Every pixel sees something inside a closed room: no cracks between triangles.
            assert!(reference.depth.data().iter().all(|&d| d > 0.0));
            // The coincident boxes: the earlier object (3) wins every tie.
            assert!(!reference.instances.data().contains(&4));
        }
        Ok(())
    }

    #[test]
    fn topdown_shows_box_rectangle_and_cuts_the_ceiling() {
        let floor = grid([0.0, 0.0, 0.0], [4.0, 0.0, 0.0], [0.0, 4.0, 0.0], 4, plain([0.5; 3]), |_| [0.0; 2]);
        let ceiling = grid([0.0, 0.0, 2.5], [4.0, 0.0, 0.0], [0.0, 4.0, 0.0], 2, plain([0.9; 3]), |_| [0.0; 2]);
        let table = axis_box([1.0, 1.0, 0.0], [2.0, 1.5, 0.8], [0.6, 0.4, 0.2]);
        let scene = RenderScene::new(vec![object(floor, 0), object(ceiling, 9), object(table, 3)]);
        let view =
            OrthoView { min_x_m: 0.0, max_y_m: 4.0, metres_per_pixel: 0.02, width: 200, height: 200, max_z_m: 2.0 };
        let frame = render_topdown(&scene, &view, &RenderOptions::default());
        // x in [1, 2] covers pixel centres 50..=99; y in [1, 1.5] covers rows 125..=149 (+y is up).
        for row in 0..200 {
            for col in 0..200 {
                let inside = (50..=99).contains(&col) && (125..=149).contains(&row);
                let (id, depth) = (id_at(&frame, col, row), depth_at(&frame, col, row));
                if inside {
                    assert_eq!(id, 3, "({col}, {row})");
                    assert!((depth - 0.8).abs() < 1e-5, "({col}, {row}): {depth}");
                } else {
                    assert_eq!(id, 0, "({col}, {row})");
                    assert!(depth.abs() < 1e-5, "({col}, {row}): {depth}");
                }
            }
        }
        // Raise the cut above the ceiling: it hides everything.
        let frame = render_topdown(&scene, &OrthoView { max_z_m: 3.0, ..view }, &RenderOptions::default());
        assert!(frame.instances.data().iter().all(|&id| id == 9));
        assert!(frame.depth.data().iter().all(|&d| (d - 2.5).abs() < 1e-5));
    }

    #[test]
    fn empty_and_malformed_input_does_not_panic() {
        let mut broken = axis_box([1.0, -0.5, -0.5], [2.0, 0.5, 0.5], [0.5; 3]);
        broken.triangles.push([0, 1, 99]);
        broken.triangle_materials.truncate(3);
        broken.materials[0].texture = Some(Arc::new(Texture { width: 4, height: 4, texels: vec![[1, 2, 3]] }));
        let scene = RenderScene::new(vec![object(broken, 1), object(TriangleMesh::default(), 2)]);
        assert_eq!(scene.triangle_count(), 13);
        let camera = PinholeCamera::gst_benchmark();
        let frame = render(&scene, &camera, &Pose3::identity(), &RenderOptions::default());
        assert_eq!(id_at(&frame, 320, 256), 0);
        let pose = Pose3::world_from_camera_yaw_pitch(Vector3::zeros(), 0.0, 0.0);
        let frame = render(&scene, &camera, &pose, &RenderOptions::default());
        assert_eq!(id_at(&frame, 320, 256), 1);
        let empty = RenderScene::new(Vec::new());
        assert!(empty.bounds().is_none());
        let frame = render(&empty, &camera, &pose, &RenderOptions::default());
        assert!(frame.depth.data().iter().all(|&d| d == 0.0));
        let zero = PinholeCamera { width: 0, height: 0, ..camera };
        assert_eq!(render(&scene, &zero, &pose, &RenderOptions::default()).rgb.data().len(), 0);
    }
}
