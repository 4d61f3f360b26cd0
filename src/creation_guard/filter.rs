//! The creation guard's seccomp filter: every syscall that gives a name to
//! something in the file system, or takes a directory away, goes to the
//! supervisor (`SECCOMP_RET_USER_NOTIF`), and so do the calls of [`NOTED`]
//! (noted and let through); Landlock and `openat2` are refused with ENOSYS;
//! the rest is allowed. Built with seccomp's assembler and per-ABI
//! dispatch, and loaded here with a listener.

use nix::libc;

use crate::seccomp::{
    arches, by_abi, off_arg, Abi, Asm, Insn, BPF_JEQ_K, BPF_JSET_K, ENOSYS, EPERM, N, RET_ALLOW,
    RET_ERRNO, RET_USER_NOTIF,
};

/// The syscalls that give a name to something in the file system, or take
/// a directory away: the creation guard (issue #12) hands them to its
/// supervisor, which refuses the protected names and performs the rest
/// itself. Numbers per ABI as in seccomp's table.
#[rustfmt::skip]
pub(super) const CREATE_SYSCALLS: &[(&str, [i32; 5])] = &[
    //                 x86_64  x32  i386 aarch64 arm
    ("open",          [  2,    2,    5,   N,    5]),
    ("openat",        [257,  257,  295,  56,  322]),
    ("creat",         [ 85,   85,    8,   N,    8]),
    ("openat2",       [437,  437,  437, 437,  437]),
    ("mkdir",         [ 83,   83,   39,   N,   39]),
    ("mkdirat",       [258,  258,  296,  34,  323]),
    ("mknod",         [133,  133,   14,   N,   14]),
    ("mknodat",       [259,  259,  297,  33,  324]),
    ("symlink",       [ 88,   88,   83,   N,   83]),
    ("symlinkat",     [266,  266,  304,  36,  331]),
    ("link",          [ 86,   86,    9,   N,    9]),
    ("linkat",        [265,  265,  303,  37,  330]),
    ("rename",        [ 82,   82,   38,   N,   38]),
    ("renameat",      [264,  264,  302,  38,  329]),
    ("renameat2",     [316,  316,  353, 276,  382]),
    ("rmdir",         [ 84,   84,   40,   N,   40]),
    ("unlinkat",      [263,  263,  301,  35,  328]),
    // A unix socket bound to a path is a new name (issue #45): performed
    // by the supervisor on the caller's own socket, which it takes with
    // `pidfd_getfd`; i386's (and 32-bit Arm's) `socketcall` multiplexer
    // too, when its operation may be `SYS_BIND`.
    ("bind",          [ 49,   49,  361, 200,  282]),
    ("socketcall",    [  N,    N,  102,   N,  102]),
    // Not creations: what the supervisor takes a caller's socket with,
    // refused to everything it serves (the sandbox's own filter lets it
    // through only where this filter stands; decision 0009).
    ("pidfd_getfd",   [438,  438,  438, 438,  438]),
    // Not creations: noted and let through (docs/decisions/0020, 0021),
    // so the supervisor knows when a umask or working directory it
    // remembered may have changed.
    ("umask",         [ 95,   95,   60, 166,   60]),
    ("chdir",         [ 80,   80,   12,  49,   12]),
    ("fchdir",        [ 81,   81,  133,  50,  133]),
    // Not creations: Landlock, refused as on a kernel without it (ENOSYS).
    // The supervisor performs creations outside a caller's Landlock
    // domain, so a domain would hold for everything but them; a tool told
    // "no Landlock" knows it is not restricted instead of believing it is.
    ("landlock_create_ruleset", [444, 444, 444, 444, 444]),
    ("landlock_add_rule",       [445, 445, 445, 445, 445]),
    ("landlock_restrict_self",  [446, 446, 446, 446, 446]),
];

/// The calls of [`CREATE_SYSCALLS`] that create nothing: the supervisor
/// notes each (a umask or working directory it remembered may change) and
/// lets the kernel run it as asked (docs/decisions/0020, 0021).
pub(super) const NOTED: &[&str] = &["umask", "chdir", "fchdir"];

/// `O_CREAT` (the same on every ABI here).
const O_CREAT: u32 = 0o100;
/// An `open` that writes: `O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC` (the
/// same on every ABI here). The git rule (issue #22) refuses opening a git
/// directory's `config` or a hook for writing, so these are the
/// supervisor's too.
const O_WRITES: u32 = 0o1 | 0o2 | O_CREAT | 0o1000;
/// `O_PATH` (the same on every ABI here): the kernel drops `O_CREAT` beside
/// it, so such an `open` creates nothing and is not the supervisor's (which
/// could not hand an `O_PATH` descriptor over anyway: `ADDFD` refuses it).
const O_PATH: u32 = 0o1000_0000;

/// `unlinkat`'s flag that makes it `rmdir`.
pub(super) const AT_REMOVEDIR: u32 = 0x200;

/// `socketcall`'s operation number of `bind`.
pub(super) const SYS_BIND: u32 = 2;

/// What the guard filter does with one syscall of [`CREATE_SYSCALLS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GuardRule {
    /// Always to the supervisor.
    Notify,
    /// To the supervisor when the low 32 bits of args\[i\] have any of these
    /// bits (an `open` without `O_CREAT` creates nothing).
    NotifyIfAny(u32, u32),
    /// Refused with this errno.
    Errno(u32),
}

fn guard_rule(name: &str) -> GuardRule {
    #[cfg(feature = "test-mutations")]
    if matches!(name, "bind" | "socketcall")
        && crate::testhooks::active(crate::testhooks::Mutation::UnsupervisedBind)
    {
        return GuardRule::NotifyIfAny(0, 0);
    }
    match name {
        "open" => GuardRule::NotifyIfAny(1, O_WRITES),
        "openat" => GuardRule::NotifyIfAny(2, O_WRITES),
        "unlinkat" => GuardRule::NotifyIfAny(2, AT_REMOVEDIR),
        // Operations with SYS_BIND's bit (2): bind, and some that create
        // nothing (let through by the supervisor, on the register's value).
        "socketcall" => GuardRule::NotifyIfAny(0, SYS_BIND),
        "pidfd_getfd" => GuardRule::Errno(EPERM),

        // Its flags are in memory, out of the filter's reach, and the
        // supervisor would have to honour its RESOLVE_* rules: libcs never
        // use it for open(3), and callers fall back to openat on ENOSYS.
        "openat2" => GuardRule::Errno(ENOSYS),
        "landlock_create_ruleset" | "landlock_add_rule" | "landlock_restrict_self" => {
            GuardRule::Errno(ENOSYS)
        }
        _ => GuardRule::Notify,
    }
}

/// The syscall of [`CREATE_SYSCALLS`] a notification is about, by name.
pub(super) fn create_syscall(arch: u32, nr: u32) -> Option<&'static str> {
    create_syscall_in(arches(), arch, nr)
}

fn create_syscall_in(set: &[(u32, &[Abi])], arch: u32, nr: u32) -> Option<&'static str> {
    let abi = Abi::of(set, arch, nr)?;
    CREATE_SYSCALLS
        .iter()
        .find(|(name, _)| abi.nr_in(CREATE_SYSCALLS, name) == Some(nr))
        .map(|(name, _)| *name)
}

/// The creation guard's filter for this machine's ABIs: every creating
/// syscall goes to the supervisor (`SECCOMP_RET_USER_NOTIF`), the rest is
/// allowed. Loaded by the shim on top of the sandbox's filter, so a refusal
/// of that one still wins.
pub(super) fn guard_program() -> Vec<Insn> {
    guard_program_for(arches())
}

fn guard_program_for(arches: &[(u32, &[Abi])]) -> Vec<Insn> {
    by_abi(arches, guard_chain)
}

/// The comparisons of one ABI (syscall number in the accumulator) and
/// their returns.
fn guard_chain(a: &mut Asm, abi: Abi) {
    let (notify, enosys, eperm) = (a.label(), a.label(), a.label());
    let mut checks = Vec::new();
    for (name, _) in CREATE_SYSCALLS {
        let Some(nr) = abi.nr_in(CREATE_SYSCALLS, name) else {
            continue;
        };
        let to = match guard_rule(name) {
            GuardRule::Notify => notify,
            GuardRule::Errno(ENOSYS) => enosys,
            GuardRule::Errno(EPERM) => eperm,
            GuardRule::Errno(e) => panic!("errno {e} has no return in the guard filter"),
            GuardRule::NotifyIfAny(i, mask) => {
                let l = a.label();
                checks.push((l, i, mask));
                l
            }
        };
        a.jump(BPF_JEQ_K, nr, Some(to), None);
    }
    a.ret(RET_ALLOW);
    a.bind(notify);
    a.ret(RET_USER_NOTIF);
    a.bind(enosys);
    a.ret(RET_ERRNO | ENOSYS);
    a.bind(eperm);
    a.ret(RET_ERRNO | EPERM);
    for (l, i, mask) in checks {
        a.bind(l);
        a.load(off_arg(i));
        let (yes, no) = (a.label(), a.label());
        if mask & O_CREAT != 0 {
            // O_PATH drops every other flag: nothing to create or write.
            a.jump(BPF_JSET_K, O_PATH, Some(no), None);
        }
        a.jump(BPF_JSET_K, mask, Some(yes), None);
        a.bind(no);
        a.ret(RET_ALLOW);
        a.bind(yes);
        a.ret(RET_USER_NOTIF);
    }
}

/// Load `insns` on the calling thread (no-new-privileges must be set, as it
/// is inside the sandbox) and return the listener its notifications arrive on.
pub(super) fn load_with_listener(insns: &[Insn]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut filter: Vec<libc::sock_filter> = insns
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let prog = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prog points at `filter`, alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this new descriptor to us.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::{header_numbers, interpret, ALL_ARCHES};

    const NOTIFY: u32 = RET_USER_NOTIF;

    #[test]
    fn guard_sends_every_creation_to_the_supervisor_on_every_abi() {
        for set in ALL_ARCHES {
            let p = guard_program_for(set);
            for (arch, abis) in set {
                for abi in *abis {
                    let nr = |n: &str| abi.nr_in(CREATE_SYSCALLS, n);
                    let run1 = |n: &str, args| nr(n).map(|nr| interpret(&p, *arch, nr, args));
                    for name in [
                        "creat",
                        "mkdir",
                        "mkdirat",
                        "mknod",
                        "mknodat",
                        "symlink",
                        "symlinkat",
                        "link",
                        "linkat",
                        "rename",
                        "renameat",
                        "renameat2",
                        "rmdir",
                        "bind",
                        "umask",
                        "chdir",
                        "fchdir",
                    ] {
                        if let Some(v) = run1(name, [0; 6]) {
                            assert_eq!(v, NOTIFY, "{abi:?} {name}");
                            assert_eq!(
                                create_syscall_in(set, *arch, nr(name).unwrap()),
                                Some(name)
                            );
                        }
                    }
                    let creat = u64::from(O_CREAT) | 0xffff_ffff_0000_0000;
                    assert_eq!(
                        run1("openat", [0, 0, creat, 0, 0, 0]),
                        Some(NOTIFY),
                        "{abi:?}"
                    );
                    // Opens that write are the supervisor's too (the git
                    // rule); reading ones, and O_PATH ones, are not.
                    for writes in [1, 2, 0o1000] {
                        assert_eq!(
                            run1("openat", [0, 0, writes, 0, 0, 0]),
                            Some(NOTIFY),
                            "{abi:?} {writes:o}"
                        );
                        assert_eq!(
                            run1("openat", [0, 0, writes | u64::from(O_PATH), 0, 0, 0]),
                            Some(RET_ALLOW),
                            "{abi:?} {writes:o}"
                        );
                    }
                    assert_eq!(
                        run1("openat", [0, 0, 0o4000 | 0o200000, 0, 0, 0]),
                        Some(RET_ALLOW),
                        "{abi:?}"
                    );
                    if let Some(v) = run1("open", [0, u64::from(O_CREAT) | 1, 0, 0, 0, 0]) {
                        assert_eq!(v, NOTIFY, "{abi:?}");
                        assert_eq!(run1("open", [0, 0, 0, 0, 0, 0]), Some(RET_ALLOW));
                    }
                    assert_eq!(
                        run1("unlinkat", [0, 0, 0, 0, 0, 0]),
                        Some(RET_ALLOW),
                        "{abi:?}"
                    );
                    assert_eq!(
                        run1("unlinkat", [0, 0, u64::from(AT_REMOVEDIR), 0, 0, 0]),
                        Some(NOTIFY)
                    );
                    assert_eq!(run1("openat2", [0; 6]), Some(RET_ERRNO | ENOSYS), "{abi:?}");
                    assert_eq!(
                        run1("pidfd_getfd", [0; 6]),
                        Some(RET_ERRNO | EPERM),
                        "{abi:?}"
                    );
                    if let Some(v) = run1("socketcall", [2, 0, 0, 0, 0, 0]) {
                        assert_eq!(v, NOTIFY, "{abi:?}");
                        assert_eq!(run1("socketcall", [1, 0, 0, 0, 0, 0]), Some(RET_ALLOW));
                    }
                    for ll in [
                        "landlock_create_ruleset",
                        "landlock_add_rule",
                        "landlock_restrict_self",
                    ] {
                        assert_eq!(run1(ll, [0; 6]), Some(RET_ERRNO | ENOSYS), "{abi:?} {ll}");
                    }
                    // O_PATH drops O_CREAT: the kernel's.
                    let opath = u64::from(O_CREAT | O_PATH);
                    assert_eq!(
                        run1("openat", [0, 0, opath, 0, 0, 0]),
                        Some(RET_ALLOW),
                        "{abi:?}"
                    );
                    // Everything else passes (read, write, close: 0..3 on x86_64).
                    let read = abi.nr("ioctl").unwrap();
                    assert_eq!(interpret(&p, *arch, read, [0; 6]), RET_ALLOW);
                }
            }
            assert_eq!(
                interpret(&p, 0x1234, 2, [0; 6]),
                RET_ERRNO | ENOSYS,
                "unknown arch"
            );
        }
    }

    #[test]
    fn guard_numbers_match_the_kernel_headers_installed_here() {
        let headers = [
            ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", Abi::X86_64),
            ("/usr/include/x86_64-linux-gnu/asm/unistd_32.h", Abi::I386),
            ("/usr/include/asm-generic/unistd.h", Abi::Aarch64),
        ];
        for (path, abi) in headers {
            let Ok(text) = std::fs::read_to_string(path) else {
                eprintln!("{path} absent: its column is not checked");
                continue;
            };
            let h = header_numbers(&text);
            for (name, cols) in CREATE_SYSCALLS {
                let ours = cols[abi.column()];
                match h.get(*name) {
                    Some(n) => assert_eq!(ours, *n, "{path}: {name}"),
                    None => assert_eq!(ours, N, "{path}: {name}"),
                }
            }
        }
    }
}
