//! `soak bench` (placeholder).

/// Flags of `soak bench`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the benchmark.
pub fn main(_: Args) -> anyhow::Result<std::process::ExitCode> {
    Ok(std::process::ExitCode::SUCCESS)
}
