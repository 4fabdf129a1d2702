//! A depth-noise model that makes rendered depth look like a consumer RGB-D sensor's.
//!
//! Rendered depth is exact; SLAM tuned on it would be fooled by real recordings. We model the three effects
//! that matter most to RGB-D odometry, after Nguyen, Izadi and Lovell, "Modeling Kinect Sensor Noise for
//! Improved 3D Reconstruction and Tracking" (3DIMPVT 2012):
//!
//! * **axial noise** growing with the square of the distance, `σ(z) = base + k·z²` (Gaussian);
//! * **missing depth at discontinuities**: structured-light sensors often return nothing at object borders,
//!   so pixels next to a depth jump drop out with some probability;
//! * **quantisation** to the step of the stored format (TUM RGB-D PNGs store `depth × 5000` as 16 bits),
//!   and a maximum range beyond which nothing is returned.
//!
//! The model is applied per pixel with independent noise (no spatial correlation, no lateral noise).
//! It is deterministic for a seed and independent of the number of threads: one value is drawn from the
//! caller's RNG and seeds a separate ChaCha stream for every image row, so rows can be processed in parallel.

use gst_core::DepthImage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::SimError;

/// Parameters of the depth-noise model. Distances are metres along the optical axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DepthNoise {
    /// Axial standard deviation at zero distance. Default 0.0012 m (Nguyen et al. 2012).
    pub axial_sigma_base_m: f64,
    /// Growth of the axial standard deviation with the squared distance: `σ(z) = base + k·z²`.
    /// Default 0.0019 m⁻¹ (Nguyen et al. fit `0.0012 + 0.0019·(z − 0.4)²`; dropping the 0.4 m offset
    /// overstates σ by under 1 mm below 1 m and by about 6 mm at 4 m, i.e. errs on the noisy side).
    pub axial_sigma_per_m2: f64,
    /// Depth is rounded to multiples of this step; 0 disables rounding. Default 1/5000 m, the resolution of
    /// TUM RGB-D depth PNGs.
    pub quantisation_m: f64,
    /// Probability that an edge pixel (see `edge_threshold_m`) returns no depth. Default 0.5.
    pub edge_dropout_probability: f64,
    /// A pixel is an edge when the clean depth of one of its four neighbours differs by more than this,
    /// or the neighbour has no depth. Default 0.1 m: object borders, but not a floor seen at a grazing
    /// angle closer than about 7 m.
    pub edge_threshold_m: f64,
    /// Pixels farther than this return no depth. Default 8 m: whole rooms stay visible, the far end of
    /// long corridors does not (σ is already about 12 cm there).
    pub max_range_m: f64,
}

impl Default for DepthNoise {
    fn default() -> Self {
        Self {
            axial_sigma_base_m: 0.0012,
            axial_sigma_per_m2: 0.0019,
            quantisation_m: 1.0 / 5000.0,
            edge_dropout_probability: 0.5,
            edge_threshold_m: 0.1,
            max_range_m: 8.0,
        }
    }
}

impl DepthNoise {
    /// Noise-free: no noise, no dropout, no rounding; only the range limit applies.
    pub fn none() -> Self {
        Self {
            axial_sigma_base_m: 0.0,
            axial_sigma_per_m2: 0.0,
            quantisation_m: 0.0,
            edge_dropout_probability: 0.0,
            ..Self::default()
        }
    }

    /// Standard deviation of the axial noise at depth `z_m`.
    pub fn axial_sigma_m(&self, z_m: f64) -> f64 {
        self.axial_sigma_base_m + self.axial_sigma_per_m2 * z_m * z_m
    }

    pub fn validate(&self) -> Result<(), SimError> {
        let non_negative = [
            ("axial_sigma_base_m", self.axial_sigma_base_m),
            ("axial_sigma_per_m2", self.axial_sigma_per_m2),
            ("quantisation_m", self.quantisation_m),
            ("edge_threshold_m", self.edge_threshold_m),
        ];
        for (name, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return Err(SimError::Config(format!(
                    "depth noise: {name} must be finite and ≥ 0, got {value}"
                )));
            }
        }
        let p = self.edge_dropout_probability;
        if !(0.0..=1.0).contains(&p) {
            return Err(SimError::Config(format!(
                "depth noise: edge_dropout_probability must be in [0, 1], got {p}"
            )));
        }
        if !(self.max_range_m > 0.0) {
            return Err(SimError::Config(format!(
                "depth noise: max_range_m must be > 0, got {}",
                self.max_range_m
            )));
        }
        Ok(())
    }

    /// A noisy copy of a clean depth image. Missing pixels (0) stay missing; pixels beyond the maximum range
    /// and dropped edge pixels become 0; noise never makes a valid pixel negative (it becomes 0 instead).
    /// Call [`Self::validate`] first: invalid parameters do not panic but give meaningless output.
    pub fn apply(&self, depth: &DepthImage, rng: &mut impl Rng) -> DepthImage {
        let seed: u64 = rng.r#gen();
        let width = depth.width() as usize;
        let clean = depth.data();
        let mut noisy = depth.clone();
        if width == 0 {
            return noisy;
        }
        let height = clean.len() / width;
        noisy.data_mut().par_chunks_mut(width).enumerate().for_each(|(y, row)| {
            let mut row_rng = ChaCha8Rng::seed_from_u64(seed);
            row_rng.set_stream(y as u64);
            let mut gaussian = Gaussian::default();
            for (x, out) in row.iter_mut().enumerate() {
                // Draw the same randomness for every pixel, so a pixel's noise does not depend on others.
                let dropout_draw: f64 = row_rng.r#gen();
                let standard_normal = gaussian.sample(&mut row_rng);
                let z = f64::from(clean[y * width + x]);
                if !(z > 0.0) || z > self.max_range_m {
                    *out = 0.0;
                    continue;
                }
                if self.is_edge(clean, width, height, x, y, z) && dropout_draw < self.edge_dropout_probability
                {
                    *out = 0.0;
                    continue;
                }
                let mut noisy_z = z + self.axial_sigma_m(z) * standard_normal;
                if self.quantisation_m > 0.0 {
                    noisy_z = (noisy_z / self.quantisation_m).round() * self.quantisation_m;
                }
                *out = if noisy_z > 0.0 { noisy_z as f32 } else { 0.0 };
            }
        });
        noisy
    }

    fn is_edge(&self, clean: &[f32], width: usize, height: usize, x: usize, y: usize, z: f64) -> bool {
        let neighbours = [
            (x > 0).then(|| y * width + x - 1),
            (x + 1 < width).then(|| y * width + x + 1),
            (y > 0).then(|| (y - 1) * width + x),
            (y + 1 < height).then(|| (y + 1) * width + x),
        ];
        neighbours.into_iter().flatten().any(|i| {
            let neighbour = f64::from(clean[i]);
            !(neighbour > 0.0) || (neighbour - z).abs() > self.edge_threshold_m
        })
    }
}

/// Standard normal samples by the Box–Muller transform, which yields them in pairs.
#[derive(Default)]
struct Gaussian {
    spare: Option<f64>,
}

impl Gaussian {
    fn sample(&mut self, rng: &mut impl Rng) -> f64 {
        if let Some(value) = self.spare.take() {
            return value;
        }
        // 1 - [0, 1) is in (0, 1]: the logarithm stays finite.
        let radius = (-2.0 * (1.0 - rng.r#gen::<f64>()).ln()).sqrt();
        let angle = std::f64::consts::TAU * rng.r#gen::<f64>();
        self.spare = Some(radius * angle.sin());
        radius * angle.cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gst_core::Image;

    fn flat(width: u32, height: u32, z: f32) -> DepthImage {
        Image::filled(width, height, z)
    }

    fn measured_sigma(noise: &DepthNoise, z: f32, seed: u64) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let noisy = noise.apply(&flat(320, 256, z), &mut rng);
        let values: Vec<f64> = noisy.data().iter().map(|&v| f64::from(v)).filter(|&v| v > 0.0).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
    }

    #[test]
    fn sigma_grows_with_squared_distance() {
        let noise =
            DepthNoise { quantisation_m: 0.0, edge_dropout_probability: 0.0, ..DepthNoise::default() };
        for z in [1.0f32, 4.0] {
            let expected = noise.axial_sigma_m(f64::from(z));
            let measured = measured_sigma(&noise, z, 7);
            assert!((measured / expected - 1.0).abs() < 0.03, "z={z}: σ {measured} vs {expected}");
        }
        let ratio = measured_sigma(&noise, 4.0, 8) / measured_sigma(&noise, 1.0, 9);
        let expected_ratio = (0.0012 + 0.0019 * 16.0) / (0.0012 + 0.0019);
        assert!((ratio / expected_ratio - 1.0).abs() < 0.05, "ratio {ratio} vs {expected_ratio}");
    }

    #[test]
    fn zeros_stay_zero_and_far_pixels_vanish() {
        let mut depth = flat(64, 48, 2.0);
        for x in 0..64 {
            if let Some(v) = depth.get_mut(x, 10) {
                *v = 0.0;
            }
            if let Some(v) = depth.get_mut(x, 30) {
                *v = 9.0;
            }
        }
        let noise = DepthNoise { edge_dropout_probability: 0.0, ..DepthNoise::default() };
        let noisy = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(1));
        for x in 0..64 {
            assert_eq!(noisy.get(x, 10), Some(&0.0));
            assert_eq!(noisy.get(x, 30), Some(&0.0));
            assert!(noisy.get(x, 20).is_some_and(|&v| v > 1.8 && v < 2.2));
        }
    }

    #[test]
    fn edges_drop_out() -> Result<(), gst_core::CoreError> {
        // Left half at 1 m, right half at 3 m: the two columns at the jump are edges.
        let (width, height) = (64u32, 200u32);
        let data = (0..width * height).map(|i| if i % width < 32 { 1.0 } else { 3.0 }).collect();
        let depth = DepthImage::from_vec(width, height, data)?;
        let noise = DepthNoise { edge_dropout_probability: 0.5, ..DepthNoise::default() };
        let noisy = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(3));
        let dropped = |x: u32| (0..height).filter(|&y| noisy.get(x, y) == Some(&0.0)).count() as f64;
        for x in [31, 32] {
            let fraction = dropped(x) / f64::from(height);
            assert!((fraction - 0.5).abs() < 0.15, "column {x}: {fraction} dropped");
        }
        assert_eq!(dropped(10) + dropped(50), 0.0, "interior pixels never drop out");
        let always = DepthNoise { edge_dropout_probability: 1.0, ..DepthNoise::default() };
        let noisy = always.apply(&depth, &mut ChaCha8Rng::seed_from_u64(3));
        assert!((0..height).all(|y| noisy.get(31, y) == Some(&0.0) && noisy.get(32, y) == Some(&0.0)));
        Ok(())
    }

    #[test]
    fn quantises_to_the_step() {
        let noise = DepthNoise::default();
        let noisy = noise.apply(&flat(32, 32, 1.5), &mut ChaCha8Rng::seed_from_u64(4));
        for &v in noisy.data() {
            let steps = f64::from(v) * 5000.0;
            assert!((steps - steps.round()).abs() < 1e-3, "{v} is not a multiple of 1/5000");
        }
    }

    #[test]
    fn same_seed_same_noise_regardless_of_threads() -> Result<(), rayon::ThreadPoolBuildError> {
        let depth = flat(97, 61, 2.5);
        let noise = DepthNoise::default();
        let a = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(11));
        let b = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(11));
        assert_eq!(a, b);
        let single = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
        let c = single.install(|| noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(11)));
        assert_eq!(a, c);
        let d = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(12));
        assert_ne!(a, d);
        Ok(())
    }

    #[test]
    fn validate_rejects_bad_parameters() {
        assert!(DepthNoise::default().validate().is_ok());
        assert!(DepthNoise::none().validate().is_ok());
        let negative = DepthNoise { axial_sigma_base_m: -0.001, ..DepthNoise::default() };
        assert!(negative.validate().is_err());
        let negative_k = DepthNoise { axial_sigma_per_m2: -1.0, ..DepthNoise::default() };
        assert!(negative_k.validate().is_err());
        let probability = DepthNoise { edge_dropout_probability: 1.5, ..DepthNoise::default() };
        assert!(probability.validate().is_err());
        let range = DepthNoise { max_range_m: f64::NAN, ..DepthNoise::default() };
        assert!(range.validate().is_err());
    }
}
