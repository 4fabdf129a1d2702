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

use gst_core::ObjectClass;
use tracing::{info, warn};

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
        let from_catalog: Vec<ModelVariant> = self
            .catalog
            .iter()
            .flat_map(|catalog| catalog.entries_of(class))
            .map(|entry| ModelVariant {
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
