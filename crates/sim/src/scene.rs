//! The scene document: a procedural house (plan, surface styles, furniture) as one serde JSON file.
//!
//! A scene is fully determined by its seed and configuration; the JSON holds everything needed to render it
//! again (given the same furniture library), and what ground truth later stages need (room polygons, doors,
//! windows, instance classes and oriented boxes).

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use gst_core::RoomType;

use crate::SimError;
use crate::furnish::{FurnishConfig, SceneInstance, furnish};
use crate::library::FurnitureLibrary;
use crate::plan::{Plan, PlanConfig, generate_plan};
use crate::textures::{SurfaceKind, SurfaceStyle};

/// Version of the scene JSON layout; bumped on incompatible changes.
pub const SCENE_FORMAT_VERSION: u32 = 1;

/// Surfaces of one room.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomStyle {
    pub floor: SurfaceStyle,
    pub wall: SurfaceStyle,
}

/// A generated house.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scene {
    pub format_version: u32,
    /// "scene_<seed>".
    pub name: String,
    pub seed: u64,
    pub plan: Plan,
    /// One style per room, parallel to `plan.rooms`.
    pub room_styles: Vec<RoomStyle>,
    pub ceiling: SurfaceStyle,
    /// The outer face of exterior walls and the wall tops.
    pub exterior: SurfaceStyle,
    pub instances: Vec<SceneInstance>,
    /// Where the furniture came from: "catalog" or "primitives".
    pub furniture_source: String,
}

/// Settings of scene generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SceneConfig {
    pub plan: PlanConfig,
    pub furnish: FurnishConfig,
}

impl SceneConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        self.plan.validate()?;
        self.furnish.validate()
    }
}

/// Generates the scene of a seed. The same seed, configuration and library give an identical scene.
pub fn generate_scene(
    seed: u64,
    config: &SceneConfig,
    library: &FurnitureLibrary,
) -> Result<Scene, SimError> {
    config.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let plan = generate_plan(&config.plan, &mut rng)?;
    let room_styles = plan.rooms.iter().map(|room| room_style(room.room_type, &mut rng)).collect();
    let ceiling = SurfaceStyle { kind: SurfaceKind::Plaster, color: [236, 234, 228], seed: rng.r#gen() };
    let exterior = SurfaceStyle { kind: SurfaceKind::Plaster, color: [200, 200, 196], seed: rng.r#gen() };
    let instances = furnish(&plan, library, &config.furnish, &mut rng)?;
    Ok(Scene {
        format_version: SCENE_FORMAT_VERSION,
        name: format!("scene_{seed}"),
        seed,
        plan,
        room_styles,
        ceiling,
        exterior,
        instances,
        furniture_source: if library.uses_catalog() { "catalog".into() } else { "primitives".into() },
    })
}

fn pick<T: Copy>(rng: &mut impl Rng, items: &[T]) -> T {
    items[rng.gen_range(0..items.len())]
}

fn room_style(room_type: RoomType, rng: &mut impl Rng) -> RoomStyle {
    use SurfaceKind as K;
    let woods = [[166, 118, 72], [196, 152, 100], [120, 82, 52], [210, 180, 140]];
    let tiles = [[220, 220, 215], [180, 190, 200], [200, 180, 160], [150, 160, 150]];
    let carpets = [[150, 110, 100], [110, 120, 150], [160, 150, 120], [120, 140, 120]];
    let paints = [
        [232, 220, 196],
        [200, 215, 228],
        [214, 232, 210],
        [236, 214, 214],
        [226, 226, 210],
        [205, 200, 225],
    ];
    let wallpapers = [K::WallpaperStripes, K::WallpaperDiamonds, K::WallpaperDots];
    let (floor_kind, floor_color) = match room_type {
        RoomType::Kitchen | RoomType::Bathroom => (K::Tiles, pick(rng, &tiles)),
        RoomType::Bedroom if rng.gen_bool(0.5) => (K::Carpet, pick(rng, &carpets)),
        RoomType::Office if rng.gen_bool(0.3) => (K::Carpet, pick(rng, &carpets)),
        _ => (K::WoodPlanks, pick(rng, &woods)),
    };
    let wall_kind = match room_type {
        RoomType::Bathroom => K::Tiles,
        RoomType::Kitchen if rng.gen_bool(0.5) => K::Brick,
        RoomType::Kitchen => K::Tiles,
        _ => pick(rng, &wallpapers),
    };
    let wall_color = if wall_kind == K::Brick { [170, 90, 70] } else { pick(rng, &paints) };
    RoomStyle {
        floor: SurfaceStyle { kind: floor_kind, color: floor_color, seed: rng.r#gen() },
        wall: SurfaceStyle { kind: wall_kind, color: wall_color, seed: rng.r#gen() },
    }
}

impl Scene {
    /// Reads and validates a scene file; errors name the file and the problem.
    pub fn load(path: &Path) -> Result<Self, SimError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| SimError::Io { path: path.into(), source })?;
        let scene: Scene = serde_json::from_str(&text).map_err(|e| SimError::Scene {
            path: path.into(),
            message: format!("not a valid scene document: {e}"),
        })?;
        scene.validate().map_err(|message| SimError::Scene { path: path.into(), message })?;
        Ok(scene)
    }

    pub fn to_json(&self) -> String {
        // Serialising plain data structures cannot fail; fall back to an empty document rather than panic.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Checks the internal consistency of a (possibly hand-edited) document.
    pub fn validate(&self) -> Result<(), String> {
        if self.format_version != SCENE_FORMAT_VERSION {
            return Err(format!(
                "format_version {} is not supported (expected {SCENE_FORMAT_VERSION})",
                self.format_version
            ));
        }
        let rooms = self.plan.rooms.len();
        if rooms == 0 {
            return Err("the plan has no rooms".into());
        }
        if self.room_styles.len() != rooms {
            return Err(format!("{} room styles for {rooms} rooms", self.room_styles.len()));
        }
        for (k, room) in self.plan.rooms.iter().enumerate() {
            if room.rects.is_empty()
                || room
                    .rects
                    .iter()
                    .any(|r| r.is_empty() || !r.min.iter().chain(&r.max).all(|v| v.is_finite()))
            {
                return Err(format!("room {k} has an empty or non-finite rectangle"));
            }
        }
        for (k, wall) in self.plan.walls.iter().enumerate() {
            if wall.rooms.iter().flatten().any(|&r| r >= rooms) || !(wall.end_m > wall.start_m) {
                return Err(format!("wall {k} refers to a missing room or has no length"));
            }
        }
        let walls = self.plan.walls.len();
        for (k, door) in self.plan.doors.iter().enumerate() {
            if door.opening.wall >= walls || door.rooms.iter().any(|&r| r >= rooms) {
                return Err(format!("door {k} refers to a missing wall or room"));
            }
        }
        if self.plan.windows.iter().any(|w| w.wall >= walls) {
            return Err("a window refers to a missing wall".into());
        }
        if !(self.plan.wall_height_m > 0.5 && self.plan.wall_height_m < 10.0) {
            return Err(format!("wall_height_m {} is not plausible", self.plan.wall_height_m));
        }
        let mut ids: Vec<u16> = self.instances.iter().map(|i| i.id.0).collect();
        ids.sort_unstable();
        if ids.first() == Some(&0) {
            return Err("instance id 0 is reserved for structure".into());
        }
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err("instance ids are not unique".into());
        }
        for instance in &self.instances {
            if instance.room >= rooms {
                return Err(format!("instance {} is in missing room {}", instance.id.0, instance.room));
            }
            if instance.bbox.size_m.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
                return Err(format!("instance {} has a non-positive size", instance.id.0));
            }
        }
        Ok(())
    }
}
