//! `gst bag info FILE`: a recording's topics (type, messages, rate) and the pairing `gst slam` would use;
//! `gst export-bag EPISODE OUT.mcap`: frames as a ROS 2 MCAP file (both in `gst-bag`).

use std::path::PathBuf;

use anyhow::{Context, Result};

use gst_io::SourceOptions;

use crate::input_args::TopicArgs;

#[derive(Debug, clap::Args)]
pub struct BagArgs {
    #[command(subcommand)]
    pub which: BagKind,
}

#[derive(Debug, clap::Subcommand)]
pub enum BagKind {
    /// Topics, types, message counts, rates, and the colour/depth/CameraInfo pairing a run would use.
    Info(BagInfoArgs),
}

#[derive(Debug, clap::Args)]
pub struct BagInfoArgs {
    /// An `.mcap` file, a rosbag2 folder (with metadata.yaml) or a ROS 1 `.bag`.
    pub file: PathBuf,
    /// A calibration file to use instead of CameraInfo (as `gst slam --calib`).
    #[arg(long)]
    pub calib: Option<PathBuf>,
    #[command(flatten)]
    pub topics: TopicArgs,
}

pub fn run(args: &BagArgs) -> Result<()> {
    match &args.which {
        BagKind::Info(info) => {
            let options = SourceOptions { calibration: info.calib.clone(), ..SourceOptions::default() };
            let text = gst_bag::info(&info.file, &gst_bag::bag_options(&options, &info.topics.choice()))?;
            #[allow(clippy::print_stdout)] // the command's report
            {
                print!("{text}");
            }
            Ok(())
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ExportBagArgs {
    /// A recording: a `gst generate` episode (`DIR/<split>/tum/<scene>`), a TUM RGB-D directory, an image
    /// folder with depth, or another bag.
    pub input: PathBuf,
    /// The MCAP file to write (atomically).
    pub out: PathBuf,
    /// Calibration file; default: the input's own.
    #[arg(long)]
    pub calib: Option<PathBuf>,
    /// Depth encoding: 32FC1 (metres, the frames' depth exactly) or 16UC1 (millimetres, as RealSense
    /// drivers publish; rounds to 1 mm).
    #[arg(long, default_value = "32FC1")]
    pub depth_encoding: gst_bag::DepthEncoding,
    /// zstd-compress the MCAP chunks.
    #[arg(long)]
    pub compress: bool,
    #[command(flatten)]
    pub topics: TopicArgs,
}

pub fn run_export(args: &ExportBagArgs) -> Result<()> {
    // Frames are exported as recorded, with their distortion in CameraInfo.
    let options =
        SourceOptions { calibration: args.calib.clone(), undistort: false, ..SourceOptions::default() };
    let mut source = gst_bag::open_source(&args.input, &options, &args.topics.choice())?;
    let calibration = source.calibration().clone();
    let export = gst_bag::ExportOptions { depth: args.depth_encoding, compress: args.compress };
    let summary = gst_bag::export_mcap(source.as_mut(), &calibration, &args.out, &export)
        .with_context(|| format!("exporting {} to {}", args.input.display(), args.out.display()))?;
    eprintln!(
        "wrote {}: {} frames, {} messages, {:.1} MB",
        args.out.display(),
        summary.frames,
        summary.messages,
        summary.bytes as f64 / 1e6
    );
    Ok(())
}
