//! Fixtures shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gst_sim::library::FurnitureLibrary;

/// The `gst` binary built for this test run.
pub fn gst() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gst"))
}

/// Runs `gst` with arguments and returns its output.
pub fn run(args: &[&str]) -> Output {
    match gst().args(args).output() {
        Ok(output) => output,
        Err(error) => panic!("cannot start gst: {error}"),
    }
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that `gst` failed cleanly: non-zero exit, no panic, and a message containing every `needle`.
pub fn assert_clean_failure(output: &Output, needles: &[&str]) {
    let text = stderr(output);
    assert!(!output.status.success(), "expected failure, got success; stderr: {text}");
    assert!(!text.contains("panicked"), "gst panicked: {text}");
    for needle in needles {
        assert!(text.contains(needle), "stderr should mention {needle:?}: {text}");
    }
}

/// The catalog library when the Debian package is installed (as `make setup` does), else primitives.
pub fn library() -> FurnitureLibrary {
    FurnitureLibrary::open(None).unwrap_or_else(|_| FurnitureLibrary::primitives_only())
}

/// Path of a file in `tests/bad`.
pub fn bad(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad").join(name)
}

/// All files under `dir`, relative paths sorted, with their bytes.
pub fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let relative = path.strip_prefix(dir).map(|p| p.display().to_string()).unwrap_or_default();
                out.push((relative, bytes));
            }
        }
    }
    out.sort();
    out
}

/// Asserts that two directories hold the same files with the same bytes, naming the ones that differ.
pub fn assert_same_files(a: &Path, b: &Path) {
    let (fa, fb) = (files(a), files(b));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&fa), names(&fb), "different file lists");
    let differing: Vec<&String> = fa.iter().zip(&fb).filter(|(x, y)| x.1 != y.1).map(|(x, _)| &x.0).collect();
    assert!(differing.is_empty(), "files differ between {} and {}: {differing:?}", a.display(), b.display());
}

/// A `gst` run under strace: its output and every path it tried to open.
#[derive(Debug)]
pub struct Traced {
    pub output: Output,
    pub opened: Vec<String>,
}

/// Runs `gst` under `strace` and lists every path it tried to open (`open`, `openat`, `openat2`, `creat`).
/// `None` when strace is not installed (`make setup` installs it).
pub fn opened_paths(args: &[&str]) -> anyhow::Result<Option<Traced>> {
    if Command::new("strace").arg("-V").output().is_err() {
        return Ok(None);
    }
    let dir = tempfile::tempdir()?;
    let trace = dir.path().join("trace.txt");
    let output = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=open,openat,openat2,creat", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_gst"))
        .args(args)
        .output()?;
    let text = std::fs::read_to_string(&trace)?;
    let mut paths = Vec::new();
    for line in text.lines() {
        // `PID openat(AT_FDCWD, "/path", O_RDONLY|O_CLOEXEC) = 3` (strace escapes quotes and non-ASCII).
        let Some(start) = line.find('"') else { continue };
        let Some(len) = line[start + 1..].find('"') else { continue };
        let path = line[start + 1..start + 1 + len].to_string();
        paths.push(path);
    }
    Ok(Some(Traced { output, opened: paths }))
}
