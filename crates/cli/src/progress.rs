//! Progress bars that draw on a terminal and stay silent when stderr is piped.

use indicatif::{ProgressBar, ProgressStyle};

pub fn bar(length: u64, message: &str) -> ProgressBar {
    let bar = ProgressBar::new(length);
    let style = ProgressStyle::with_template("{msg:>12} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(message.to_string());
    bar
}
