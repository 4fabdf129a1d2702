//! Corpus-mutation fuzzing of gst-sim's parsers of outside input (issue 48): OBJ and MTL text, the
//! furniture catalogue (its properties file inside a real archive, and whole archives) and scene.json.
//! Seeds: `fuzz/corpus/<target>/` (two CC0 Blend Swap models of Debian's sweethome3d-furniture, a scene
//! `gst generate` wrote); crashes once found: `fuzz/regressions/<target>/`. See `fuzz/harness.rs`.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use std::io::Write;
use std::path::{Path, PathBuf};

use gst_sim::catalog::Catalog;
use gst_sim::scene::Scene;
use proptest::prelude::*;

fn obj(bytes: &[u8]) -> bool {
    gst_sim::obj::parse_obj(&String::from_utf8_lossy(bytes)).is_ok()
}

fn mtl(bytes: &[u8]) -> bool {
    gst_sim::obj::parse_mtl(&String::from_utf8_lossy(bytes)).is_ok()
}

fn temp_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{e}"));
    (dir, path)
}

/// Opens an archive and loads every model it lists; errors must name the archive.
fn open_catalog(path: &Path) -> bool {
    let named = |error: &gst_sim::SimError| {
        assert!(error.to_string().contains(&*path.to_string_lossy()), "error does not name the file: {error}")
    };
    match Catalog::open(path) {
        Ok(catalog) => {
            let mut all = true;
            for entry in catalog.entries() {
                if let Err(error) = catalog.load_model(entry) {
                    named(&error);
                    all = false;
                }
            }
            all
        }
        Err(error) => {
            named(&error);
            false
        }
    }
}

/// The members of the seed archive but its properties file.
fn model_members() -> Vec<(String, Vec<u8>)> {
    let path = harness::repo_root().join("fuzz/corpus/catalog_archive/two-models.sh3f");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut archive = zip::ZipArchive::new(file).unwrap_or_else(|e| panic!("{e}"));
    let mut members = Vec::new();
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).unwrap_or_else(|e| panic!("{e}"));
        if member.is_file() && !member.name().ends_with(".properties") {
            let mut bytes = Vec::new();
            std::io::copy(&mut member, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
            members.push((member.name().to_string(), bytes));
        }
    }
    members
}

fn catalog_properties(bytes: &[u8]) -> bool {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temporary folder: {e}"));
    let path = dir.path().join("fuzz.sh3f");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}")));
    let options = zip::write::SimpleFileOptions::default();
    let mut add = |name: &str, bytes: &[u8]| {
        writer.start_file(name, options).unwrap_or_else(|e| panic!("{e}"));
        writer.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
    };
    add("PluginFurnitureCatalog.properties", bytes);
    for (name, member) in model_members() {
        add(&name, &member);
    }
    writer.finish().unwrap_or_else(|e| panic!("{e}"));
    open_catalog(&path)
}

fn catalog_archive(bytes: &[u8]) -> bool {
    let (_dir, path) = temp_file("fuzz.sh3f", bytes);
    open_catalog(&path)
}

fn scene_json(bytes: &[u8]) -> bool {
    let (_dir, path) = temp_file("scene.json", bytes);
    match Scene::load(&path) {
        Ok(_) => true,
        Err(error) => {
            assert!(error.to_string().contains("scene.json"), "error does not name the file: {error}");
            false
        }
    }
}

#[test]
fn corpora_replay_and_valid_seeds_parse() {
    assert_eq!(harness::replay("obj", obj), 3);
    assert_eq!(harness::replay("mtl", mtl), 3);
    assert_eq!(harness::replay("catalog_properties", catalog_properties), 1);
    assert_eq!(harness::replay("catalog_archive", catalog_archive), 1, "the corrupt archive is refused");
    assert_eq!(harness::replay("scene_json", scene_json), 1, "the two bad scenes are refused");
}

proptest! {
    #[test]
    fn fuzz_obj(input in harness::mutated("obj")) {
        obj(&input);
    }

    #[test]
    fn fuzz_mtl(input in harness::mutated("mtl")) {
        mtl(&input);
    }

    #[test]
    fn fuzz_catalog_properties(input in harness::mutated("catalog_properties")) {
        catalog_properties(&input);
    }

    #[test]
    fn fuzz_catalog_archive(input in harness::mutated("catalog_archive")) {
        catalog_archive(&input);
    }

    #[test]
    fn fuzz_scene_json(input in harness::mutated("scene_json")) {
        scene_json(&input);
    }
}
