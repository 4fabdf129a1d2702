//! The `gst` binary: a thin shell over [`gst_cli`], as ripgrep's binary is over its library crates.

fn main() -> std::process::ExitCode {
    gst_cli::main()
}
