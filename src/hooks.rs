//! `claude-sandbox hooks`: not built yet (issue #4).

/// Command-line arguments of `claude-sandbox hooks`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Everything else, for now.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<std::ffi::OsString>,
}

/// Run `claude-sandbox hooks`; returns the exit status.
pub fn main(_args: &Args) -> anyhow::Result<i32> {
    Err(crate::error::Fail::new(
        1,
        "`claude-sandbox hooks` is not available yet in this build",
    )
    .into())
}
