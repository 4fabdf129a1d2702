//! Renderer throughput on a synthetic house whose size is known by construction: six textured box rooms
//! (3 x 2, 4 m square, connected by doorways) and 40 dense objects (UV spheres and subdivided boxes of
//! 2-5k triangles each), rendered at 640x512 (RGB, depth and instance ids) from poses inside the rooms.
//!
//! Criterion reports throughput in elements per second: one element is one frame, so that is frames/s.
//! `synthetic_house` allocates a new frame per call (`render`), `synthetic_house_reusing_frame` renders
//! into one frame (`render_into`), as an episode generator would.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gst_core::{PinholeCamera, Pose3};
use gst_sim::mesh::{Material, Texture, TriangleMesh};
use gst_sim::render::{
    Frame, OrthoView, RenderObject, RenderOptions, RenderScene, render, render_into, render_topdown,
};
use nalgebra::Vector3;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const ROOM_SIZE_M: f32 = 4.0;
const ROOM_COLUMNS: usize = 3;
const ROOM_ROWS: usize = 2;
const WALL_HEIGHT_M: f32 = 2.6;
const DOOR_WIDTH_M: f32 = 1.0;
const DOOR_HEIGHT_M: f32 = 2.1;
/// Edge length of the quads that walls and floors are tessellated into.
const CELL_M: f32 = 0.5;
const OBJECT_COUNT: usize = 40;

/// A procedural texture: `texel(x, y)` over a `size`² image.
fn texture(size: u32, texel: impl Fn(u32, u32) -> [u8; 3]) -> Arc<Texture> {
    let texels = (0..size * size).map(|i| texel(i % size, i / size)).collect();
    Arc::new(Texture { width: size, height: size, texels })
}

fn textured(name: &str, texture: &Arc<Texture>) -> Material {
    Material { texture: Some(Arc::clone(texture)), ..Material::plain(name, [1.0; 3]) }
}

/// The parallelogram `origin + s·du + t·dv` (s, t in [0, 1]) as a grid of about `CELL_M` cells, with
/// texture coordinates in metres along `du` and `dv`.
fn panel(mesh: &mut TriangleMesh, origin: [f32; 3], du: [f32; 3], dv: [f32; 3], material: u16) {
    let length = |d: [f32; 3]| (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
    let (lu, lv) = (length(du), length(dv));
    let (nu, nv) = ((lu / CELL_M).ceil().max(1.0) as u32, (lv / CELL_M).ceil().max(1.0) as u32);
    let base = mesh.positions.len() as u32;
    for j in 0..=nv {
        for i in 0..=nu {
            let (s, t) = (i as f32 / nu as f32, j as f32 / nv as f32);
            mesh.positions.push([0, 1, 2].map(|k| origin[k] + s * du[k] + t * dv[k]));
            mesh.uvs.push([s * lu, t * lv]);
        }
    }
    for j in 0..nv {
        for i in 0..nu {
            let a = base + j * (nu + 1) + i;
            let (b, c, d) = (a + 1, a + nu + 2, a + nu + 1);
            mesh.triangles.extend([[a, b, c], [a, c, d]]);
            mesh.triangle_materials.extend([material, material]);
        }
    }
}

/// A vertical wall from `start` to `end` (on the floor), with an optional centred doorway.
fn wall(mesh: &mut TriangleMesh, start: [f32; 2], end: [f32; 2], door: bool, material: u16) {
    let along = [end[0] - start[0], end[1] - start[1], 0.0];
    let up = [0.0, 0.0, WALL_HEIGHT_M];
    if !door {
        panel(mesh, [start[0], start[1], 0.0], along, up, material);
        return;
    }
    let length = (along[0] * along[0] + along[1] * along[1]).sqrt();
    let unit = [along[0] / length, along[1] / length, 0.0];
    let side = (length - DOOR_WIDTH_M) / 2.0;
    let at = |d: f32, z: f32| [start[0] + unit[0] * d, start[1] + unit[1] * d, z];
    let scaled = |d: f32| unit.map(|c| c * d);
    panel(mesh, at(0.0, 0.0), scaled(side), up, material);
    panel(mesh, at(side + DOOR_WIDTH_M, 0.0), scaled(side), up, material);
    panel(
        mesh,
        at(side, DOOR_HEIGHT_M),
        scaled(DOOR_WIDTH_M),
        [0.0, 0.0, WALL_HEIGHT_M - DOOR_HEIGHT_M],
        material,
    );
}

/// Walls, floors and ceilings of the 3 x 2 rooms; every pair of neighbouring rooms shares a doorway.
fn structure() -> TriangleMesh {
    let bricks = texture(64, |x, y| {
        let row = y / 8;
        let mortar = y % 8 == 0 || (x + if row % 2 == 0 { 0 } else { 8 }) % 16 == 0;
        if mortar { [200, 200, 195] } else { [150 + (x * 7 % 30) as u8, 70, 50] }
    });
    let planks = texture(64, |x, y| {
        let grain = ((x * 13 + y / 16 * 29) % 23) as u8;
        if x % 16 == 0 { [90, 60, 30] } else { [160 + grain, 110 + grain, 60] }
    });
    let mut mesh = TriangleMesh {
        materials: vec![
            textured("bricks", &bricks),
            textured("planks", &planks),
            Material::plain("ceiling", [0.9, 0.9, 0.88]),
        ],
        ..TriangleMesh::default()
    };
    let s = ROOM_SIZE_M;
    for row in 0..ROOM_ROWS {
        for column in 0..ROOM_COLUMNS {
            let (x0, y0) = (column as f32 * s, row as f32 * s);
            panel(&mut mesh, [x0, y0, 0.0], [s, 0.0, 0.0], [0.0, s, 0.0], 1);
            panel(&mut mesh, [x0, y0, WALL_HEIGHT_M], [s, 0.0, 0.0], [0.0, s, 0.0], 2);
        }
    }
    let (width, depth) = (ROOM_COLUMNS as f32 * s, ROOM_ROWS as f32 * s);
    for column in 0..ROOM_COLUMNS {
        let x = column as f32 * s;
        for y in [0.0, depth] {
            wall(&mut mesh, [x, y], [x + s, y], false, 0);
        }
        for row in 1..ROOM_ROWS {
            let y = row as f32 * s;
            wall(&mut mesh, [x, y], [x + s, y], true, 0);
        }
    }
    for row in 0..ROOM_ROWS {
        let y = row as f32 * s;
        for x in [0.0, width] {
            wall(&mut mesh, [x, y], [x, y + s], false, 0);
        }
        for column in 1..ROOM_COLUMNS {
            let x = column as f32 * s;
            wall(&mut mesh, [x, y], [x, y + s], true, 0);
        }
    }
    mesh
}

fn uv_sphere(centre: [f32; 3], radius: f32, rings: u32, segments: u32, diffuse: [f32; 3]) -> TriangleMesh {
    let mut mesh =
        TriangleMesh { materials: vec![Material::plain("sphere", diffuse)], ..TriangleMesh::default() };
    for ring in 0..=rings {
        let polar = std::f32::consts::PI * ring as f32 / rings as f32;
        for segment in 0..=segments {
            let azimuth = std::f32::consts::TAU * segment as f32 / segments as f32;
            let direction = [polar.sin() * azimuth.cos(), polar.sin() * azimuth.sin(), polar.cos()];
            mesh.positions.push([0, 1, 2].map(|k| centre[k] + radius * direction[k]));
            mesh.uvs.push([segment as f32 / segments as f32, ring as f32 / rings as f32]);
        }
    }
    for ring in 0..rings {
        for segment in 0..segments {
            let a = ring * (segments + 1) + segment;
            let (b, c, d) = (a + 1, a + segments + 2, a + segments + 1);
            mesh.triangles.extend([[a, b, c], [a, c, d]]);
            mesh.triangle_materials.extend([0, 0]);
        }
    }
    mesh
}

/// An axis-aligned box with every face split into `n x n` quads.
fn subdivided_box(min: [f32; 3], max: [f32; 3], n: u32, material: Material) -> TriangleMesh {
    let mut mesh = TriangleMesh { materials: vec![material], ..TriangleMesh::default() };
    let size = [0, 1, 2].map(|k| max[k] - min[k]);
    for axis in 0..3 {
        let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
        for high in [false, true] {
            let mut origin = min;
            if high {
                origin[axis] = max[axis];
            }
            let mut du = [0.0; 3];
            let mut dv = [0.0; 3];
            du[u] = size[u];
            dv[v] = size[v];
            let base = mesh.positions.len() as u32;
            for j in 0..=n {
                for i in 0..=n {
                    let (s, t) = (i as f32 / n as f32, j as f32 / n as f32);
                    mesh.positions.push([0, 1, 2].map(|k| origin[k] + s * du[k] + t * dv[k]));
                    mesh.uvs.push([s, t]);
                }
            }
            for j in 0..n {
                for i in 0..n {
                    let a = base + j * (n + 1) + i;
                    let (b, c, d) = (a + 1, a + n + 2, a + n + 1);
                    mesh.triangles.extend([[a, b, c], [a, c, d]]);
                    mesh.triangle_materials.extend([0, 0]);
                }
            }
        }
    }
    mesh
}

/// The house: structure (instance 0) and `OBJECT_COUNT` objects spread over the rooms, seeded.
fn house() -> RenderScene {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let checker = texture(32, |x, y| if (x / 8 + y / 8) % 2 == 0 { [220, 220, 220] } else { [40, 90, 160] });
    let mut objects = vec![RenderObject { mesh: Arc::new(structure()), instance_id: 0 }];
    for i in 0..OBJECT_COUNT {
        let room = i % (ROOM_COLUMNS * ROOM_ROWS);
        let (room_x, room_y) =
            ((room % ROOM_COLUMNS) as f32 * ROOM_SIZE_M, (room / ROOM_COLUMNS) as f32 * ROOM_SIZE_M);
        let x = room_x + rng.gen_range(0.6..ROOM_SIZE_M - 0.6);
        let y = room_y + rng.gen_range(0.6..ROOM_SIZE_M - 0.6);
        let colour = [rng.gen_range(0.1..0.9), rng.gen_range(0.1..0.9), rng.gen_range(0.1..0.9)];
        let mesh = if i % 2 == 0 {
            let radius = rng.gen_range(0.15..0.45);
            let (rings, segments) = if i % 4 == 0 { (24, 48) } else { (40, 60) };
            uv_sphere([x, y, radius + rng.gen_range(0.0..0.6)], radius, rings, segments, colour)
        } else {
            let half = [rng.gen_range(0.15..0.5), rng.gen_range(0.15..0.5), rng.gen_range(0.2..0.6)];
            let material =
                if i % 3 == 0 { textured("checker", &checker) } else { Material::plain("box", colour) };
            let n = if i % 4 == 1 { 13 } else { 20 };
            subdivided_box(
                [x - half[0], y - half[1], 0.0],
                [x + half[0], y + half[1], 2.0 * half[2]],
                n,
                material,
            )
        };
        objects.push(RenderObject { mesh: Arc::new(mesh), instance_id: i as u16 + 1 });
    }
    RenderScene::new(objects)
}

/// Eye-height poses in every room, looking across it and through doorways, plus two in doorways.
fn poses() -> Vec<Pose3> {
    let mut poses = Vec::new();
    for room in 0..ROOM_COLUMNS * ROOM_ROWS {
        let (x, y) = ((room % ROOM_COLUMNS) as f64 * 4.0, (room / ROOM_COLUMNS) as f64 * 4.0);
        let yaw = room as f64 * 1.1;
        poses.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(x + 0.7, y + 0.8, 1.5), 0.6 + yaw, -0.15));
        poses.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(x + 3.2, y + 3.1, 1.3), 3.8 + yaw, -0.25));
    }
    poses.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(4.0, 2.0, 1.5), 0.0, 0.0));
    poses.push(Pose3::world_from_camera_yaw_pitch(Vector3::new(6.0, 4.0, 1.5), 1.57, -0.1));
    poses
}

fn bench_render(c: &mut Criterion) {
    let scene = house();
    let poses = poses();
    let camera = PinholeCamera::gst_benchmark();
    let options = RenderOptions::default();
    eprintln!(
        "synthetic house: {} objects, {} triangles, {} poses",
        scene.objects().len(),
        scene.triangle_count(),
        poses.len()
    );

    let mut group = c.benchmark_group("render_640x512");
    group.throughput(Throughput::Elements(1));
    group.sample_size(50);
    let mut next = 0;
    group.bench_function("synthetic_house", |b| {
        b.iter(|| {
            next = (next + 1) % poses.len();
            black_box(render(&scene, &camera, &poses[next], &options))
        })
    });
    let mut frame = Frame::empty(camera.width, camera.height, options.background);
    group.bench_function("synthetic_house_reusing_frame", |b| {
        b.iter(|| {
            next = (next + 1) % poses.len();
            render_into(&scene, &camera, &poses[next], &options, &mut frame);
            black_box(&frame);
        })
    });
    group.finish();

    let mut group = c.benchmark_group("render_topdown_640x512");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    let view = OrthoView {
        min_x_m: -0.5,
        max_y_m: 8.5,
        metres_per_pixel: 0.02,
        width: 640,
        height: 512,
        max_z_m: 2.0,
    };
    group
        .bench_function("synthetic_house", |b| b.iter(|| black_box(render_topdown(&scene, &view, &options))));
    group.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
