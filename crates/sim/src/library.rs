//! The furniture models that scene generation draws from: catalog models where the Sweet Home 3D
//! catalog has the class, primitives where it does not (or where no catalog is installed).
//!
//! Scene generation picks a [`ModelVariant`] per object (its size decides placement) and the renderer asks
//! for the mesh by the variant's key. Keys are plain strings (`catalog:bed1`, `primitive:coffee_table`) so
//! that a generated scene file can name its models and be re-rendered later; meshes are loaded once and
//! shared behind [`Arc`], and the library is `Send + Sync` so that frames can render in parallel.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use gst_core::{ObjectClass, stable_hash};
use tracing::{info, warn};

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, DEFAULT_CATALOG_PATH};
use crate::error::SimError;
use crate::mesh::TriangleMesh;
use crate::primitives::{nominal_size_m, primitive_model};

const CATALOG_PREFIX: &str = "catalog:";
const PRIMITIVE_PREFIX: &str = "primitive:";

/// One model a class can be drawn with.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelVariant {
    /// What [`FurnitureLibrary::model`] takes: `catalog:<catalog id>` or `primitive:<class, snake_case>`.
    pub key: String,
    /// A human-readable name ("Oak table", "dining table (primitive)").
    pub name: String,
    /// Width (x), depth (y), height (z) in metres: the model's bounds in its local frame.
    pub size_m: [f64; 3],
}

/// Which part of the catalogue's models of each class a scene is furnished with.
///
/// The models of a class are split once, by a stable hash of their catalogue id (not by anything scene
/// generation draws): about a quarter of them are `unseen` and furnish only held-out test scenes, the rest
/// are `seen` and furnish training, dev and val scenes, so that nothing trained or tuned on those has seen a
/// test scene's furniture. A class with a single model cannot be split: that model is in both parts (see
/// [`FurnitureLibrary::shared_classes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelSplit {
    /// Every model (the default).
    #[default]
    All,
    /// The models not held out.
    Seen,
    /// The held-out models, for test scenes.
    Unseen,
}

impl ModelSplit {
    pub fn is_all(&self) -> bool {
        *self == ModelSplit::All
    }
}

/// Whether each of a class's model ids is held out: hash ≡ 0 (mod 4), at least one and never all of them
/// when there are two or more (the lowest hash is held out when none is, the highest kept when all are).
fn held_out(ids: &[&str]) -> Vec<bool> {
    if ids.len() < 2 {
        return vec![false; ids.len()];
    }
    let hashes: Vec<u64> = ids.iter().map(|id| stable_hash(id)).collect();
    let mut out: Vec<bool> = hashes.iter().map(|h| h % 4 == 0).collect();
    let lowest = (0..hashes.len()).min_by_key(|&i| hashes[i]).unwrap_or(0);
    let highest = (0..hashes.len()).max_by_key(|&i| hashes[i]).unwrap_or(0);
    if !out.contains(&true) {
        out[lowest] = true;
    }
    if !out.contains(&false) {
        out[highest] = false;
    }
    out
}

/// Furniture models by class, with a cache of loaded meshes.
#[derive(Debug)]
pub struct FurnitureLibrary {
    catalog: Option<Catalog>,
    cache: Mutex<BTreeMap<String, Arc<TriangleMesh>>>,
}

impl FurnitureLibrary {
    /// Opens the furniture library.
    ///
    /// `None`: the default catalog ([`DEFAULT_CATALOG_PATH`]) if it exists, else primitives only, with a
    /// warning (scenes then look much less realistic). `Some(path)`: that catalog, or an error naming it
    /// (missing file, not a zip archive, no properties file, malformed properties). A default catalog that
    /// exists but cannot be read is an error too: a broken installation should be fixed, not papered over.
    pub fn open(catalog: Option<&Path>) -> Result<Self, SimError> {
        let path = match catalog {
            Some(path) => path,
            None => {
                let default = Path::new(DEFAULT_CATALOG_PATH);
                if !default.exists() {
                    warn!(
                        "furniture catalog {DEFAULT_CATALOG_PATH} not found (Debian package sweethome3d-furniture): \
                         furnishing scenes with box-and-cylinder primitives only"
                    );
                    return Ok(Self::primitives_only());
                }
                default
            }
        };
        let catalog = Catalog::open(path)?;
        info!(catalog = %path.display(), entries = catalog.entries().len(), "furniture catalog opened");
        Ok(Self { catalog: Some(catalog), cache: Mutex::new(BTreeMap::new()) })
    }

    /// A library of primitives only: hermetic, for tests and machines without the catalog.
    pub fn primitives_only() -> Self {
        Self { catalog: None, cache: Mutex::new(BTreeMap::new()) }
    }

    pub fn uses_catalog(&self) -> bool {
        self.catalog.is_some()
    }

    /// The catalog, when one is open.
    pub fn catalog(&self) -> Option<&Catalog> {
        self.catalog.as_ref()
    }

    /// The models `class` can be drawn with: the catalog's entries of the class sorted by id, or a single
    /// primitive of nominal size when there is no catalog or it has no model of this class. Never empty.
    pub fn variants(&self, class: ObjectClass) -> Vec<ModelVariant> {
        self.variants_in(class, ModelSplit::All)
    }

    /// [`Self::variants`] restricted to one part of the model split (a class with one model has it in both).
    pub fn variants_in(&self, class: ObjectClass, models: ModelSplit) -> Vec<ModelVariant> {
        let entries: Vec<_> = self.catalog.iter().flat_map(|catalog| catalog.entries_of(class)).collect();
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        let held = held_out(&ids);
        let shared = ids.len() < 2;
        let from_catalog: Vec<ModelVariant> = entries
            .iter()
            .zip(held)
            .filter(|(_, held)| match models {
                ModelSplit::All => true,
                ModelSplit::Seen => shared || !held,
                ModelSplit::Unseen => shared || *held,
            })
            .map(|(entry, _)| ModelVariant {
                key: format!("{CATALOG_PREFIX}{}", entry.id),
                name: entry.name.clone(),
                size_m: entry.size_m,
            })
            .collect();
        if !from_catalog.is_empty() {
            return from_catalog;
        }
        vec![ModelVariant {
            key: primitive_key(class),
            name: format!("{} (primitive)", class.text()),
            size_m: nominal_size_m(class),
        }]
    }

    /// The classes whose catalogue has a single model, which therefore furnishes both parts of the split.
    pub fn shared_classes(&self) -> Vec<ObjectClass> {
        let Some(catalog) = &self.catalog else { return Vec::new() };
        ObjectClass::ALL.iter().copied().filter(|&class| catalog.entries_of(class).len() == 1).collect()
    }

    /// The mesh of a variant key, in the furniture local frame (z up, front towards -y, bottom at z = 0,
    /// bounds = the variant's size). Loaded on first use, then shared from the cache.
    pub fn model(&self, key: &str) -> Result<Arc<TriangleMesh>, SimError> {
        if let Some(mesh) = self.cache.lock().unwrap_or_else(PoisonError::into_inner).get(key) {
            return Ok(Arc::clone(mesh));
        }
        // Loading happens outside the lock so that other threads keep hitting the cache meanwhile; two
        // threads may then load the same model once each, and the first stored copy wins.
        let mesh = Arc::new(self.load(key)?);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(Arc::clone(cache.entry(key.to_string()).or_insert(mesh)))
    }

    fn load(&self, key: &str) -> Result<TriangleMesh, SimError> {
        if let Some(name) = key.strip_prefix(PRIMITIVE_PREFIX) {
            let class = ObjectClass::parse(name).ok_or_else(|| {
                SimError::Config(format!("model key {key:?}: unknown object class {name:?}"))
            })?;
            return Ok(primitive_model(class, nominal_size_m(class)));
        }
        if let Some(id) = key.strip_prefix(CATALOG_PREFIX) {
            let Some(catalog) = &self.catalog else {
                return Err(SimError::Config(format!(
                    "model key {key:?} needs the furniture catalog, but the library has primitives only"
                )));
            };
            let entry =
                catalog.entries().iter().find(|entry| entry.id == id).ok_or_else(|| SimError::Catalog {
                    path: catalog.path().to_path_buf(),
                    message: format!("no piece with id {id:?} (model key {key:?})"),
                })?;
            return catalog.load_model(entry);
        }
        Err(SimError::Config(format!(
            "model key {key:?} is neither {CATALOG_PREFIX}<id> nor {PRIMITIVE_PREFIX}<class>"
        )))
    }
}

/// `primitive:<class in snake_case>`, e.g. `primitive:coffee_table`.
fn primitive_key(class: ObjectClass) -> String {
    format!("{PRIMITIVE_PREFIX}{}", class.text().replace(' ', "_"))
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_model_split_holds_out_some_never_all_and_is_stable() {
        // Two models or more: at least one held out, at least one kept; one model: nothing held out.
        for n in 2..12 {
            let ids: Vec<String> = (0..n).map(|k| format!("model{k}")).collect();
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let held = held_out(&refs);
            assert!(held.contains(&true) && held.contains(&false), "{n} models: {held:?}");
            assert_eq!(held, held_out(&refs), "the split is a function of the ids");
        }
        assert_eq!(held_out(&["only"]), vec![false]);
    }

    #[test]
    fn without_a_catalog_both_parts_are_the_primitive() {
        let library = FurnitureLibrary::primitives_only();
        for split in [ModelSplit::All, ModelSplit::Seen, ModelSplit::Unseen] {
            assert_eq!(library.variants_in(ObjectClass::Bed, split), library.variants(ObjectClass::Bed));
        }
        assert!(library.shared_classes().is_empty());
    }

    #[test]
    fn with_the_catalog_seen_and_unseen_partition_each_class() -> Result<(), SimError> {
        let Ok(library) = FurnitureLibrary::open(Some(Path::new(DEFAULT_CATALOG_PATH))) else {
            return Ok(()); // the catalogue package is not installed here; the split tests above still ran
        };
        let shared = library.shared_classes();
        for &class in ObjectClass::ALL {
            let keys = |split| -> Vec<String> {
                library.variants_in(class, split).into_iter().map(|v| v.key).collect()
            };
            let (all, seen, unseen) =
                (keys(ModelSplit::All), keys(ModelSplit::Seen), keys(ModelSplit::Unseen));
            if shared.contains(&class) || all.len() < 2 {
                assert_eq!(seen, all, "{class:?}");
                assert_eq!(unseen, all, "{class:?}");
                continue;
            }
            assert!(!seen.is_empty() && !unseen.is_empty(), "{class:?}: {all:?}");
            assert!(seen.iter().all(|k| !unseen.contains(k)), "{class:?}: parts overlap");
            assert_eq!(seen.len() + unseen.len(), all.len(), "{class:?}: parts cover the class");
        }
        Ok(())
    }
    use std::io::Write;
    use std::path::PathBuf;

    #[test]
    fn primitives_only_gives_one_nominal_variant_per_class() -> Result<(), SimError> {
        let library = FurnitureLibrary::primitives_only();
        assert!(!library.uses_catalog());
        for &class in ObjectClass::ALL {
            let variants = library.variants(class);
            assert_eq!(variants.len(), 1);
            assert_eq!(variants[0].size_m, nominal_size_m(class));
            let mesh = library.model(&variants[0].key)?;
            assert!(mesh.triangle_count() > 0);
            assert!(Arc::ptr_eq(&mesh, &library.model(&variants[0].key)?), "cached");
        }
        assert_eq!(library.variants(ObjectClass::CoffeeTable)[0].key, "primitive:coffee_table");
        Ok(())
    }

    #[test]
    fn unknown_keys_are_errors() {
        let library = FurnitureLibrary::primitives_only();
        for key in ["primitive:spaceship", "catalog:bed1", "bed", ""] {
            let error = library.model(key).expect_err(key);
            assert!(error.to_string().contains(&format!("{key:?}")), "{error}");
        }
    }

    #[test]
    fn library_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<FurnitureLibrary>();
    }

    #[test]
    fn explicit_catalog_errors_name_the_file() {
        let missing = PathBuf::from("/nonexistent/furniture.sh3f");
        let error = FurnitureLibrary::open(Some(&missing)).expect_err("missing");
        assert!(error.to_string().contains("/nonexistent/furniture.sh3f"), "{error}");
    }

    #[test]
    fn catalog_variants_fall_back_to_primitives_per_class() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("one-chair.sh3f");
        let mut writer = zip::ZipWriter::new(std::fs::File::create(&path)?);
        let options = zip::write::SimpleFileOptions::default();
        writer.start_file("PluginFurnitureCatalog.properties", options)?;
        writer.write_all(
            b"id#1=T#chair\nname#1=Chair\ncategory#1=Living room\nmodel#1=/m/chair.obj\n\
              width#1=50\ndepth#1=50\nheight#1=90\n\
              id#2=T#chair2\nname#2=Chair 2\ncategory#2=Living room\nmodel#2=/m/chair.obj\n\
              width#2=40\ndepth#2=45\nheight#2=85\n",
        )?;
        writer.start_file("m/chair.obj", options)?;
        writer.write_all(b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")?;
        writer.finish()?;

        let library = FurnitureLibrary::open(Some(&path))?;
        assert!(library.uses_catalog());
        let chairs = library.variants(ObjectClass::Chair);
        let keys: Vec<&str> = chairs.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, ["catalog:chair", "catalog:chair2"]);
        assert_eq!(chairs[1].size_m, [0.4, 0.45, 0.85]);
        let mesh = library.model("catalog:chair2")?;
        let (lo, hi) = mesh.bounds().expect("non-empty");
        assert!((hi[2] - lo[2] - 0.85).abs() < 1e-4);
        assert_eq!(library.variants(ObjectClass::Bed)[0].key, "primitive:bed");
        let error = library.model("catalog:sofa").expect_err("no such id");
        assert!(error.to_string().contains("one-chair.sh3f"), "{error}");

        // Concurrent first loads agree on one cached mesh.
        let meshes: Vec<Arc<TriangleMesh>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| library.model("primitive:sofa"))).collect();
            handles.into_iter().map(|h| h.join().expect("thread").expect("model")).collect()
        });
        assert!(meshes.iter().all(|m| **m == *meshes[0]));
        Ok(())
    }
}
