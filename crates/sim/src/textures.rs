//! Procedural surface textures for floors, walls and ceilings.
//!
//! Visual odometry needs texture: a house of flat paint gives ORB nothing to track. Every style here has
//! structure at several scales (plank seams, tile grout, wallpaper motifs, carpet fibres) with enough
//! contrast for FAST corners (OpenCV's default threshold is 20 grey levels), while still looking like the
//! surface it imitates. Textures tile seamlessly and depend only on their [`SurfaceStyle`], so a scene
//! document regenerates them byte for byte.

use serde::{Deserialize, Serialize};

use crate::Texture;

/// Side of every generated texture in texels.
pub const TEXTURE_SIZE: u32 = 512;

/// The kind of a surface and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SurfaceKind {
    WoodPlanks,
    Tiles,
    Carpet,
    WallpaperStripes,
    WallpaperDiamonds,
    WallpaperDots,
    Brick,
    Plaster,
}

/// A surface style: kind, base colour and the seed of its noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SurfaceStyle {
    pub kind: SurfaceKind,
    pub color: [u8; 3],
    pub seed: u64,
}

impl SurfaceStyle {
    /// Metres covered by one repeat of the texture.
    pub fn repeat_m(&self) -> f64 {
        match self.kind {
            SurfaceKind::WoodPlanks => 2.4,
            SurfaceKind::Tiles => 1.6,
            SurfaceKind::Carpet => 1.5,
            SurfaceKind::Brick => 1.8,
            SurfaceKind::Plaster => 3.0,
            _ => 1.6,
        }
    }

    pub fn generate(&self) -> Texture {
        generate(self)
    }
}

/// splitmix64: a fast, well-mixed hash for lattice noise.
fn hash(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Uniform value in [0, 1) for a lattice point.
fn lattice(seed: u64, x: i64, y: i64) -> f32 {
    let h = hash(seed ^ hash((x as u64).wrapping_mul(0x1_0000_0001) ^ (y as u64).rotate_left(32)));
    (h >> 40) as f32 / (1u64 << 24) as f32
}

/// Periodic value noise in [0, 1) with `cells` lattice cells across the texture.
fn value_noise(seed: u64, u: f32, v: f32, cells: i64) -> f32 {
    let (x, y) = (u * cells as f32, v * cells as f32);
    let (x0, y0) = (x.floor(), y.floor());
    let (fx, fy) = (x - x0, y - y0);
    let (sx, sy) = (fx * fx * (3.0 - 2.0 * fx), fy * fy * (3.0 - 2.0 * fy));
    let (ix, iy) = (x0 as i64, y0 as i64);
    let at = |dx: i64, dy: i64| lattice(seed, (ix + dx).rem_euclid(cells), (iy + dy).rem_euclid(cells));
    let top = at(0, 0) * (1.0 - sx) + at(1, 0) * sx;
    let bottom = at(0, 1) * (1.0 - sx) + at(1, 1) * sx;
    top * (1.0 - sy) + bottom * sy
}

/// Fractal noise: octaves of value noise, in [0, 1).
fn fractal(seed: u64, u: f32, v: f32, base_cells: i64, octaves: u32) -> f32 {
    let (mut sum, mut weight, mut amplitude) = (0.0, 0.0, 1.0);
    for octave in 0..octaves {
        sum += amplitude * value_noise(seed.wrapping_add(u64::from(octave)), u, v, base_cells << octave);
        weight += amplitude;
        amplitude *= 0.5;
    }
    sum / weight
}

fn shade(color: [u8; 3], factor: f32) -> [u8; 3] {
    color.map(|c| (f32::from(c) * factor).clamp(0.0, 255.0) as u8)
}

fn mix(a: [u8; 3], b: [u8; 3], t: f32) -> [u8; 3] {
    let t = t.clamp(0.0, 1.0);
    [0, 1, 2].map(|i| (f32::from(a[i]) * (1.0 - t) + f32::from(b[i]) * t) as u8)
}

fn generate(style: &SurfaceStyle) -> Texture {
    let n = TEXTURE_SIZE;
    let seed = style.seed;
    let base = style.color;
    let mut texels = Vec::with_capacity((n * n) as usize);
    for row in 0..n {
        for col in 0..n {
            let u = (col as f32 + 0.5) / n as f32;
            let v = (row as f32 + 0.5) / n as f32;
            texels.push(texel(style.kind, base, seed, u, v));
        }
    }
    Texture { width: n, height: n, texels }
}

fn texel(kind: SurfaceKind, base: [u8; 3], seed: u64, u: f32, v: f32) -> [u8; 3] {
    match kind {
        SurfaceKind::WoodPlanks => {
            // 8 planks across; each plank has its own tone, offset grain and staggered end joints.
            const PLANKS: f32 = 8.0;
            let plank = (v * PLANKS).floor();
            let in_plank = v * PLANKS - plank;
            let plank_id = plank as i64;
            let offset = lattice(seed, plank_id, 7);
            let along = (u + offset).fract();
            let joint = (along * 2.0).fract();
            let tone = 0.75 + 0.4 * lattice(seed, plank_id, 3);
            let grain = fractal(seed ^ 0xA5, along * 0.25, in_plank * 0.15 + plank * 0.13, 8, 4);
            let rings = ((along * 40.0 + grain * 12.0).sin() * 0.5 + 0.5).powf(3.0);
            let knots = ((fractal(seed ^ 0x5A, u, v, 16, 2) - 0.62).max(0.0) * 2.0).min(0.35);
            let mut factor = tone * (0.82 + 0.18 * rings) * (1.0 - knots);
            if !(0.03..=0.97).contains(&in_plank) || joint < 0.006 {
                factor *= 0.35;
            }
            shade(base, factor)
        }
        SurfaceKind::Tiles => {
            // 8x8 tiles with grout, per-tile tone and speckles.
            const TILES: f32 = 8.0;
            let (tu, tv) = (u * TILES, v * TILES);
            let (fu, fv) = (tu.fract(), tv.fract());
            let tile_id = (tu.floor() as i64, tv.floor() as i64);
            if fu < 0.04 || fv < 0.04 {
                return shade(base, 0.45);
            }
            let tone = 0.82 + 0.3 * lattice(seed, tile_id.0, tile_id.1);
            let speckle =
                if lattice(seed ^ 0x77, (u * 512.0) as i64, (v * 512.0) as i64) > 0.985 { 0.6 } else { 1.0 };
            let marble = fractal(seed ^ 0x33, u, v, 12, 4);
            shade(base, tone * speckle * (0.85 + 0.3 * marble))
        }
        SurfaceKind::Carpet => {
            let blotch = fractal(seed, u, v, 6, 3);
            let fibre = lattice(seed ^ 0x99, (u * 512.0) as i64, (v * 512.0) as i64);
            let weave =
                if ((u * 64.0).floor() as i64 + (v * 64.0).floor() as i64) % 2 == 0 { 1.0 } else { 0.85 };
            shade(base, (0.65 + 0.5 * blotch) * (0.8 + 0.35 * fibre) * weave)
        }
        SurfaceKind::WallpaperStripes => {
            let stripe = (u * 12.0).fract();
            let band = if stripe < 0.5 { 1.0 } else { 0.78 };
            let pin = if (stripe - 0.25).abs() < 0.02 { 0.55 } else { 1.0 };
            let motif = ((v * 24.0).fract() - 0.5).abs() < 0.08 && (stripe - 0.75).abs() < 0.08;
            let plaster = fractal(seed, u, v, 16, 3);
            let factor = band * pin * (0.88 + 0.24 * plaster) * if motif { 0.6 } else { 1.0 };
            shade(base, factor)
        }
        SurfaceKind::WallpaperDiamonds => {
            let (x, y) = ((u * 10.0).fract() - 0.5, (v * 10.0).fract() - 0.5);
            let diamond = x.abs() + y.abs();
            let outline = (diamond - 0.38).abs() < 0.035;
            let centre = diamond < 0.1;
            let plaster = fractal(seed, u, v, 16, 3);
            let mut color = shade(base, 0.9 + 0.2 * plaster);
            if outline {
                color = shade(base, 0.55);
            } else if centre {
                color = mix(base, [255, 255, 255], 0.6);
            }
            color
        }
        SurfaceKind::WallpaperDots => {
            let cell = (((u * 14.0).floor() as i64) + ((v * 14.0).floor() as i64)) % 2;
            let (x, y) = ((u * 14.0).fract() - 0.5, (v * 14.0).fract() - 0.5);
            let r = (x * x + y * y).sqrt();
            let dot = r < if cell == 0 { 0.22 } else { 0.12 };
            let plaster = fractal(seed, u, v, 16, 3);
            if dot { shade(base, 0.55 + 0.1 * plaster) } else { shade(base, 0.92 + 0.16 * plaster) }
        }
        SurfaceKind::Brick => {
            const ROWS: f32 = 16.0;
            let row = (v * ROWS).floor();
            let fv = (v * ROWS).fract();
            let shift = if row as i64 % 2 == 0 { 0.0 } else { 0.5 };
            let bu = u * 8.0 + shift;
            let fu = bu.fract();
            if fv < 0.1 || fu < 0.05 {
                return [200, 196, 188];
            }
            let tone = 0.75 + 0.45 * lattice(seed, bu.floor() as i64, row as i64);
            let grit = fractal(seed ^ 0x11, u, v, 32, 3);
            shade(base, tone * (0.8 + 0.35 * grit))
        }
        SurfaceKind::Plaster => {
            let cloud = fractal(seed, u, v, 8, 5);
            let crack = (fractal(seed ^ 0x44, u, v, 4, 2) - 0.5).abs() < 0.006;
            shade(base, if crack { 0.86 } else { 0.9 + 0.15 * cloud })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textures_tile_are_deterministic_and_have_contrast() {
        for kind in [
            SurfaceKind::WoodPlanks,
            SurfaceKind::Tiles,
            SurfaceKind::Carpet,
            SurfaceKind::WallpaperStripes,
            SurfaceKind::WallpaperDiamonds,
            SurfaceKind::WallpaperDots,
            SurfaceKind::Brick,
        ] {
            let style = SurfaceStyle { kind, color: [180, 150, 120], seed: 5 };
            let a = style.generate();
            assert_eq!(a, style.generate(), "{kind:?} is not deterministic");
            let grey: Vec<f32> = a
                .texels
                .iter()
                .map(|t| (f32::from(t[0]) + f32::from(t[1]) + f32::from(t[2])) / 3.0)
                .collect();
            let mean = grey.iter().sum::<f32>() / grey.len() as f32;
            let std = (grey.iter().map(|g| (g - mean).powi(2)).sum::<f32>() / grey.len() as f32).sqrt();
            assert!(std > 8.0, "{kind:?} is too flat: std {std}");
        }
    }
}
