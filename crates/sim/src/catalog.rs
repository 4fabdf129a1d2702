//! The Sweet Home 3D furniture catalog: CC0 furniture models with names, categories and real sizes.
//!
//! A Sweet Home 3D furniture library (`.sh3f`) is a zip archive holding `PluginFurnitureCatalog.properties`
//! (a Java properties file: `name#N`, `category#N`, `model#N`, `width#N`, ... for the N-th piece) and,
//! per piece, an OBJ model with its MTL files and textures. Debian's `sweethome3d-furniture` package
//! installs the Blend Swap CC-0 library at [`DEFAULT_CATALOG_PATH`].
//!
//! # Frames
//!
//! Sweet Home 3D treats a model as y-up with its front facing +z; the catalog's optional `modelRotation`
//! (nine numbers, a row-major 3x3 matrix `R`) is applied to the model's points first (`p' = R p`, as in
//! Sweet Home 3D's `ModelManager.getRotationTransformation`), and the rotated bounding box is then
//! stretched to the catalog's width (x), height (y) and depth (z). We keep that order and then change to
//! the furniture's *local frame* used throughout `gst-sim`: `(x, y, z)_local = (x, -z, y)_obj`, so local
//! is z-up (like the world frame) with the front facing -y; finally each axis is scaled so that the bounds
//! are exactly the catalog size (width along x, depth along y, height along z), centred on x and y, with
//! the bottom at z = 0. [`fit_to_size`] is that last step; the primitives use it too.
//!
//! # Classes
//!
//! The catalog's categories ("Living room", "Kitchen") are too coarse for the benchmark's object
//! vocabulary, so a hand-written table maps catalog ids to [`ObjectClass`]; it was checked against the
//! names, sizes and icons of the Blend Swap CC-0 library. Pieces that are not floor-standing furniture
//! of a class (`stove` is a 2-burner cooktop, `lamp2` a ceiling lamp, `cactus` and `littlePlant` are
//! table-top plants, `sofa` and `L_shaped_sofa` are corner sofas that only fit a corner) are deliberately
//! left out: they get `class: None`, and classes without any catalog piece use the primitives.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gst_core::ObjectClass;
use tracing::{debug, warn};
use zip::ZipArchive;

use crate::error::SimError;
use crate::mesh::{Texture, TriangleMesh};
use crate::obj::{self, MtlMaterial, ParseError};

/// Where Debian's `sweethome3d-furniture` package installs the Blend Swap CC-0 furniture library.
pub const DEFAULT_CATALOG_PATH: &str = "/usr/share/sweethome3d/furniture/BlendSwap-CC-0.sh3f";

/// The catalog description inside a furniture library (the default, non-localised one).
pub const PROPERTIES_MEMBER: &str = "PluginFurnitureCatalog.properties";

/// Triangle budget of one loaded model. A furnished house has a few dozen pieces, and the CPU renderer
/// must draw it at ≥ 100 frames/s on two cores, so a scene should stay around 100k triangles; some
/// catalog models have 30k faces. At 4000 triangles (vertex clustering on a grid of about 50 cells along
/// the longest side) chair legs, pillows and shelves are still clearly visible at the benchmark's 640x512.
pub const MAX_MODEL_TRIANGLES: usize = 4000;

/// Textures larger than this on a side are box-filtered down: furniture covers a small part of a
/// 640x512 frame, and full-size textures (some are 2048²) would cost memory and cache misses for nothing.
pub const MAX_TEXTURE_SIDE: u32 = 256;

/// Catalog id (the part after `#` in `id#N`) → class, for the Blend Swap CC-0 library. Ids not listed
/// have no class. Checked against the catalog: names, sizes in cm and icons.
const CLASS_OF_ID: &[(&str, ObjectClass)] = &[
    ("bed1", ObjectClass::Bed),
    ("bed2", ObjectClass::Bed),
    ("bed3", ObjectClass::Bed),
    ("bedWithTexture", ObjectClass::Bed),
    ("bedsideTable2", ObjectClass::Nightstand),
    ("wardrobeWithSlidingDoors", ObjectClass::Wardrobe),
    // A 150 cm two-door cupboard with drawers below: a cabinet rather than a chest of drawers.
    ("cupboard", ObjectClass::Cabinet),
    ("sofa2", ObjectClass::Sofa),
    ("couch", ObjectClass::Sofa),
    ("couch2", ObjectClass::Sofa),
    ("winchesterSofa", ObjectClass::Sofa),
    ("armchair2", ObjectClass::Armchair),
    ("modernArmchair", ObjectClass::Armchair),
    ("winchesterArmchair", ObjectClass::Armchair),
    // The tulip armchair (78 cm wide, upholstered seat).
    ("designChair", ObjectClass::Armchair),
    ("televisionCabinet", ObjectClass::TvStand),
    ("led_tv", ObjectClass::Television),
    ("bookcase", ObjectClass::Bookshelf),
    ("verticalShelves", ObjectClass::Bookshelf),
    ("oakTable", ObjectClass::DiningTable),
    ("table", ObjectClass::DiningTable),
    ("tableWithTablecloth", ObjectClass::DiningTable),
    // "armchair" is a plastic stacking chair with arms, not an upholstered armchair.
    ("armchair", ObjectClass::Chair),
    ("plasticChair", ObjectClass::Chair),
    ("oakChair", ObjectClass::Chair),
    ("chair", ObjectClass::Chair),
    ("chair2", ObjectClass::Chair),
    ("thonet", ObjectClass::Chair),
    ("antiqueChair", ObjectClass::Chair),
    ("sillaBlanca", ObjectClass::Chair),
    ("chairWithCushion", ObjectClass::Chair),
    // A wooden four-legged dining chair, not an office chair.
    ("osakaChair", ObjectClass::Chair),
    ("desk", ObjectClass::Desk),
    ("lbDesk", ObjectClass::Desk),
    ("refrigerator", ObjectClass::Refrigerator),
    ("largeFridge", ObjectClass::Refrigerator),
    ("lowerCabinet", ObjectClass::KitchenCabinet),
    ("highCabinet", ObjectClass::KitchenCabinet),
    // A kitchen base unit with drawers and a worktop.
    ("drawersCabinet", ObjectClass::KitchenCabinet),
    ("sinkCabinet", ObjectClass::Sink),
    ("toiletsUnit", ObjectClass::Toilet),
    ("showerStall", ObjectClass::Shower),
    ("washbasin", ObjectClass::Washbasin),
    ("modernVanity", ObjectClass::Washbasin),
    ("plant", ObjectClass::Plant),
    ("augalas", ObjectClass::Plant),
    ("decorativePlant", ObjectClass::Plant),
    ("orchids", ObjectClass::Plant),
    ("pianoAQueue", ObjectClass::Piano),
    ("bench", ObjectClass::Bench),
    ("shelves", ObjectClass::Shelf),
];

/// The class of a catalog id, if it is one of the pieces we use.
pub fn class_of_id(id: &str) -> Option<ObjectClass> {
    CLASS_OF_ID.iter().find(|(known, _)| *known == id).map(|(_, class)| *class)
}

/// One piece of furniture of the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogEntry {
    /// The catalog id without its library prefix: `bed1` for `Blend Swap CC-0#bed1`.
    pub id: String,
    pub name: String,
    pub category: String,
    /// Path of the OBJ model inside the archive, without a leading `/`.
    pub model_member: String,
    /// Width (local x), depth (local y) and height (local z) in metres.
    pub size_m: [f64; 3],
    /// Sweet Home 3D's `modelRotation`: row-major 3x3, applied to the OBJ points before anything else.
    pub model_rotation: Option<[f64; 9]>,
    pub class: Option<ObjectClass>,
}

/// A furniture library opened for reading: its index and entries; models are read on demand.
pub struct Catalog {
    path: PathBuf,
    entries: Vec<CatalogEntry>,
    /// Archive member names by their lower-case form, to resolve texture names written with another
    /// case (the models come from Windows tools).
    members_by_lowercase: BTreeMap<String, String>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("path", &self.path)
            .field("entries", &self.entries.len())
            .field("members", &self.members_by_lowercase.len())
            .finish()
    }
}

/// An MTL material and the archive folder its texture names are relative to.
struct MaterialDefinition {
    material: MtlMaterial,
    folder: String,
}

impl Catalog {
    /// Opens a furniture library: reads the archive index and the properties file only.
    ///
    /// Errors name the file: missing or unreadable, not a zip archive, no properties file, malformed
    /// properties (bad escape, missing or non-numeric size, bad `modelRotation`).
    pub fn open(path: &Path) -> Result<Catalog, SimError> {
        let mut archive = open_archive(path)?;
        let members_by_lowercase: BTreeMap<String, String> =
            archive.file_names().map(|name| (name.to_lowercase(), name.to_string())).collect();
        let bytes = match read_member(&mut archive, path, PROPERTIES_MEMBER)? {
            Some(bytes) => bytes,
            None => {
                return Err(SimError::Catalog {
                    path: path.to_path_buf(),
                    message: format!(
                        "no {PROPERTIES_MEMBER} in the archive: not a Sweet Home 3D furniture library"
                    ),
                });
            }
        };
        let catalog_error = |message: String| SimError::Catalog {
            path: path.to_path_buf(),
            message: format!("{PROPERTIES_MEMBER}: {message}"),
        };
        let properties =
            parse_properties(&decode_properties_text(&bytes)).map_err(|e| catalog_error(e.to_string()))?;
        let entries = entries_from_properties(&properties).map_err(catalog_error)?;
        for entry in &entries {
            if !members_by_lowercase.contains_key(&entry.model_member.to_lowercase()) {
                warn!(catalog = %path.display(), id = %entry.id, member = %entry.model_member, "model is not in the archive");
            }
        }
        debug!(catalog = %path.display(), entries = entries.len(), "opened furniture catalog");
        Ok(Catalog { path: path.to_path_buf(), entries, members_by_lowercase })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All entries, in catalog order.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// The entries of one class, sorted by id so that seeded scene generation is deterministic.
    pub fn entries_of(&self, class: ObjectClass) -> Vec<&CatalogEntry> {
        let mut entries: Vec<&CatalogEntry> =
            self.entries.iter().filter(|entry| entry.class == Some(class)).collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        entries
    }

    /// Loads an entry's model with its materials and textures, in the furniture's local frame (see the
    /// module docs), decimated to at most [`MAX_MODEL_TRIANGLES`] and with bounds equal to `size_m`.
    ///
    /// A missing MTL file or texture is not an error: it is logged and the material falls back to grey
    /// or to its `Kd` colour. A missing or malformed OBJ is.
    pub fn load_model(&self, entry: &CatalogEntry) -> Result<TriangleMesh, SimError> {
        let mut archive = open_archive(&self.path)?;
        let member = &entry.model_member;
        let model_error = |line: usize, message: String| SimError::Model {
            archive: self.path.clone(),
            member: member.clone(),
            line,
            message,
        };
        if !member.to_lowercase().ends_with(".obj") {
            return Err(model_error(0, "only Wavefront OBJ models are supported".to_string()));
        }
        let bytes = self.read_resolved(&mut archive, member)?.ok_or_else(|| SimError::Catalog {
            path: self.path.clone(),
            message: format!("model {member} of {} is not in the archive", entry.id),
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let model =
            obj::parse_obj(&text).map_err(|ParseError { line, message }| model_error(line, message))?;
        let mut mesh = model.mesh;
        let folder = parent_folder(member);

        let library =
            self.read_material_libraries(&mut archive, member, folder, &model.material_libraries)?;
        // Materials often share a texture: decode each file once. Missing materials and textures are known
        // defects of a few catalog models (bed1 and bed2 name Windows paths, desk a material its MTL lacks):
        // logged at debug level, since nothing can be done about them here.
        let mut textures: HashMap<String, Option<Arc<Texture>>> = HashMap::new();
        for material in &mut mesh.materials {
            let Some(definition) = library.get(&material.name) else {
                if !material.name.is_empty() && !library.is_empty() {
                    debug!(
                        catalog = %self.path.display(), %member, material = %material.name,
                        "material is not defined in the MTL files; using grey"
                    );
                }
                continue;
            };
            material.diffuse = definition.material.diffuse;
            if let Some(map) = &definition.material.diffuse_map {
                let texture = match self.resolve_member(&definition.folder, map) {
                    Some(texture_member) => textures
                        .entry(texture_member.clone())
                        .or_insert_with(|| self.load_texture(&mut archive, member, &texture_member))
                        .clone(),
                    None => {
                        debug!(
                            catalog = %self.path.display(), %member, texture = %map,
                            "texture not found; using the material colour"
                        );
                        None
                    }
                };
                material.texture = texture;
            }
        }

        let rotation = entry.model_rotation;
        mesh.transform_positions(|p| {
            let p = p.map(f64::from);
            let p = match &rotation {
                Some(r) => [
                    r[0] * p[0] + r[1] * p[1] + r[2] * p[2],
                    r[3] * p[0] + r[4] * p[1] + r[5] * p[2],
                    r[6] * p[0] + r[7] * p[1] + r[8] * p[2],
                ],
                None => p,
            };
            local_from_obj(p).map(|c| c as f32)
        });
        let mut mesh = obj::decimate(&mesh, MAX_MODEL_TRIANGLES);
        fit_to_size(&mut mesh, entry.size_m);
        if mesh.triangle_count() == 0 {
            return Err(model_error(0, "the model has no faces".to_string()));
        }
        Ok(mesh)
    }

    /// Reads and merges the MTL files named by `mtllib`, by material name (the first definition of a
    /// name wins).
    fn read_material_libraries(
        &self,
        archive: &mut ZipArchive<File>,
        obj_member: &str,
        folder: &str,
        names: &[String],
    ) -> Result<HashMap<String, MaterialDefinition>, SimError> {
        let mut library: HashMap<String, MaterialDefinition> = HashMap::new();
        for name in names {
            // `mtllib` may list several files; a single name with spaces is tried first.
            let candidates: Vec<&str> = std::iter::once(name.as_str())
                .chain(name.split_whitespace().filter(|_| name.contains(char::is_whitespace)))
                .collect();
            let mut found_any = false;
            for candidate in candidates {
                let Some(mtl_member) = self.resolve_member(folder, candidate) else { continue };
                let Some(bytes) = read_member(archive, &self.path, &mtl_member)? else { continue };
                found_any = true;
                let materials =
                    obj::parse_mtl(&String::from_utf8_lossy(&bytes)).map_err(|error| SimError::Model {
                        archive: self.path.clone(),
                        member: mtl_member.clone(),
                        line: error.line,
                        message: error.message,
                    })?;
                let mtl_folder = parent_folder(&mtl_member);
                for material in materials {
                    library
                        .entry(material.name.clone())
                        .or_insert_with(|| MaterialDefinition { material, folder: mtl_folder.to_string() });
                }
                if candidate == name.as_str() {
                    break;
                }
            }
            if !found_any {
                warn!(
                    catalog = %self.path.display(), member = %obj_member, mtllib = %name,
                    "material library not found; using grey"
                );
            }
        }
        Ok(library)
    }

    /// Reads, decodes and downsamples a texture member; logs and returns `None` when that fails, since a
    /// model without its texture is still useful.
    fn load_texture(
        &self,
        archive: &mut ZipArchive<File>,
        obj_member: &str,
        member: &str,
    ) -> Option<Arc<Texture>> {
        let texture_error = |message: String| SimError::Texture {
            archive: self.path.clone(),
            member: member.to_string(),
            message,
        };
        let result = match read_member(archive, &self.path, member) {
            Ok(Some(bytes)) => texture_from_bytes(&bytes)
                .map(|texture| downsample(texture, MAX_TEXTURE_SIDE))
                .map_err(texture_error),
            Ok(None) => Err(texture_error("not in the archive".to_string())),
            Err(error) => Err(error),
        };
        match result {
            Ok(texture) => Some(Arc::new(texture)),
            Err(error) => {
                warn!(member = %obj_member, %error, "texture unusable; using the material colour");
                None
            }
        }
    }

    /// Resolves a file name written in an OBJ or MTL file against the archive: relative to `folder`,
    /// then case-insensitively, then by its base name alone (MTL files exported on Windows often carry
    /// absolute paths such as `C:/Documents and Settings/.../wood.jpg`).
    fn resolve_member(&self, folder: &str, name: &str) -> Option<String> {
        let name = name.trim().replace('\\', "/");
        let base = name.rsplit('/').next().unwrap_or(&name).to_string();
        [join_member(folder, &name), join_member(folder, &base)]
            .into_iter()
            .flatten()
            .find_map(|candidate| self.members_by_lowercase.get(&candidate.to_lowercase()).cloned())
    }

    /// Reads a member by its name, case-insensitively.
    fn read_resolved(
        &self,
        archive: &mut ZipArchive<File>,
        member: &str,
    ) -> Result<Option<Vec<u8>>, SimError> {
        match self.members_by_lowercase.get(&member.to_lowercase()) {
            Some(actual) => read_member(archive, &self.path, actual),
            None => Ok(None),
        }
    }
}

/// `(x, y, z)` in the furniture's local frame (z up, front towards -y) from Sweet Home 3D's model frame
/// (y up, front towards +z).
pub fn local_from_obj(p: [f64; 3]) -> [f64; 3] {
    [p[0], -p[2], p[1]]
}

/// Scales `mesh` per axis so that its bounds are exactly `size_m` (width along x, depth along y, height
/// along z), centred on x and y, with the bottom at z = 0: the placement convention of every furniture
/// model. An axis along which the mesh is flat cannot be stretched; it is only centred (or put at z = 0).
pub fn fit_to_size(mesh: &mut TriangleMesh, size_m: [f64; 3]) {
    let Some((lo, hi)) = mesh.bounds() else { return };
    let lo = lo.map(f64::from);
    let hi = hi.map(f64::from);
    let scale: [f64; 3] = std::array::from_fn(|i| {
        let extent = hi[i] - lo[i];
        if extent > 1e-9 { size_m[i] / extent } else { 1.0 }
    });
    let origin = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0, lo[2]];
    mesh.transform_positions(|p| std::array::from_fn(|i| ((f64::from(p[i]) - origin[i]) * scale[i]) as f32));
}

fn open_archive(path: &Path) -> Result<ZipArchive<File>, SimError> {
    let file = File::open(path).map_err(|source| SimError::Io { path: path.to_path_buf(), source })?;
    ZipArchive::new(file)
        .map_err(|error| SimError::CatalogArchive { path: path.to_path_buf(), message: error.to_string() })
}

/// Reads one archive member; `None` when the archive has no member of that exact name.
fn read_member(
    archive: &mut ZipArchive<File>,
    path: &Path,
    member: &str,
) -> Result<Option<Vec<u8>>, SimError> {
    let archive_error = |message: String| SimError::CatalogArchive {
        path: path.to_path_buf(),
        message: format!("{member}: {message}"),
    };
    let mut file = match archive.by_name(member) {
        Ok(file) => file,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(error) => return Err(archive_error(error.to_string())),
    };
    let limit = gst_core::limits::MAX_MESH_FILE_BYTES;
    gst_core::limits::check_file_size(file.size(), limit, "catalogue members (models, materials, textures)")
        .map_err(archive_error)?;
    let mut bytes = Vec::with_capacity(usize::try_from(file.size()).unwrap_or(0).min(1 << 28));
    // The declared size may lie: never read past the limit either.
    (&mut file).take(limit + 1).read_to_end(&mut bytes).map_err(|error| archive_error(error.to_string()))?;
    gst_core::limits::check_file_size(
        bytes.len() as u64,
        limit,
        "catalogue members (models, materials, textures)",
    )
    .map_err(archive_error)?;
    Ok(Some(bytes))
}

/// The folder part of an archive member path (`""` at the root).
fn parent_folder(member: &str) -> &str {
    member.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// Joins a relative name to an archive folder, resolving `.` and `..`; `None` if it climbs out of the
/// archive or names nothing.
fn join_member(folder: &str, name: &str) -> Option<String> {
    let mut parts: Vec<&str> = if name.starts_with('/') {
        Vec::new()
    } else {
        folder.split('/').filter(|p| !p.is_empty()).collect()
    };
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Properties files are ISO-8859-1 by the Java specification, but Java 9+ resource bundles read UTF-8
/// first and fall back to ISO-8859-1, and Sweet Home 3D libraries rely on that; so do we.
fn decode_properties_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(_) => bytes.iter().map(|&b| char::from(b)).collect(),
    }
}

/// Parses a Java properties file (`java.util.Properties.load` semantics): `key=value`, `key: value` or
/// `key value`; `#` and `!` comment lines; a line ending in an odd number of backslashes continues on the
/// next one (whose leading whitespace is dropped); escapes `\t \n \r \f \uXXXX`, and `\` before any other
/// character stands for that character. A later duplicate key wins. A malformed `\u` escape is an error.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, ParseError> {
    let mut properties = BTreeMap::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, first)) = lines.next() {
        let line_number = index + 1;
        let first = first.trim_start_matches([' ', '\t', '\x0c']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = first.to_string();
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        properties.insert(unescape(key, line_number)?, unescape(value, line_number)?);
    }
    Ok(properties)
}

fn ends_with_odd_backslashes(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace; whitespace around the separator
/// is dropped. Both halves are still escaped.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut key_end = bytes.len();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let key_end = key_end.min(bytes.len());
    let mut rest = line[key_end..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(stripped) = rest.strip_prefix(['=', ':']) {
        rest = stripped.trim_start_matches([' ', '\t', '\x0c']);
    }
    (&line[..key_end], rest)
}

fn unescape(text: &str, line: usize) -> Result<String, ParseError> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4).then(|| u32::from_str_radix(&hex, 16).ok()).flatten();
                // Characters outside the basic plane come as UTF-16 surrogate pairs of two escapes.
                let decoded = match code {
                    Some(high @ 0xD800..=0xDBFF) => {
                        let rest = chars.as_str();
                        let low = rest
                            .strip_prefix("\\u")
                            .and_then(|r| r.get(..4))
                            .and_then(|h| u32::from_str_radix(h, 16).ok())
                            .filter(|low| (0xDC00..=0xDFFF).contains(low));
                        low.and_then(|low| {
                            chars = rest[6..].chars();
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        })
                    }
                    Some(code) => char::from_u32(code),
                    None => None,
                };
                match decoded {
                    Some(c) => out.push(c),
                    None => {
                        return Err(ParseError { line, message: format!("malformed \\u escape \\u{hex}") });
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// Builds the entries from the properties, pieces numbered from 1 until the first missing `name#N` (as
/// Sweet Home 3D reads them). Errors name the key.
fn entries_from_properties(properties: &BTreeMap<String, String>) -> Result<Vec<CatalogEntry>, String> {
    let mut entries = Vec::new();
    for n in 1.. {
        let Some(name) = properties.get(&format!("name#{n}")) else { break };
        let required = |key: &str| -> Result<&String, String> {
            properties
                .get(&format!("{key}#{n}"))
                .ok_or_else(|| format!("{key}#{n} is missing (piece {name:?})"))
        };
        let number = |key: &str| -> Result<f64, String> {
            let value = required(key)?;
            match value.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                _ => Err(format!("{key}#{n} = {value:?} is not a positive number")),
            }
        };
        let model = required("model")?;
        let model_member = model.trim().trim_start_matches('/').to_string();
        let id = match properties.get(&format!("id#{n}")) {
            Some(id) => id.rsplit_once('#').map_or(id.as_str(), |(_, local)| local).trim().to_string(),
            // Catalogs without ids: the model's file stem is the next best stable name.
            None => {
                let file = model_member.rsplit('/').next().unwrap_or(&model_member);
                file.rsplit_once('.').map_or(file, |(stem, _)| stem).to_string()
            }
        };
        let model_rotation = match properties.get(&format!("modelRotation#{n}")) {
            None => None,
            Some(value) => {
                let numbers: Option<Vec<f64>> =
                    value.split_whitespace().map(|t| t.parse::<f64>().ok()).collect();
                let rotation: [f64; 9] = numbers
                    .and_then(|numbers| numbers.try_into().ok())
                    .filter(|r: &[f64; 9]| r.iter().all(|v| v.is_finite()))
                    .ok_or_else(|| format!("modelRotation#{n} = {value:?} is not nine numbers"))?;
                Some(rotation)
            }
        };
        // Sizes are in centimetres in the catalog.
        let size_m = [number("width")? / 100.0, number("depth")? / 100.0, number("height")? / 100.0];
        let class = class_of_id(&id);
        entries.push(CatalogEntry {
            id,
            name: name.clone(),
            category: required("category")?.clone(),
            model_member,
            size_m,
            model_rotation,
            class,
        });
    }
    Ok(entries)
}

/// Decodes a PNG or JPEG texture to RGB (alpha dropped, grey replicated, CMYK converted).
fn texture_from_bytes(bytes: &[u8]) -> Result<Texture, String> {
    if bytes.starts_with(b"\x89PNG") {
        texture_from_png(bytes)
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        texture_from_jpeg(bytes)
    } else {
        Err("not a PNG or JPEG image".to_string())
    }
}

fn texture_from_png(bytes: &[u8]) -> Result<Texture, String> {
    let mut decoder = png::Decoder::new(bytes);
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let mut buffer = vec![0u8; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).map_err(|e| e.to_string())?;
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err("palette image was not expanded".to_string()),
    };
    let pixels = (info.width as usize) * (info.height as usize);
    let texels = (0..pixels)
        .map(|i| {
            let row = i / info.width as usize;
            let col = i % info.width as usize;
            let at = row * info.line_size + col * channels;
            match channels {
                1 | 2 => [buffer[at]; 3],
                _ => [buffer[at], buffer[at + 1], buffer[at + 2]],
            }
        })
        .collect();
    texture(info.width, info.height, texels)
}

fn texture_from_jpeg(bytes: &[u8]) -> Result<Texture, String> {
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    let pixels = decoder.decode().map_err(|e| e.to_string())?;
    let info = decoder.info().ok_or("no image information")?;
    let texels: Vec<[u8; 3]> = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => pixels.iter().map(|&l| [l; 3]).collect(),
        // Big-endian 16-bit grey: the high byte is the 8-bit value.
        jpeg_decoder::PixelFormat::L16 => pixels.chunks_exact(2).map(|l| [l[0]; 3]).collect(),
        jpeg_decoder::PixelFormat::RGB24 => pixels.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
        // The decoder outputs CMYK with 0 = no ink; without a colour profile, the naive conversion.
        jpeg_decoder::PixelFormat::CMYK32 => pixels
            .chunks_exact(4)
            .map(|p| {
                let white = 255 - u16::from(p[3]);
                [0, 1, 2].map(|i| ((255 - u16::from(p[i])) * white / 255) as u8)
            })
            .collect(),
    };
    texture(u32::from(info.width), u32::from(info.height), texels)
}

fn texture(width: u32, height: u32, texels: Vec<[u8; 3]>) -> Result<Texture, String> {
    if width == 0 || height == 0 || texels.len() != (width as usize) * (height as usize) {
        return Err(format!("bad image size {width}x{height}"));
    }
    Ok(Texture { width, height, texels })
}

/// Box-filters a texture by the smallest integer factor that brings both sides to at most `max_side`.
fn downsample(texture: Texture, max_side: u32) -> Texture {
    let factor = texture.width.max(texture.height).div_ceil(max_side.max(1));
    if factor <= 1 {
        return texture;
    }
    let width = texture.width.div_ceil(factor);
    let height = texture.height.div_ceil(factor);
    let mut texels = Vec::with_capacity((width * height) as usize);
    for y in 0..height {
        for x in 0..width {
            let (mut sum, mut count) = ([0u32; 3], 0u32);
            for sy in y * factor..((y + 1) * factor).min(texture.height) {
                for sx in x * factor..((x + 1) * factor).min(texture.width) {
                    let texel = texture.texels[(sy * texture.width + sx) as usize];
                    for c in 0..3 {
                        sum[c] += u32::from(texel[c]);
                    }
                    count += 1;
                }
            }
            texels.push(sum.map(|s| ((s + count / 2) / count.max(1)) as u8));
        }
    }
    Texture { width, height, texels }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use crate::obj::DEFAULT_DIFFUSE;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn properties_follow_java_rules() -> Result<(), ParseError> {
        let text = "\
# comment = not a key
! another comment
   key1 = value one
key2:value2
key3 value three
long = first \\
       second \\
    third
escaped\\=key = a\\tb\\u00e9\\\\
unicode = \\u0048\\u0069 \\ud83d\\ude00
empty =
trailing = ends with escaped backslash \\\\
next = still its own line
key1 = overridden
";
        let p = parse_properties(text)?;
        assert_eq!(p.get("key1").map(String::as_str), Some("overridden"));
        assert_eq!(p["key2"], "value2");
        assert_eq!(p["key3"], "value three");
        assert_eq!(p["long"], "first second third");
        assert_eq!(p["escaped=key"], "a\tbé\\");
        assert_eq!(p["unicode"], "Hi 😀");
        assert_eq!(p["empty"], "");
        assert_eq!(p["trailing"], "ends with escaped backslash \\");
        assert_eq!(p["next"], "still its own line");
        assert!(!p.keys().any(|k| k.starts_with('#') || k.starts_with('!')));
        let error = parse_properties("ok = 1\nbad = \\u12G4\n").expect_err("malformed escape");
        assert_eq!(error.line, 2);
        Ok(())
    }

    const CUBE_OBJ: &str = "\
mtllib cube.mtl
# a unit cube from -1 to 1, plus a marker vertex on +z (the front)
v -1 -1 -1
v 1 -1 -1
v 1 1 -1
v -1 1 -1
v -1 -1 1
v 1 -1 1
v 1 1 1
v -1 1 1
v 0 0 1.5
vt 0 0
vt 1 0
vt 1 1
vt 0 1
usemtl textured
f 1/1 4/4 3/3 2/2
f 5/1 6/2 7/3 8/4
usemtl plain
f 1 2 6 5
f 2 3 7 6
f 3 4 8 7
f 4 1 5 8
f 5 6 9
";

    const CUBE_MTL: &str = "\
newmtl textured
Kd 1 1 1
map_Kd tex.png
newmtl plain
Kd 0.2 0.4 0.6
";

    fn png_2x2() -> Vec<u8> {
        let mut bytes = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut bytes, 2, 2);
            encoder.set_color(png::ColorType::Rgba);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().expect("png header");
            writer
                .write_image_data(&[255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0, 255, 255, 255, 255])
                .expect("png data");
        }
        bytes
    }

    fn properties_for(model: &str, extra: &str) -> String {
        format!(
            "id=test\nname=Test library\n\n\
             id#1=Test#bed1\nname#1=Bed\ncategory#1=Bedroom\nmodel#1={model}\n\
             width#1=140\ndepth#1=200\nheight#1=50\n{extra}\
             id#2=Test#butter\nname#2=Butter\ncategory#2=Kitchen\nmodel#2=/lib/cube/cube.obj\n\
             width#2=16\ndepth#2=7.5\nheight#2=3.4\nmodelRotation#2=1 0 0 0 0 1 0 -1 0\n"
        )
    }

    fn write_zip(path: &Path, members: &[(&str, &[u8])]) -> TestResult {
        let mut writer = zip::ZipWriter::new(File::create(path)?);
        for (name, bytes) in members {
            writer.start_file(*name, SimpleFileOptions::default())?;
            writer.write_all(bytes)?;
        }
        writer.finish()?;
        Ok(())
    }

    fn cube_library(dir: &Path, properties: &str, obj: &str) -> Result<PathBuf, Box<dyn std::error::Error>> {
        let path = dir.join("test.sh3f");
        let png = png_2x2();
        write_zip(
            &path,
            &[
                (PROPERTIES_MEMBER, properties.as_bytes()),
                ("lib/cube/cube.obj", obj.as_bytes()),
                ("lib/cube/cube.mtl", CUBE_MTL.as_bytes()),
                ("lib/cube/tex.png", &png),
            ],
        )?;
        Ok(path)
    }

    #[test]
    fn loads_entries_and_a_textured_model_in_the_local_frame() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = cube_library(dir.path(), &properties_for("/lib/cube/cube.obj", ""), CUBE_OBJ)?;
        let catalog = Catalog::open(&path)?;
        assert_eq!(catalog.path(), path.as_path());
        assert_eq!(catalog.entries().len(), 2);
        let bed = &catalog.entries()[0];
        assert_eq!(bed.id, "bed1");
        assert_eq!(bed.name, "Bed");
        assert_eq!(bed.category, "Bedroom");
        assert_eq!(bed.model_member, "lib/cube/cube.obj");
        assert_eq!(bed.size_m, [1.4, 2.0, 0.5]);
        assert_eq!(bed.model_rotation, None);
        assert_eq!(bed.class, Some(ObjectClass::Bed));
        assert_eq!(catalog.entries()[1].class, None);
        assert_eq!(catalog.entries()[1].model_rotation, Some([1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0]));
        assert_eq!(catalog.entries_of(ObjectClass::Bed).len(), 1);
        assert!(catalog.entries_of(ObjectClass::Sofa).is_empty());

        let mesh = catalog.load_model(bed)?;
        let (lo, hi) = mesh.bounds().expect("non-empty");
        let expected_lo = [-0.7, -1.0, 0.0];
        let expected_hi = [0.7, 1.0, 0.5];
        for i in 0..3 {
            assert!((f64::from(lo[i]) - expected_lo[i]).abs() < 1e-4, "{lo:?}");
            assert!((f64::from(hi[i]) - expected_hi[i]).abs() < 1e-4, "{hi:?}");
        }
        // The marker at OBJ +z (the front) ends at local -y, mid-height.
        let marker = mesh
            .positions
            .iter()
            .find(|p| (f64::from(p[1]) + 1.0).abs() < 1e-4)
            .expect("a vertex at the front bound");
        assert!(marker[0].abs() < 1e-4 && (marker[2] - 0.25).abs() < 1e-4, "{marker:?}");
        assert_eq!(mesh.triangle_count(), 2 * 6 + 1);

        let textured = mesh.materials.iter().find(|m| m.name == "textured").expect("material");
        let texture = textured.texture.as_ref().expect("texture decoded");
        assert_eq!((texture.width, texture.height), (2, 2));
        assert_eq!(texture.texels, vec![[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]);
        let plain = mesh.materials.iter().find(|m| m.name == "plain").expect("material");
        assert_eq!(plain.diffuse, [0.2, 0.4, 0.6]);
        assert!(plain.texture.is_none());

        // modelRotation (x, y, z) -> (x, z, -y) turns the marker at OBJ +z to OBJ +y: the top centre.
        let butter = catalog.load_model(&catalog.entries()[1])?;
        let (lo, hi) = butter.bounds().expect("non-empty");
        assert!((hi[0] - lo[0] - 0.16).abs() < 1e-4 && (hi[1] - lo[1] - 0.075).abs() < 1e-4);
        assert!((hi[2] - 0.034).abs() < 1e-4 && lo[2].abs() < 1e-6);
        assert!(
            butter
                .positions
                .iter()
                .any(|p| p[0].abs() < 1e-4 && p[1].abs() < 1e-4 && (p[2] - hi[2]).abs() < 1e-6)
        );
        Ok(())
    }

    #[test]
    fn missing_mtl_and_texture_fall_back_with_a_warning() -> TestResult {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("partial.sh3f");
        let obj = CUBE_OBJ.replace("mtllib cube.mtl", "mtllib missing.mtl");
        let mtl = CUBE_MTL.replace("tex.png", "C:\\Users\\me\\nowhere.jpg");
        write_zip(
            &path,
            &[
                (PROPERTIES_MEMBER, properties_for("/lib/cube/cube.obj", "").as_bytes()),
                ("lib/cube/cube.obj", obj.as_bytes()),
                ("lib/cube/other.obj", CUBE_OBJ.as_bytes()),
                ("lib/cube/cube.mtl", mtl.as_bytes()),
            ],
        )?;
        let catalog = Catalog::open(&path)?;
        let mesh = catalog.load_model(&catalog.entries()[0])?;
        assert!(mesh.materials.iter().all(|m| m.diffuse == DEFAULT_DIFFUSE && m.texture.is_none()));
        let mut entry = catalog.entries()[0].clone();
        entry.model_member = "lib/cube/other.obj".to_string();
        let mesh = catalog.load_model(&entry)?;
        let textured = mesh.materials.iter().find(|m| m.name == "textured").expect("material");
        assert!(textured.texture.is_none());
        assert_eq!(textured.diffuse, [1.0, 1.0, 1.0]);
        Ok(())
    }

    #[test]
    fn errors_name_the_file() -> TestResult {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("missing.sh3f");
        let error = Catalog::open(&missing).expect_err("missing file");
        assert!(matches!(error, SimError::Io { .. }));
        assert!(error.to_string().contains("missing.sh3f"), "{error}");

        let not_zip = dir.path().join("not-a-zip.sh3f");
        std::fs::write(&not_zip, "plain text")?;
        let error = Catalog::open(&not_zip).expect_err("not a zip");
        assert!(matches!(error, SimError::CatalogArchive { .. }), "{error}");
        assert!(error.to_string().contains("not-a-zip.sh3f"), "{error}");

        let no_properties = dir.path().join("no-properties.sh3f");
        write_zip(&no_properties, &[("lib/cube/cube.obj", CUBE_OBJ.as_bytes())])?;
        let error = Catalog::open(&no_properties).expect_err("no properties");
        assert!(error.to_string().contains("no-properties.sh3f"), "{error}");
        assert!(error.to_string().contains(PROPERTIES_MEMBER), "{error}");

        let bad_size = dir.path().join("bad-size.sh3f");
        let properties = properties_for("/lib/cube/cube.obj", "").replace("width#1=140", "width#1=wide");
        write_zip(&bad_size, &[(PROPERTIES_MEMBER, properties.as_bytes())])?;
        let error = Catalog::open(&bad_size).expect_err("bad size");
        let text = error.to_string();
        assert!(
            text.contains("bad-size.sh3f") && text.contains("width#1") && text.contains("wide"),
            "{text}"
        );

        let bad_rotation = dir.path().join("bad-rotation.sh3f");
        let properties = properties_for("/lib/cube/cube.obj", "modelRotation#1=1 0 0\n");
        write_zip(&bad_rotation, &[(PROPERTIES_MEMBER, properties.as_bytes())])?;
        let error = Catalog::open(&bad_rotation).expect_err("bad rotation");
        assert!(error.to_string().contains("modelRotation#1"), "{error}");

        let bad_obj_dir = dir.path().join("bad-obj");
        std::fs::create_dir(&bad_obj_dir)?;
        let path = cube_library(
            &bad_obj_dir,
            &properties_for("/lib/cube/cube.obj", ""),
            &CUBE_OBJ.replace("f 5 6 9", "f 5 6 10"),
        )?;
        let catalog = Catalog::open(&path)?;
        let error = catalog.load_model(&catalog.entries()[0]).expect_err("bad index");
        match &error {
            SimError::Model { archive, member, line, message } => {
                assert_eq!(archive, &path);
                assert_eq!(member, "lib/cube/cube.obj");
                assert_eq!(*line, 24);
                assert!(message.contains("out of range"), "{message}");
            }
            other => panic!("unexpected error {other}"),
        }
        assert!(error.to_string().contains("test.sh3f"), "{error}");

        let mut entry = catalog.entries()[0].clone();
        entry.model_member = "lib/cube/absent.obj".to_string();
        let error = catalog.load_model(&entry).expect_err("absent model");
        assert!(
            error.to_string().contains("absent.obj") && error.to_string().contains("test.sh3f"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn textures_are_downsampled_with_a_box_filter() {
        let texels =
            (0..600 * 300).map(|i| if (i % 600) % 2 == 0 { [0, 0, 0] } else { [200, 100, 50] }).collect();
        let small = downsample(Texture { width: 600, height: 300, texels }, MAX_TEXTURE_SIDE);
        assert_eq!((small.width, small.height), (200, 100));
        assert!(small.texels.iter().all(|t| t[0].abs_diff(100) <= 34 && t[1].abs_diff(50) <= 17));
    }

    #[test]
    fn member_names_resolve_relative_case_insensitive_and_by_base_name() {
        assert_eq!(join_member("a/b", "../c/d.png").as_deref(), Some("a/c/d.png"));
        assert_eq!(join_member("a", "./x.jpg").as_deref(), Some("a/x.jpg"));
        assert_eq!(join_member("", "../x.jpg"), None);
        let catalog = Catalog {
            path: PathBuf::from("x.sh3f"),
            entries: Vec::new(),
            members_by_lowercase: [("lib/m/wood.jpg", "lib/m/Wood.JPG")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        assert_eq!(catalog.resolve_member("lib/m", "wood.jpg").as_deref(), Some("lib/m/Wood.JPG"));
        assert_eq!(catalog.resolve_member("lib/m", "C:\\tex\\WOOD.jpg").as_deref(), Some("lib/m/Wood.JPG"));
        assert_eq!(catalog.resolve_member("lib/m", "stone.jpg"), None);
    }

    /// Runs only where the Debian furniture package is installed: every classified piece loads within
    /// budget and with its catalog size.
    #[test]
    fn real_catalog_models_load() -> TestResult {
        let path = Path::new(DEFAULT_CATALOG_PATH);
        if !path.exists() {
            return Ok(());
        }
        let start = std::time::Instant::now();
        let catalog = Catalog::open(path)?;
        let open_s = start.elapsed().as_secs_f64();
        let mut known_ids: Vec<&str> = CLASS_OF_ID.iter().map(|(id, _)| *id).collect();
        known_ids.retain(|id| !catalog.entries().iter().any(|e| e.id == *id));
        assert!(known_ids.is_empty(), "class table ids not in the catalog: {known_ids:?}");
        let mut summary = Vec::new();
        for &class in ObjectClass::ALL {
            let entries = catalog.entries_of(class);
            if entries.is_empty() {
                continue;
            }
            let class_start = std::time::Instant::now();
            let mut triangles = Vec::new();
            for entry in &entries {
                let mesh = catalog.load_model(entry)?;
                assert!(mesh.triangle_count() > 0, "{}", entry.id);
                assert!(mesh.triangle_count() <= MAX_MODEL_TRIANGLES, "{}", entry.id);
                let (lo, hi) = mesh.bounds().expect("non-empty");
                for i in 0..3 {
                    let extent = f64::from(hi[i] - lo[i]);
                    assert!((extent - entry.size_m[i]).abs() < 1e-4, "{} axis {i}: {extent}", entry.id);
                }
                assert!(lo[2].abs() < 1e-5 && (lo[0] + hi[0]).abs() < 1e-4 && (lo[1] + hi[1]).abs() < 1e-4);
                triangles.push(format!("{}:{}", entry.id, mesh.triangle_count()));
            }
            summary.push(format!(
                "{class}: {} models in {:.2} s [{}]",
                entries.len(),
                class_start.elapsed().as_secs_f64(),
                triangles.join(" ")
            ));
        }
        eprintln!(
            "catalog opened in {open_s:.3} s, {} entries; models loaded in {:.2} s\n{}",
            catalog.entries().len(),
            start.elapsed().as_secs_f64() - open_s,
            summary.join("\n")
        );
        Ok(())
    }
}
