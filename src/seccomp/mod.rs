//! The seccomp filter bubblewrap loads for the whole sandbox (`--seccomp`).
//!
//! PROMISES. A Docker devcontainer runs with `seccomp=unconfined` (our
//! namespaces need it), so this filter is the only one between a session
//! and the kernel. It is a deny list, at least as strict as Docker's default
//! profile for what a coding session does not need
//! (docs/decisions/0007-seccomp-profile.md has the table, syscall by
//! syscall, with Docker's choice beside ours):
//!
//! - **terminal injection** (SPEC §4.4): `ioctl(TIOCSTI)` and
//!   `ioctl(TIOCLINUX)` fail with EPERM (docs/decisions/0001-tiocsti-seccomp.md);
//! - **kernel keyrings**: `add_key`, `request_key`, `keyctl`;
//! - **namespaces**: `clone` and `unshare` with a namespace flag, `setns`;
//!   `clone3` fails with ENOSYS (its flags are in memory, out of the filter's
//!   reach, and every libc falls back to `clone` on ENOSYS);
//! - **PID 1** (bubblewrap's init, outside this filter) cannot be traced or
//!   have its memory written;
//! - **kernel attack surface** no session needs: `bpf`, `perf_event_open`,
//!   `userfaultfd`, io_uring, the mount API, modules, kexec, the clock
//!   setters, `personality` beyond Docker's safe values, `AF_ALG` and
//!   `AF_VSOCK` sockets, btrfs's subvolume ioctls, and the obsolete or
//!   privileged rest of the table.
//!
//! Arguments are compared on their low 32 bits, as the kernel reads them.
//! Every ABI through which a process can enter the kernel is checked against
//! its own numbers (x86_64, x32 and i386 on x86_64; aarch64 and arm on
//! aarch64); an unknown architecture is refused.
//!
//! The program is assembled here rather than with a crate: `seccompiler` (the
//! maintained choice) builds one architecture per filter and kills the process
//! on any other, has one match action per filter (no EPERM beside ENOSYS) and
//! knows nothing of x32 or the 32-bit compat ABIs (decision 0007).
//!
//! May import: nothing of the crate: a pure unit, it builds bytes and runs
//! nothing (the creation guard loads its own filter).
//!
//! Exports:
//! - the sandbox's filter as bubblewrap reads it: [`program_bytes`] (the
//!   plan), [`guarded_program_bytes`] (where the creation guard's filter
//!   stands over it and refuses `pidfd_getfd` itself), `program_bytes_for` a `Profile` (testhooks' mutations), and
//!   under test `x86_64_program_bytes` (the golden plans);
//! - to the creation guard, which builds its own filter from them: the
//!   assembler ([`Asm`], [`Insn`], the opcodes and returns it uses,
//!   [`off_arg`]), the ABIs ([`Abi`], [`arches`], [`N`]) and the per-ABI
//!   dispatch every filter opens with ([`by_abi`]);
//! - under test, for both filters' tests: a BPF interpreter (`interpret`), the
//!   architecture sets (`ALL_ARCHES`) and the kernel headers' numbers
//!   (`header_numbers`).
//!
//! Files: `asm.rs` (the assembler), `abi.rs` (ABIs, the syscall table, the
//! dispatch), `deny.rs` (the rules, the profiles, the program), `testkit.rs`
//! (test support).

mod abi;
mod asm;
mod deny;
#[cfg(test)]
mod testkit;

pub(crate) use abi::{arches, by_abi, Abi, N};
pub(crate) use asm::{
    off_arg, Asm, Insn, BPF_JEQ_K, BPF_JSET_K, ENOSYS, EPERM, RET_ALLOW, RET_ERRNO, RET_USER_NOTIF,
};
#[cfg(test)]
pub(crate) use deny::x86_64_program_bytes;
pub(crate) use deny::{guarded_program_bytes, program_bytes};
#[cfg(feature = "test-mutations")]
pub(crate) use deny::{program_bytes_for, Profile};
#[cfg(test)]
pub(crate) use testkit::{header_numbers, interpret, ALL_ARCHES};
