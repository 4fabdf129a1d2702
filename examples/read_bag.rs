//! Read a ROS bag (ROS 2 MCAP, a rosbag2 folder or a ROS 1 `.bag`) as colour–depth frame pairs.
//!
//! ```sh
//! cargo run --release --example read_bag -- recording.mcap
//! ```
//! Prints the topics the pairing chose, then each pair's stamp and image size.
#![allow(clippy::print_stdout)]

use std::path::Path;

use anyhow::bail;
use gst_bag::{BagOptions, BagSource};
use gst_io::FrameSource;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bag] = args.as_slice() else { bail!("usage: read_bag BAG") };
    let options = BagOptions::default();
    println!("{}", gst_bag::info(Path::new(bag), &options)?);

    let mut source = BagSource::open(Path::new(bag), &options)?;
    let mut pairs = 0;
    while let Some(frame) = source.next_frame()? {
        pairs += 1;
        if pairs <= 3 {
            println!(
                "{:.3} s: {}x{} colour with depth",
                frame.timestamp_s,
                frame.rgb.width(),
                frame.rgb.height()
            );
        }
    }
    println!("{pairs} frame pairs");
    Ok(())
}
