//! The sandbox's deny list: what bubblewrap's `--seccomp` filter refuses,
//! syscall by syscall and argument by argument ([`rule`]), the deliberate
//! regressions of it the mutation tests load ([`Profile`]), and the program
//! that enforces it on every ABI of the machine.
//!
//! Arguments are compared on their low 32 bits, as the kernel reads `ioctl`'s
//! `cmd`, `personality`'s persona and `clone`'s flags, so high bits cannot
//! smuggle a value past the filter.

#[cfg(test)]
use super::abi::X86_ARCHES;
use super::abi::{arches, by_abi, Abi, SYSCALLS};
use super::asm::{
    encode, off_arg, Asm, Insn, BPF_JEQ_K, BPF_JSET_K, ENOSYS, EPERM, RET_ALLOW, RET_ERRNO,
};

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
/// btrfs's ioctls that give a new subvolume or snapshot a name: a directory
/// made without `mkdir`, past the creation guard (and nothing a session
/// needs). `_IOW(0x94, nr, 4096-byte args)`, the same on every ABI.
const BTRFS_IOC_SNAP_CREATE: u32 = 0x5000_9401;
const BTRFS_IOC_SUBVOL_CREATE: u32 = 0x5000_940e;
const BTRFS_IOC_SNAP_CREATE_V2: u32 = 0x5000_9417;
const BTRFS_IOC_SUBVOL_CREATE_V2: u32 = 0x5000_9418;

// Namespace flags of clone(2) and unshare(2) (linux/sched.h).
const CLONE_NEWTIME: u32 = 0x0000_0080;
const CLONE_NEWNS: u32 = 0x0002_0000;
const CLONE_NEWCGROUP: u32 = 0x0200_0000;
const CLONE_NEWUTS: u32 = 0x0400_0000;
const CLONE_NEWIPC: u32 = 0x0800_0000;
const CLONE_NEWUSER: u32 = 0x1000_0000;
const CLONE_NEWPID: u32 = 0x2000_0000;
const CLONE_NEWNET: u32 = 0x4000_0000;
/// What Docker's profile refuses in `clone`. CLONE_NEWTIME is not among
/// them: in `clone` that bit is part of the exit signal.
const NS_CLONE: u32 = CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET;
/// `unshare` can also make a time namespace.
const NS_UNSHARE: u32 = NS_CLONE | CLONE_NEWTIME;

/// `personality` values Docker's profile allows: PER_LINUX, PER_LINUX32,
/// UNAME26, both, and the query 0xffffffff.
const PERSONALITY_OK: &[u32] = &[0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];
/// Socket families refused, as Docker's profile does: the kernel crypto API
/// and host/guest sockets.
const AF_ALG: u32 = 38;
const AF_VSOCK: u32 = 40;

/// What the filter does with one syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Refused whatever the arguments, with this errno.
    Errno(u32),
    /// EPERM when the low 32 bits of args\[i\] are one of these values.
    DenyIfEq(u32, &'static [u32]),
    /// EPERM unless the low 32 bits of args\[i\] are one of these values.
    AllowOnly(u32, &'static [u32]),
    /// EPERM when the low 32 bits of args\[i\] have any of these bits.
    DenyIfAny(u32, u32),
}

/// Which filter: the sandbox's, or (tests, `test-mutations`) a deliberate
/// regression of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// The sandbox's filter.
    Sandbox,
    /// The sandbox's filter where the creation guard stands: `pidfd_getfd`
    /// is left to the guard's filter, which refuses it to every process the
    /// supervisor serves; the supervisor takes a caller's socket with it
    /// to bind it (issue #45).
    Guarded,
    /// The filter before issue #13: terminal injection and keyrings only.
    #[cfg(any(test, feature = "test-mutations"))]
    Minimal,
    /// The sandbox's filter letting `clone`/`unshare` make user namespaces.
    #[cfg(any(test, feature = "test-mutations"))]
    UsernsAllowed,
    /// The sandbox's filter letting `ptrace` and `process_vm_writev` reach
    /// PID 1.
    #[cfg(any(test, feature = "test-mutations"))]
    Pid1Open,
}

/// The rule for `name` (None: allowed).
fn rule(name: &str, profile: Profile) -> Option<Rule> {
    const IOCTLS_REFUSED: &[u32] = &[
        TIOCSTI,
        TIOCLINUX,
        BTRFS_IOC_SNAP_CREATE,
        BTRFS_IOC_SUBVOL_CREATE,
        BTRFS_IOC_SNAP_CREATE_V2,
        BTRFS_IOC_SUBVOL_CREATE_V2,
    ];
    // The test profiles stand for a guarded sandbox's filter too.
    if profile != Profile::Sandbox && name == "pidfd_getfd" {
        return None;
    }
    #[cfg(any(test, feature = "test-mutations"))]
    match profile {
        Profile::Minimal => {
            return match name {
                "ioctl" => Some(Rule::DenyIfEq(1, &[TIOCSTI, TIOCLINUX])),
                "add_key" | "request_key" | "keyctl" => Some(Rule::Errno(EPERM)),
                _ => None,
            }
        }
        Profile::UsernsAllowed => match name {
            "clone" => return Some(Rule::DenyIfAny(0, NS_CLONE & !CLONE_NEWUSER)),
            "unshare" => return Some(Rule::DenyIfAny(0, NS_UNSHARE & !CLONE_NEWUSER)),
            _ => {}
        },
        Profile::Pid1Open => {
            if matches!(name, "ptrace" | "process_vm_writev") {
                return None;
            }
        }
        Profile::Sandbox | Profile::Guarded => {}
    }
    let _ = profile;
    Some(match name {
        "ioctl" => Rule::DenyIfEq(1, IOCTLS_REFUSED),
        // PID 1 is bubblewrap's init: the session's uid, dumpable, and not
        // under this filter (bubblewrap loads it for the command only). A
        // process that traced it or wrote its memory would run code free
        // of every rule here (and of the creation guard). Its /proc mem
        // files are masked (plan::system_mounts); pidfd_getfd is refused.
        "ptrace" => Rule::DenyIfEq(1, &[1]),
        "process_vm_writev" => Rule::DenyIfEq(0, &[1]),
        "clone" => Rule::DenyIfAny(0, NS_CLONE),
        "unshare" => Rule::DenyIfAny(0, NS_UNSHARE),
        "clone3" => Rule::Errno(ENOSYS),
        "personality" => Rule::AllowOnly(0, PERSONALITY_OK),
        "socket" => Rule::DenyIfEq(0, &[AF_ALG, AF_VSOCK]),
        n if SYSCALLS.iter().any(|(s, _)| *s == n) => Rule::Errno(EPERM),
        _ => return None,
    })
}

/// The filter for this machine's ABIs.
fn program(profile: Profile) -> Vec<Insn> {
    program_for(arches(), profile)
}

/// The filter for `arches`.
fn program_for(arches: &[(u32, &[Abi])], profile: Profile) -> Vec<Insn> {
    // Layout:
    //   ld arch; jeq ARCH_i -> block_i …; ret ERRNO(ENOSYS)   (unknown architecture)
    //   block (x86_64): ld nr; jset X32_BIT -> x32 chain; x86_64 chain
    //   chain: jeq NR -> its rule …; ret ALLOW; then the rules: ret ERRNO(EPERM),
    //          ret ERRNO(ENOSYS), one argument check per syscall that has one.
    // Every chain carries its own rules, so no jump is longer than one chain.
    by_abi(arches, |a, abi| chain(a, abi, profile))
}

/// The comparisons of one ABI (syscall number in the accumulator) and its rules.
fn chain(a: &mut Asm, abi: Abi, profile: Profile) {
    let (eperm, enosys) = (a.label(), a.label());
    let mut checks = Vec::new();
    for (name, _) in SYSCALLS {
        let (Some(nr), Some(r)) = (abi.nr(name), rule(name, profile)) else {
            continue;
        };
        let to = match r {
            Rule::Errno(EPERM) => eperm,
            Rule::Errno(ENOSYS) => enosys,
            Rule::Errno(e) => panic!("errno {e} has no return in the filter"),
            _ => {
                let l = a.label();
                checks.push((l, r));
                l
            }
        };
        a.jump(BPF_JEQ_K, nr, Some(to), None);
    }
    a.ret(RET_ALLOW);
    a.bind(eperm);
    a.ret(RET_ERRNO | EPERM);
    a.bind(enosys);
    a.ret(RET_ERRNO | ENOSYS);
    for (l, r) in checks {
        a.bind(l);
        match r {
            Rule::DenyIfEq(i, values) => {
                a.load(off_arg(i));
                let deny = a.label();
                for v in values {
                    a.jump(BPF_JEQ_K, *v, Some(deny), None);
                }
                a.ret(RET_ALLOW);
                a.bind(deny);
                a.ret(RET_ERRNO | EPERM);
            }
            Rule::AllowOnly(i, values) => {
                a.load(off_arg(i));
                let allow = a.label();
                for v in values {
                    a.jump(BPF_JEQ_K, *v, Some(allow), None);
                }
                a.ret(RET_ERRNO | EPERM);
                a.bind(allow);
                a.ret(RET_ALLOW);
            }
            Rule::DenyIfAny(i, mask) => {
                a.load(off_arg(i));
                let deny = a.label();
                a.jump(BPF_JSET_K, mask, Some(deny), None);
                a.ret(RET_ALLOW);
                a.bind(deny);
                a.ret(RET_ERRNO | EPERM);
            }
            Rule::Errno(_) => unreachable!(),
        }
    }
}

/// The sandbox's filter, as bubblewrap reads it.
pub(crate) fn program_bytes() -> Vec<u8> {
    program_bytes_for(Profile::Sandbox)
}

/// [`Profile::Guarded`]'s filter, as bubblewrap reads it.
pub(crate) fn guarded_program_bytes() -> Vec<u8> {
    program_bytes_for(Profile::Guarded)
}

/// The filter of `profile`, as bubblewrap reads it.
pub(crate) fn program_bytes_for(profile: Profile) -> Vec<u8> {
    encode(&program(profile))
}

/// The sandbox's filter as an x86_64 machine's binary builds it, whatever
/// this machine is: the golden plan table (src/golden.rs) pins its hash, so
/// the table holds on aarch64 too (issue #14).
#[cfg(test)]
pub(crate) fn x86_64_program_bytes(guarded: bool) -> Vec<u8> {
    let profile = if guarded {
        Profile::Guarded
    } else {
        Profile::Sandbox
    };
    encode(&program_for(X86_ARCHES, profile))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::abi::{AARCH64_ARCHES, AUDIT_ARCH_I386, X32_BIT};
    use crate::seccomp::{interpret, ALL_ARCHES};

    fn arg0(v: u64) -> [u64; 6] {
        [v, 0, 0, 0, 0, 0]
    }

    fn arg1(v: u64) -> [u64; 6] {
        [0, v, 0, 0, 0, 0]
    }

    const DENIED: u32 = RET_ERRNO | EPERM;
    const NOSYS: u32 = RET_ERRNO | ENOSYS;

    const ALL_ABIS: [Abi; 5] = [Abi::X86_64, Abi::X32, Abi::I386, Abi::Aarch64, Abi::Arm];

    fn set_of(abi: Abi) -> &'static [(u32, &'static [Abi])] {
        match abi {
            Abi::Aarch64 | Abi::Arm => AARCH64_ARCHES,
            _ => X86_ARCHES,
        }
    }

    /// Run `name` through `abi` in the filter of `profile`.
    fn verdict(profile: Profile, abi: Abi, name: &str, args: [u64; 6]) -> u32 {
        let p = program_for(set_of(abi), profile);
        let nr = abi
            .nr(name)
            .unwrap_or_else(|| panic!("{name} not on {abi:?}"));
        interpret(&p, abi.arch(), nr, args)
    }

    /// What the rules say, computed without the program.
    fn model(set: &[(u32, &[Abi])], profile: Profile, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let Some((_, abis)) = set.iter().find(|(a, _)| *a == arch) else {
            return NOSYS;
        };
        let abi = if abis.contains(&Abi::X32) && nr & X32_BIT != 0 {
            Abi::X32
        } else {
            abis[0]
        };
        let Some((name, _)) = SYSCALLS.iter().find(|(n, _)| abi.nr(n) == Some(nr)) else {
            return RET_ALLOW;
        };
        let lo = |i: u32| args[i as usize] as u32;
        let deny = match rule(name, profile) {
            None => false,
            Some(Rule::Errno(e)) => return RET_ERRNO | e,
            Some(Rule::DenyIfEq(i, v)) => v.contains(&lo(i)),
            Some(Rule::AllowOnly(i, v)) => !v.contains(&lo(i)),
            Some(Rule::DenyIfAny(i, m)) => lo(i) & m != 0,
        };
        if deny {
            DENIED
        } else {
            RET_ALLOW
        }
    }

    const PROFILES: [Profile; 3] = [Profile::Sandbox, Profile::Minimal, Profile::UsernsAllowed];

    #[test]
    fn the_program_does_what_the_rules_say_for_every_number_and_abi() {
        let mut samples: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
        for v in [
            TIOCSTI as u64,
            TIOCLINUX as u64,
            0xdead_0000_0000_0000 | TIOCSTI as u64,
            0x5413,
            AF_ALG as u64,
            AF_VSOCK as u64,
            (1 << 40) | AF_VSOCK as u64,
            2,
            17,
            0x003d_0f00,
        ] {
            samples.push(arg0(v));
            samples.push(arg1(v));
        }
        for f in [NS_UNSHARE, CLONE_NEWUSER, CLONE_NEWTIME, CLONE_NEWNET | 17] {
            samples.push(arg0(f as u64));
            samples.push(arg0((1 << 33) | f as u64));
        }
        for v in PERSONALITY_OK.iter().chain(&[0x40000, 0x0400_0000, 0x1]) {
            samples.push(arg0(*v as u64));
            samples.push(arg0((1 << 32) | *v as u64));
        }
        let mut nrs: Vec<u32> = (0..1100).collect();
        nrs.extend((0..1100).map(|n| n | X32_BIT));
        nrs.extend([u32::MAX, 0x8000_0000, 0x0f_0005]);
        let table: std::collections::BTreeSet<u32> = ALL_ABIS
            .iter()
            .flat_map(|a| SYSCALLS.iter().filter_map(|(n, _)| a.nr(n)))
            .collect();
        for profile in PROFILES {
            for set in ALL_ARCHES {
                let p = program_for(set, profile);
                assert!(p.len() < 4096, "{} instructions", p.len());
                for arch in set
                    .iter()
                    .map(|(a, _)| *a)
                    .chain([0x1234, AUDIT_ARCH_I386 | 1])
                {
                    for &nr in &nrs {
                        // Arguments matter only to the table's numbers.
                        let in_table = table.contains(&nr);
                        let n = if in_table { samples.len() } else { 2 };
                        for args in &samples[..n] {
                            assert_eq!(
                                interpret(&p, arch, nr, *args),
                                model(set, profile, arch, nr, *args),
                                "{profile:?} arch {arch:#x} nr {nr:#x} args {args:x?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn tiocsti_refused_everything_else_allowed() {
        for abi in ALL_ABIS {
            let v = |a| verdict(Profile::Sandbox, abi, "ioctl", a);
            assert_eq!(v(arg1(TIOCSTI as u64)), DENIED, "{abi:?}");
            assert_eq!(v(arg1(TIOCLINUX as u64)), DENIED, "{abi:?}");
            // High bits do not hide the request: the kernel truncates cmd to 32 bits.
            assert_eq!(v(arg1(0xdead_0000_0000_0000 | TIOCSTI as u64)), DENIED);
            assert_eq!(v(arg1(0x5413)), RET_ALLOW, "TIOCGWINSZ");
            assert_eq!(v(arg1(0x5414)), RET_ALLOW, "TIOCSWINSZ");
            // The request in another argument is nothing.
            assert_eq!(v(arg0(TIOCSTI as u64)), RET_ALLOW);
        }
        let p = program(Profile::Sandbox);
        assert_eq!(
            interpret(&p, 0x1234, 1, [0; 6]),
            NOSYS,
            "unknown arch refused"
        );
        assert_eq!(program_bytes().len(), p.len() * 8);
    }

    #[test]
    fn every_refused_syscall_returns_its_errno_on_every_abi() {
        let mut refused = 0;
        for abi in ALL_ABIS {
            for (name, _) in SYSCALLS {
                if abi.nr(name).is_none() {
                    continue;
                }
                let want = match rule(name, Profile::Sandbox) {
                    Some(Rule::Errno(e)) => RET_ERRNO | e,
                    _ => continue,
                };
                assert_eq!(
                    verdict(Profile::Sandbox, abi, name, [0; 6]),
                    want,
                    "{abi:?} {name}"
                );
                refused += 1;
            }
        }
        assert!(refused > 250, "{refused}");
        for abi in ALL_ABIS {
            assert_eq!(verdict(Profile::Sandbox, abi, "clone3", [0; 6]), NOSYS);
            for k in ["keyctl", "add_key", "request_key", "bpf", "mount", "setns"] {
                assert_eq!(verdict(Profile::Sandbox, abi, k, [0; 6]), DENIED, "{k}");
            }
        }
    }

    #[test]
    fn namespace_flags_refused_plain_clone_and_threads_allowed() {
        const SIGCHLD: u64 = 17;
        // What glibc's pthread_create passes to clone.
        const THREAD: u64 = 0x003d_0f00;
        for abi in ALL_ABIS {
            let clone = |f| verdict(Profile::Sandbox, abi, "clone", arg0(f));
            let unshare = |f| verdict(Profile::Sandbox, abi, "unshare", arg0(f));
            assert_eq!(clone(SIGCHLD), RET_ALLOW, "{abi:?} fork");
            assert_eq!(clone(THREAD), RET_ALLOW, "{abi:?} thread");
            assert_eq!(clone(0x4111), RET_ALLOW, "{abi:?} vfork");
            for f in [
                CLONE_NEWNS,
                CLONE_NEWCGROUP,
                CLONE_NEWUTS,
                CLONE_NEWIPC,
                CLONE_NEWUSER,
                CLONE_NEWPID,
                CLONE_NEWNET,
            ] {
                assert_eq!(clone(SIGCHLD | f as u64), DENIED, "{abi:?} clone {f:#x}");
                assert_eq!(unshare(f as u64), DENIED, "{abi:?} unshare {f:#x}");
                assert_eq!(unshare((1 << 40) | f as u64), DENIED);
            }
            assert_eq!(unshare(CLONE_NEWTIME as u64), DENIED, "{abi:?} time ns");
            // unshare without a namespace: files, fs, SysV semaphores.
            assert_eq!(unshare(0x0000_0600), RET_ALLOW);
            assert_eq!(unshare(0x0004_0000), RET_ALLOW);
            assert_eq!(
                verdict(Profile::Sandbox, abi, "setns", arg1(0)),
                DENIED,
                "{abi:?} setns"
            );
        }
    }

    #[test]
    fn personality_only_dockers_values() {
        for abi in ALL_ABIS {
            let v = |x| verdict(Profile::Sandbox, abi, "personality", arg0(x));
            for ok in PERSONALITY_OK {
                assert_eq!(v(*ok as u64), RET_ALLOW, "{abi:?} {ok:#x}");
            }
            // ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, PER_BSD.
            for bad in [0x0004_0000u64, 0x0040_0000, 0x6] {
                assert_eq!(v(bad), DENIED, "{abi:?} {bad:#x}");
            }
            assert_eq!(v((1 << 32) | 0x8), RET_ALLOW, "the kernel reads 32 bits");
        }
    }

    #[test]
    fn sockets_refused_only_for_alg_and_vsock() {
        for abi in ALL_ABIS {
            let v = |f| verdict(Profile::Sandbox, abi, "socket", arg0(f));
            // AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET.
            for ok in [1u64, 2, 10, 16, 17] {
                assert_eq!(v(ok), RET_ALLOW, "{abi:?} family {ok}");
            }
            assert_eq!(v(AF_ALG as u64), DENIED, "{abi:?}");
            assert_eq!(v(AF_VSOCK as u64), DENIED, "{abi:?}");
        }
    }

    #[test]
    fn pid_1_cannot_be_traced_or_written_other_processes_can() {
        for abi in ALL_ABIS {
            for (name, i) in [("ptrace", 1usize), ("process_vm_writev", 0)] {
                let v = |pid: u64| {
                    let mut args = [0u64; 6];
                    args[i] = pid;
                    verdict(Profile::Sandbox, abi, name, args)
                };
                // The kernel reads a pid_t: the high bits do not matter.
                assert_eq!(v(1), DENIED, "{abi:?} {name}");
                assert_eq!(v(0xffff_ffff_0000_0001), DENIED, "{abi:?} {name}");
                for ok in [0u64, 2, 4242, u64::MAX] {
                    assert_eq!(v(ok), RET_ALLOW, "{abi:?} {name} {ok}");
                }
                // The mutation that proves verify's check lets them through.
                let mut args = [0u64; 6];
                args[i] = 1;
                assert_eq!(verdict(Profile::Pid1Open, abi, name, args), RET_ALLOW);
            }
        }
    }

    #[test]
    fn btrfs_subvolumes_cannot_be_made_other_ioctls_pass() {
        for abi in ALL_ABIS {
            let v = |cmd: u32| verdict(Profile::Sandbox, abi, "ioctl", arg1(cmd.into()));
            for cmd in [
                BTRFS_IOC_SNAP_CREATE,
                BTRFS_IOC_SUBVOL_CREATE,
                BTRFS_IOC_SNAP_CREATE_V2,
                BTRFS_IOC_SUBVOL_CREATE_V2,
            ] {
                assert_eq!(v(cmd), DENIED, "{abi:?} {cmd:#x}");
            }
            // FIONREAD, TCGETS, BTRFS_IOC_CLONE (a reflink: no new name).
            for cmd in [0x541B, 0x5401, 0x4004_9409] {
                assert_eq!(v(cmd), RET_ALLOW, "{abi:?} {cmd:#x}");
            }
        }
    }

    /// Numbers of everyday syscalls, per ABI (not in the filter's table).
    #[rustfmt::skip]
    const WORKLOAD: &[(&str, [u32; 5])] = &[
        //                    x86_64 x32  i386 aarch64 arm
        ("read",              [  0,   0,    3,  63,    3]),
        ("write",             [  1,   1,    4,  64,    4]),
        ("openat",            [257, 257,  295,  56,  322]),
        ("execve",            [ 59, 520,   11, 221,   11]),
        ("mmap/mmap2",        [  9,   9,  192, 222,  192]),
        ("futex",             [202, 202,  240,  98,  240]),
        ("connect",           [ 42,  42,  362, 203,  283]),
        ("wait4",             [ 61,  61,  114, 260,  114]),
        ("ptrace",            [101, 521,   26, 117,   26]),
        ("process_vm_readv",  [310, 539,  347, 270,  376]),
        ("adjtimex",          [159, 159,  124, 171,  124]),
        ("name_to_handle_at", [303, 303,  341, 264,  370]),
        ("get_mempolicy",     [239, 239,  275, 236,  320]),
        ("seccomp",           [317, 317,  354, 277,  383]),
        ("chroot",            [161, 161,   61,  51,   61]),
    ];

    #[test]
    fn workload_syscalls_allowed_on_every_abi() {
        for abi in ALL_ABIS {
            let p = program_for(set_of(abi), Profile::Sandbox);
            for (name, nrs) in WORKLOAD {
                let mut nr = nrs[abi.column()];
                if abi == Abi::X32 {
                    nr |= X32_BIT;
                }
                for args in [[0; 6], [u64::MAX; 6], arg1(TIOCSTI as u64)] {
                    assert_eq!(
                        interpret(&p, abi.arch(), nr, args),
                        RET_ALLOW,
                        "{abi:?} {name}"
                    );
                }
            }
        }
        // i386's socketcall multiplexer keeps its arguments in memory: allowed (as Docker).
        assert_eq!(
            interpret(
                &program_for(X86_ARCHES, Profile::Sandbox),
                AUDIT_ARCH_I386,
                102,
                [0; 6]
            ),
            RET_ALLOW
        );
    }

    #[test]
    fn keyring_syscalls_refused_on_every_abi() {
        for abi in ALL_ABIS {
            for k in ["add_key", "request_key", "keyctl"] {
                assert_eq!(
                    verdict(Profile::Sandbox, abi, k, [0; 6]),
                    DENIED,
                    "{abi:?} {k}"
                );
            }
        }
    }

    #[test]
    fn regression_profiles_differ_only_where_meant() {
        for abi in ALL_ABIS {
            // The filter before issue #13: injection and keyrings only.
            let m = |n: &str, a| verdict(Profile::Minimal, abi, n, a);
            assert_eq!(m("ioctl", arg1(TIOCSTI as u64)), DENIED);
            assert_eq!(m("keyctl", [0; 6]), DENIED);
            for n in [
                "mount",
                "bpf",
                "perf_event_open",
                "userfaultfd",
                "setns",
                "clone3",
            ] {
                assert_eq!(m(n, [0; 6]), RET_ALLOW, "{abi:?} {n}");
            }
            assert_eq!(m("unshare", arg0(CLONE_NEWNS as u64)), RET_ALLOW);
            // User namespaces allowed, every other namespace still refused.
            let u = |n: &str, f: u32| verdict(Profile::UsernsAllowed, abi, n, arg0(f as u64));
            assert_eq!(u("unshare", CLONE_NEWUSER), RET_ALLOW);
            assert_eq!(u("clone", CLONE_NEWUSER | 17), RET_ALLOW);
            assert_eq!(u("unshare", CLONE_NEWNS), DENIED);
            assert_eq!(u("clone", CLONE_NEWNS | CLONE_NEWUSER), DENIED);
            assert_eq!(u("mount", 0), DENIED);
            // PID 1 reachable, everything else as the sandbox's.
            let o = |n: &str, a| verdict(Profile::Pid1Open, abi, n, a);
            assert_eq!(o("ptrace", arg1(1)), RET_ALLOW);
            assert_eq!(o("process_vm_writev", arg0(1)), RET_ALLOW);
            assert_eq!(o("ioctl", arg1(TIOCSTI as u64)), DENIED);
            assert_eq!(o("mount", [0; 6]), DENIED);
            assert_eq!(o("unshare", arg0(CLONE_NEWUSER as u64)), DENIED);
        }
    }

    #[test]
    fn every_table_entry_has_a_rule_and_jumps_fit() {
        for (name, _) in SYSCALLS {
            assert!(rule(name, Profile::Sandbox).is_some(), "{name}");
        }
        assert_eq!(rule("read", Profile::Sandbox), None);
        for set in ALL_ARCHES {
            for profile in PROFILES {
                // finish() panics on a jump longer than 255.
                let _ = program_for(set, profile);
            }
        }
    }
}
