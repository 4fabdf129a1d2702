//! Triangle meshes with materials: what the catalog loader produces and the renderer draws.

use std::sync::Arc;

/// An RGB texture, sampled with wrap-around addressing (OBJ texture coordinates repeat).
#[derive(Clone, Debug, PartialEq)]
pub struct Texture {
    pub width: u32,
    pub height: u32,
    /// Row-major texels, the first row is the top of the image (v = 1 in OBJ coordinates).
    pub texels: Vec<[u8; 3]>,
}

impl Texture {
    /// Nearest-texel lookup at OBJ texture coordinates (u right, v up), wrapping outside [0, 1).
    #[inline]
    pub fn sample(&self, u: f32, v: f32) -> [u8; 3] {
        let w = self.width as f32;
        let h = self.height as f32;
        let x = (u - floor_f32(u)) * w;
        let y = (1.0 - (v - floor_f32(v))) * h;
        // `x` and `y` are in [0, size] (or NaN, which converts to 0): the i32 conversion is exact there and
        // much cheaper than a saturating u32 conversion on x86-64.
        let xi = (x as i32).min(self.width as i32 - 1).max(0) as u32;
        let yi = (y as i32).min(self.height as i32 - 1).max(0) as u32;
        self.texels[(yi * self.width + xi) as usize]
    }
}

/// `x.floor()` without a libm call and without branches (baseline x86-64 has no rounding instruction, and
/// the renderer samples textures per pixel). Equal to `f32::floor` except that it may return +0 for -0.
#[inline]
fn floor_f32(x: f32) -> f32 {
    // Adding and removing 2^23 rounds to an integer (every f32 from 2^23 on is one).
    const TWO_POW_23: f32 = 8_388_608.0;
    let magic = TWO_POW_23.copysign(x);
    let rounded = (x + magic) - magic;
    let floored = rounded - if rounded > x { 1.0 } else { 0.0 };
    if x.abs() < TWO_POW_23 { floored } else { x }
}

/// A surface material: a diffuse colour, optionally modulated by a texture.
#[derive(Clone, Debug, PartialEq)]
pub struct Material {
    pub name: String,
    /// Linear diffuse colour in [0, 1] (the MTL `Kd`).
    pub diffuse: [f32; 3],
    pub texture: Option<Arc<Texture>>,
}

impl Material {
    pub fn plain(name: &str, diffuse: [f32; 3]) -> Self {
        Self { name: name.to_string(), diffuse, texture: None }
    }
}

/// An indexed triangle mesh. `uvs` is parallel to `positions` (zeros where a model has no texture
/// coordinates); each triangle has a material index into `materials`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TriangleMesh {
    pub positions: Vec<[f32; 3]>,
    pub uvs: Vec<[f32; 2]>,
    pub triangles: Vec<[u32; 3]>,
    pub triangle_materials: Vec<u16>,
    pub materials: Vec<Material>,
}

impl TriangleMesh {
    /// Axis-aligned bounds `(min, max)`; `None` for an empty mesh.
    pub fn bounds(&self) -> Option<([f32; 3], [f32; 3])> {
        let mut iter = self.positions.iter();
        let first = *iter.next()?;
        let (mut lo, mut hi) = (first, first);
        for p in iter {
            for i in 0..3 {
                lo[i] = lo[i].min(p[i]);
                hi[i] = hi[i].max(p[i]);
            }
        }
        Some((lo, hi))
    }

    pub fn triangle_count(&self) -> usize {
        self.triangles.len()
    }

    /// Appends another mesh, keeping its materials.
    pub fn append(&mut self, other: &TriangleMesh) {
        let vertex_offset = self.positions.len() as u32;
        let material_offset = self.materials.len() as u16;
        self.positions.extend_from_slice(&other.positions);
        self.uvs.extend_from_slice(&other.uvs);
        self.triangles.extend(other.triangles.iter().map(|t| t.map(|i| i + vertex_offset)));
        self.triangle_materials.extend(other.triangle_materials.iter().map(|m| m + material_offset));
        self.materials.extend(other.materials.iter().cloned());
    }

    /// Applies `f` to every position.
    pub fn transform_positions(&mut self, f: impl Fn([f32; 3]) -> [f32; 3]) {
        for p in &mut self.positions {
            *p = f(*p);
        }
    }
}
