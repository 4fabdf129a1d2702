//! Finding and loading ONNX Runtime.
//!
//! `ort` is built with `load-dynamic`: the library is opened at run time, not linked. Where it comes from,
//! first match wins:
//! 1. an explicit path (`OnnxConfig::ort_library`, `gst eval --ort-library`);
//! 2. `ORT_DYLIB_PATH` (what `.venv/env.sh` from `make setup` exports);
//! 3. `$GST_VENV`, then a `.venv` in the current directory or any directory above it: the newest
//!    `lib/python*/site-packages/onnxruntime/capi/libonnxruntime.so*` of the wheel (ort rc.15 needs ≥ 1.31).
//!
//! ONNX Runtime allows one environment per process; [`environment`] creates it once and hands out clones.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::environment::Environment;

use crate::VlmError;

static ENVIRONMENT: Mutex<Option<Environment>> = Mutex::new(None);

/// The `libonnxruntime.so*` of a virtualenv's onnxruntime wheel, the newest when there are several.
pub fn library_in_venv(venv: &Path) -> Option<PathBuf> {
    let mut found = Vec::new();
    for python in std::fs::read_dir(venv.join("lib")).ok()?.flatten() {
        let capi = python.path().join("site-packages/onnxruntime/capi");
        let Ok(entries) = std::fs::read_dir(&capi) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("libonnxruntime.so") && entry.path().is_file() {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found.pop()
}

/// Where ONNX Runtime would be loaded from (see the module documentation), or `None`.
pub fn find_library(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    if let Some(path) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    if let Some(venv) = std::env::var_os("GST_VENV").filter(|p| !p.is_empty())
        && let Some(lib) = library_in_venv(Path::new(&venv))
    {
        return Some(lib);
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors().find_map(|dir| library_in_venv(&dir.join(".venv")))
}

/// The process's ONNX Runtime environment, created on first use from the library [`find_library`] finds.
pub fn environment(explicit_library: Option<&Path>) -> Result<Environment, VlmError> {
    let mut slot = ENVIRONMENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(environment) = slot.as_ref() {
        return Ok(environment.clone());
    }
    let library = find_library(explicit_library).ok_or_else(|| {
        VlmError::Runtime(
            "cannot find libonnxruntime.so: set ORT_DYLIB_PATH (source .venv/env.sh after `make setup`) or \
             run from the repository, whose .venv holds the onnxruntime wheel"
                .into(),
        )
    })?;
    if !library.is_file() {
        return Err(VlmError::Runtime(format!("ONNX Runtime library {} does not exist", library.display())));
    }
    tracing::info!(library = %library.display(), "loading ONNX Runtime");
    let environment = ort::init_from(&library)
        .map_err(|e| VlmError::Runtime(format!("cannot load {}: {e}", library.display())))?
        .with_name("gst")
        .build()
        .map_err(|e| {
            VlmError::Runtime(format!("cannot create an environment from {}: {e}", library.display()))
        })?;
    *slot = Some(environment.clone());
    Ok(environment)
}
