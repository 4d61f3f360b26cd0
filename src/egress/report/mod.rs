//! `claude-sandbox egress report` (SPEC §4.9): what one session's proxy let
//! through and refused, read from its connection log, with a risk score.
//!
//! Files: `show.rs` reads a log and prints the report (text or `--json`);
//! `tally.rs` its arithmetic, pure: the sums and the risk score.
//!
//! May import: `egress::policy` (the log's format and paths), `sys`,
//! `error`.
//!
//! Exports: [`report_main`]; [`Tally`] (lib.rs's `fuzz_targets`).

mod show;
mod tally;

pub(crate) use show::report_main;
pub(crate) use tally::Tally;
