//! The base every role stands on: facts the kernel and the system give, and
//! plumbing between processes. Promises nothing about the sandbox itself;
//! it promises to stay below it.
//!
//! May import: nothing of the crate (tests/layout.rs fails otherwise), so
//! any folder may import it without a circle.
//!
//! Exports its modules as namespaces, each small and self-contained:
//! - [`paths`]: compile-time locations of every security input (SPEC §1);
//! - [`files`]: reading the small text files a launch depends on, refusing
//!   FIFOs, directories, devices and oversized files;
//! - [`fd`]: fd moves and closes between fork and exec, one-byte signals,
//!   fd passing over unix sockets;
//! - [`kernel`]: namespace identities, loopback listeners, routes, children,
//!   signal dispositions;
//! - [`inside`]: "am I inside the sandbox?" from kernel facts (SPEC §2.1);
//! - [`user`]: who is launching (ids, login name, home);
//! - [`clock`]: UTC times as text without a time-zone database;
//! - [`text`]: bytes as hex.

pub(crate) mod clock;
pub(crate) mod fd;
pub(crate) mod files;
pub(crate) mod inside;
pub(crate) mod kernel;
pub(crate) mod paths;
pub(crate) mod text;
pub(crate) mod user;
