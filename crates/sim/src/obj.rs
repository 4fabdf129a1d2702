//! Wavefront OBJ and MTL parsing, and mesh decimation by vertex clustering.
//!
//! The parsers read the subset that furniture catalogs use (the Sweet Home 3D exports in particular):
//! positions, texture coordinates, faces of any size in all four index forms, `usemtl` and `mtllib`;
//! diffuse colour and diffuse texture from MTL files. Everything else (normals, smoothing groups, object
//! and group names, line elements, specular terms) is skipped: the renderer shades with face normals and
//! a diffuse model only. Errors carry the 1-based line number so that the caller can name the archive
//! member and the line.
//!
//! [`decimate`] exists because some catalog models have tens of thousands of faces, while the CPU
//! renderer has to draw a whole furnished house at interactive rates; vertex clustering is used because it
//! is simple, robust on the non-manifold "triangle soups" that catalog models are, and keeps the overall
//! shape (what a viewer recognises) rather than fine detail.

use std::collections::{HashMap, HashSet};

use crate::mesh::{Material, TriangleMesh};

/// Diffuse colour of faces without a material, or whose material is not found in any MTL file.
pub const DEFAULT_DIFFUSE: [f32; 3] = [0.7, 0.7, 0.7];

/// A parse error at a 1-based line of the OBJ or MTL text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl ParseError {
    fn new(line: usize, message: impl Into<String>) -> Self {
        Self { line, message: message.into() }
    }
}

/// A parsed OBJ file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjModel {
    /// Triangles in the OBJ's own frame. `materials` holds one placeholder per material name used by
    /// `usemtl`, in order of first use, with [`DEFAULT_DIFFUSE`] and no texture; the caller resolves them
    /// against the MTL files. Faces before any `usemtl` use a material named `""`.
    pub mesh: TriangleMesh,
    /// File names given by `mtllib`, in order, as written (relative to the OBJ file).
    pub material_libraries: Vec<String>,
}

/// One `newmtl` block of an MTL file, reduced to what the renderer uses.
#[derive(Clone, Debug, PartialEq)]
pub struct MtlMaterial {
    pub name: String,
    /// `Kd`, in [0, 1].
    pub diffuse: [f32; 3],
    /// `map_Kd` file name as written (options stripped), relative to the MTL file.
    pub diffuse_map: Option<String>,
}

/// Yields logical lines `(1-based number of the first physical line, text)`, joining lines that end with a
/// backslash (OBJ and MTL allow that continuation). Comment lines come out empty; a `#` later in a line
/// is left alone here because material and file names may contain it (numeric statements stop at it).
fn logical_lines(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    let mut physical = text.lines().enumerate().peekable();
    std::iter::from_fn(move || {
        let (index, first) = physical.next()?;
        let mut line = first.to_string();
        while line.ends_with('\\') {
            line.pop();
            match physical.next() {
                Some((_, next)) => {
                    line.push(' ');
                    line.push_str(next);
                }
                None => break,
            }
        }
        if line.trim_start().starts_with('#') {
            line.clear();
        }
        Some((index + 1, line))
    })
}

fn parse_f32(token: &str, line: usize, what: &str) -> Result<f32, ParseError> {
    match token.parse::<f32>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(ParseError::new(line, format!("{what}: {token:?} is not a finite number"))),
    }
}

/// Resolves a 1-based (positive) or relative (negative) OBJ index against `count` elements seen so far.
fn resolve_index(token: &str, count: usize, line: usize, what: &str) -> Result<u32, ParseError> {
    let index: i64 = token
        .parse()
        .map_err(|_| ParseError::new(line, format!("{what} index {token:?} is not an integer")))?;
    let resolved = match index {
        i if i > 0 => i - 1,
        i if i < 0 => count as i64 + i,
        _ => {
            return Err(ParseError::new(line, format!("{what} index 0 is invalid (OBJ indices start at 1)")));
        }
    };
    if resolved < 0 || resolved >= count as i64 {
        return Err(ParseError::new(
            line,
            format!("{what} index {index} is out of range ({count} defined so far)"),
        ));
    }
    Ok(resolved as u32)
}

/// Parses OBJ text into an indexed triangle mesh.
///
/// Polygons are fan-triangulated; faces with fewer than three vertices are skipped. Output vertices are
/// de-duplicated per (position index, texture coordinate index) pair, so a position shared by faces with
/// different texture coordinates becomes several vertices.
pub fn parse_obj(text: &str) -> Result<ObjModel, ParseError> {
    let mut positions: Vec<[f32; 3]> = Vec::new();
    let mut tex_coords: Vec<[f32; 2]> = Vec::new();
    let mut normal_count = 0usize;
    let mut model = ObjModel::default();
    let mut vertex_of: HashMap<(u32, u32), u32> = HashMap::new();
    let mut material_of: HashMap<String, u16> = HashMap::new();
    let mut current_material: Option<u16> = None;
    let mut corners: Vec<u32> = Vec::new();

    for (line, text) in logical_lines(text) {
        let mut tokens = text.split_whitespace().take_while(|token| !token.starts_with('#'));
        let Some(keyword) = tokens.next() else { continue };
        match keyword {
            "v" => {
                let mut xyz = [0.0f32; 3];
                for (i, value) in xyz.iter_mut().enumerate() {
                    let token = tokens.next().ok_or_else(|| {
                        ParseError::new(line, format!("vertex has {i} coordinates, expected 3"))
                    })?;
                    *value = parse_f32(token, line, "vertex coordinate")?;
                }
                positions.push(xyz);
            }
            "vt" => {
                let u = tokens.next().ok_or_else(|| ParseError::new(line, "texture coordinate without u"))?;
                let u = parse_f32(u, line, "texture coordinate")?;
                let v = match tokens.next() {
                    Some(token) => parse_f32(token, line, "texture coordinate")?,
                    None => 0.0,
                };
                tex_coords.push([u, v]);
            }
            "vn" => normal_count += 1,
            "f" => {
                let material = match current_material {
                    Some(material) => material,
                    None => {
                        let index = material_index(&mut model.mesh, &mut material_of, "", line)?;
                        current_material = Some(index);
                        index
                    }
                };
                corners.clear();
                for corner in tokens {
                    let mut parts = corner.split('/');
                    let position =
                        resolve_index(parts.next().unwrap_or(""), positions.len(), line, "vertex")?;
                    let uv = match parts.next() {
                        Some(token) if !token.is_empty() => {
                            resolve_index(token, tex_coords.len(), line, "texture coordinate")?
                        }
                        _ => u32::MAX,
                    };
                    if let Some(token) = parts.next().filter(|token| !token.is_empty()) {
                        resolve_index(token, normal_count, line, "normal")?;
                    }
                    let next = model.mesh.positions.len() as u32;
                    let vertex = *vertex_of.entry((position, uv)).or_insert_with(|| {
                        model.mesh.positions.push(positions[position as usize]);
                        model.mesh.uvs.push(if uv == u32::MAX {
                            [0.0, 0.0]
                        } else {
                            tex_coords[uv as usize]
                        });
                        next
                    });
                    corners.push(vertex);
                }
                for i in 1..corners.len().saturating_sub(1) {
                    model.mesh.triangles.push([corners[0], corners[i], corners[i + 1]]);
                    model.mesh.triangle_materials.push(material);
                }
            }
            "usemtl" => {
                let name = text.trim_start().strip_prefix("usemtl").unwrap_or("").trim();
                current_material = Some(material_index(&mut model.mesh, &mut material_of, name, line)?);
            }
            "mtllib" => {
                let name = text.trim_start().strip_prefix("mtllib").unwrap_or("").trim();
                if !name.is_empty() {
                    model.material_libraries.push(name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(model)
}

fn material_index(
    mesh: &mut TriangleMesh,
    material_of: &mut HashMap<String, u16>,
    name: &str,
    line: usize,
) -> Result<u16, ParseError> {
    if let Some(&index) = material_of.get(name) {
        return Ok(index);
    }
    let index = u16::try_from(mesh.materials.len())
        .map_err(|_| ParseError::new(line, "more than 65535 materials"))?;
    mesh.materials.push(Material::plain(name, DEFAULT_DIFFUSE));
    material_of.insert(name.to_string(), index);
    Ok(index)
}

/// Strips the options (`-s 1 1 1`, `-clamp on`, ...) in front of a texture file name of an MTL map
/// statement and returns the file name, which may contain spaces.
fn map_file_name(arguments: &str) -> Option<&str> {
    let mut rest = arguments.trim();
    while rest.starts_with('-') {
        let (option, after) = rest.split_once(char::is_whitespace)?;
        rest = after.trim_start();
        // Options take one argument, except these which take up to three numbers (or two for -mm).
        let max_arguments = match option {
            "-o" | "-s" | "-t" => 3,
            "-mm" => 2,
            _ => 1,
        };
        for taken in 0..max_arguments {
            let (argument, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if taken > 0 && argument.parse::<f32>().is_err() {
                break;
            }
            rest = after.trim_start();
        }
    }
    let name = rest.trim();
    (!name.is_empty()).then_some(name)
}

/// Parses MTL text. Only `newmtl`, `Kd` and `map_Kd` are read; a `Kd` or `map_Kd` outside a `newmtl`
/// block is an error, as is a non-numeric `Kd`.
pub fn parse_mtl(text: &str) -> Result<Vec<MtlMaterial>, ParseError> {
    let mut materials: Vec<MtlMaterial> = Vec::new();
    for (line, text) in logical_lines(text) {
        let trimmed = text.trim();
        let Some(keyword) = trimmed.split_whitespace().next() else { continue };
        let arguments = trimmed[keyword.len()..].trim();
        match keyword {
            "newmtl" => materials.push(MtlMaterial {
                name: arguments.to_string(),
                diffuse: DEFAULT_DIFFUSE,
                diffuse_map: None,
            }),
            "Kd" => {
                let material =
                    materials.last_mut().ok_or_else(|| ParseError::new(line, "Kd before any newmtl"))?;
                let values: Vec<f32> = arguments
                    .split_whitespace()
                    .take_while(|token| !token.starts_with('#'))
                    .map(|token| parse_f32(token, line, "Kd"))
                    .collect::<Result<_, _>>()?;
                material.diffuse = match values[..] {
                    [grey] => [grey; 3],
                    [r, g, b, ..] => [r, g, b],
                    _ => return Err(ParseError::new(line, "Kd needs 1 or 3 values")),
                }
                .map(|c| c.clamp(0.0, 1.0));
            }
            "map_Kd" => {
                let material =
                    materials.last_mut().ok_or_else(|| ParseError::new(line, "map_Kd before any newmtl"))?;
                material.diffuse_map = map_file_name(arguments).map(str::to_string);
            }
            _ => {}
        }
    }
    Ok(materials)
}

/// Simplifies `mesh` to at most `max_triangles` triangles by vertex clustering.
///
/// Vertices are snapped to a regular grid whose cell size is the finest (found by bisection on the
/// number of cells along the longest side) that meets the budget; the vertices of a cell merge into one at
/// their mean position. Clustering is done per material, so material boundaries and a representative
/// texture coordinate (that of the first vertex seen in the cell) survive. Triangles that collapse (two
/// corners in one cell) and duplicates are dropped. Averaging pulls the surface inwards by up to half a
/// cell, so the result is finally stretched per axis back to the input's bounds: placement uses the
/// bounds, and they must not change. A mesh already within budget is returned unchanged.
pub fn decimate(mesh: &TriangleMesh, max_triangles: usize) -> TriangleMesh {
    if mesh.triangle_count() <= max_triangles {
        return mesh.clone();
    }
    let Some((lo, hi)) = mesh.bounds() else { return mesh.clone() };
    // Bisection invariant: clustering with `good` cells along the longest side meets the budget (one cell
    // collapses every triangle), `bad` does not (or is the upper limit of the search).
    const MAX_CELLS: u32 = 4096;
    let mut good = 1u32;
    let mut best = cluster(mesh, lo, hi, good);
    let mut bad = MAX_CELLS + 1;
    while bad - good > 1 {
        let cells = good + (bad - good) / 2;
        let candidate = cluster(mesh, lo, hi, cells);
        if candidate.triangle_count() <= max_triangles {
            good = cells;
            best = candidate;
        } else {
            bad = cells;
        }
    }
    restore_bounds(&mut best, lo, hi);
    best
}

/// One clustering pass with `cells` grid cells along the longest side of the bounds `lo`..`hi`.
fn cluster(mesh: &TriangleMesh, lo: [f32; 3], hi: [f32; 3], cells: u32) -> TriangleMesh {
    let extent: [f32; 3] = std::array::from_fn(|i| hi[i] - lo[i]);
    let longest = extent.iter().copied().fold(0.0f32, f32::max).max(f32::MIN_POSITIVE);
    let cell_size = longest / cells as f32;
    let dims: [u64; 3] = std::array::from_fn(|i| ((extent[i] / cell_size).ceil() as u64).max(1));
    let cell_of = |p: [f32; 3]| -> u64 {
        let c: [u64; 3] =
            std::array::from_fn(|i| (((p[i] - lo[i]) / cell_size).floor().max(0.0) as u64).min(dims[i] - 1));
        (c[2] * dims[1] + c[1]) * dims[0] + c[0]
    };

    let vertex_cells: Vec<u64> = mesh.positions.iter().map(|&p| cell_of(p)).collect();
    let mut cell_sums: HashMap<u64, ([f64; 3], u32)> = HashMap::new();
    for (p, &cell) in mesh.positions.iter().zip(&vertex_cells) {
        let entry = cell_sums.entry(cell).or_insert(([0.0; 3], 0));
        for (sum, &coordinate) in entry.0.iter_mut().zip(p) {
            *sum += f64::from(coordinate);
        }
        entry.1 += 1;
    }

    let mut out = TriangleMesh { materials: mesh.materials.clone(), ..TriangleMesh::default() };
    let mut vertex_of: HashMap<(u64, u16), u32> = HashMap::new();
    let mut seen: HashSet<([u32; 3], u16)> = HashSet::new();
    for (triangle, &material) in mesh.triangles.iter().zip(&mesh.triangle_materials) {
        let cells = triangle.map(|v| vertex_cells[v as usize]);
        if cells[0] == cells[1] || cells[1] == cells[2] || cells[0] == cells[2] {
            continue;
        }
        let corners: [u32; 3] = std::array::from_fn(|k| {
            let next = out.positions.len() as u32;
            *vertex_of.entry((cells[k], material)).or_insert_with(|| {
                let (sum, count) = cell_sums.get(&cells[k]).copied().unwrap_or(([0.0; 3], 1));
                out.positions.push(sum.map(|s| (s / f64::from(count)) as f32));
                out.uvs.push(mesh.uvs.get(triangle[k] as usize).copied().unwrap_or([0.0, 0.0]));
                next
            })
        });
        // Canonical rotation keeps the winding, so the two faces of a thin panel both survive.
        let first = (0..3).min_by_key(|&k| corners[k]).unwrap_or(0);
        let canonical = [corners[first], corners[(first + 1) % 3], corners[(first + 2) % 3]];
        if seen.insert((canonical, material)) {
            out.triangles.push(corners);
            out.triangle_materials.push(material);
        }
    }
    out
}

/// Stretches `mesh` per axis so that its bounds become `lo`..`hi`.
fn restore_bounds(mesh: &mut TriangleMesh, lo: [f32; 3], hi: [f32; 3]) {
    let Some((now_lo, now_hi)) = mesh.bounds() else { return };
    let scale: [f32; 3] = std::array::from_fn(|i| {
        let now = now_hi[i] - now_lo[i];
        if now > f32::EPSILON * (hi[i] - lo[i]).abs().max(1.0) { (hi[i] - lo[i]) / now } else { 1.0 }
    });
    mesh.transform_positions(|p| std::array::from_fn(|i| lo[i] + (p[i] - now_lo[i]) * scale[i]));
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_face_form() -> Result<(), ParseError> {
        let text = "\
# a comment
o thing
g group
s 1
mtllib a.mtl
v 0 0 0
v 1 0 0 # trailing comment
v 1 1 0
v 0 1 0
vt 0 0
vt 1 0
vt 1 1
vn 0 0 1
usemtl red
f 1 2 3
f 1/1 2/2 3/3
f 1/1/1 3/3/1 4/3/1
f 1//1 3//1 4//1
unknown statement here
";
        let model = parse_obj(text)?;
        assert_eq!(model.material_libraries, vec!["a.mtl".to_string()]);
        assert_eq!(model.mesh.triangle_count(), 4);
        assert_eq!(model.mesh.materials.len(), 1);
        assert_eq!(model.mesh.materials[0].name, "red");
        // (1,-) (2,-) (3,-) (1,1) (2,2) (3,3) (4,3) (4,-): 8 distinct (position, uv) pairs.
        assert_eq!(model.mesh.positions.len(), 8);
        assert_eq!(model.mesh.uvs.len(), 8);
        assert_eq!(model.mesh.triangles[0], [0, 1, 2]);
        assert_eq!(model.mesh.triangles[3], [0, 2, 7]);
        assert_eq!(model.mesh.uvs[5], [1.0, 1.0]);
        Ok(())
    }

    #[test]
    fn negative_indices_are_relative() -> Result<(), ParseError> {
        let model = parse_obj("v 0 0 0\nv 1 0 0\nv 0 1 0\nf -3 -2 -1\nv 5 5 5\nf -4 -1 -2\n")?;
        assert_eq!(model.mesh.triangle_count(), 2);
        let t = model.mesh.triangles[1];
        assert_eq!(model.mesh.positions[t[0] as usize], [0.0, 0.0, 0.0]);
        assert_eq!(model.mesh.positions[t[1] as usize], [5.0, 5.0, 5.0]);
        assert_eq!(model.mesh.positions[t[2] as usize], [0.0, 1.0, 0.0]);
        Ok(())
    }

    #[test]
    fn polygons_are_fan_triangulated_and_faces_before_usemtl_get_a_default() -> Result<(), ParseError> {
        let model =
            parse_obj("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv -1 1 0\nf 1 2 3 4\nf 1 2 3 4 5\nf 1 2\n")?;
        assert_eq!(model.mesh.triangles[..2], [[0, 1, 2], [0, 2, 3]]);
        assert_eq!(model.mesh.triangle_count(), 2 + 3);
        assert_eq!(model.mesh.materials, vec![Material::plain("", DEFAULT_DIFFUSE)]);
        assert!(model.mesh.triangle_materials.iter().all(|&m| m == 0));
        Ok(())
    }

    #[test]
    fn bad_indices_and_numbers_are_errors_with_line_numbers() {
        let cases = [
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\n\nf 1 2 4\n", 5, "out of range"),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", 4, "index 0"),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf -4 1 2\n", 4, "out of range"),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1/1 2/1 3/1\n", 4, "texture coordinate index 1"),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1//2 2//2 3//2\n", 4, "normal index 2"),
            ("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 x\n", 4, "not an integer"),
            ("v 0 0 0\nv 1 zero 0\n", 2, "not a finite number"),
            ("v 0 0\n", 1, "2 coordinates"),
            ("v 0 0 0\nvt nan 0\n", 2, "not a finite number"),
        ];
        for (text, line, needle) in cases {
            let error = parse_obj(text).expect_err(text);
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(error.message.contains(needle), "{text:?}: {error}");
        }
    }

    #[test]
    fn continuation_lines_join_and_keep_the_first_line_number() {
        let error = parse_obj("v 0 0 0\nv 1 \\\n 0 0\nf 1 2 \\\n 3\n").expect_err("index 3 is out of range");
        assert_eq!(error.line, 4);
    }

    #[test]
    fn mtl_reads_colours_and_maps_with_options() -> Result<(), ParseError> {
        let text = "\
newmtl wood
Ka 0 0 0
Kd 0.5 0.25 1.5
map_Kd -s 1 1 1 -clamp on textures/wood grain.jpg
newmtl grey
Kd 0.3
map_Kd C:/Documents and Settings/x.png
";
        let materials = parse_mtl(text)?;
        assert_eq!(materials.len(), 2);
        assert_eq!(materials[0].diffuse, [0.5, 0.25, 1.0]);
        assert_eq!(materials[0].diffuse_map.as_deref(), Some("textures/wood grain.jpg"));
        assert_eq!(materials[1].diffuse, [0.3; 3]);
        assert_eq!(materials[1].diffuse_map.as_deref(), Some("C:/Documents and Settings/x.png"));
        let error = parse_mtl("newmtl a\nKd 1 x 1\n").expect_err("x is not a number");
        assert_eq!(error.line, 2);
        assert!(parse_mtl("Kd 1 1 1\n").is_err());
        Ok(())
    }

    /// A UV sphere with `rings` x `segments` quads, as triangles.
    fn sphere(rings: u32, segments: u32) -> TriangleMesh {
        let mut mesh = TriangleMesh { materials: vec![Material::plain("s", [1.0; 3])], ..Default::default() };
        for ring in 0..=rings {
            let theta = std::f32::consts::PI * ring as f32 / rings as f32;
            for segment in 0..segments {
                let phi = std::f32::consts::TAU * segment as f32 / segments as f32;
                mesh.positions.push([theta.sin() * phi.cos(), theta.sin() * phi.sin(), theta.cos()]);
                mesh.uvs.push([segment as f32 / segments as f32, ring as f32 / rings as f32]);
            }
        }
        for ring in 0..rings {
            for segment in 0..segments {
                let a = ring * segments + segment;
                let b = ring * segments + (segment + 1) % segments;
                let (c, d) = (a + segments, b + segments);
                mesh.triangles.push([a, c, b]);
                mesh.triangles.push([b, c, d]);
                mesh.triangle_materials.extend([0, 0]);
            }
        }
        mesh
    }

    #[test]
    fn decimation_meets_the_budget_and_keeps_the_bounds() {
        let dense = sphere(120, 240);
        assert!(dense.triangle_count() > 50_000);
        let (lo, hi) = dense.bounds().expect("non-empty");
        for budget in [4000, 500] {
            let coarse = decimate(&dense, budget);
            assert!(coarse.triangle_count() <= budget, "{} > {budget}", coarse.triangle_count());
            assert!(coarse.triangle_count() > budget / 4, "{} wasted budget", coarse.triangle_count());
            assert_eq!(coarse.uvs.len(), coarse.positions.len());
            assert_eq!(coarse.triangle_materials.len(), coarse.triangles.len());
            assert_eq!(coarse.materials, dense.materials);
            let (clo, chi) = coarse.bounds().expect("non-empty");
            for i in 0..3 {
                let extent = hi[i] - lo[i];
                assert!((clo[i] - lo[i]).abs() <= 0.05 * extent, "axis {i}: {clo:?} vs {lo:?}");
                assert!((chi[i] - hi[i]).abs() <= 0.05 * extent, "axis {i}: {chi:?} vs {hi:?}");
            }
            // No degenerate triangles and every vertex still on (roughly) the unit sphere.
            for t in &coarse.triangles {
                assert!(t[0] != t[1] && t[1] != t[2] && t[0] != t[2]);
            }
            for p in &coarse.positions {
                let r = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
                assert!((0.8..=1.1).contains(&r), "radius {r}");
            }
        }
        let small = sphere(4, 8);
        assert_eq!(decimate(&small, 1000), small);
    }
}
