//! `claude-sandbox promote`: not built yet (issue #6).

/// Command-line arguments of `claude-sandbox promote`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Everything else, for now.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<std::ffi::OsString>,
}

/// Run `claude-sandbox promote`; returns the exit status.
pub fn main(_args: &Args) -> anyhow::Result<i32> {
    Err(crate::error::Fail::new(
        1,
        "`claude-sandbox promote` is not available yet in this build",
    )
    .into())
}
