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
//! Beyond those, the sensor profiles ([`DepthNoise::kinect`], [`DepthNoise::d435`]) turn on the effects a
//! real camera adds and that `DepthNoise::default()` leaves off (so that its output is unchanged):
//!
//! * **disparity-style quantisation**: triangulating sensors measure disparity in fixed sub-pixel steps,
//!   so the depth step grows with the square of the distance (`step(z) = s·z²`);
//! * a **minimum range** below which nothing is returned;
//! * **dropouts on dark surfaces** (the projected infrared pattern is absorbed), on **glossy highlights**
//!   (near-white, saturated colour pixels stand in for specular reflections, which send the pattern away),
//!   and at **oblique incidence** (surfaces seen almost edge-on return too little light);
//! * **colour↔depth misregistration**: the depth image is shifted by whole pixels against the colour image,
//!   the residual of a factory calibration.
//!
//! Sources of each profile's numbers are given on the profile constructors and in `docs/protocol.md`.
//!
//! The model is applied per pixel with independent noise (no spatial correlation, no lateral noise).
//! It is deterministic for a seed and independent of the number of threads: one value is drawn from the
//! caller's RNG and seeds a separate ChaCha stream for every image row, so rows can be processed in parallel.

use gst_core::{DepthImage, RgbImage};
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
    /// Pixels nearer than this return no depth. Default 0 (off).
    pub min_range_m: f64,
    /// Disparity-style quantisation: depth is rounded to steps of `s·z²` metres (after the fixed
    /// `quantisation_m`). Default 0 (off).
    pub disparity_step_per_m: f64,
    /// Probability that a pixel whose colour luma (0–255, BT.601) is at most `dark_luma_max` returns no
    /// depth. Needs the colour image ([`DepthNoise::apply_sensor`]). Default 0 (off).
    pub dark_dropout_probability: f64,
    /// Luma at or below which a pixel counts as dark. Default 25.
    pub dark_luma_max: f64,
    /// Probability that a pixel whose colour luma is at least `glossy_luma_min` (a specular highlight)
    /// returns no depth. Needs the colour image. Default 0 (off).
    pub glossy_dropout_probability: f64,
    /// Luma at or above which a pixel counts as a highlight. Default 250.
    pub glossy_luma_min: f64,
    /// Probability that a pixel whose surface is seen at an incidence angle above
    /// `oblique_incidence_deg` (angle between the viewing ray and the surface normal, estimated from the
    /// depth of its neighbours) returns no depth. Needs the focal length. Default 0 (off).
    pub oblique_dropout_probability: f64,
    /// Incidence angle above which a surface counts as oblique, degrees. Default 80.
    pub oblique_incidence_deg: f64,
    /// The depth image is shifted by this many whole pixels `[x, y]` against the colour image (a depth
    /// pixel at `(x, y)` is read at `(x − dx, y − dy)`; pixels shifted in from outside are missing).
    /// Default `[0, 0]`.
    pub registration_offset_px: [i32; 2],
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
            min_range_m: 0.0,
            disparity_step_per_m: 0.0,
            dark_dropout_probability: 0.0,
            dark_luma_max: 25.0,
            glossy_dropout_probability: 0.0,
            glossy_luma_min: 250.0,
            oblique_dropout_probability: 0.0,
            oblique_incidence_deg: 80.0,
            registration_offset_px: [0, 0],
        }
    }
}

/// The named depth-sensor profiles of `gst generate --depth-sensor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SensorProfile {
    /// A structured-light sensor of the Kinect v1 kind (the camera of the TUM RGB-D benchmark).
    Kinect,
    /// An active-stereo sensor of the Intel RealSense D435 kind.
    D435,
    /// The renderer's exact z-buffer, untouched (an oracle: no real camera measures depth like this).
    Perfect,
}

impl SensorProfile {
    pub const NAMES: [&'static str; 3] = ["kinect", "d435", "perfect"];

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "kinect" => Some(Self::Kinect),
            "d435" => Some(Self::D435),
            "perfect" => Some(Self::Perfect),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Kinect => "kinect",
            Self::D435 => "d435",
            Self::Perfect => "perfect",
        }
    }

    /// The profile's model, or `None` for `Perfect` (depth passes through untouched).
    pub fn model(self) -> Option<DepthNoise> {
        match self {
            Self::Kinect => Some(DepthNoise::kinect()),
            Self::D435 => Some(DepthNoise::d435()),
            Self::Perfect => None,
        }
    }
}

/// The depth sensor of a bench export: a named profile or a model given in full. In JSON it is the
/// profile's name (`"kinect"`) or a [`DepthNoise`] object (missing fields take `DepthNoise::default()`'s).
#[derive(Clone, Debug, PartialEq)]
pub enum DepthSensor {
    Profile(SensorProfile),
    Model(DepthNoise),
}

impl Default for DepthSensor {
    /// The bench export's default: the Kinect-like profile.
    fn default() -> Self {
        Self::Profile(SensorProfile::Kinect)
    }
}

impl DepthSensor {
    /// A profile's name, or a JSON file holding a [`DepthNoise`] (validated; errors name the file).
    pub fn from_name_or_file(value: &str) -> Result<Self, SimError> {
        if let Some(profile) = SensorProfile::from_name(value) {
            return Ok(Self::Profile(profile));
        }
        let path = std::path::Path::new(value);
        if !path.exists() {
            return Err(SimError::Config(format!(
                "unknown depth sensor {value:?}: expected one of {} or a JSON file of the noise model",
                SensorProfile::NAMES.join(", ")
            )));
        }
        Ok(Self::Model(DepthNoise::from_file(path)?))
    }

    /// The model applied to rendered depth, or `None` when depth passes through untouched.
    pub fn model(&self) -> Option<DepthNoise> {
        match self {
            Self::Profile(profile) => profile.model(),
            Self::Model(model) => Some(model.clone()),
        }
    }

    /// A short name for tables and logs: the profile's name or "custom".
    pub fn name(&self) -> &'static str {
        match self {
            Self::Profile(profile) => profile.name(),
            Self::Model(_) => "custom",
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        match self {
            Self::Profile(_) => Ok(()),
            Self::Model(model) => model.validate(),
        }
    }
}

impl Serialize for DepthSensor {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Profile(profile) => profile.serialize(serializer),
            Self::Model(model) => model.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for DepthSensor {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Name(String),
            Model(DepthNoise),
        }
        match Repr::deserialize(deserializer)? {
            Repr::Name(name) => SensorProfile::from_name(&name).map(Self::Profile).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown depth sensor {name:?}: expected one of {}",
                    SensorProfile::NAMES.join(", ")
                ))
            }),
            Repr::Model(model) => {
                model.validate().map_err(serde::de::Error::custom)?;
                Ok(Self::Model(model))
            }
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

    /// A structured-light sensor of the Kinect v1 kind.
    ///
    /// * axial noise `0.0012 + 0.0019·z²` m: Nguyen, Izadi and Lovell, 3DIMPVT 2012 (their fit, without
    ///   its 0.4 m offset);
    /// * depth resolution `2.85·10⁻³·z²` m (about 7 cm at 5 m) from 1/8-pixel disparity steps, and a working
    ///   range of 0.5–5 m: Khoshelham and Elberink, "Accuracy and Resolution of Kinect Depth Data for Indoor
    ///   Mapping Applications", Sensors 12(2), 2012;
    /// * half of the pixels at depth discontinuities missing, as in Nguyen et al.'s edge statistics;
    /// * dark surfaces (luma ≤ 25) and specular highlights (luma ≥ 250) missing half of the time, surfaces
    ///   past 75° of incidence missing half of the time: the failure cases Khoshelham and Elberink and
    ///   Nguyen et al. describe (no paper gives one rate for all materials; 0.5 is a middle value);
    /// * a one-pixel colour↔depth misregistration: the residual Herrera, Kannala and Heikkilä report for
    ///   factory-calibrated Kinects ("Joint Depth and Color Camera Calibration with Distortion
    ///   Correction", TPAMI 2012).
    pub fn kinect() -> Self {
        // Axial noise, 0.2 mm steps, edge dropouts and the luma thresholds are the default model's.
        Self {
            max_range_m: 5.0,
            min_range_m: 0.5,
            disparity_step_per_m: 2.85e-3,
            dark_dropout_probability: 0.5,
            glossy_dropout_probability: 0.5,
            oblique_dropout_probability: 0.5,
            oblique_incidence_deg: 75.0,
            registration_offset_px: [1, 0],
            ..Self::default()
        }
    }

    /// An active-stereo sensor of the Intel RealSense D435 kind.
    ///
    /// * stereo depth error `σ(z) = z²·σ_d / (f·b)` with baseline b = 50 mm, f ≈ 421 px at 848×480 and a
    ///   sub-pixel disparity error σ_d ≈ 0.08 px: about 0.0038·z² m, i.e. under 2 % at 2 m as the datasheet
    ///   states (Intel RealSense D400 Series Product Family Datasheet; Intel's "Tuning depth cameras for
    ///   best performance" white paper gives the formula);
    /// * disparity steps of 1/32 px: `z²/(32·f·b)` ≈ 0.0015·z² m; depth stored in 1 mm units;
    /// * range 0.3–10 m (datasheet minimum depth and its typical maximum);
    /// * stereo occlusion shadows at discontinuities (30 % of edge pixels), fewer dark-surface losses than a
    ///   structured-light sensor (the left/right images still carry texture; 20 %), highlights and
    ///   oblique surfaces past 75° missing half of the time;
    /// * a one-pixel colour↔depth misregistration (the colour camera sits beside the stereo pair).
    pub fn d435() -> Self {
        Self {
            axial_sigma_base_m: 0.001,
            axial_sigma_per_m2: 0.0038,
            quantisation_m: 0.001,
            edge_dropout_probability: 0.3,
            max_range_m: 10.0,
            min_range_m: 0.3,
            disparity_step_per_m: 0.0015,
            dark_dropout_probability: 0.2,
            glossy_dropout_probability: 0.5,
            oblique_dropout_probability: 0.5,
            oblique_incidence_deg: 75.0,
            registration_offset_px: [1, 0],
            ..Self::default()
        }
    }

    /// Reads a model from a JSON file (missing fields take `DepthNoise::default()`'s) and validates it;
    /// errors name the file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, SimError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| SimError::Io { path: path.into(), source })?;
        let model: Self = serde_json::from_str(&text)
            .map_err(|error| SimError::Config(format!("depth sensor model {}: {error}", path.display())))?;
        model
            .validate()
            .map_err(|error| SimError::Config(format!("depth sensor model {}: {error}", path.display())))?;
        Ok(model)
    }

    /// Whether the model needs the colour image (dark or glossy dropouts).
    pub fn needs_colour(&self) -> bool {
        self.dark_dropout_probability > 0.0 || self.glossy_dropout_probability > 0.0
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
            ("min_range_m", self.min_range_m),
            ("disparity_step_per_m", self.disparity_step_per_m),
            ("dark_luma_max", self.dark_luma_max),
            ("glossy_luma_min", self.glossy_luma_min),
            ("oblique_incidence_deg", self.oblique_incidence_deg),
        ];
        for (name, value) in non_negative {
            if !(value.is_finite() && value >= 0.0) {
                return Err(SimError::Config(format!(
                    "depth noise: {name} must be finite and ≥ 0, got {value}"
                )));
            }
        }
        let probabilities = [
            ("edge_dropout_probability", self.edge_dropout_probability),
            ("dark_dropout_probability", self.dark_dropout_probability),
            ("glossy_dropout_probability", self.glossy_dropout_probability),
            ("oblique_dropout_probability", self.oblique_dropout_probability),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(SimError::Config(format!("depth noise: {name} must be in [0, 1], got {p}")));
            }
        }
        if !(self.max_range_m > self.min_range_m) {
            return Err(SimError::Config(format!(
                "depth noise: max_range_m must be > min_range_m ({}), got {}",
                self.min_range_m, self.max_range_m
            )));
        }
        if self.oblique_incidence_deg > 90.0 {
            return Err(SimError::Config(format!(
                "depth noise: oblique_incidence_deg must be at most 90, got {}",
                self.oblique_incidence_deg
            )));
        }
        if self.registration_offset_px.iter().any(|d| d.unsigned_abs() > 64) {
            return Err(SimError::Config(format!(
                "depth noise: registration_offset_px must be within ±64 pixels, got {:?}",
                self.registration_offset_px
            )));
        }
        Ok(())
    }

    /// A noisy copy of a clean depth image. Missing pixels (0) stay missing; pixels beyond the maximum range
    /// and dropped edge pixels become 0; noise never makes a valid pixel negative (it becomes 0 instead).
    /// Call [`Self::validate`] first: invalid parameters do not panic but give meaningless output.
    /// Effects that need the colour image or the focal length are skipped; see [`Self::apply_sensor`].
    pub fn apply(&self, depth: &DepthImage, rng: &mut impl Rng) -> DepthImage {
        self.apply_inner(depth, None, None, rng)
    }

    /// The whole sensor model: [`Self::apply`] plus the colour-dependent dropouts (dark and glossy pixels,
    /// judged on `colour`, registered with the clean depth), oblique-incidence dropouts (normals from the
    /// depth with focal length `focal_px` and the principal point at the image centre) and the
    /// colour↔depth misregistration. Errors on invalid parameters, on NaN, infinite or negative depth
    /// (naming the pixel), on a colour image of another size and on a focal length that is not positive.
    pub fn apply_sensor(
        &self,
        depth: &DepthImage,
        colour: Option<&RgbImage>,
        focal_px: f64,
        rng: &mut impl Rng,
    ) -> Result<DepthImage, SimError> {
        self.validate()?;
        if !(focal_px.is_finite() && focal_px > 0.0) {
            return Err(SimError::Config(format!(
                "depth sensor: focal length must be > 0 px, got {focal_px}"
            )));
        }
        if let Some(colour) = colour
            && (colour.width() != depth.width() || colour.height() != depth.height())
        {
            return Err(SimError::Config(format!(
                "depth sensor: colour image is {}x{} but depth is {}x{}",
                colour.width(),
                colour.height(),
                depth.width(),
                depth.height()
            )));
        }
        if colour.is_none() && self.needs_colour() {
            return Err(SimError::Config(
                "depth sensor: dark or glossy dropouts need the colour image".to_string(),
            ));
        }
        let width = depth.width().max(1) as usize;
        if let Some(i) = depth.data().iter().position(|z| !(z.is_finite() && *z >= 0.0)) {
            return Err(SimError::Config(format!(
                "depth sensor: depth at pixel ({}, {}) is {}; depth must be finite and ≥ 0 (0 = missing)",
                i % width,
                i / width,
                depth.data()[i]
            )));
        }
        Ok(self.apply_inner(depth, colour, Some(focal_px), rng))
    }

    fn apply_inner(
        &self,
        depth: &DepthImage,
        colour: Option<&RgbImage>,
        focal_px: Option<f64>,
        rng: &mut impl Rng,
    ) -> DepthImage {
        let seed: u64 = rng.r#gen();
        let width = depth.width() as usize;
        let shifted;
        let clean: &[f32] = if self.registration_offset_px == [0, 0] {
            depth.data()
        } else {
            shifted = shift(depth, self.registration_offset_px);
            &shifted
        };
        let mut noisy = depth.clone();
        if width == 0 {
            return noisy;
        }
        let height = clean.len() / width;
        let luma = |i: usize| -> Option<f64> {
            colour
                .and_then(|c| c.data().get(i))
                .map(|[r, g, b]| 0.299 * f64::from(*r) + 0.587 * f64::from(*g) + 0.114 * f64::from(*b))
        };
        let oblique_cos = self.oblique_incidence_deg.to_radians().cos();
        noisy.data_mut().par_chunks_mut(width).enumerate().for_each(|(y, row)| {
            let mut row_rng = ChaCha8Rng::seed_from_u64(seed);
            row_rng.set_stream(y as u64);
            let mut gaussian = Gaussian::default();
            for (x, out) in row.iter_mut().enumerate() {
                // Draw the same randomness for every pixel, so a pixel's noise does not depend on others.
                let dropout_draw: f64 = row_rng.r#gen();
                let standard_normal = gaussian.sample(&mut row_rng);
                let z = f64::from(clean[y * width + x]);
                if !(z > 0.0) || z > self.max_range_m || z < self.min_range_m {
                    *out = 0.0;
                    continue;
                }
                // One draw decides every dropout cause: the pixel survives each cause independently.
                let mut keep = 1.0;
                if self.is_edge(clean, width, height, x, y, z) {
                    keep *= 1.0 - self.edge_dropout_probability;
                }
                if let Some(l) = luma(y * width + x) {
                    if l <= self.dark_luma_max {
                        keep *= 1.0 - self.dark_dropout_probability;
                    }
                    if l >= self.glossy_luma_min {
                        keep *= 1.0 - self.glossy_dropout_probability;
                    }
                }
                if self.oblique_dropout_probability > 0.0
                    && let Some(f) = focal_px
                    && incidence_cos(clean, width, height, x, y, f).is_some_and(|c| c < oblique_cos)
                {
                    keep *= 1.0 - self.oblique_dropout_probability;
                }
                if dropout_draw < 1.0 - keep {
                    *out = 0.0;
                    continue;
                }
                let mut noisy_z = z + self.axial_sigma_m(z) * standard_normal;
                if self.quantisation_m > 0.0 {
                    noisy_z = (noisy_z / self.quantisation_m).round() * self.quantisation_m;
                }
                let step = self.disparity_step_per_m * z * z;
                if step > 0.0 {
                    noisy_z = (noisy_z / step).round() * step;
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

/// The depth image shifted by `[dx, dy]` whole pixels: output `(x, y)` reads input `(x − dx, y − dy)`.
fn shift(depth: &DepthImage, [dx, dy]: [i32; 2]) -> Vec<f32> {
    let (width, height) = (depth.width() as i64, depth.height() as i64);
    let mut out = vec![0.0; depth.data().len()];
    for y in 0..height {
        for x in 0..width {
            let (sx, sy) = (x - i64::from(dx), y - i64::from(dy));
            if (0..width).contains(&sx) && (0..height).contains(&sy) {
                out[(y * width + x) as usize] = depth.data()[(sy * width + sx) as usize];
            }
        }
    }
    out
}

/// Cosine of the angle between the viewing ray through pixel `(x, y)` and the surface normal estimated
/// from its four neighbours (principal point at the image centre); `None` where a neighbour is missing.
fn incidence_cos(
    clean: &[f32],
    width: usize,
    height: usize,
    x: usize,
    y: usize,
    focal_px: f64,
) -> Option<f64> {
    if x == 0 || y == 0 || x + 1 >= width || y + 1 >= height {
        return None;
    }
    let (cx, cy) = (width as f64 / 2.0, height as f64 / 2.0);
    let point = |u: usize, v: usize| -> Option<[f64; 3]> {
        let z = f64::from(clean[v * width + u]);
        (z > 0.0).then(|| [z * (u as f64 - cx) / focal_px, z * (v as f64 - cy) / focal_px, z])
    };
    let (left, right) = (point(x - 1, y)?, point(x + 1, y)?);
    let (up, down) = (point(x, y - 1)?, point(x, y + 1)?);
    let centre = point(x, y)?;
    let a = [right[0] - left[0], right[1] - left[1], right[2] - left[2]];
    let b = [down[0] - up[0], down[1] - up[1], down[2] - up[2]];
    let normal = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
    let norm = |v: [f64; 3]| (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let (n, c) = (norm(normal), norm(centre));
    if !(n > 0.0 && c > 0.0) {
        return None;
    }
    Some((normal[0] * centre[0] + normal[1] * centre[1] + normal[2] * centre[2]).abs() / (n * c))
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
    fn the_default_model_is_unchanged_by_the_sensor_fields() {
        // Colour given but every colour-dependent effect off: the same bytes as `apply`.
        let depth = flat(80, 60, 2.0);
        let colour = Image::filled(80, 60, [10u8, 10, 10]);
        let noise = DepthNoise::default();
        let a = noise.apply(&depth, &mut ChaCha8Rng::seed_from_u64(5));
        let b = noise.apply_sensor(&depth, Some(&colour), 500.0, &mut ChaCha8Rng::seed_from_u64(5));
        assert_eq!(Some(a), b.ok());
    }

    #[test]
    fn range_limits_and_disparity_steps() {
        let noise = DepthNoise {
            axial_sigma_base_m: 0.0,
            axial_sigma_per_m2: 0.0,
            quantisation_m: 0.0,
            min_range_m: 0.5,
            disparity_step_per_m: 2.85e-3,
            ..DepthNoise::default()
        };
        let near = noise.apply(&flat(16, 16, 0.4), &mut ChaCha8Rng::seed_from_u64(1));
        assert!(near.data().iter().all(|&v| v == 0.0), "nearer than the minimum range: missing");
        let far = noise.apply(&flat(16, 16, 4.01), &mut ChaCha8Rng::seed_from_u64(1));
        let step = 2.85e-3 * 4.01 * 4.01;
        for &v in far.data() {
            let steps = f64::from(v) / step;
            assert!((steps - steps.round()).abs() < 1e-3, "{v} is not on the {step} m disparity step");
            assert!((f64::from(v) - 4.01).abs() <= step / 2.0 + 1e-6);
        }
    }

    #[test]
    fn dark_and_glossy_pixels_drop_out() -> Result<(), SimError> {
        let (width, height) = (100u32, 100u32);
        let depth = flat(width, height, 2.0);
        // Left third dark, middle grey, right third a white highlight.
        let data = (0..width * height)
            .map(|i| match i % width {
                0..33 => [5u8, 5, 5],
                33..66 => [128, 128, 128],
                _ => [255, 255, 255],
            })
            .collect();
        let colour = RgbImage::from_vec(width, height, data).map_err(|e| SimError::Config(e.to_string()))?;
        let noise = DepthNoise {
            dark_dropout_probability: 0.5,
            glossy_dropout_probability: 1.0,
            ..DepthNoise::default()
        };
        let noisy = noise.apply_sensor(&depth, Some(&colour), 500.0, &mut ChaCha8Rng::seed_from_u64(2))?;
        let dropped = |xs: std::ops::Range<u32>| {
            let n = xs.len() as f64 * f64::from(height);
            xs.flat_map(|x| (0..height).map(move |y| (x, y)))
                .filter(|&(x, y)| noisy.get(x, y) == Some(&0.0))
                .count() as f64
                / n
        };
        let dark = dropped(1..32);
        assert!((dark - 0.5).abs() < 0.05, "dark: {dark} dropped");
        assert_eq!(dropped(34..65), 0.0, "grey pixels keep their depth");
        assert_eq!(dropped(67..99), 1.0, "highlights always drop at p = 1");
        // Without the colour image these dropouts cannot be judged: an error, not a silent skip.
        assert!(noise.apply_sensor(&depth, None, 500.0, &mut ChaCha8Rng::seed_from_u64(2)).is_err());
        Ok(())
    }

    #[test]
    fn oblique_surfaces_drop_out_and_frontal_ones_do_not() -> Result<(), SimError> {
        let (width, height, focal) = (120u32, 100u32, 100.0);
        // A floor-like plane seen at grazing angles in its far rows: z = h·f / (v − cy) below the centre.
        let data = (0..width * height)
            .map(|i| {
                let v = f64::from(i / width) - f64::from(height) / 2.0;
                if v > 0.5 { (0.3 * focal / v) as f32 } else { 0.0 }
            })
            .collect();
        let floor = DepthImage::from_vec(width, height, data).map_err(|e| SimError::Config(e.to_string()))?;
        let noise = DepthNoise {
            axial_sigma_base_m: 0.0,
            axial_sigma_per_m2: 0.0,
            quantisation_m: 0.0,
            edge_dropout_probability: 0.0,
            max_range_m: 100.0,
            oblique_dropout_probability: 1.0,
            oblique_incidence_deg: 80.0,
            ..DepthNoise::default()
        };
        let noisy = noise.apply_sensor(&floor, None, focal, &mut ChaCha8Rng::seed_from_u64(3))?;
        // Row v sees the floor at incidence atan(f / v): past 80° for v < f·tan(10°) ≈ 17.6.
        let kept = |y: u32| (1..width - 1).filter(|&x| noisy.get(x, y).is_some_and(|&z| z > 0.0)).count();
        assert_eq!(kept(height / 2 + 5), 0, "grazing rows drop out");
        assert_eq!(kept(height - 10), (width - 2) as usize, "steep rows keep their depth");
        let wall = flat(width, height, 2.0);
        let frontal = noise.apply_sensor(&wall, None, focal, &mut ChaCha8Rng::seed_from_u64(3))?;
        assert_eq!(frontal, wall, "a frontal wall is untouched");
        Ok(())
    }

    #[test]
    fn misregistration_shifts_depth_against_colour() -> Result<(), SimError> {
        let (width, height) = (8u32, 4u32);
        let data = (0..width * height).map(|i| 1.0 + (i % width) as f32 * 0.5).collect();
        let depth = DepthImage::from_vec(width, height, data).map_err(|e| SimError::Config(e.to_string()))?;
        let noise = DepthNoise { registration_offset_px: [1, 0], ..DepthNoise::none() };
        let shifted = noise.apply_sensor(&depth, None, 500.0, &mut ChaCha8Rng::seed_from_u64(4))?;
        for y in 0..height {
            assert_eq!(shifted.get(0, y), Some(&0.0), "shifted in from outside: missing");
            for x in 1..width {
                assert_eq!(shifted.get(x, y), depth.get(x - 1, y));
            }
        }
        Ok(())
    }

    #[test]
    fn bad_input_is_an_error_naming_the_value() {
        let mut depth = flat(10, 10, 1.0);
        if let Some(v) = depth.get_mut(3, 7) {
            *v = f32::NAN;
        }
        let noise = DepthNoise::kinect();
        let colour = Image::filled(10, 10, [100u8, 100, 100]);
        let error = noise.apply_sensor(&depth, Some(&colour), 500.0, &mut ChaCha8Rng::seed_from_u64(1));
        let message = error.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("(3, 7)") && message.contains("NaN"), "{message}");
        let mut negative = flat(10, 10, 1.0);
        if let Some(v) = negative.get_mut(0, 0) {
            *v = -1.0;
        }
        assert!(
            noise.apply_sensor(&negative, Some(&colour), 500.0, &mut ChaCha8Rng::seed_from_u64(1)).is_err()
        );
        let small = Image::filled(5, 10, [100u8, 100, 100]);
        assert!(
            noise
                .apply_sensor(&flat(10, 10, 1.0), Some(&small), 500.0, &mut ChaCha8Rng::seed_from_u64(1))
                .is_err()
        );
        assert!(
            noise
                .apply_sensor(&flat(10, 10, 1.0), Some(&colour), 0.0, &mut ChaCha8Rng::seed_from_u64(1))
                .is_err()
        );
    }

    #[test]
    fn profiles_by_name_and_from_files() -> Result<(), Box<dyn std::error::Error>> {
        for name in SensorProfile::NAMES {
            let sensor = DepthSensor::from_name_or_file(name)?;
            assert_eq!(sensor.name(), name);
            sensor.validate()?;
        }
        assert_eq!(DepthSensor::from_name_or_file("perfect")?.model(), None);
        assert!(DepthNoise::kinect().validate().is_ok() && DepthNoise::d435().validate().is_ok());
        let unknown =
            DepthSensor::from_name_or_file("kinetic").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(unknown.contains("kinetic") && unknown.contains("d435"), "{unknown}");
        let dir = std::env::temp_dir().join(format!("gst-noise-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let good = dir.join("good.json");
        std::fs::write(&good, r#"{"axial_sigma_per_m2": 0.003, "registration_offset_px": [0, 1]}"#)?;
        let model = DepthSensor::from_name_or_file(&good.to_string_lossy())?.model();
        assert_eq!(model.map(|m| (m.axial_sigma_per_m2, m.registration_offset_px)), Some((0.003, [0, 1])));
        let bad = dir.join("negative.json");
        std::fs::write(&bad, r#"{"axial_sigma_base_m": -0.01}"#)?;
        let message = DepthSensor::from_name_or_file(&bad.to_string_lossy()).err().map(|e| e.to_string());
        let message = message.unwrap_or_default();
        assert!(message.contains("negative.json") && message.contains("axial_sigma_base_m"), "{message}");
        // In JSON: a name or a model; unknown names and invalid models are refused.
        let named: DepthSensor = serde_json::from_str(r#""d435""#)?;
        assert_eq!(named, DepthSensor::Profile(SensorProfile::D435));
        assert_eq!(serde_json::to_string(&named)?, r#""d435""#);
        assert!(serde_json::from_str::<DepthSensor>(r#""lidar""#).is_err());
        assert!(serde_json::from_str::<DepthSensor>(r#"{"edge_dropout_probability": 2.0}"#).is_err());
        std::fs::remove_dir_all(&dir)?;
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
