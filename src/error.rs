//! Errors that end the process with a documented exit status.
//!
//! | status | meaning |
//! |---|---|
//! | 0–124 | the real Claude Code's own exit status (shadow) |
//! | 2 | bad input: configuration file, environment override or command line |
//! | 125 | the sandbox could not be built (missing prerequisite, bubblewrap or jail failure) |
//! | 126 | integrity refusal: the real binary does not match its pin |
//! | 127 | not installed: the real binary or our own files are missing |
//! | 128+N | the sandboxed program was killed by signal N |

use std::fmt;

/// Exit status for bad user input.
pub(crate) const EXIT_BAD_INPUT: i32 = 2;
/// Exit status when the sandbox cannot be built.
pub(crate) const EXIT_SETUP: i32 = 125;
/// Exit status when the integrity check refuses the real binary.
pub(crate) const EXIT_INTEGRITY: i32 = 126;
/// Exit status when something the launch needs is not installed.
const EXIT_NOT_INSTALLED: i32 = 127;

/// An error meant for a person: one line, what failed, with the value, and what to do.
#[derive(Debug)]
pub(crate) struct Fail {
    pub code: i32,
    pub msg: String,
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for Fail {}

impl Fail {
    pub(crate) fn new(code: i32, msg: impl Into<String>) -> Self {
        Fail {
            code,
            msg: msg.into(),
        }
    }
}

/// Bad input (exit 2).
pub(crate) fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    Fail::new(EXIT_BAD_INPUT, msg).into()
}

/// The sandbox could not be built (exit 125).
pub(crate) fn setup(msg: impl Into<String>) -> anyhow::Error {
    Fail::new(EXIT_SETUP, msg).into()
}

/// Not installed (exit 127).
pub(crate) fn not_installed(msg: impl Into<String>) -> anyhow::Error {
    Fail::new(EXIT_NOT_INSTALLED, msg).into()
}

/// The exit status an error maps to: its own for a [`Fail`], 1 otherwise.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    err.downcast_ref::<Fail>().map_or(1, |f| f.code)
}
