//! `claude-sandbox doctor`: not built yet (issue #4).

/// Command-line arguments of `claude-sandbox doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Everything else, for now.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<std::ffi::OsString>,
}

/// Run `claude-sandbox doctor`; returns the exit status.
pub fn main(_args: &Args) -> anyhow::Result<i32> {
    Err(crate::error::Fail::new(
        1,
        "`claude-sandbox doctor` is not available yet in this build",
    )
    .into())
}
