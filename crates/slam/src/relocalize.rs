//! Relocalisation of one RGB image without depth against a SLAM map: the building block of every current-view
//! question.
//!
//! The image's ORB descriptors vote for keyframes through the descriptor index ([`crate::index`]); for the
//! best-voted keyframes, brute-force matching to their map points gives 2D–3D correspondences, PnP-RANSAC
//! (OpenCV) a first pose, and matching the map points of nearby keyframes projected with that pose, then
//! motion-only optimisation on reprojection errors, the final pose. The best keyframe hypothesis by inliers wins.
//!
//! Confidence is `min(1, inliers / 100) · inliers / candidate matches`: near 1 for a view with a hundred or
//! more consistent matches, lower when few matches exist or most of them disagree.

use std::collections::HashMap;

use nalgebra::{Isometry3, Point3};
use serde::Serialize;

use gst_core::{Pose3, RgbImage};

use crate::features::{Features, OrbExtractor, hamming};
use crate::index::DescriptorIndex;
use crate::map_file::SlamMap;
use crate::optimize::{optimize_pose, pnp_ransac};
use crate::system::{match_to_points, observations};
use crate::{SlamConfig, SlamError};

/// A relocalised camera.
#[derive(Clone, Debug, Serialize)]
pub struct Relocalization {
    pub world_from_camera: Pose3,
    /// Inlier 2D–3D matches after the final optimisation.
    pub inliers: usize,
    /// Matches that went into the final optimisation.
    pub matches: usize,
    /// In [0, 1] (see the module documentation).
    pub confidence: f64,
    /// The keyframe whose map points gave the first pose.
    pub keyframe: u32,
}

/// Relocalises images against one map.
#[derive(Debug)]
pub struct Relocalizer<'a> {
    map: &'a SlamMap,
    index: DescriptorIndex,
    orb: OrbExtractor,
    config: SlamConfig,
}

/// Keyframe hypotheses tried per image.
const HYPOTHESES: usize = 5;
/// Hamming distance under which a descriptor votes for a keyframe.
const VOTE_DISTANCE: u32 = 40;
/// Keyframes before and after a hypothesis whose points join its matching.
const NEIGHBOURS: u32 = 3;
/// Fewest PnP inliers for a hypothesis.
const MIN_INLIERS: usize = 15;

impl<'a> Relocalizer<'a> {
    /// A relocaliser over `map` (from a run: [`SlamMap::from_output`]; from disk: [`SlamMap::load`]).
    pub fn new(map: &'a SlamMap, config: &SlamConfig) -> Result<Self, SlamError> {
        let mut index = DescriptorIndex::new();
        for keyframe in &map.keyframes {
            for (f, point) in keyframe.points.iter().enumerate() {
                if point.is_some() {
                    index.insert(keyframe.id, f as u32, &keyframe.features.descriptors[f]);
                }
            }
        }
        Ok(Self { map, index, orb: OrbExtractor::new(&config.orb)?, config: config.clone() })
    }

    /// The camera pose of `image` in the map, or `None` when no hypothesis is verified.
    pub fn relocalize(&mut self, image: &RgbImage) -> Result<Option<Relocalization>, SlamError> {
        let camera = &self.map.camera;
        if (image.width(), image.height()) != (camera.width, camera.height) {
            return Err(SlamError::InvalidInput(format!(
                "the image is {}x{} but the map's camera is {}x{}",
                image.width(),
                image.height(),
                camera.width,
                camera.height
            )));
        }
        let features = self.orb.extract(image, None)?;
        if features.len() < MIN_INLIERS {
            return Ok(None);
        }
        // A tight distance keeps the votes discriminative (at 64 nearly every keyframe gets hundreds).
        let ranked = self.index.vote(&features.descriptors, VOTE_DISTANCE, |_| false);
        let mut best: Option<Relocalization> = None;
        for &(kf, _) in ranked.iter().take(HYPOTHESES) {
            // Match against the hypothesis and its neighbours in time: more of the place's points.
            let first = kf.saturating_sub(NEIGHBOURS);
            let last = (kf + NEIGHBOURS).min(self.map.keyframes.len().saturating_sub(1) as u32);
            let mut matches: Vec<(u32, u32)> = Vec::new();
            let mut taken = std::collections::HashSet::new();
            for k in first..=last {
                let Some(keyframe) = self.map.keyframes.get(k as usize) else { continue };
                for (p, f) in match_to_points(
                    &features,
                    &keyframe.features,
                    &keyframe.points,
                    self.config.max_descriptor_distance,
                ) {
                    if taken.insert(f) {
                        matches.push((p, f));
                    }
                }
            }
            let points: Vec<Point3<f64>> =
                matches.iter().map(|&(p, _)| self.map.points[p as usize].position).collect();
            let pixels: Vec<[f64; 2]> = matches
                .iter()
                .map(|&(_, f)| {
                    [f64::from(features.keypoints[f as usize].u), f64::from(features.keypoints[f as usize].v)]
                })
                .collect();
            let pnp = pnp_ransac(camera, &points, &pixels, 6.0, MIN_INLIERS)?;
            let Some((camera_from_world, _)) = pnp else {
                continue;
            };
            let Some(found) = self.refine(&features, camera_from_world, kf) else { continue };
            if best.as_ref().is_none_or(|b| found.inliers > b.inliers) {
                best = Some(found);
            }
        }
        Ok(best)
    }

    /// Matches the map points of keyframes near the hypothesis projected into the image, and optimises.
    fn refine(
        &self,
        features: &Features,
        camera_from_world: Isometry3<f64>,
        keyframe: u32,
    ) -> Option<Relocalization> {
        let camera = &self.map.camera;
        let world_from_camera = camera_from_world.inverse();
        let position = world_from_camera.translation.vector;
        let forward = world_from_camera.rotation * nalgebra::Vector3::z();
        let scale = self.config.orb.scale_factor;
        let mut best: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut nearby = Vec::new();
        let mut visited = std::collections::HashSet::new();
        for kf in &self.map.keyframes {
            let d = (kf.world_from_camera.translation.vector - position).norm();
            let f = kf.world_from_camera.rotation * nalgebra::Vector3::z();
            if d > self.config.local_map_radius_m || f.dot(&forward) < 0.3 {
                continue;
            }
            for &p in kf.points.iter().flatten() {
                if !visited.insert(p) {
                    continue;
                }
                let point = &self.map.points[p as usize];
                let c = camera_from_world * point.position;
                if c.z < 0.1 {
                    continue;
                }
                let (u, v) = (camera.fx * c.x / c.z + camera.cx, camera.fy * c.y / c.z + camera.cy);
                if u < 0.0 || v < 0.0 || u >= f64::from(camera.width) || v >= f64::from(camera.height) {
                    continue;
                }
                features.within(u as f32, v as f32, 8.0 * scale.powi(i32::from(point.octave)), &mut nearby);
                let found = nearby
                    .iter()
                    .map(|&i| (hamming(&point.descriptor, &features.descriptors[i as usize]), i))
                    .min();
                if let Some((distance, i)) = found
                    && distance <= self.config.max_descriptor_distance
                {
                    let entry = best.entry(i).or_insert((p, u32::MAX));
                    if distance < entry.1 {
                        *entry = (p, distance);
                    }
                }
            }
        }
        let mut matches: Vec<(u32, u32)> = best.into_iter().map(|(f, (p, _))| (p, f)).collect();
        matches.sort_unstable();
        if matches.len() < MIN_INLIERS {
            return None;
        }
        let observations = observations(&self.map.points, features, &matches, f64::from(scale), false);
        let mut pose = camera_from_world;
        let mut inlier = vec![true; observations.len()];
        let inliers = optimize_pose(camera, &mut pose, &observations, &mut inlier);
        if inliers < MIN_INLIERS {
            return None;
        }
        let confidence = (inliers as f64 / 100.0).min(1.0) * inliers as f64 / matches.len() as f64;
        Some(Relocalization {
            world_from_camera: Pose3(pose.inverse()),
            inliers,
            matches: matches.len(),
            confidence,
            keyframe,
        })
    }
}
