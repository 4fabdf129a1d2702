//! Drawing on top-down images for trajectory-selection options (GST style: a red trajectory on the binary
//! top-down, a blue dot at its start), and comparisons between plans and paths.

use gst_core::{Image, RgbImage};

/// GST's trajectory colour and start-dot colour.
pub const TRAJECTORY_RED: [u8; 3] = [240, 110, 110];
pub const START_BLUE: [u8; 3] = [110, 110, 250];

/// The binary top-down as an RGB image (white free floor, black elsewhere).
pub fn rgb_from_binary(binary: &Image<u8>) -> RgbImage {
    let data = binary.data().iter().map(|v| [*v, *v, *v]).collect();
    Image::from_vec(binary.width(), binary.height(), data).unwrap_or_else(|_| Image::filled(1, 1, [0, 0, 0]))
}

/// Fills a disc of `radius_px` at a pixel position.
pub fn fill_disc(image: &mut RgbImage, center: [f64; 2], radius_px: f64, color: [u8; 3]) {
    let (w, h) = (image.width() as i64, image.height() as i64);
    let r = radius_px.ceil() as i64;
    let (cx, cy) = (center[0].floor() as i64, center[1].floor() as i64);
    for y in (cy - r).max(0)..=(cy + r).min(h - 1) {
        for x in (cx - r).max(0)..=(cx + r).min(w - 1) {
            let (dx, dy) = (x as f64 + 0.5 - center[0], y as f64 + 0.5 - center[1]);
            if dx * dx + dy * dy <= radius_px * radius_px
                && let Some(p) = image.get_mut(x as u32, y as u32)
            {
                *p = color;
            }
        }
    }
}

/// Draws a polyline of pixel positions with round joins, `width_px` wide.
pub fn draw_polyline(image: &mut RgbImage, points: &[[f64; 2]], width_px: f64, color: [u8; 3]) {
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let length = ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
        let steps = (length / 0.5).ceil().max(1.0) as usize;
        for k in 0..=steps {
            let t = k as f64 / steps as f64;
            fill_disc(image, [a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])], width_px / 2.0, color);
        }
    }
    if points.len() == 1 {
        fill_disc(image, points[0], width_px / 2.0, color);
    }
}

/// Intersection over union of the white (non-zero) pixels of two equally sized binary images.
pub fn binary_iou(a: &Image<u8>, b: &Image<u8>) -> f64 {
    let (mut both, mut either) = (0usize, 0usize);
    for (x, y) in a.data().iter().zip(b.data()) {
        let (x, y) = (*x > 127, *y > 127);
        both += usize::from(x && y);
        either += usize::from(x || y);
    }
    if a.width() != b.width() || a.height() != b.height() {
        return 0.0;
    }
    both as f64 / either.max(1) as f64
}

/// The discrete Fréchet distance between two polylines (Eiter and Mannila 1994), in their units.
pub fn discrete_frechet(p: &[[f64; 2]], q: &[[f64; 2]]) -> f64 {
    if p.is_empty() || q.is_empty() {
        return f64::INFINITY;
    }
    let d = |a: [f64; 2], b: [f64; 2]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    let mut previous = vec![0.0f64; q.len()];
    let mut current = vec![0.0f64; q.len()];
    for (i, &pi) in p.iter().enumerate() {
        for (j, &qj) in q.iter().enumerate() {
            let cost = d(pi, qj);
            current[j] = match (i, j) {
                (0, 0) => cost,
                (0, _) => current[j - 1].max(cost),
                (_, 0) => previous[0].max(cost),
                _ => previous[j].min(previous[j - 1]).min(current[j - 1]).max(cost),
            };
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[q.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frechet_of_parallel_lines_is_their_offset_and_order_matters() {
        let p = [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]];
        let q = [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]];
        assert!((discrete_frechet(&p, &q) - 1.0).abs() < 1e-12);
        let reversed: Vec<[f64; 2]> = p.iter().rev().copied().collect();
        assert!((discrete_frechet(&p, &reversed) - 2.0).abs() < 1e-12);
        assert_eq!(discrete_frechet(&p, &p), 0.0);
    }

    #[test]
    fn polyline_and_disc_stay_inside_the_image() {
        let mut image = Image::filled(20, 10, [0u8, 0, 0]);
        draw_polyline(&mut image, &[[-5.0, -5.0], [25.0, 15.0]], 3.0, TRAJECTORY_RED);
        fill_disc(&mut image, [19.5, 9.5], 4.0, START_BLUE);
        assert!(image.data().contains(&TRAJECTORY_RED));
        assert_eq!(image.get(19, 9), Some(&START_BLUE));
    }

    #[test]
    fn iou_of_identical_and_disjoint_images() {
        let a = Image::from_vec(2, 1, vec![255u8, 0]).expect("2x1");
        let b = Image::from_vec(2, 1, vec![0u8, 255]).expect("2x1");
        assert_eq!(binary_iou(&a, &a), 1.0);
        assert_eq!(binary_iou(&a, &b), 0.0);
    }
}
