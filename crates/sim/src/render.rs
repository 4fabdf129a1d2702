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
//! * **Deferred shading.** The raster pass only keeps, per pixel, one 64-bit entry: the depth key and the
//!   id of the triangle that produced it; colour (texture lookup, lighting) is computed once per pixel
//!   afterwards. Overdraw costs one comparison, not a texture fetch.
//! * **Bands.** Triangles are set up once per frame (in parallel, one task per cluster of triangles); then
//!   the image is split into horizontal bands of [`RenderOptions::tile_size`] rows, each rasterised and
//!   shaded by one rayon task that owns those rows of every buffer (no locks) and walks the set-up
//!   triangles overlapping it. Triangle ids follow (object index, triangle index), and the depth test
//!   compares (depth, id) at once: the nearest surface wins and equal depths go to the lower id, so frames
//!   are byte-identical whatever the number of threads, the band height or the drawing order.
//! * **Occlusion culling.** The structure (instance id 0: walls, floors, ceilings) is drawn first; the
//!   farthest depth in each block of the screen then tells which other objects, and which clusters of
//!   their triangles, are wholly behind it (the next room's furniture) and need no setup at all. The test
//!   is conservative, so the image is exactly what drawing everything would give.
//! * **Watertight edges.** Edge functions are built so that the two triangles sharing an edge evaluate
//!   exactly negated values, and pixels centred exactly on an edge go to one triangle by a top-left style
//!   rule: meshes show no cracks and no double coverage.
//! * **Frustum culling.** Objects and clusters of [`CLUSTER_TRIANGLES`] consecutive triangles are culled by
//!   their world-space bounding boxes against the view frustum; triangles wholly outside one frustum plane or not
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
//! Rendering many frames? [`render_into`] reuses the caller's [`Frame`]: the per-thread working buffers
//! are kept between frames anyway, and allocating fresh images costs page faults on every frame.
//!
//! The camera is an ideal pinhole: [`PinholeCamera::distortion`] is ignored (the simulator's cameras have
//! none; to emulate a distorting lens, render with a pinhole and remap). Pixel centres are at integer
//! coordinates: pixel `(u, v)` sees the ray through `((u - cx) / fx, (v - cy) / fy, 1)` (OpenCV).

use std::cell::RefCell;
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

/// The id that marks an empty pixel.
const NO_TRIANGLE: u32 = u32::MAX;

/// The depth-buffer entry of an empty pixel: below every [`depth_entry`].
const EMPTY_ENTRY: u64 = 0;

/// A depth-buffer entry: the depth key (larger is nearer) in the high half, mapped to an unsigned integer of
/// the same order, and the bitwise complement of the triangle id in the low half. One unsigned comparison
/// then says "nearer, or as near with a lower id": the nearest surface wins and equal depths go to the
/// lower id whatever order triangles are drawn in, so frames do not depend on passes or threads.
#[inline]
fn depth_entry(key: f32, id: u32) -> u64 {
    let bits = key.to_bits();
    // Non-negative floats: set the sign bit; negative floats: flip every bit (their magnitude order is
    // reversed).
    let ordered = bits ^ ((((bits as i32) >> 31) as u32) | 0x8000_0000);
    (u64::from(ordered) << 32) | u64::from(!id)
}

/// The triangle id of a depth-buffer entry ([`NO_TRIANGLE`] for an empty pixel).
#[inline]
fn entry_id(entry: u64) -> u32 {
    !(entry as u32)
}

/// The order-preserving integer of a depth-buffer entry's key (0 for an empty pixel).
#[inline]
fn entry_key_order(entry: u64) -> u32 {
    (entry >> 32) as u32
}

/// Outcode bit of a vertex in front of the near plane (z < near).
const NEAR_BIT: u8 = 1;

/// Screen triangles with a smaller doubled area (pixels²) have no interior worth drawing.
const MIN_DOUBLE_AREA_PX2: f64 = 1e-9;

/// Fractional bits of the fixed-point colour factors that multiply texels (integer arithmetic keeps
/// float-to-u8 conversions out of the per-pixel loop).
const FIXED_BITS: u32 = 8;
const FIXED_ONE: f32 = (1 << FIXED_BITS) as f32;
const FIXED_HALF: u32 = 1 << (FIXED_BITS - 1);

/// Display gamma applied to linear colours.
const GAMMA: f32 = 2.2;

/// Shading intensities above this saturate (the gamma table covers `[0, MAX_LIGHT]`).
const MAX_LIGHT: f32 = 2.0;

/// Entries of the gamma table over `[0, MAX_LIGHT]`, linearly interpolated.
const GAMMA_TABLE_SIZE: usize = 256;

/// Rows of triangles at most this wide are tested pixel by pixel without first narrowing the span.
const SPAN_NARROWING_MIN_WIDTH: usize = 8;

/// Accepted range of [`RenderOptions::tile_size`] (band height); values outside are clamped.
const TILE_SIZE_RANGE: (u32, u32) = (8, 256);

/// Material used when a triangle's material index is out of range.
const FALLBACK_DIFFUSE: [f32; 3] = [0.6, 0.6, 0.6];

/// One mesh to draw, already in world coordinates, with the instance id written to the instance image.
#[derive(Clone)]
pub struct RenderObject {
    pub mesh: Arc<TriangleMesh>,
    /// Value in the instance image; 0 is structure (walls, floor, ceiling). Structure is also what the
    /// renderer uses as occluder: it is drawn first, and objects wholly behind it are skipped.
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
        for (i, &coordinate) in p.iter().enumerate() {
            self.min[i] = self.min[i].min(coordinate);
            self.max[i] = self.max[i].max(coordinate);
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
            for (i, &normal) in plane.iter().take(3).enumerate() {
                let coordinate = if normal >= 0.0 { self.max[i] } else { self.min[i] };
                value += normal * f64::from(coordinate);
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

/// What is prepared once per object: bounds, clusters, materials, and per-triangle world-space geometry.
#[derive(Clone, Debug)]
struct PreparedObject {
    /// `None` for an object without drawable vertices.
    bounds: Option<Aabb>,
    clusters: Vec<Cluster>,
    materials: Vec<MaterialLook>,
    /// Per triangle: the plane `n·p = d` as `[n.x, n.y, n.z, d]` with a unit normal, in f64 (depth is
    /// computed from it); all zeros for a degenerate triangle.
    planes: Vec<[f64; 4]>,
    /// Per triangle, only when some material of the object is textured: texture coordinates `u` and `v`
    /// as linear functions of the world position `g·p + h`, each stored as `[g.x, g.y, g.z, h]`.
    uv_gradients: Vec<[[f64; 4]; 2]>,
}

impl PreparedObject {
    fn new(index: usize, mesh: &TriangleMesh) -> Self {
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
            tracing::warn!(
                object = index,
                bad_triangles,
                "triangles with vertex indices out of range are skipped"
            );
        }
        let materials: Vec<MaterialLook> = mesh
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
        let any_textured = materials.iter().any(|m| m.textured);
        let mut planes = Vec::with_capacity(mesh.triangles.len());
        let mut uv_gradients = Vec::with_capacity(if any_textured { mesh.triangles.len() } else { 0 });
        for triangle in &mesh.triangles {
            let corners =
                triangle.map(|i| mesh.positions.get(i as usize).map(|p| Vector3::from(p.map(f64::from))));
            let [Some(p0), Some(p1), Some(p2)] = corners else {
                planes.push([0.0; 4]);
                if any_textured {
                    uv_gradients.push([[0.0; 4]; 2]);
                }
                continue;
            };
            let (e1, e2) = (p1 - p0, p2 - p0);
            let normal = e1.cross(&e2);
            let length = normal.norm();
            planes.push(if length > 0.0 && length.is_finite() {
                let n = normal / length;
                [n.x, n.y, n.z, n.dot(&p0)]
            } else {
                [0.0; 4]
            });
            if any_textured {
                let uvs = triangle.map(|i| mesh.uvs.get(i as usize).copied().unwrap_or([0.0; 2]));
                uv_gradients.push(linear_uv_functions([p0, p1, p2], uvs));
            }
        }
        Self { bounds: bounds.is_valid().then_some(bounds), clusters, materials, planes, uv_gradients }
    }
}

/// Texture coordinates as linear functions `g·p + h` over a triangle: `g` lies in the triangle's plane and
/// solves the Gram system `g·e1 = Δf1, g·e2 = Δf2`. Degenerate triangles get constant functions.
fn linear_uv_functions(p: [Vector3<f64>; 3], uvs: [[f32; 2]; 3]) -> [[f64; 4]; 2] {
    let (e1, e2) = (p[1] - p[0], p[2] - p[0]);
    let (a, b, c) = (e1.dot(&e1), e1.dot(&e2), e2.dot(&e2));
    let det = a * c - b * b;
    [0, 1].map(|k| {
        let f = uvs.map(|uv| f64::from(uv[k]));
        let (df1, df2) = (f[1] - f[0], f[2] - f[0]);
        let g = if det > f64::EPSILON * a * c && det.is_finite() {
            e1 * ((c * df1 - b * df2) / det) + e2 * ((a * df2 - b * df1) / det)
        } else {
            Vector3::zeros()
        };
        let h = f[0] - g.dot(&p[0]);
        [g.x, g.y, g.z, h]
    })
}

/// Everything that is drawn, with what can be prepared once: bounding boxes of objects and of triangle
/// clusters for frustum culling, per-material colours, and per-triangle planes and texture-coordinate
/// gradients in world space.
pub struct RenderScene {
    objects: Vec<RenderObject>,
    prepared: Vec<PreparedObject>,
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
        let prepared: Vec<PreparedObject> = objects
            .par_iter()
            .enumerate()
            .map(|(index, object)| PreparedObject::new(index, &object.mesh))
            .collect();
        let mut scene_bounds = Aabb::empty();
        for bounds in prepared.iter().filter_map(|p| p.bounds.as_ref()) {
            scene_bounds.add_box(bounds);
        }
        let triangle_count = objects.iter().map(|o| o.mesh.triangle_count()).sum();
        let bounds = scene_bounds.is_valid().then_some(scene_bounds);
        Self { objects, prepared, triangle_count, bounds }
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
    /// Height in rows of the horizontal bands ("tiles" as wide as the image) that are rasterised in
    /// parallel, clamped to [8, 256]; it is also the height of the occlusion-culling blocks. Default 32: a
    /// 640x512 frame gives 16 bands to spread over threads. The image does not depend on it; speed hardly
    /// does (measured from 8 to 64).
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
    /// A frame where nothing is seen.
    pub fn empty(width: u32, height: u32, background: [u8; 3]) -> Self {
        Self {
            rgb: Image::filled(width, height, background),
            depth: Image::filled(width, height, 0.0),
            instances: Image::filled(width, height, 0),
        }
    }

    /// Makes the frame `width x height`, reallocating only when the size changes (rendering overwrites
    /// every pixel).
    fn resize(&mut self, width: u32, height: u32, background: [u8; 3]) {
        if self.rgb.width() != width
            || self.rgb.height() != height
            || self.depth.width() != width
            || self.depth.height() != height
            || self.instances.width() != width
            || self.instances.height() != height
        {
            *self = Self::empty(width, height, background);
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
    let mut frame = Frame::empty(camera.width, camera.height, options.background);
    render_into(scene, camera, world_from_camera, options, &mut frame);
    frame
}

/// Like [`render`], but writes into `frame` (resized to the camera if needed), so that a loop rendering
/// many frames reuses its buffers instead of allocating (and page-faulting in) three images per frame.
pub fn render_into(
    scene: &RenderScene,
    camera: &PinholeCamera,
    world_from_camera: &Pose3,
    options: &RenderOptions,
    frame: &mut Frame,
) {
    frame.resize(camera.width, camera.height, options.background);
    let near_m = if options.near_m.is_finite() && options.near_m > 0.0 { options.near_m } else { 1e-3 };
    match Perspective::new(camera, world_from_camera, near_m) {
        Some(projection) => {
            render_with(scene, &projection, options, frame);
        }
        None => {
            tracing::warn!(?camera, "camera with non-finite or non-positive intrinsics; rendered empty");
            *frame = Frame::empty(camera.width, camera.height, options.background);
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
    let mut frame = Frame::empty(view.width, view.height, options.background);
    match Orthographic::new(view) {
        Some(projection) => {
            render_with(scene, &projection, options, &mut frame);
        }
        None => tracing::warn!(?view, "top-down view with non-finite or non-positive scale; rendered empty"),
    }
    frame
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
        Self {
            m: rows,
            origin: [origin.x as f32, origin.y as f32, origin.z as f32],
            m64: m,
            origin64: origin,
        }
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
    /// The depth key of a view-space point with `z ≥ near`.
    fn key_of(&self, v: [f32; 3]) -> f32;
    /// The key over the view-space plane `n·v = d`, as `[a, b, c]` with `key = a·x + b·y + c`.
    fn key_plane(&self, n: Vector3<f64>, d: f64) -> Option<[f64; 3]>;
    /// For `f(v) = g·v + h` on the plane whose key is `key`, the affine function of the pixel coordinates
    /// equal to `f·key` (perspective) or `f` (orthographic).
    fn weighted_plane(&self, g: Vector3<f64>, h: f64, key: &[f64; 3]) -> [f64; 3];
    /// `|n·v|` for a unit normal `n` and the unit viewing ray `v` through a view-space point.
    fn headlight_cosine(&self, normal: &Vector3<f64>, point: [f32; 3]) -> f64;
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

    fn key_of(&self, v: [f32; 3]) -> f32 {
        1.0 / v[2]
    }

    fn key_plane(&self, n: Vector3<f64>, d: f64) -> Option<[f64; 3]> {
        // The ray of pixel (x, y) is z·(xn, yn, 1) with xn = (x - cx)/fx; on the plane n·v = d,
        // 1/z = (n.x·xn + n.y·yn + n.z) / d.
        if d == 0.0 {
            return None;
        }
        let inverse_d = 1.0 / d;
        Some(self.ray_affine(n).map(|coefficient| coefficient * inverse_d))
    }

    fn weighted_plane(&self, g: Vector3<f64>, h: f64, key: &[f64; 3]) -> [f64; 3] {
        // f/z = g·(xn, yn, 1) + h/z.
        let ray = self.ray_affine(g);
        [0, 1, 2].map(|i| ray[i] + h * key[i])
    }

    fn headlight_cosine(&self, normal: &Vector3<f64>, point: [f32; 3]) -> f64 {
        let length = (point[0] * point[0] + point[1] * point[1] + point[2] * point[2]).sqrt();
        let dot =
            normal.x * f64::from(point[0]) + normal.y * f64::from(point[1]) + normal.z * f64::from(point[2]);
        if length > 0.0 { dot.abs() / f64::from(length) } else { normal.z.abs() }
    }
}

impl Perspective {
    /// `g·(xn, yn, 1)` with `xn = (x - cx)/fx`, `yn = (y - cy)/fy`, as an affine function of the pixel.
    fn ray_affine(&self, g: Vector3<f64>) -> [f64; 3] {
        let (inv_fx, inv_fy) = (1.0 / self.fx, 1.0 / self.fy);
        [g.x * inv_fx, g.y * inv_fy, g.z - g.x * self.cx * inv_fx - g.y * self.cy * inv_fy]
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
        if !(m.is_finite()
            && m > 0.0
            && view.min_x_m.is_finite()
            && view.max_y_m.is_finite()
            && view.max_z_m.is_finite())
        {
            return None;
        }
        let transform = ViewTransform::new(
            Matrix3::from_diagonal(&Vector3::new(1.0, 1.0, -1.0)),
            Vector3::new(0.0, 0.0, view.max_z_m),
        );
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

    fn key_of(&self, v: [f32; 3]) -> f32 {
        self.max_z as f32 - v[2]
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

    fn headlight_cosine(&self, normal: &Vector3<f64>, _point: [f32; 3]) -> f64 {
        normal.z.abs()
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

/// What the raster pass needs of a screen triangle. Edge `i` is `a·x + b·y + c`, positive inside (never
/// -0: the coefficients are canonical); a pixel is covered when every edge value, read as the signed
/// integer of its bits, is `≥ threshold` (0 includes the edge, 1 excludes it, by the tie rule).
#[derive(Clone, Copy, Debug)]
struct RasterTriangle {
    edge_a: [f32; 3],
    edge_b: [f32; 3],
    edge_c: [f32; 3],
    threshold: [i32; 3],
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
    /// Lit, gamma-encoded diffuse colour (may exceed 1 under strong light) in fixed point with
    /// [`FIXED_BITS`] fractional bits, multiplied with texels.
    factor_fixed: [u32; 3],
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
        let index = (position as i32).clamp(0, GAMMA_TABLE_SIZE as i32 - 1) as usize;
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

/// Renders into `frame`, whose images must have the projection's size.
fn render_with<P: Projection>(
    scene: &RenderScene,
    projection: &P,
    options: &RenderOptions,
    frame: &mut Frame,
) -> RenderStats {
    let (width, height) = projection.size();
    if width == 0 || height == 0 {
        return RenderStats::default();
    }
    let stats = FRAME_BUFFERS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffers) => render_passes(scene, projection, options, frame, &mut buffers),
        // Only reachable if a render ran inside another on this thread; stay correct anyway.
        Err(_) => render_passes(scene, projection, options, frame, &mut FrameBuffers::default()),
    });
    tracing::trace!(?stats, "frame rendered");
    stats
}

/// What a render did, for tracing and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct RenderStats {
    /// Clusters inside the view frustum.
    clusters_in_frustum: usize,
    /// Of those, clusters found hidden behind the structure.
    clusters_occluded: usize,
    /// Screen triangles set up.
    triangles_set_up: usize,
}

thread_local! {
    /// The calling thread's depth buffer (2.6 MB at 640x512), kept between frames: allocating it afresh
    /// would cost page faults on every frame.
    static FRAME_BUFFERS: RefCell<FrameBuffers> = RefCell::new(FrameBuffers::default());
}

/// A frame's depth buffer of [`depth_entry`] values.
#[derive(Default)]
struct FrameBuffers {
    entries: Vec<u64>,
}

/// The two passes: occluders (structure), then whatever the occluders do not hide, then shading.
fn render_passes<P: Projection>(
    scene: &RenderScene,
    projection: &P,
    options: &RenderOptions,
    frame: &mut Frame,
    buffers: &mut FrameBuffers,
) -> RenderStats {
    let (width, height) = projection.size();
    let (width, height) = (width as usize, height as usize);
    let transform = projection.transform();
    let world_planes = projection.planes().map(|plane| transform.plane_to_world(plane));

    // Frustum culling of objects, then of their clusters. Chunk `i` of the frame holds the set-up
    // triangles of `draw_list[i]`, so triangle ids follow (object, triangle) order whatever the pass.
    let mut visible_objects = Vec::new();
    let mut draw_list = Vec::new();
    for (object, prepared) in scene.prepared.iter().enumerate() {
        let Some(bounds) = &prepared.bounds else { continue };
        if bounds.outside_any(&world_planes) {
            continue;
        }
        let slot = visible_objects.len();
        visible_objects.push(object);
        for (cluster_index, cluster) in prepared.clusters.iter().enumerate() {
            if !cluster.bounds.outside_any(&world_planes) {
                draw_list.push((slot, cluster_index));
            }
        }
    }
    if draw_list.len() > MAX_CHUNKS {
        tracing::warn!(
            clusters = draw_list.len(),
            "too many visible clusters; the last in order are dropped"
        );
        draw_list.truncate(MAX_CHUNKS);
    }
    let is_occluder = |slot: usize| scene.objects[visible_objects[slot]].instance_id == 0;

    let band_rows = options.tile_size.clamp(TILE_SIZE_RANGE.0, TILE_SIZE_RANGE.1) as usize;
    let band_len = band_rows * width;
    let band_count = height.div_ceil(band_rows);
    let rows_of =
        |band: usize| BandRows { y0: band * band_rows, y1: ((band + 1) * band_rows).min(height), width };
    // Sized here, emptied by each band in parallel.
    buffers.entries.resize(width * height, EMPTY_ENTRY);

    let view_planes = projection.planes().map(|p| p.map(|v| v as f32));
    let lighting = Lighting::new(options, transform);
    let mut vertices: Vec<Option<Vec<ViewVertex>>> = vec![None; visible_objects.len()];
    let mut chunks: Vec<Chunk<'_>> = (0..draw_list.len()).map(|_| Chunk::empty()).collect();

    // Pass 1: the structure, which hides most of a multi-room house, into the z-buffer; then the
    // farthest depth in each block of the screen.
    let occluder_slots: Vec<usize> = (0..visible_objects.len()).filter(|&slot| is_occluder(slot)).collect();
    transform_objects(scene, projection, &view_planes, &visible_objects, &occluder_slots, &mut vertices);
    let occluder_chunks: Vec<usize> = (0..draw_list.len()).filter(|&i| is_occluder(draw_list[i].0)).collect();
    let setup = |i: usize, vertices: &[Option<Vec<ViewVertex>>]| {
        let (slot, cluster_index) = draw_list[i];
        let object = visible_objects[slot];
        let vertices = vertices[slot].as_deref().unwrap_or_default();
        let cluster = &scene.prepared[object].clusters[cluster_index];
        setup_chunk(scene, projection, object, vertices, &lighting, cluster.triangles.clone())
    };
    let first_pass: Vec<(usize, Chunk<'_>)> =
        occluder_chunks.par_iter().map(|&i| (i, setup(i, &vertices))).collect();
    for (i, chunk) in first_pass {
        chunks[i] = chunk;
    }
    let block_columns = width.div_ceil(HIZ_BLOCK_WIDTH);
    let farthest: Vec<u32> = buffers
        .entries
        .par_chunks_mut(band_len)
        .enumerate()
        .flat_map_iter(|(band, entries)| {
            entries.fill(EMPTY_ENTRY);
            let mut view = BandView { rows: rows_of(band), entries };
            for &i in &occluder_chunks {
                view.rasterise_chunk(&chunks[i], i);
            }
            view.block_farthest_keys()
        })
        .collect();
    let hiz = HiZ { farthest, block_columns, band_rows, band_count, width, height };

    // Pass 2: every other object and cluster that is not wholly behind the structure.
    let others: Vec<usize> = (0..visible_objects.len())
        .filter(|&slot| !is_occluder(slot))
        .filter(|&slot| {
            let object = visible_objects[slot];
            scene.prepared[object].bounds.is_some_and(|bounds| !hiz.hides(projection, &bounds))
        })
        .collect();
    transform_objects(scene, projection, &view_planes, &visible_objects, &others, &mut vertices);
    let second_pass: Vec<(usize, Chunk<'_>)> = (0..draw_list.len())
        .into_par_iter()
        .filter(|&i| {
            let (slot, cluster_index) = draw_list[i];
            if is_occluder(slot) || vertices[slot].is_none() {
                return false;
            }
            let cluster = &scene.prepared[visible_objects[slot]].clusters[cluster_index];
            !hiz.hides(projection, &cluster.bounds)
        })
        .map(|i| (i, setup(i, &vertices)))
        .collect();
    let second_chunks: Vec<usize> = second_pass.iter().map(|(i, _)| *i).collect();
    for (i, chunk) in second_pass {
        chunks[i] = chunk;
    }

    // Rasterise the rest and shade, band by band. Each band owns its rows of the buffers and of the
    // output images and walks the chunks overlapping it in id order: no binning pass and no locks.
    let background = options.background;
    buffers
        .entries
        .par_chunks_mut(band_len)
        .zip(frame.rgb.data_mut().par_chunks_mut(band_len))
        .zip(frame.depth.data_mut().par_chunks_mut(band_len))
        .zip(frame.instances.data_mut().par_chunks_mut(band_len))
        .enumerate()
        .for_each(|(band, (((entries, rgb), depth), instances))| {
            let mut view = BandView { rows: rows_of(band), entries };
            for &i in &second_chunks {
                view.rasterise_chunk(&chunks[i], i);
            }
            view.shade::<P>(&chunks, background, BandOutput { rgb, depth, instances });
        });
    let set_up = occluder_chunks.len() + second_chunks.len();
    RenderStats {
        clusters_in_frustum: draw_list.len(),
        clusters_occluded: draw_list.len() - set_up,
        triangles_set_up: chunks.iter().map(|chunk| chunk.raster.len()).sum(),
    }
}

/// Transforms the vertices of the objects in `slots` (indices into `visible_objects`) that have none yet.
fn transform_objects<P: Projection>(
    scene: &RenderScene,
    projection: &P,
    planes: &[[f32; 4]; 5],
    visible_objects: &[usize],
    slots: &[usize],
    vertices: &mut [Option<Vec<ViewVertex>>],
) {
    let transformed: Vec<(usize, Vec<ViewVertex>)> = slots
        .par_iter()
        .map(|&slot| {
            (slot, transform_vertices(projection, planes, &scene.objects[visible_objects[slot]].mesh))
        })
        .collect();
    for (slot, view_vertices) in transformed {
        vertices[slot] = Some(view_vertices);
    }
}

/// Sets up the triangles `range` of an object into a chunk.
fn setup_chunk<'a, P: Projection>(
    scene: &'a RenderScene,
    projection: &P,
    object: usize,
    vertices: &[ViewVertex],
    lighting: &Lighting,
    range: Range<usize>,
) -> Chunk<'a> {
    // Reserved up front: growing by doubling would copy the records several times.
    let mut chunk = Chunk {
        raster: Vec::with_capacity(range.len()),
        shade: Vec::with_capacity(range.len()),
        rows: [i32::MAX, -1],
    };
    SetupContext { scene, object, vertices, lighting }.setup_triangles(projection, range, &mut chunk);
    chunk
}

/// Pixel columns per block of the coarse depth buffer used for occlusion culling; blocks are one band tall.
const HIZ_BLOCK_WIDTH: usize = 16;

/// Relative margin of the occlusion test: a box is hidden only if the occluders are nearer by more than
/// this, which absorbs the f32 rounding of projected box corners and of depth keys.
const HIZ_MARGIN: f32 = 1e-4;

/// The farthest depth of the occluders in each block of the screen, as the key order of
/// [`depth_entry`] (0 where a pixel shows nothing): anything whose nearest point is farther than that
/// everywhere it projects is hidden.
struct HiZ {
    farthest: Vec<u32>,
    block_columns: usize,
    band_rows: usize,
    band_count: usize,
    width: usize,
    height: usize,
}

impl HiZ {
    /// Whether a world box is certainly hidden behind the occluders.
    fn hides<P: Projection>(&self, projection: &P, bounds: &Aabb) -> bool {
        let transform = projection.transform();
        let near = projection.near();
        let (mut min_x, mut min_y, mut max_x, mut max_y) =
            (f32::INFINITY, f32::INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY);
        let mut nearest_key = f32::NEG_INFINITY;
        for i in 0..8 {
            let corner = [0, 1, 2].map(|k| if i >> k & 1 == 1 { bounds.max[k] } else { bounds.min[k] });
            let view = transform.apply(corner);
            // A box reaching in front of the near plane (or above a top-down cut) is not tested.
            if !(view[2] >= near) {
                return false;
            }
            let [x, y] = projection.screen(view);
            (min_x, min_y, max_x, max_y) = (min_x.min(x), min_y.min(y), max_x.max(x), max_y.max(y));
            nearest_key = nearest_key.max(projection.key_of(view));
        }
        if !(min_x.is_finite() && min_y.is_finite() && max_x.is_finite() && max_y.is_finite()) {
            return false;
        }
        // Pixel centres the box can cover, with a pixel of margin, clamped to the image.
        let column =
            |x: f32| (x.clamp(-2.0, self.width as f32 + 1.0) as i32).clamp(0, self.width as i32 - 1) as usize;
        let row = |y: f32| {
            (y.clamp(-2.0, self.height as f32 + 1.0) as i32).clamp(0, self.height as i32 - 1) as usize
        };
        let (x0, x1) = (column(min_x - 1.0), column(max_x + 1.0));
        let (y0, y1) = (row(min_y - 1.0), row(max_y + 1.0));
        let threshold = entry_key_order(depth_entry(nearest_key + HIZ_MARGIN * nearest_key.abs(), 0));
        for band in (y0 / self.band_rows)..=(y1 / self.band_rows).min(self.band_count - 1) {
            let blocks = &self.farthest[band * self.block_columns..(band + 1) * self.block_columns];
            for &farthest in &blocks[x0 / HIZ_BLOCK_WIDTH..=x1 / HIZ_BLOCK_WIDTH] {
                if farthest <= threshold {
                    return false;
                }
            }
        }
        true
    }
}

/// The set-up triangles of one cluster: a raster and a shade record per screen triangle.
struct Chunk<'a> {
    raster: Vec<RasterTriangle>,
    shade: Vec<ShadeTriangle<'a>>,
    /// Inclusive range of pixel rows covered by the triangles' bounding boxes (empty: `[i32::MAX, -1]`).
    rows: [i32; 2],
}

impl Chunk<'_> {
    fn empty() -> Self {
        Self { raster: Vec::new(), shade: Vec::new(), rows: [i32::MAX, -1] }
    }

    fn overlaps(&self, rows: &BandRows) -> bool {
        self.rows[0] < rows.y1 as i32 && self.rows[1] >= rows.y0 as i32
    }
}

/// Bits of a triangle id that index within its chunk: a cluster's triangles give at most two screen
/// triangles each.
const CHUNK_BITS: u32 = (2 * CLUSTER_TRIANGLES).next_power_of_two().trailing_zeros();

/// Chunks that ids can address (the all-ones id is [`NO_TRIANGLE`]).
const MAX_CHUNKS: usize = (u32::MAX >> CHUNK_BITS) as usize;

fn triangle_id(chunk: usize, position: usize) -> u32 {
    ((chunk as u32) << CHUNK_BITS) | position as u32
}

fn split_id(id: u32) -> (usize, usize) {
    ((id >> CHUNK_BITS) as usize, (id & ((1 << CHUNK_BITS) - 1)) as usize)
}

#[inline]
fn chunk_shade<'c, 'a>(chunks: &'c [Chunk<'a>], id: u32) -> Option<&'c ShadeTriangle<'a>> {
    if id == NO_TRIANGLE {
        return None;
    }
    let (chunk, position) = split_id(id);
    chunks.get(chunk)?.shade.get(position)
}

fn transform_vertices<P: Projection>(
    projection: &P,
    planes: &[[f32; 4]; 5],
    mesh: &TriangleMesh,
) -> Vec<ViewVertex> {
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
    fn setup_triangles<P: Projection>(&self, projection: &P, range: Range<usize>, chunk: &mut Chunk<'a>) {
        let mesh = &self.scene.objects[self.object].mesh;
        let (width, height) = projection.size();
        let size = (width as i32, height as i32);
        let near = projection.near();
        for t in range {
            let Some(&[i0, i1, i2]) = mesh.triangles.get(t) else { continue };
            let (Some(v0), Some(v1), Some(v2)) = (
                self.vertices.get(i0 as usize),
                self.vertices.get(i1 as usize),
                self.vertices.get(i2 as usize),
            ) else {
                continue;
            };
            if v0.outcode & v1.outcode & v2.outcode != 0 {
                continue;
            }
            let corners = [v0, v1, v2];
            // Shading and the depth plane are computed once per mesh triangle, when a piece first survives.
            let mut look: Option<Option<([f32; 3], ShadeTriangle<'a>)>> = None;
            let mut emit = |edges: RasterTriangle, chunk: &mut Chunk<'a>| {
                let prepared = look.get_or_insert_with(|| self.shade_triangle(projection, t, v0.view));
                if let Some((key, shade_triangle)) = prepared {
                    chunk.rows = [chunk.rows[0].min(edges.bbox[1]), chunk.rows[1].max(edges.bbox[3])];
                    chunk.raster.push(RasterTriangle { key: *key, ..edges });
                    chunk.shade.push(*shade_triangle);
                }
            };
            if (v0.outcode | v1.outcode | v2.outcode) & NEAR_BIT == 0 {
                if let Some(edges) = edge_setup([v0.screen, v1.screen, v2.screen], size) {
                    emit(edges, chunk);
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
                    emit(edges, chunk);
                }
            }
        }
    }

    /// The depth key plane and the shading record of mesh triangle `t` (`first_vertex` is its first
    /// vertex in view space); `None` for a degenerate triangle.
    fn shade_triangle<P: Projection>(
        &self,
        projection: &P,
        t: usize,
        first_vertex: [f32; 3],
    ) -> Option<([f32; 3], ShadeTriangle<'a>)> {
        let object = &self.scene.objects[self.object];
        let prepared = &self.scene.prepared[self.object];
        let mesh = &object.mesh;
        let transform = projection.transform();
        // The plane comes from the world positions in f64 (prepared once), not from the f32 view-space
        // vertices: an f32 rotation tilts planes by ~1e-7 rad, which at grazing angles moves depth by a
        // tenth of a millimetre.
        let [nx, ny, nz, d_world] = *prepared.planes.get(t)?;
        let normal_world = Vector3::new(nx, ny, nz);
        if normal_world == Vector3::zeros() {
            return None;
        }
        let normal = transform.m64 * normal_world;
        let key = projection.key_plane(normal, d_world - normal_world.dot(&transform.origin64))?;
        if !key.iter().all(|k| k.is_finite()) {
            return None;
        }

        let lighting = self.lighting;
        let light = lighting.ambient
            + normal.dot(&lighting.sun_view).abs()
            + lighting.headlight * projection.headlight_cosine(&normal, first_vertex);
        let brightness = lighting.gamma(light);

        let material_index = mesh.triangle_materials.get(t).map(|&m| usize::from(m));
        let look = material_index.and_then(|m| prepared.materials.get(m));
        let diffuse = look.map_or_else(|| gamma_encode(FALLBACK_DIFFUSE), |l| l.diffuse_gamma);
        let factor = diffuse.map(|c| c * brightness);
        let texture = match (look, material_index) {
            (Some(l), Some(m)) if l.textured => mesh.materials.get(m).and_then(|mat| mat.texture.as_deref()),
            _ => None,
        };
        let mut uv = [[0.0f32; 3]; 2];
        if texture.is_some() {
            let gradients = prepared.uv_gradients.get(t)?;
            for (plane, [gx, gy, gz, h]) in uv.iter_mut().zip(gradients) {
                // f = g·p + h with p = mᵀ·v + origin gives f = (m·g)·v + (g·origin + h).
                let g_world = Vector3::new(*gx, *gy, *gz);
                let g_view = transform.m64 * g_world;
                let h_view = h + g_world.dot(&transform.origin64);
                *plane = projection.weighted_plane(g_view, h_view, &key).map(|v| v as f32);
            }
        }
        let shade = ShadeTriangle {
            key,
            texture,
            uv,
            factor_fixed: factor.map(|f| (f.clamp(0.0, MAX_LIGHT) * FIXED_ONE + 0.5) as u32),
            flat: factor.map(|f| (f * 255.0 + 0.5).min(255.0) as u8),
            instance: object.instance_id,
        };
        Some((key.map(|k| k as f32), shade))
    }
}

/// `x.floor()` as an integer, for `|x|` well inside the i32 range; baseline x86-64 has no rounding
/// instruction, and the libm call was a measurable part of triangle setup.
#[inline]
fn floor_to_i32(x: f32) -> i32 {
    let truncated = x as i32;
    truncated - i32::from((truncated as f32) > x)
}

/// `x.ceil()` as an integer, for `|x|` well inside the i32 range.
#[inline]
fn ceil_to_i32(x: f32) -> i32 {
    let truncated = x as i32;
    truncated + i32::from((truncated as f32) < x)
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
    // Pixel centres are at integers: the covered columns are ceil(min_x)..=floor(max_x). Clamping first
    // keeps the conversions in range.
    let x_lo = ceil_to_i32(min_x.max(-1.0)).max(0);
    let x_hi = floor_to_i32(max_x.min(width as f32)).min(width - 1);
    let y_lo = ceil_to_i32(min_y.max(-1.0)).max(0);
    let y_hi = floor_to_i32(max_y.min(height as f32)).min(height - 1);
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
        threshold: [0; 3],
        key: [0.0; 3],
        bbox: [x_lo, y_lo, x_hi, y_hi],
    };
    for i in 0..3 {
        let (pi, pj) = (p[i], p[(i + 1) % 3]);
        // Differences and products of f32 values are exact in f64 and rounding is symmetric, so the
        // triangle on the other side of this edge gets exactly the negated coefficients.
        // Adding +0 turns -0 into +0, so that no edge value is ever -0 (see `RasterTriangle`).
        let a = (sign * (pi[1] - pj[1])) as f32 + 0.0;
        let b = (sign * (pj[0] - pi[0])) as f32 + 0.0;
        let c = (sign * (pi[0] * pj[1] - pj[0] * pi[1])) as f32 + 0.0;
        triangle.edge_a[i] = a;
        triangle.edge_b[i] = b;
        triangle.edge_c[i] = c;
        // Tie rule: a pixel centred exactly on an edge belongs to the side where (a, b) points "up-left" in
        // this sense; the neighbour has (-a, -b) and excludes it.
        let owns_edge = a > 0.0 || (a == 0.0 && b > 0.0);
        triangle.threshold[i] = if owns_edge { 0 } else { 1 };
    }
    Some(triangle)
}

// ---------------------------------------------------------------------------------------------------------
// Bands.

/// The pixel rows `y0..y1` of one band, over the full image width.
#[derive(Clone, Copy, Debug)]
struct BandRows {
    y0: usize,
    y1: usize,
    width: usize,
}

/// The rows of the frame's depth buffer that one band owns.
struct BandView<'b> {
    rows: BandRows,
    entries: &'b mut [u64],
}

/// The rows of the output images that one band owns.
struct BandOutput<'o> {
    rgb: &'o mut [[u8; 3]],
    depth: &'o mut [f32],
    instances: &'o mut [u16],
}

impl BandView<'_> {
    /// Rasterises the triangles of chunk `chunk_index` that overlap the band.
    fn rasterise_chunk(&mut self, chunk: &Chunk<'_>, chunk_index: usize) {
        if !chunk.overlaps(&self.rows) {
            return;
        }
        for (position, triangle) in chunk.raster.iter().enumerate() {
            self.rasterise(triangle, triangle_id(chunk_index, position));
        }
    }

    /// The farthest key order in each block of [`HIZ_BLOCK_WIDTH`] columns of the band.
    fn block_farthest_keys(&self) -> Vec<u32> {
        let width = self.rows.width;
        let mut farthest = vec![u32::MAX; width.div_ceil(HIZ_BLOCK_WIDTH)];
        for row in self.entries.chunks_exact(width) {
            for (block, entries) in farthest.iter_mut().zip(row.chunks(HIZ_BLOCK_WIDTH)) {
                *block = entries.iter().fold(*block, |a, &b| a.min(entry_key_order(b)));
            }
        }
        farthest
    }

    /// Depth-tests triangle `index` at the pixel centres it covers in the band. Coverage and the key are
    /// evaluated directly at each pixel (row value plus `a·x`), never accumulated, so that values are exact
    /// to one rounding and independent of where a band starts.
    #[inline]
    fn rasterise(&mut self, triangle: &RasterTriangle, index: u32) {
        let rows = self.rows;
        let [x_lo, y_lo, x_hi, y_hi] = triangle.bbox;
        // The bounding box is inside the image: x_lo ≤ x_hi < width.
        let (x_start, x_end) = (x_lo as usize, x_hi as usize + 1);
        let y_start = (y_lo as usize).max(rows.y0);
        let y_end = (y_hi as usize + 1).min(rows.y1);
        if x_start >= x_end.min(rows.width) || y_start >= y_end {
            return;
        }
        let RasterTriangle { edge_a: a, edge_b: b, edge_c: c, threshold: t, key, .. } = *triangle;
        for y in y_start..y_end {
            let yf = y as f32;
            let row = [b[0] * yf + c[0], b[1] * yf + c[1], b[2] * yf + c[2]];
            let key_row = key[1] * yf + key[2];
            let (lo, hi) = if x_end - x_start > SPAN_NARROWING_MIN_WIDTH {
                // Narrow the span to where every edge can be non-negative; two pixels of slack on each
                // side absorb the rounding of the division and of the truncation, the exact test decides.
                let (mut lo, mut hi) = (x_start as i32, x_end as i32 - 1);
                let limit = x_end as f32 + 4.0;
                for i in 0..3 {
                    if a[i] != 0.0 {
                        let crossing = (-row[i] / a[i]).clamp(-4.0, limit) as i32;
                        if a[i] > 0.0 { lo = lo.max(crossing - 2) } else { hi = hi.min(crossing + 2) }
                    } else if (row[i].to_bits() as i32) < t[i] {
                        hi = -1;
                    }
                }
                if lo > hi {
                    continue;
                }
                (lo as usize, hi as usize + 1)
            } else {
                (x_start, x_end)
            };
            // Branch-free: a conditional store would cost a mispredicted branch per pixel edge.
            let start = (y - rows.y0) * rows.width + lo;
            let entries = &mut self.entries[start..start + (hi - lo)];
            let mut xf = lo as f32;
            for stored in entries.iter_mut() {
                let e0 = row[0] + a[0] * xf;
                let e1 = row[1] + a[1] * xf;
                let e2 = row[2] + a[2] * xf;
                // Inside when every `bits(e) - threshold` is non-negative, i.e. their OR is.
                let inside = ((e0.to_bits() as i32) - t[0])
                    | ((e1.to_bits() as i32) - t[1])
                    | ((e2.to_bits() as i32) - t[2]);
                let outside_mask = i64::from(inside >> 31) as u64;
                let candidate = depth_entry(key_row + key[0] * xf, index) & !outside_mask;
                *stored = (*stored).max(candidate);
                xf += 1.0;
            }
        }
    }

    /// Shades the band's pixels into its output rows, one run of pixels showing the same triangle at a
    /// time, so that the per-triangle values stay in registers and the depth loop vectorises.
    fn shade<P: Projection>(&self, chunks: &[Chunk<'_>], background: [u8; 3], output: BandOutput<'_>) {
        let rows = self.rows;
        let width = rows.width;
        for y in rows.y0..rows.y1 {
            let buffer_row = (y - rows.y0) * width;
            let out_row = (y - rows.y0) * width;
            let entries = &self.entries[buffer_row..buffer_row + width];
            let rgb = &mut output.rgb[out_row..out_row + width];
            let depth = &mut output.depth[out_row..out_row + width];
            let instances = &mut output.instances[out_row..out_row + width];
            let yf = y as f32;
            let mut x = 0;
            while x < width {
                let id = entry_id(entries[x]);
                let end =
                    x + entries[x..].iter().position(|&other| entry_id(other) != id).unwrap_or(width - x);
                let Some(triangle) = chunk_shade(chunks, id) else {
                    rgb[x..end].fill(background);
                    depth[x..end].fill(0.0);
                    instances[x..end].fill(0);
                    x = end;
                    continue;
                };
                instances[x..end].fill(triangle.instance);
                // The key is evaluated in f64 (no cancellation), the reciprocal in f32 (1e-7 relative).
                let [ka, kb, kc] = triangle.key;
                let key_row = kb * f64::from(yf) + kc;
                let first = x as i32;
                for (i, d) in depth[x..end].iter_mut().enumerate() {
                    let key = (ka * f64::from(first + i as i32) + key_row) as f32;
                    *d = if P::PERSPECTIVE { 1.0 / key } else { key };
                }
                match triangle.texture {
                    None => rgb[x..end].fill(triangle.flat),
                    Some(texture) => {
                        let [pu, pv] = triangle.uv;
                        let (u_row, v_row) = (pu[1] * yf + pu[2], pv[1] * yf + pv[2]);
                        let f = triangle.factor_fixed;
                        for (i, (colour, &z)) in rgb[x..end].iter_mut().zip(&depth[x..end]).enumerate() {
                            let xf = (first + i as i32) as f32;
                            let (mut u, mut v) = (u_row + pu[0] * xf, v_row + pv[0] * xf);
                            if P::PERSPECTIVE {
                                u *= z;
                                v *= z;
                            }
                            let texel = texture.sample(u, v);
                            *colour = [0, 1, 2].map(|c| {
                                ((u32::from(texel[c]) * f[c] + FIXED_HALF) >> FIXED_BITS).min(255) as u8
                            });
                        }
                    }
                }
                x = end;
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

    fn render_stats(scene: &RenderScene, camera: &PinholeCamera, pose: &Pose3) -> RenderStats {
        let mut frame = Frame::empty(camera.width, camera.height, [0; 3]);
        let near_m = RenderOptions::default().near_m;
        Perspective::new(camera, pose, near_m)
            .map(|projection| render_with(scene, &projection, &RenderOptions::default(), &mut frame))
            .unwrap_or_default()
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
        let wall = grid(
            [distance, -half, -half],
            [0.0, 2.0 * half, 0.0],
            [0.0, 0.0, 2.0 * half],
            32,
            plain([0.8; 3]),
            |_| [0.0; 2],
        );
        let scene = RenderScene::new(vec![object(wall, 0)]);
        let camera = PinholeCamera::gst_benchmark();
        let pose = Pose3::world_from_camera_yaw_pitch(
            Vector3::zeros(),
            yaw_deg.to_radians(),
            pitch_deg.to_radians(),
        );
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
        let floor =
            grid([-5.0, -5.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0], 4, plain([0.5; 3]), |_| [0.0; 2]);
        let scene = RenderScene::new(vec![object(floor, 0), object(axis_box(min, max, [0.7, 0.2, 0.2]), 5)]);
        let camera = PinholeCamera::gst_benchmark();
        for (position, yaw, pitch) in [([0.0, 0.0, 1.2], 0.1, -0.2), ([0.5, 1.5, 1.6], -0.6, -0.3)] {
            let pose = Pose3::world_from_camera_yaw_pitch(Vector3::from(position), yaw, pitch);
            let frame = render(&scene, &camera, &pose, &RenderOptions::default());
            let camera_from_world = pose.inverse();
            let centre = Point3::from([0, 1, 2].map(|k| f64::from(min[k] + max[k]) / 2.0));
            for i in 0..8 {
                let corner =
                    Point3::from([0, 1, 2].map(|k| f64::from(if i >> k & 1 == 1 { max[k] } else { min[k] })));
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
        let floor = grid([0.0, 0.0, 0.0], [5.0, 0.0, 0.0], [0.0, 4.0, 0.0], 6, wall_material.clone(), |p| {
            [p[0], p[1]]
        });
        let ceiling =
            grid([0.0, 0.0, 2.5], [5.0, 0.0, 0.0], [0.0, 4.0, 0.0], 3, plain([0.9; 3]), |_| [0.0; 2]);
        let mut objects = vec![object(floor, 0), object(ceiling, 0)];
        let walls = [
            ([0.0, 0.0, 0.0], [5.0, 0.0, 0.0]),
            ([5.0, 0.0, 0.0], [0.0, 4.0, 0.0]),
            ([5.0, 4.0, 0.0], [-5.0, 0.0, 0.0]),
            ([0.0, 4.0, 0.0], [0.0, -4.0, 0.0]),
        ];
        for (origin, along) in walls {
            let wall =
                grid(origin, along, [0.0, 0.0, 2.5], 5, wall_material.clone(), |p| [p[0] + p[1], p[2]]);
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
                assert_eq!(
                    reference,
                    pool.install(|| render(&scene, &camera, pose, &options)),
                    "{threads} threads"
                );
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
    fn occlusion_culling_does_not_change_the_image() -> TestResult {
        // The room's structure (instance 0) occludes boxes in the "next room"; a decal lies exactly on a wall
        // and comes first in the object list, so it must win the depth ties against the wall.
        let decal =
            grid([5.0, 1.0, 0.5], [0.0, 1.5, 0.0], [0.0, 0.0, 1.0], 2, plain([0.9, 0.1, 0.9]), |_| [0.0; 2]);
        let mut objects = vec![object(decal, 7)];
        objects.extend(test_room().objects().iter().cloned());
        for (i, x) in [6.0f32, 7.5, 9.0].into_iter().enumerate() {
            objects
                .push(object(axis_box([x, 0.5, 0.0], [x + 0.8, 3.5, 2.0], [0.3, 0.6, 0.9]), 20 + i as u16));
        }
        let culled = RenderScene::new(objects.clone());
        // The same scene with the structure renamed: no occluders, so nothing is culled.
        let renamed: Vec<RenderObject> = objects
            .into_iter()
            .map(|o| RenderObject { instance_id: if o.instance_id == 0 { 99 } else { o.instance_id }, ..o })
            .collect();
        let unculled = RenderScene::new(renamed);
        let camera = PinholeCamera::gst_benchmark();
        for (i, pose) in [
            Pose3::world_from_camera_yaw_pitch(Vector3::new(0.5, 2.0, 1.4), 0.0, -0.1),
            Pose3::world_from_camera_yaw_pitch(Vector3::new(1.0, 0.5, 1.6), 0.5, -0.3),
            // Outside the room, looking at it: the far boxes are in front of the structure there.
            Pose3::world_from_camera_yaw_pitch(Vector3::new(12.0, 2.0, 1.5), std::f64::consts::PI, 0.0),
        ]
        .into_iter()
        .enumerate()
        {
            let a = render(&culled, &camera, &pose, &RenderOptions::default());
            let stats = render_stats(&culled, &camera, &pose);
            // The culling test is conservative (a box's nearest corner against the farthest occluder depth
            // in every block it may cover): from the second pose, only some of the boxes are culled.
            let expected_culled = [3, 1, 0][i];
            assert!(stats.clusters_occluded >= expected_culled, "pose {i}: {stats:?}");
            let mut b = render(&unculled, &camera, &pose, &RenderOptions::default());
            for id in b.instances.data_mut() {
                if *id == 99 {
                    *id = 0;
                }
            }
            assert_eq!(a, b, "pose {i}");
            if i == 0 {
                let decal_pixels = a.instances.data().iter().filter(|&&id| id == 7).count();
                assert!(decal_pixels > 1000, "the decal wins its ties with the wall: {decal_pixels} pixels");
            }
        }
        Ok(())
    }

    #[test]
    fn topdown_shows_box_rectangle_and_cuts_the_ceiling() {
        let floor = grid([0.0, 0.0, 0.0], [4.0, 0.0, 0.0], [0.0, 4.0, 0.0], 4, plain([0.5; 3]), |_| [0.0; 2]);
        let ceiling =
            grid([0.0, 0.0, 2.5], [4.0, 0.0, 0.0], [0.0, 4.0, 0.0], 2, plain([0.9; 3]), |_| [0.0; 2]);
        let table = axis_box([1.0, 1.0, 0.0], [2.0, 1.5, 0.8], [0.6, 0.4, 0.2]);
        let scene = RenderScene::new(vec![object(floor, 0), object(ceiling, 9), object(table, 3)]);
        let view = OrthoView {
            min_x_m: 0.0,
            max_y_m: 4.0,
            metres_per_pixel: 0.02,
            width: 200,
            height: 200,
            max_z_m: 2.0,
        };
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
    fn texture_sampling_matches_the_reference_formula() {
        // `Texture::sample` avoids libm and saturating conversions for speed; it must pick the same texels
        // as the straightforward formula everywhere, including negative, huge and non-finite coordinates.
        let texture = Texture {
            width: 5,
            height: 3,
            texels: (0..15u8).map(|i| [i, i.wrapping_mul(7), 255 - i]).collect(),
        };
        let reference = |u: f32, v: f32| {
            let x = (u - u.floor()) * 5.0;
            let y = (1.0 - (v - v.floor())) * 3.0;
            let (xi, yi) = ((x as u32).min(4), (y as u32).min(2));
            texture.texels[(yi * 5 + xi) as usize]
        };
        let mut values = vec![0.0, -0.0, 1.0, -1.0, 0.2, -0.2, 0.9999999, -1e-10, 1e-10, 123.456, -987.25];
        values.extend([
            8_388_607.5,
            -8_388_607.5,
            1e9,
            -1e9,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        values.extend((0..2000).map(|i| (i as f32 - 1000.0) * 0.0137));
        for &u in &values {
            for &v in values.iter().step_by(7) {
                assert_eq!(texture.sample(u, v), reference(u, v), "u={u} v={v}");
            }
        }
    }

    #[test]
    fn empty_and_malformed_input_does_not_panic() {
        let mut broken = axis_box([1.0, -0.5, -0.5], [2.0, 0.5, 0.5], [0.5; 3]);
        broken.triangles.push([0, 1, 99]);
        broken.triangle_materials.truncate(3);
        broken.materials[0].texture =
            Some(Arc::new(Texture { width: 4, height: 4, texels: vec![[1, 2, 3]] }));
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
