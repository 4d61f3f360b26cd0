//! held: what host git would run or trust, written inside, kept for the
//! user instead of refused (issue #44 item 3, docs/decisions/0028).
//!
//! Promise. A session can install a git hook in the workspace's
//! repositories, and set a key outside the allow-list of what git writes
//! (`core.hooksPath`, a helper, a proxy…): the call succeeds inside, so
//! `pre-commit install`, husky and `git lfs install` finish; nothing of it
//! reaches where host git looks. Each git directory's existing `hooks` is
//! bound, inside, to a copy in the session's private state (hidden
//! inside; the hooks run inside, sandboxed); a config key the creation
//! guard holds is left out of the file it writes and said on the session's
//! notices file (which only the sandbox's own parts write). When the
//! session ends both are gathered into [`Item`]s, recorded with the
//! tripwire's record of the session (and kept as long as it is), and
//! `claude-sandbox review` shows each with its full content and why it
//! was held; `review --apply ID` puts it in place on the host after
//! showing it, only when the target is as the session left it, and never
//! runs anything.
//!
//! May import: `sys`.
//!
//! Exports: the launch's [`Copies`] (made before the sandbox, gathered
//! after it), the guard's [`key_notice`], the record's [`Item`] and
//! review's [`apply`].

mod apply;
mod copies;
mod item;

pub(crate) use apply::apply;
pub(crate) use copies::Copies;
#[cfg(test)]
pub(crate) use copies::DIR_REL as STATE_REL;
pub(crate) use item::{key_notice, Item, What};
