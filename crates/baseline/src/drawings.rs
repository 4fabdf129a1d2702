//! Reading the drawings on trajectory-selection options: a red polyline (the trajectory) with a blue disc at
//! its start, on a top-down image; and comparing such a drawing with a path we estimated, in pixels.
//!
//! Colours are classified loosely (red: R high and well above G and B; blue: B high and well above R and
//! G), so antialiased or compressed drawings work too; black and white plan pixels are neither.

use gst_core::RgbImage;

/// The trajectory drawn on an option image.
#[derive(Clone, Debug, PartialEq)]
pub struct TrajectoryDrawing {
    pub width: u32,
    pub height: u32,
    /// Pixels of the red line (x, y), row-major order.
    pub line: Vec<[u32; 2]>,
    /// Centre of the blue start disc, pixels; `None` when the image has no blue.
    pub start: Option<[f64; 2]>,
    /// Distance (pixels, chamfer 3-4 / 3) from every pixel to the nearest line pixel, row-major.
    distance: Vec<f32>,
}

fn is_red([r, g, b]: [u8; 3]) -> bool {
    r >= 150 && i32::from(r) - i32::from(g.max(b)) >= 60
}

fn is_blue([r, g, b]: [u8; 3]) -> bool {
    b >= 150 && i32::from(b) - i32::from(r.max(g)) >= 60
}

impl TrajectoryDrawing {
    /// The drawing of an option image, or `None` when it has no red line.
    pub fn read(image: &RgbImage) -> Option<Self> {
        let (w, h) = (image.width(), image.height());
        let mut line = Vec::new();
        let (mut sx, mut sy, mut blue) = (0.0, 0.0, 0usize);
        for (k, &pixel) in image.data().iter().enumerate() {
            let (x, y) = ((k % w as usize) as u32, (k / w as usize) as u32);
            if is_red(pixel) {
                line.push([x, y]);
            } else if is_blue(pixel) {
                sx += f64::from(x);
                sy += f64::from(y);
                blue += 1;
            }
        }
        if line.is_empty() {
            return None;
        }
        let start = (blue > 0).then(|| [sx / blue as f64, sy / blue as f64]);
        let distance = chamfer(w as usize, h as usize, &line);
        Some(TrajectoryDrawing { width: w, height: h, line, start, distance })
    }

    /// Distance in pixels from (x, y) to the line (outside the image: to the nearest border pixel, plus the
    /// way out).
    pub fn distance_to_line(&self, p: [f64; 2]) -> f64 {
        let x = p[0].round().clamp(0.0, f64::from(self.width - 1));
        let y = p[1].round().clamp(0.0, f64::from(self.height - 1));
        let outside = ((p[0] - x).powi(2) + (p[1] - y).powi(2)).sqrt();
        f64::from(self.distance[y as usize * self.width as usize + x as usize]) + outside
    }

    /// How badly `path` (pixels, in order, first = start) matches this drawing: the mean distance of the
    /// path's points to the line, plus the mean distance of the line's pixels to the path (so a path
    /// covering part of the line scores worse than one covering all of it), plus the distance between the
    /// starts. Lower is better; `f64::INFINITY` for an empty path.
    pub fn mismatch(&self, path: &[[f64; 2]]) -> f64 {
        if path.is_empty() {
            return f64::INFINITY;
        }
        let to_line = path.iter().map(|&p| self.distance_to_line(p)).sum::<f64>() / path.len() as f64;
        // Line → path: a subsample of the line's pixels to the polyline.
        let step = (self.line.len() / 400).max(1);
        let samples: Vec<f64> = self
            .line
            .iter()
            .step_by(step)
            .map(|&[x, y]| distance_to_polyline([f64::from(x), f64::from(y)], path))
            .collect();
        let to_path = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
        let start = match self.start {
            Some(s) => ((s[0] - path[0][0]).powi(2) + (s[1] - path[0][1]).powi(2)).sqrt(),
            None => 0.0,
        };
        to_line + to_path + start
    }
}

/// Distance from `p` to a polyline.
pub fn distance_to_polyline(p: [f64; 2], path: &[[f64; 2]]) -> f64 {
    if path.len() == 1 {
        return ((p[0] - path[0][0]).powi(2) + (p[1] - path[0][1]).powi(2)).sqrt();
    }
    path.windows(2)
        .map(|s| {
            let (a, b) = (s[0], s[1]);
            let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
            let len2 = dx * dx + dy * dy;
            let t = if len2 > 0.0 {
                (((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / len2).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let (cx, cy) = (a[0] + t * dx, a[1] + t * dy);
            ((p[0] - cx).powi(2) + (p[1] - cy).powi(2)).sqrt()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Chamfer (3-4) distance transform to the `seeds`, in pixels.
fn chamfer(w: usize, h: usize, seeds: &[[u32; 2]]) -> Vec<f32> {
    const FAR: f32 = 1e9;
    let mut d = vec![FAR; w * h];
    for &[x, y] in seeds {
        d[y as usize * w + x as usize] = 0.0;
    }
    let (a, b) = (1.0f32, 4.0f32 / 3.0);
    for y in 0..h {
        for x in 0..w {
            let mut v = d[y * w + x];
            if x > 0 {
                v = v.min(d[y * w + x - 1] + a);
            }
            if y > 0 {
                v = v.min(d[(y - 1) * w + x] + a);
                if x > 0 {
                    v = v.min(d[(y - 1) * w + x - 1] + b);
                }
                if x + 1 < w {
                    v = v.min(d[(y - 1) * w + x + 1] + b);
                }
            }
            d[y * w + x] = v;
        }
    }
    for y in (0..h).rev() {
        for x in (0..w).rev() {
            let mut v = d[y * w + x];
            if x + 1 < w {
                v = v.min(d[y * w + x + 1] + a);
            }
            if y + 1 < h {
                v = v.min(d[(y + 1) * w + x] + a);
                if x + 1 < w {
                    v = v.min(d[(y + 1) * w + x + 1] + b);
                }
                if x > 0 {
                    v = v.min(d[(y + 1) * w + x - 1] + b);
                }
            }
            d[y * w + x] = v;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::Image;

    /// A white/black plan with a red path (3 px wide) through `points` and a blue disc at the first.
    fn option(points: &[[f64; 2]]) -> RgbImage {
        let (w, h) = (120u32, 80u32);
        let mut data = vec![[255u8, 255, 255]; (w * h) as usize];
        for (k, p) in data.iter_mut().enumerate() {
            if (k as u32 % w) < 10 {
                *p = [0, 0, 0];
            }
        }
        for y in 0..h {
            for x in 0..w {
                let q = [f64::from(x), f64::from(y)];
                let k = (y * w + x) as usize;
                if distance_to_polyline(q, points) <= 1.5 {
                    data[k] = [240, 110, 110];
                }
                if ((q[0] - points[0][0]).powi(2) + (q[1] - points[0][1]).powi(2)).sqrt() <= 4.0 {
                    data[k] = [110, 110, 250];
                }
            }
        }
        Image::from_vec(w, h, data).expect("size")
    }

    #[test]
    fn reads_line_and_start_and_prefers_the_matching_path() {
        let l_path = [[20.0, 20.0], [100.0, 20.0], [100.0, 70.0]];
        let drawing = TrajectoryDrawing::read(&option(&l_path)).expect("a red line");
        let start = drawing.start.expect("a blue start");
        assert!((start[0] - 20.0).abs() < 0.6 && (start[1] - 20.0).abs() < 0.6, "{start:?}");
        assert!(drawing.distance_to_line([60.0, 20.0]) < 1.0);
        assert!((drawing.distance_to_line([60.0, 40.0]) - 18.5).abs() < 2.0);

        let same = drawing.mismatch(&l_path);
        let reversed: Vec<[f64; 2]> = l_path.iter().rev().copied().collect();
        let half = drawing.mismatch(&l_path[..2]);
        let other = drawing.mismatch(&[[20.0, 70.0], [20.0, 20.0], [100.0, 20.0]]);
        assert!(same < 3.0, "{same}");
        assert!(drawing.mismatch(&reversed) > same + 40.0, "the start counts");
        assert!(half > same + 5.0, "covering part of the line is worse: {half} vs {same}");
        assert!(other > same + 10.0, "{other}");
        assert_eq!(drawing.mismatch(&[]), f64::INFINITY);
        // A plain plan has no drawing.
        assert_eq!(
            TrajectoryDrawing::read(&Image::from_vec(4, 4, vec![[255u8, 255, 255]; 16]).expect("size")),
            None
        );
    }
}
