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
        let x = (u - u.floor()) * w;
        let y = (1.0 - (v - v.floor())) * h;
        let xi = (x as u32).min(self.width - 1);
        let yi = (y as u32).min(self.height - 1);
        self.texels[(yi * self.width + xi) as usize]
    }
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
