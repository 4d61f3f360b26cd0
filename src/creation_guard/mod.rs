//! The creation guard (issue #12, SPEC §4.8; docs/decisions/0009).
//!
//! PROMISES. A protected workspace path that does not exist at launch cannot
//! be created from inside either, and the user's repository gets no
//! placeholder for it. And by rule, wherever it is and whenever it came to
//! be (`gitrule.rs`, issue #22): nothing is planted in a git directory that
//! host git would run — no hook, no `config` key that runs a command, no
//! pointer out of it — and no git directory comes to be with one.
//!
//! The shim, the first program inside the sandbox, forks. The child loads a
//! seccomp filter (`filter.rs`) that hands every creating syscall — `open`/
//! `openat` with `O_CREAT` (or any flag that writes: the git rule refuses
//! opening a git directory's `config` or hook for writing), `creat`, `mkdir`, `mknod`, `symlink`, `link`,
//! `rename`, `rmdir` and their `*at` forms, and `bind` (a unix socket's
//! path, decision 0029) — to the listener, sends the
//! listener to the parent, and execs the real binary; everything it starts
//! inherits the filter. The parent becomes the **supervisor**: for each call
//! it copies the path strings out of the caller's memory *once*, resolves
//! the parent directory itself, refuses a protected name there (`EPERM`),
//! and otherwise performs the call itself on that resolved directory and
//! that copy, returning the result (a new descriptor is placed in the caller
//! with `SECCOMP_IOCTL_NOTIF_ADDFD`). So what is checked is exactly what is
//! done: a second thread that rewrites the path after the check changes
//! nothing, and `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (which would let the
//! kernel read the path again) is never used for a call the guard decides
//! on. The filter hands `umask(2)`, `chdir(2)` and `fchdir(2)` over too:
//! noted and let through (`CONTINUE`; nothing is decided on their
//! arguments), so the supervisor knows when a caller's umask or working
//! directory it remembered may have changed (`fs_context.rs`, decisions
//! 0020 and 0021).
//!
//! The supervisor lives inside the sandbox, so it has the caller's root,
//! mounts, user namespace and credentials: performing a call for it grants
//! nothing the caller did not have. It is not dumpable (no process inside
//! can trace it or read its memory), is the child subreaper of the session
//! (so every process inside stays its descendant, as a ptrace-scoped
//! `process_vm_readv` needs), forwards the signals the shadow sends, and
//! exits with the real binary's status. If it dies, every creating call
//! inside fails (`ENOSYS`): closed, never open.
//!
//! May import: `sys` (fd passing, `/proc` status fields), `error` (exit
//! codes), `sandbox` (the guard list's encoding), `seccomp` (its
//! assembler and ABI table, which the guard's filter is built with) and
//! `plan::gitconfig` (the one reading of git config the rule decides with).
//!
//! Exports: one entry, what the shim (`launch::shim`) runs when there are
//! protected paths: [`guarded`] reads them from the shim's fd, forks, and
//! returns `None` in the child (which goes on under the filter to exec the
//! real binary) or, in the parent, the real binary's status once the
//! supervisor has served the whole session.
//!
//! Files: `filter.rs` (the guard's seccomp filter and its loading),
//! `fork.rs` (the shim's entry, fork, supervise, signals, the table's reading), `table.rs`
//! (the protected names), `calls.rs` (a notification decoded), `proc.rs`
//! (the caller: its memory, its `/proc`), `resolve.rs` (paths resolved as
//! the kernel would), `serve.rs` (the serving threads, every call but
//! `open`), `open.rs` (`open(O_CREAT)` and opens that write; a plain
//! creation in one `openat2`, decisions 0022 and 0023), `gitrule.rs`
//! (git directories by rule), `fs_context.rs` (the callers' umasks and
//! working directories), `fifo_wait.rs` (an existing FIFO's open waited
//! for apart, given up when its caller is gone), `aside.rs` (a git
//! directory's `config` made by a plain open, held aside until the
//! session's end, then checked and put in place: issue #44), `bind.rs`
//! (`bind(2)` of a unix socket to a path, performed on the caller's own
//! socket: issue #45), `fold.rs` and `spelling.rs` (names on a workspace
//! whose file system folds case, decided by its lookup: issue #45 item 8).

mod aside;
mod bind;
mod calls;
mod fifo_wait;
mod filter;
mod fold;
mod fork;
mod fs_context;
mod gitrule;
mod open;
mod proc;
mod resolve;
mod serve;
mod spelling;
mod table;
mod worktrees;

pub(crate) use fork::guarded;
