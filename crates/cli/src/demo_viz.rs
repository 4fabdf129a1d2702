//! The demo's Rerun recording (filled in once gst-viz lands).

use std::path::Path;

use anyhow::Result;

pub fn record(_bench: &Path, _eval_dir: &Path, _rrd: &Path, _spawn: bool) -> Result<()> {
    Ok(())
}
