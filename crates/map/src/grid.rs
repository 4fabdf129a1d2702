//! Metric 2D grids on the map's floor plane and the transform between world (x, y) and cells.

use serde::{Deserialize, Serialize};

/// The placement of a grid in the map frame: cell `(col, row)` covers
/// `x ∈ [origin_x_m + col·res, origin_x_m + (col+1)·res)` and likewise `y` with `row` (row 0 = smallest y).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridFrame {
    pub origin_x_m: f64,
    pub origin_y_m: f64,
    pub resolution_m: f64,
    pub width: u32,
    pub height: u32,
}

impl GridFrame {
    /// The cell holding a point, or `None` outside the grid.
    pub fn cell_from_world(&self, x: f64, y: f64) -> Option<(u32, u32)> {
        // In the grid a coordinate is non-negative, where truncating is flooring (no libm call in the hot
        // loops of mapping); NaN fails the test.
        let col = (x - self.origin_x_m) / self.resolution_m;
        let row = (y - self.origin_y_m) / self.resolution_m;
        if col >= 0.0 && row >= 0.0 && col < f64::from(self.width) && row < f64::from(self.height) {
            Some((col as u32, row as u32))
        } else {
            None
        }
    }

    /// The centre of a cell in the map frame.
    pub fn world_from_cell(&self, col: u32, row: u32) -> [f64; 2] {
        [
            self.origin_x_m + (f64::from(col) + 0.5) * self.resolution_m,
            self.origin_y_m + (f64::from(row) + 0.5) * self.resolution_m,
        ]
    }

    pub fn len(&self) -> usize {
        self.width as usize * self.height as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row-major index of a cell.
    pub fn index(&self, col: u32, row: u32) -> usize {
        row as usize * self.width as usize + col as usize
    }

    /// Area of one cell, square metres.
    pub fn cell_area_m2(&self) -> f64 {
        self.resolution_m * self.resolution_m
    }
}

/// 4-neighbours of a cell index that lie in the grid.
pub(crate) fn neighbours4(frame: &GridFrame, index: usize) -> impl Iterator<Item = usize> {
    let w = frame.width as usize;
    let h = frame.height as usize;
    let (col, row) = (index % w.max(1), index / w.max(1));
    let mut out = [usize::MAX; 4];
    if col > 0 {
        out[0] = index - 1;
    }
    if col + 1 < w {
        out[1] = index + 1;
    }
    if row > 0 {
        out[2] = index - w;
    }
    if row + 1 < h {
        out[3] = index + w;
    }
    out.into_iter().filter(|&i| i != usize::MAX)
}

/// Euclidean distance transform (Felzenszwalb & Huttenlocher 2012) of a mask: for each cell, the distance
/// in cells to the nearest cell where `source` is true (`f32::INFINITY` when there is none).
pub fn distance_transform(width: usize, height: usize, source: &[bool]) -> Vec<f32> {
    const BIG: f32 = 1e12;
    let mut grid: Vec<f32> = source.iter().map(|&s| if s { 0.0 } else { BIG }).collect();
    let n = width.max(height);
    let mut f = vec![0.0f32; n];
    let mut d = vec![0.0f32; n];
    let mut v = vec![0usize; n];
    let mut z = vec![0.0f32; n + 1];
    // Columns, then rows.
    for x in 0..width {
        for y in 0..height {
            f[y] = grid[y * width + x];
        }
        dt1d(&f[..height], &mut d[..height], &mut v, &mut z);
        for y in 0..height {
            grid[y * width + x] = d[y];
        }
    }
    for y in 0..height {
        f[..width].copy_from_slice(&grid[y * width..(y + 1) * width]);
        dt1d(&f[..width], &mut d[..width], &mut v, &mut z);
        grid[y * width..(y + 1) * width].copy_from_slice(&d[..width]);
    }
    grid.into_iter().map(|g| if g >= BIG * 0.5 { f32::INFINITY } else { g.sqrt() }).collect()
}

/// One-dimensional squared distance transform of sampled function `f` (lower envelope of parabolas).
fn dt1d(f: &[f32], d: &mut [f32], v: &mut [usize], z: &mut [f32]) {
    let n = f.len();
    if n == 0 {
        return;
    }
    let mut k = 0usize;
    v[0] = 0;
    z[0] = f32::NEG_INFINITY;
    z[1] = f32::INFINITY;
    for q in 1..n {
        let qf = q as f32;
        loop {
            let p = v[k];
            let pf = p as f32;
            let s = ((f[q] + qf * qf) - (f[p] + pf * pf)) / (2.0 * qf - 2.0 * pf);
            if s <= z[k] && k > 0 {
                k -= 1;
                continue;
            }
            if s <= z[k] {
                // k == 0: replace the first parabola.
                v[0] = q;
                z[0] = f32::NEG_INFINITY;
                z[1] = f32::INFINITY;
                break;
            }
            k += 1;
            v[k] = q;
            z[k] = s;
            z[k + 1] = f32::INFINITY;
            break;
        }
    }
    k = 0;
    for (q, out) in d.iter_mut().enumerate().take(n) {
        let qf = q as f32;
        while z[k + 1] < qf {
            k += 1;
        }
        let p = v[k] as f32;
        *out = (qf - p) * (qf - p) + f[v[k]];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_centres_round_trip() {
        let frame =
            GridFrame { origin_x_m: -1.0, origin_y_m: 2.0, resolution_m: 0.05, width: 40, height: 20 };
        let (c, r) = frame.cell_from_world(-0.97, 2.51).unwrap();
        assert_eq!((c, r), (0, 10));
        let [x, y] = frame.world_from_cell(c, r);
        assert!((x + 0.975).abs() < 1e-9 && (y - 2.525).abs() < 1e-9);
        assert!(frame.cell_from_world(-1.01, 2.5).is_none());
        assert!(frame.cell_from_world(1.0, 2.5).is_none());
    }

    #[test]
    fn distance_transform_matches_brute_force() {
        let (w, h) = (13, 9);
        let source: Vec<bool> = (0..w * h).map(|i| i % 17 == 3 || i == 50).collect();
        let dt = distance_transform(w, h, &source);
        for y in 0..h {
            for x in 0..w {
                let mut best = f32::INFINITY;
                for (j, &s) in source.iter().enumerate() {
                    if s {
                        let (sx, sy) = ((j % w) as f32, (j / w) as f32);
                        best = best.min(((sx - x as f32).powi(2) + (sy - y as f32).powi(2)).sqrt());
                    }
                }
                assert!((dt[y * w + x] - best).abs() < 1e-4, "({x},{y}): {} vs {best}", dt[y * w + x]);
            }
        }
        assert!(distance_transform(3, 3, &[false; 9]).iter().all(|d| d.is_infinite()));
    }
}
