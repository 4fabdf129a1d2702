//! Turns a scene document into triangles for the renderer: floors, ceilings, walls with door and window
//! openings, and every furniture model placed in the world.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::SimError;
use crate::library::FurnitureLibrary;
use crate::mesh::{Material, Texture, TriangleMesh};
use crate::plan::{Axis, Rect, WallSegment};
use crate::render::{RenderObject, RenderScene};
use crate::scene::Scene;
use crate::textures::SurfaceStyle;

/// Wall tops stop this far below the ceiling, so that an orthographic view cut just under the ceiling sees
/// the wall tops (the walls of a top-down map) instead of looking past them onto the floor.
pub const WALL_TOP_GAP_M: f64 = 0.01;

/// Materials generated from surface styles, each texture made once.
struct MaterialCache {
    textures: BTreeMap<(u64, [u8; 3]), Arc<Texture>>,
}

impl MaterialCache {
    fn material(&mut self, name: &str, style: &SurfaceStyle) -> (Material, f32) {
        let texture = self
            .textures
            .entry((style.seed, style.color))
            .or_insert_with(|| Arc::new(style.generate()))
            .clone();
        (
            Material { name: name.to_string(), diffuse: [1.0, 1.0, 1.0], texture: Some(texture) },
            style.repeat_m() as f32,
        )
    }
}

/// A mesh under construction with one material per quad call.
#[derive(Default)]
struct MeshBuilder {
    mesh: TriangleMesh,
}

impl MeshBuilder {
    fn material_index(&mut self, material: &Material) -> u16 {
        if let Some(k) = self.mesh.materials.iter().position(|m| m.name == material.name) {
            return k as u16;
        }
        self.mesh.materials.push(material.clone());
        (self.mesh.materials.len() - 1) as u16
    }

    /// A quad with corners in order, uv per corner.
    fn quad(&mut self, corners: [[f64; 3]; 4], uvs: [[f32; 2]; 4], material: u16) {
        let base = self.mesh.positions.len() as u32;
        for (c, uv) in corners.iter().zip(uvs) {
            self.mesh.positions.push(c.map(|v| v as f32));
            self.mesh.uvs.push(uv);
        }
        self.mesh.triangles.push([base, base + 1, base + 2]);
        self.mesh.triangles.push([base, base + 2, base + 3]);
        self.mesh.triangle_materials.extend([material, material]);
    }

    /// A horizontal rectangle at height `z`, texture mapped in world metres.
    fn horizontal(&mut self, rect: &Rect, z: f64, material: u16, repeat_m: f32) {
        let uv = |x: f64, y: f64| [x as f32 / repeat_m, y as f32 / repeat_m];
        let (a, b) = (rect.min, rect.max);
        self.quad(
            [[a[0], a[1], z], [b[0], a[1], z], [b[0], b[1], z], [a[0], b[1], z]],
            [uv(a[0], a[1]), uv(b[0], a[1]), uv(b[0], b[1]), uv(a[0], b[1])],
            material,
        );
    }

    fn finish(self) -> TriangleMesh {
        self.mesh
    }
}

/// Builds the renderable scene. Structure has instance id 0; furniture carries its instance id.
pub fn build_render_scene(scene: &Scene, library: &FurnitureLibrary) -> Result<RenderScene, SimError> {
    build(scene, library, Lintels::Keep)
}

/// The scene as top-down maps see it: without the wall above door openings, so that doors show as gaps.
pub fn build_topdown_scene(scene: &Scene, library: &FurnitureLibrary) -> Result<RenderScene, SimError> {
    build(scene, library, Lintels::Drop)
}

/// Whether the wall above door openings is built.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lintels {
    Keep,
    Drop,
}

fn build(scene: &Scene, library: &FurnitureLibrary, lintels: Lintels) -> Result<RenderScene, SimError> {
    let mut cache = MaterialCache { textures: BTreeMap::new() };
    let mut objects = Vec::new();
    let height = scene.plan.wall_height_m;

    // Floors and ceilings, one object per room so that culling can skip rooms out of view.
    for (room, style) in scene.plan.rooms.iter().zip(&scene.room_styles) {
        let mut builder = MeshBuilder::default();
        let (floor, floor_repeat) = cache.material("floor", &style.floor);
        let floor = builder.material_index(&floor);
        let (ceiling, ceiling_repeat) = cache.material("ceiling", &scene.ceiling);
        let ceiling = builder.material_index(&ceiling);
        for rect in &room.rects {
            builder.horizontal(rect, 0.0, floor, floor_repeat);
            builder.horizontal(rect, height, ceiling, ceiling_repeat);
        }
        objects.push(RenderObject { mesh: Arc::new(builder.finish()), instance_id: 0 });
    }

    // Walls, one object per segment.
    for (index, wall) in scene.plan.walls.iter().enumerate() {
        let side_style = |side: usize| match wall.rooms[side] {
            Some(room) => (format!("wall{room}"), scene.room_styles[room].wall),
            None => ("exterior".to_string(), scene.exterior),
        };
        let mut builder = MeshBuilder::default();
        let (name0, style0) = side_style(0);
        let (name1, style1) = side_style(1);
        let (m0, repeat0) = cache.material(&name0, &style0);
        let (m1, repeat1) = cache.material(&name1, &style1);
        let (cap, _) = cache.material("wall_top", &scene.exterior);
        let sides = [(builder.material_index(&m0), repeat0), (builder.material_index(&m1), repeat1)];
        let cap = builder.material_index(&cap);
        let door_top = |top: f64| if lintels == Lintels::Drop { height } else { top };
        let openings: Vec<(f64, f64, f64, f64)> = scene
            .plan
            .doors
            .iter()
            .map(|d| (&d.opening, door_top(d.opening.top_m)))
            .chain(scene.plan.windows.iter().map(|w| (w, w.top_m)))
            .filter(|(o, _)| o.wall == index)
            .map(|(o, top)| (o.start_m(), o.end_m(), o.bottom_m, top))
            .collect();
        wall_boxes(&mut builder, wall, &openings, height - WALL_TOP_GAP_M, sides, cap);
        objects.push(RenderObject { mesh: Arc::new(builder.finish()), instance_id: 0 });
    }

    // Furniture.
    for instance in &scene.instances {
        let model = library.model(&instance.model)?;
        let world_from_model = instance.world_from_model();
        let mut mesh = (*model).clone();
        mesh.transform_positions(|p| {
            let q = world_from_model.transform_point(&nalgebra::Point3::new(
                f64::from(p[0]),
                f64::from(p[1]),
                f64::from(p[2]),
            ));
            [q.x as f32, q.y as f32, q.z as f32]
        });
        objects.push(RenderObject { mesh: Arc::new(mesh), instance_id: instance.id.0 });
    }
    Ok(RenderScene::new(objects))
}

/// Emits the solid parts of a wall as boxes: full height between openings, lintels above and sills below.
fn wall_boxes(
    builder: &mut MeshBuilder,
    wall: &WallSegment,
    openings: &[(f64, f64, f64, f64)],
    top_m: f64,
    sides: [(u16, f32); 2],
    cap: u16,
) {
    // Extend by half the thickness so that walls meeting at a corner close it.
    let half = wall.thickness_m / 2.0;
    let (start, end) = (wall.start_m - half, wall.end_m + half);
    let mut cuts = vec![start, end];
    for &(a, b, _, _) in openings {
        cuts.push(a.clamp(start, end));
        cuts.push(b.clamp(start, end));
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    for pair in cuts.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let mid = (a + b) / 2.0;
        match openings.iter().find(|o| mid > o.0 && mid < o.1) {
            None => wall_box(builder, wall, a, b, 0.0, top_m, sides, cap),
            Some(&(_, _, bottom, top)) => {
                if bottom > 0.0 {
                    wall_box(builder, wall, a, b, 0.0, bottom, sides, cap);
                }
                if top < top_m {
                    wall_box(builder, wall, a, b, top, top_m, sides, cap);
                }
            }
        }
    }
}

/// One box of wall from `a` to `b` along the axis and `z0` to `z1` in height.
fn wall_box(
    builder: &mut MeshBuilder,
    wall: &WallSegment,
    a: f64,
    b: f64,
    z0: f64,
    z1: f64,
    sides: [(u16, f32); 2],
    cap: u16,
) {
    let half = wall.thickness_m / 2.0;
    // Points in (along, across, z), mapped to world.
    let world = |along: f64, across: f64, z: f64| match wall.axis {
        Axis::X => [along, wall.offset_m + across, z],
        Axis::Y => [wall.offset_m + across, along, z],
    };
    for (side, &(material, repeat)) in [-half, half].iter().zip(&sides) {
        let uv = |along: f64, z: f64| [along as f32 / repeat, z as f32 / repeat];
        builder.quad(
            [world(a, *side, z0), world(b, *side, z0), world(b, *side, z1), world(a, *side, z1)],
            [uv(a, z0), uv(b, z0), uv(b, z1), uv(a, z1)],
            material,
        );
    }
    let flat = [[0.0, 0.0]; 4];
    // Top and bottom.
    for z in [z0, z1] {
        builder.quad(
            [world(a, -half, z), world(b, -half, z), world(b, half, z), world(a, half, z)],
            flat,
            cap,
        );
    }
    // Ends (the reveals of openings).
    for along in [a, b] {
        builder.quad(
            [
                world(along, -half, z0),
                world(along, half, z0),
                world(along, half, z1),
                world(along, -half, z1),
            ],
            flat,
            cap,
        );
    }
}
