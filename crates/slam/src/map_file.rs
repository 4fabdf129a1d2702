//! The persistent map of a SLAM run: what relocalisation needs (the camera, keyframes with their poses, ORB
//! keypoints, descriptors and map-point links, and the map points), saved as one binary file so that a later
//! process can relocalise images without running SLAM again.
//!
//! Format (`map.gstslam`, little-endian): the magic `GSTSLAM2`, then
//! - camera: width, height (u32), fx, fy, cx, cy (f64): the undistorted camera SLAM worked in (keypoints are
//!   in undistorted pixels; images to relocalise must be undistorted first, as the frame sources do);
//! - keyframes (u32 count), each: id (u32), frame index (u64), timestamp_s (f64), world_from_camera as
//!   translation xyz and unit quaternion xyzw (7 × f64), features (u32 count) each u, v (f32), octave (u8),
//!   descriptor (32 bytes), map point (u32, `u32::MAX` = none); the thumbnail: width, height (u32), its
//!   camera fx, fy, cx, cy (f64), grey levels (width × height bytes), depth (width × height u16, 1/5000 m,
//!   0 = none);
//! - map points (u32 count), each: position xyz (3 × f64), descriptor (32 bytes), octave (u8).
//!
//! Reading checks every count against the bytes left and every map-point link against the point count, so
//! a truncated or corrupt file is an error naming the file, never a panic.

use std::path::Path;

use nalgebra::{Isometry3, Point3, Quaternion, Translation3, UnitQuaternion};

use gst_core::{Distortion, PinholeCamera};

use crate::features::{Descriptor, Features, Keypoint};
use crate::system::HasPosition;
use crate::thumbnail::Thumbnail;
use crate::{SlamError, SlamOutput};

const MAGIC: &[u8; 8] = b"GSTSLAM2";

/// File name of the map inside `gst slam`'s output directory.
pub const MAP_FILE: &str = "map.gstslam";

/// A keyframe of a stored map.
#[derive(Clone, Debug)]
pub struct StoredKeyframe {
    pub id: u32,
    pub frame_index: usize,
    pub timestamp_s: f64,
    pub world_from_camera: Isometry3<f64>,
    pub features: Features,
    /// The map point of each feature, if any.
    pub points: Vec<Option<u32>>,
    /// Grey-level thumbnail with depth (relocalisation's photometric check).
    pub thumbnail: Thumbnail,
}

/// Depth units per metre of stored thumbnails.
const THUMBNAIL_DEPTH_SCALE: f64 = 5000.0;

/// A map point of a stored map.
#[derive(Clone, Debug)]
pub struct StoredPoint {
    pub position: Point3<f64>,
    pub descriptor: Descriptor,
    pub octave: u8,
}

impl HasPosition for StoredPoint {
    fn position(&self) -> Point3<f64> {
        self.position
    }
}

/// The relocalisation map of a SLAM run.
#[derive(Clone, Debug)]
pub struct SlamMap {
    pub camera: PinholeCamera,
    pub keyframes: Vec<StoredKeyframe>,
    pub points: Vec<StoredPoint>,
}

impl SlamMap {
    /// The map of a finished run.
    pub fn from_output(output: &SlamOutput) -> Self {
        SlamMap {
            camera: output.camera,
            keyframes: output
                .keyframes
                .iter()
                .map(|k| StoredKeyframe {
                    id: k.id,
                    frame_index: k.frame_index,
                    timestamp_s: k.timestamp_s,
                    world_from_camera: k.world_from_camera,
                    features: k.features.clone(),
                    points: k.points.clone(),
                    thumbnail: k.thumbnail.clone(),
                })
                .collect(),
            points: output
                .map_points
                .iter()
                .map(|p| StoredPoint { position: p.position, descriptor: p.descriptor, octave: p.octave })
                .collect(),
        }
    }

    /// The file's bytes (see the module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.keyframes.len() * 50_000 + self.points.len() * 57);
        out.extend_from_slice(MAGIC);
        let c = &self.camera;
        put_u32(&mut out, c.width);
        put_u32(&mut out, c.height);
        for v in [c.fx, c.fy, c.cx, c.cy] {
            put_f64(&mut out, v);
        }
        put_u32(&mut out, self.keyframes.len() as u32);
        for k in &self.keyframes {
            put_u32(&mut out, k.id);
            out.extend_from_slice(&(k.frame_index as u64).to_le_bytes());
            put_f64(&mut out, k.timestamp_s);
            let t = k.world_from_camera.translation.vector;
            let q = k.world_from_camera.rotation;
            for v in [t.x, t.y, t.z, q.i, q.j, q.k, q.w] {
                put_f64(&mut out, v);
            }
            put_u32(&mut out, k.features.len() as u32);
            for ((keypoint, descriptor), point) in
                k.features.keypoints.iter().zip(&k.features.descriptors).zip(&k.points)
            {
                out.extend_from_slice(&keypoint.u.to_le_bytes());
                out.extend_from_slice(&keypoint.v.to_le_bytes());
                out.push(keypoint.octave);
                out.extend_from_slice(descriptor);
                put_u32(&mut out, point.unwrap_or(u32::MAX));
            }
            let t = &k.thumbnail;
            put_u32(&mut out, t.camera.width);
            put_u32(&mut out, t.camera.height);
            for v in [t.camera.fx, t.camera.fy, t.camera.cx, t.camera.cy] {
                put_f64(&mut out, v);
            }
            out.extend_from_slice(&t.gray);
            for &d in &t.depth_m {
                let units =
                    (f64::from(d) * THUMBNAIL_DEPTH_SCALE).round().clamp(0.0, f64::from(u16::MAX)) as u16;
                out.extend_from_slice(&units.to_le_bytes());
            }
        }
        put_u32(&mut out, self.points.len() as u32);
        for p in &self.points {
            for v in [p.position.x, p.position.y, p.position.z] {
                put_f64(&mut out, v);
            }
            out.extend_from_slice(&p.descriptor);
            out.push(p.octave);
        }
        out
    }

    /// Writes the map to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), SlamError> {
        gst_io::atomic_write(path, &self.to_bytes())?;
        Ok(())
    }

    /// Reads a map written by [`save`](Self::save).
    pub fn load(path: &Path) -> Result<Self, SlamError> {
        let bytes = std::fs::read(path).map_err(|source| SlamError::File { path: path.into(), source })?;
        Self::from_bytes(&bytes)
            .map_err(|message| SlamError::InvalidInput(format!("{}: {message}", path.display())))
    }

    /// Parses the bytes of a map file; the error says what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(8)? != MAGIC {
            return Err("not a gst SLAM map (the file does not start with GSTSLAM2)".into());
        }
        let (width, height) = (r.u32()?, r.u32()?);
        let (fx, fy, cx, cy) = (r.f64()?, r.f64()?, r.f64()?, r.f64()?);
        let camera = PinholeCamera { width, height, fx, fy, cx, cy, distortion: Distortion::default() };
        if width == 0 || height == 0 || !(fx > 0.0 && fy > 0.0) {
            return Err(format!("invalid camera {width}x{height}, fx {fx}, fy {fy}"));
        }
        let keyframe_count = r.count(8 + 8 + 8 + 56 + 4)?;
        let mut keyframes = Vec::with_capacity(keyframe_count);
        for _ in 0..keyframe_count {
            let id = r.u32()?;
            let frame_index = r.u64()? as usize;
            let timestamp_s = r.f64()?;
            let v: Vec<f64> = (0..7).map(|_| r.f64()).collect::<Result<_, _>>()?;
            let q = Quaternion::new(v[6], v[3], v[4], v[5]);
            if !v.iter().all(|x| x.is_finite()) || (q.norm() - 1.0).abs() > 1e-6 {
                return Err(format!("keyframe {id}: invalid pose"));
            }
            // Stored unit quaternions are kept bit for bit (a file saved again is identical); only ones off by
            // more than rounding are renormalised.
            let rotation = if (q.norm() - 1.0).abs() < 1e-12 {
                UnitQuaternion::new_unchecked(q)
            } else {
                UnitQuaternion::new_normalize(q)
            };
            let world_from_camera = Isometry3::from_parts(Translation3::new(v[0], v[1], v[2]), rotation);
            let n = r.count(4 + 4 + 1 + 32 + 4)?;
            let mut keypoints = Vec::with_capacity(n);
            let mut descriptors = Vec::with_capacity(n);
            let mut points = Vec::with_capacity(n);
            for _ in 0..n {
                let (u, v) = (r.f32()?, r.f32()?);
                let octave = r.u8()?;
                let mut descriptor = [0u8; 32];
                descriptor.copy_from_slice(r.take(32)?);
                let point = r.u32()?;
                keypoints.push(Keypoint { u, v, octave, depth_m: None });
                descriptors.push(descriptor);
                points.push((point != u32::MAX).then_some(point));
            }
            let features = Features::from_parts(keypoints, descriptors, width, height);
            let (tw, th) = (r.u32()?, r.u32()?);
            let (tfx, tfy, tcx, tcy) = (r.f64()?, r.f64()?, r.f64()?, r.f64()?);
            let pixels = (tw as usize).saturating_mul(th as usize);
            if pixels.saturating_mul(3) > bytes.len() - r.at {
                return Err(format!("keyframe {id}: a {tw}x{th} thumbnail exceeds the bytes left"));
            }
            let gray = r.take(pixels)?.to_vec();
            let depth_m = r
                .take(2 * pixels)?
                .chunks_exact(2)
                .map(|c| (f64::from(u16::from_le_bytes([c[0], c[1]])) / THUMBNAIL_DEPTH_SCALE) as f32)
                .collect();
            let thumbnail = Thumbnail {
                camera: PinholeCamera {
                    width: tw,
                    height: th,
                    fx: tfx,
                    fy: tfy,
                    cx: tcx,
                    cy: tcy,
                    distortion: Distortion::default(),
                },
                gray,
                depth_m,
            };
            keyframes.push(StoredKeyframe {
                id,
                frame_index,
                timestamp_s,
                world_from_camera,
                features,
                points,
                thumbnail,
            });
        }
        let point_count = r.count(24 + 32 + 1)?;
        let mut points = Vec::with_capacity(point_count);
        for _ in 0..point_count {
            let position = Point3::new(r.f64()?, r.f64()?, r.f64()?);
            let mut descriptor = [0u8; 32];
            descriptor.copy_from_slice(r.take(32)?);
            let octave = r.u8()?;
            points.push(StoredPoint { position, descriptor, octave });
        }
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the last map point", bytes.len() - r.at));
        }
        for k in &keyframes {
            if let Some(bad) = k.points.iter().flatten().find(|&&p| p as usize >= points.len()) {
                return Err(format!("keyframe {} links map point {bad} of {}", k.id, points.len()));
            }
        }
        for (k, keyframe) in keyframes.iter().enumerate() {
            if keyframe.id as usize != k {
                return Err(format!("keyframe {k} has id {}", keyframe.id));
            }
        }
        Ok(SlamMap { camera, keyframes, points })
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "truncated: {n} bytes needed at offset {}, {} left",
                self.at,
                self.bytes.len() - self.at
            ));
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn f32(&mut self) -> Result<f32, String> {
        Ok(f32::from_le_bytes(self.array()?))
    }
    fn f64(&mut self) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    /// A count of records of at least `min_size` bytes each, checked against the bytes left.
    fn count(&mut self, min_size: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if n.saturating_mul(min_size) > left {
            return Err(format!(
                "a count of {n} records at offset {} exceeds the {left} bytes left",
                self.at - 4
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> SlamMap {
        let camera = PinholeCamera {
            width: 64,
            height: 48,
            fx: 50.0,
            fy: 50.0,
            cx: 32.0,
            cy: 24.0,
            distortion: Distortion::default(),
        };
        let keyframe = |id: u32| {
            let keypoints: Vec<Keypoint> = (0..5)
                .map(|k| Keypoint { u: 3.5 * k as f32, v: 40.0 - k as f32, octave: k as u8, depth_m: None })
                .collect();
            let descriptors: Vec<Descriptor> = (0..5).map(|k| [k as u8 * 7 + id as u8; 32]).collect();
            StoredKeyframe {
                id,
                frame_index: 10 * id as usize,
                timestamp_s: 1.5 * f64::from(id),
                world_from_camera: Isometry3::from_parts(
                    Translation3::new(f64::from(id), 2.0, 1.4),
                    UnitQuaternion::from_euler_angles(0.1, -0.2, 0.3 * f64::from(id)),
                ),
                features: Features::from_parts(keypoints, descriptors, camera.width, camera.height),
                points: vec![Some(0), None, Some(2), Some(1), None],
                thumbnail: Thumbnail {
                    camera: Thumbnail::camera_for(&camera),
                    gray: (0..16 * 12).map(|k| (k % 251) as u8).collect(),
                    depth_m: (0..16 * 12)
                        .map(|k| if k % 5 == 0 { 0.0 } else { 0.5 + 0.0002 * k as f32 })
                        .collect(),
                },
            }
        };
        let points = (0..3)
            .map(|k| StoredPoint {
                position: Point3::new(k as f64, -1.0, 2.5),
                descriptor: [k as u8; 32],
                octave: 1,
            })
            .collect();
        SlamMap { camera, keyframes: vec![keyframe(0), keyframe(1)], points }
    }

    #[test]
    fn round_trips_and_rejects_damage() -> Result<(), Box<dyn std::error::Error>> {
        let map = map();
        let bytes = map.to_bytes();
        let back = SlamMap::from_bytes(&bytes)?;
        assert_eq!(back.camera, map.camera);
        assert_eq!(back.keyframes.len(), 2);
        assert_eq!(back.to_bytes(), bytes);
        let (a, b) = (&map.keyframes[1], &back.keyframes[1]);
        assert_eq!(a.points, b.points);
        assert_eq!(a.features.descriptors, b.features.descriptors);
        assert_eq!(a.thumbnail.gray, b.thumbnail.gray);
        assert_eq!(a.thumbnail.camera, b.thumbnail.camera);
        for (x, y) in a.thumbnail.depth_m.iter().zip(&b.thumbnail.depth_m) {
            assert!((x - y).abs() < 1e-4, "{x} {y}");
        }
        assert!(
            (a.world_from_camera.translation.vector - b.world_from_camera.translation.vector).norm() < 1e-12
        );
        let mut near = Vec::new();
        b.features.within(7.0, 38.0, 1.0, &mut near);
        assert_eq!(near, [2], "radius search works on loaded features");

        for cut in [0, 7, 20, bytes.len() / 2, bytes.len() - 1] {
            let error = SlamMap::from_bytes(&bytes[..cut]).err().ok_or("truncated map accepted")?;
            assert!(
                error.contains("truncated") || error.contains("GSTSLAM2") || error.contains("exceeds"),
                "{cut}: {error}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            SlamMap::from_bytes(&longer).err().ok_or("trailing byte accepted")?.contains("after the last")
        );
        // A link to a map point that does not exist.
        let mut bad = map.clone();
        bad.keyframes[0].points[1] = Some(9);
        let error = SlamMap::from_bytes(&bad.to_bytes()).err().ok_or("bad link accepted")?;
        assert!(error.contains("links map point 9 of 3"), "{error}");

        let dir = tempfile::tempdir()?;
        let path = dir.path().join(MAP_FILE);
        map.save(&path)?;
        assert_eq!(SlamMap::load(&path)?.to_bytes(), bytes);
        std::fs::write(&path, b"not a map")?;
        let error = SlamMap::load(&path).err().ok_or("garbage accepted")?.to_string();
        assert!(error.contains("map.gstslam") && error.contains("GSTSLAM2"), "{error}");
        Ok(())
    }
}
