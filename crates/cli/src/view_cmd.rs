//! `gst view FILE`: opens a saved Rerun recording in the viewer.

use std::path::PathBuf;

use anyhow::Result;

#[derive(Debug, clap::Args)]
pub struct ViewArgs {
    /// A recording written with `--rrd` (`.rrd`).
    pub file: PathBuf,
}

/// Checks that the file is a recording, then runs the viewer on it (from `$GST_VENV/bin`, `.venv/bin` or
/// `PATH`) and waits until it is closed.
pub fn run(args: &ViewArgs) -> Result<()> {
    gst_viz::view_file(&args.file)?;
    Ok(())
}
