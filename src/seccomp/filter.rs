//! The seccomp filter bubblewrap loads for the whole sandbox (`--seccomp`).
//!
//! A Docker devcontainer runs with `seccomp=unconfined` (our namespaces need
//! it), so this filter is the only one between a session and the kernel. It
//! is a deny list, at least as strict as Docker's default profile for what a
//! coding session does not need (docs/decisions/0007-seccomp-profile.md has
//! the table, syscall by syscall, with Docker's choice beside ours):
//!
//! - **terminal injection** (SPEC §4.4): `ioctl(TIOCSTI)` and
//!   `ioctl(TIOCLINUX)` fail with EPERM (docs/decisions/0001-tiocsti-seccomp.md);
//! - **kernel keyrings**: `add_key`, `request_key`, `keyctl`;
//! - **namespaces**: `clone` and `unshare` with a namespace flag, `setns`;
//!   `clone3` fails with ENOSYS (its flags are in memory, out of the filter's
//!   reach, and every libc falls back to `clone` on ENOSYS);
//! - **kernel attack surface** no session needs: `bpf`, `perf_event_open`,
//!   `userfaultfd`, io_uring, the mount API, modules, kexec, the clock
//!   setters, `personality` beyond Docker's safe values, `AF_ALG` and
//!   `AF_VSOCK` sockets, and the obsolete or privileged rest of the table.
//!
//! Arguments are compared on their low 32 bits, as the kernel reads `ioctl`'s
//! `cmd`, `personality`'s persona and `clone`'s flags, so high bits cannot
//! smuggle a value past the filter. Every ABI through which a process can
//! enter the kernel is checked against its own numbers (x86_64, x32 and i386
//! on x86_64; aarch64 and arm on aarch64); an unknown architecture is refused.
//!
//! The program is assembled here rather than with a crate: `seccompiler` (the
//! maintained choice) builds one architecture per filter and kills the process
//! on any other, has one match action per filter (no EPERM beside ENOSYS) and
//! knows nothing of x32 or the 32-bit compat ABIs (decision 0007).

use nix::libc;

// Classic BPF opcodes (linux/bpf_common.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

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

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[i] (little-endian: every ABI here is).
const fn off_arg(i: u32) -> u32 {
    16 + 8 * i
}

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
const X32_BIT: u32 = 0x4000_0000;

/// One ABI the kernel may be entered through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abi {
    X86_64,
    /// x86_64's audit architecture, numbers with bit 30 set.
    X32,
    I386,
    Aarch64,
    Arm,
}

impl Abi {
    pub(crate) fn arch(self) -> u32 {
        match self {
            Abi::X86_64 | Abi::X32 => AUDIT_ARCH_X86_64,
            Abi::I386 => AUDIT_ARCH_I386,
            Abi::Aarch64 => AUDIT_ARCH_AARCH64,
            Abi::Arm => AUDIT_ARCH_ARM,
        }
    }

    fn column(self) -> usize {
        self as usize
    }

    /// The number the filter sees for `name` through this ABI.
    pub(crate) fn nr(self, name: &str) -> Option<u32> {
        self.nr_in(SYSCALLS, name)
    }

    /// The number the filter sees for `name` of `table` through this ABI.
    fn nr_in(self, table: &[(&str, [i32; 5])], name: &str) -> Option<u32> {
        let row = table.iter().find(|(n, _)| *n == name)?;
        let n = u32::try_from(row.1[self.column()]).ok()?;
        Some(if self == Abi::X32 { n | X32_BIT } else { n })
    }

    /// The ABI a `struct seccomp_data` {nr, arch} came through, among `set`.
    fn of(set: &[(u32, &[Abi])], arch: u32, nr: u32) -> Option<Abi> {
        let (_, abis) = set.iter().find(|(a, _)| *a == arch)?;
        if abis.contains(&Abi::X32) && nr & X32_BIT != 0 {
            Some(Abi::X32)
        } else {
            abis.first().copied()
        }
    }
}

/// The ABIs of the machine this binary runs on, grouped by audit
/// architecture (x32 shares x86_64's).
fn arches() -> &'static [(u32, &'static [Abi])] {
    if cfg!(target_arch = "aarch64") {
        AARCH64_ARCHES
    } else {
        X86_ARCHES
    }
}

const X86_ARCHES: &[(u32, &[Abi])] = &[
    (AUDIT_ARCH_X86_64, &[Abi::X86_64, Abi::X32]),
    (AUDIT_ARCH_I386, &[Abi::I386]),
];
const AARCH64_ARCHES: &[(u32, &[Abi])] = &[
    (AUDIT_ARCH_AARCH64, &[Abi::Aarch64]),
    (AUDIT_ARCH_ARM, &[Abi::Arm]),
];

/// Absent from that ABI.
const N: i32 = -1;

/// Every syscall the filter looks at, with its number per ABI: x86_64, x32
/// (without bit 30), i386, aarch64, arm (EABI). From the kernel's syscall
/// tables (arch/x86/entry/syscalls, include/uapi/asm-generic/unistd.h,
/// arch/arm/tools/syscall.tbl); numbers from 424 on are the same on every
/// ABI. A unit test checks the x86 and aarch64 columns against the kernel
/// headers installed here. The ones with an argument check come first: they
/// are evaluated on every call (the kernel caches the others' verdict).
#[rustfmt::skip]
const SYSCALLS: &[(&str, [i32; 5])] = &[
    //                       x86_64  x32  i386 aarch64 arm
    ("ioctl",               [ 16,  514,   54,  29,   54]),
    ("ptrace",              [101,  521,   26, 117,   26]),
    ("process_vm_writev",   [311,  540,  348, 271,  377]),
    ("clone",               [ 56,   56,  120, 220,  120]),
    ("socket",              [ 41,   41,  359, 198,  281]),
    ("unshare",             [272,  272,  310,  97,  337]),
    ("personality",         [135,  135,  136,  92,  136]),
    ("clone3",              [435,  435,  435, 435,  435]),
    ("setns",               [308,  308,  346, 268,  375]),
    ("bpf",                 [321,  321,  357, 280,  386]),
    ("perf_event_open",     [298,  298,  336, 241,  364]),
    ("userfaultfd",         [323,  323,  374, 282,  388]),
    ("io_uring_setup",      [425,  425,  425, 425,  425]),
    ("io_uring_enter",      [426,  426,  426, 426,  426]),
    ("io_uring_register",   [427,  427,  427, 427,  427]),
    ("mount",               [165,  165,   21,  40,   21]),
    ("umount",              [  N,    N,   22,   N,    N]),
    ("umount2",             [166,  166,   52,  39,   52]),
    ("pivot_root",          [155,  155,  217,  41,  218]),
    ("open_tree",           [428,  428,  428, 428,  428]),
    ("move_mount",          [429,  429,  429, 429,  429]),
    ("fsopen",              [430,  430,  430, 430,  430]),
    ("fsconfig",            [431,  431,  431, 431,  431]),
    ("fsmount",             [432,  432,  432, 432,  432]),
    ("fspick",              [433,  433,  433, 433,  433]),
    ("mount_setattr",       [442,  442,  442, 442,  442]),
    ("open_tree_attr",      [467,  467,  467, 467,  467]),
    ("add_key",             [248,  248,  286, 217,  309]),
    ("request_key",         [249,  249,  287, 218,  310]),
    ("keyctl",              [250,  250,  288, 219,  311]),
    ("kexec_load",          [246,  528,  283, 104,  347]),
    ("kexec_file_load",     [320,  320,    N, 294,  401]),
    ("init_module",         [175,  175,  128, 105,  128]),
    ("finit_module",        [313,  313,  350, 273,  379]),
    ("delete_module",       [176,  176,  129, 106,  129]),
    ("create_module",       [174,    N,  127,   N,    N]),
    ("get_kernel_syms",     [177,    N,  130,   N,    N]),
    ("query_module",        [178,    N,  167,   N,    N]),
    ("reboot",              [169,  169,   88, 142,   88]),
    ("swapon",              [167,  167,   87, 224,   87]),
    ("swapoff",             [168,  168,  115, 225,  115]),
    ("acct",                [163,  163,   51,  89,   51]),
    ("settimeofday",        [164,  164,   79, 170,   79]),
    ("stime",               [  N,    N,   25,   N,    N]),
    ("clock_settime",       [227,  227,  264, 112,  262]),
    ("clock_settime64",     [  N,    N,  404,   N,  404]),
    ("syslog",              [103,  103,  103, 116,  103]),
    ("vhangup",             [153,  153,  111,  58,  111]),
    ("lookup_dcookie",      [212,  212,  253,  18,  249]),
    ("quotactl",            [179,  179,  131,  60,  131]),
    ("quotactl_fd",         [443,  443,  443, 443,  443]),
    ("nfsservctl",          [180,    N,  169,  42,  169]),
    ("open_by_handle_at",   [304,  304,  342, 265,  371]),
    ("iopl",                [172,  172,  110,   N,    N]),
    ("ioperm",              [173,  173,  101,   N,    N]),
    ("vm86old",             [  N,    N,  113,   N,    N]),
    ("vm86",                [  N,    N,  166,   N,    N]),
    ("pciconfig_iobase",    [  N,    N,    N,   N,  271]),
    ("pciconfig_read",      [  N,    N,    N,   N,  272]),
    ("pciconfig_write",     [  N,    N,    N,   N,  273]),
    ("uselib",              [134,    N,   86,   N,   86]),
    ("ustat",               [136,  136,   62,   N,   62]),
    ("sysfs",               [139,  139,  135,   N,  135]),
    ("_sysctl",             [156,    N,  149,   N,  149]),
    ("kcmp",                [312,  312,  349, 272,  378]),
    ("pidfd_getfd",         [438,  438,  438, 438,  438]),
    ("process_madvise",     [440,  440,  440, 440,  440]),
    ("move_pages",          [279,  533,  317, 239,  344]),
    ("migrate_pages",       [256,  256,  294, 238,  400]),
    ("fanotify_init",       [300,  300,  338, 262,  367]),
    ("sethostname",         [170,  170,   74, 161,   74]),
    ("setdomainname",       [171,  171,  121, 162,  121]),
    ("lsm_get_self_attr",   [459,  459,  459, 459,  459]),
    ("lsm_set_self_attr",   [460,  460,  460, 460,  460]),
    ("lsm_list_modules",    [461,  461,  461, 461,  461]),
];

/// What the filter does with one syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
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
pub(crate) fn rule(name: &str, profile: Profile) -> Option<Rule> {
    const IOCTLS_REFUSED: &[u32] = &[
        TIOCSTI,
        TIOCLINUX,
        BTRFS_IOC_SNAP_CREATE,
        BTRFS_IOC_SUBVOL_CREATE,
        BTRFS_IOC_SNAP_CREATE_V2,
        BTRFS_IOC_SUBVOL_CREATE_V2,
    ];
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
        Profile::Sandbox => {}
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

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// A forward-jump target in [`Asm`].
#[derive(Debug, Clone, Copy)]
struct Label(usize);

/// A tiny assembler: straight-line code with forward jumps to labels.
#[derive(Default)]
struct Asm {
    code: Vec<Insn>,
    bound: Vec<Option<usize>>,
    /// (instruction, true for jt / false for jf, target)
    fixups: Vec<(usize, bool, Label)>,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.bound.push(None);
        Label(self.bound.len() - 1)
    }

    fn bind(&mut self, l: Label) {
        assert!(self.bound[l.0].is_none(), "label bound twice");
        self.bound[l.0] = Some(self.code.len());
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        });
    }

    fn load(&mut self, off: u32) {
        self.stmt(BPF_LD_W_ABS, off);
    }

    fn ret(&mut self, k: u32) {
        self.stmt(BPF_RET_K, k);
    }

    /// Jump to `jt` when the test holds, else to `jf`; None: the next instruction.
    fn jump(&mut self, code: u16, k: u32, jt: Option<Label>, jf: Option<Label>) {
        let at = self.code.len();
        self.stmt(code, k);
        if let Some(l) = jt {
            self.fixups.push((at, true, l));
        }
        if let Some(l) = jf {
            self.fixups.push((at, false, l));
        }
    }

    fn finish(mut self) -> Vec<Insn> {
        for (at, jt, l) in self.fixups {
            let to = self.bound[l.0].expect("jump to an unbound label");
            assert!(to > at, "backward jump");
            let off = u8::try_from(to - at - 1).expect("seccomp jump longer than 255 instructions");
            if jt {
                self.code[at].jt = off;
            } else {
                self.code[at].jf = off;
            }
        }
        self.code
    }
}

/// The filter for this machine's ABIs.
pub(crate) fn program(profile: Profile) -> Vec<Insn> {
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
    let mut a = Asm::default();
    a.load(OFF_ARCH);
    let blocks: Vec<Label> = arches.iter().map(|_| a.label()).collect();
    for ((arch, _), l) in arches.iter().zip(&blocks) {
        a.jump(BPF_JEQ_K, *arch, Some(*l), None);
    }
    a.ret(RET_ERRNO | ENOSYS);
    for ((arch, abis), l) in arches.iter().zip(blocks) {
        debug_assert!(abis.iter().all(|abi| abi.arch() == *arch));
        a.bind(l);
        a.load(OFF_NR);
        let chains: Vec<Label> = abis.iter().map(|_| a.label()).collect();
        for (abi, c) in abis.iter().zip(&chains).skip(1) {
            assert_eq!(*abi, Abi::X32, "only x32 shares an audit architecture");
            a.jump(BPF_JSET_K, X32_BIT, Some(*c), None);
        }
        for (abi, c) in abis.iter().zip(chains) {
            a.bind(c);
            chain(&mut a, *abi, profile);
        }
    }
    a.finish()
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

/// `insns` as bubblewrap reads them from `--seccomp FD`: raw `sock_filter`s.
fn encode(insns: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(insns.len() * 8);
    for i in insns {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// The sandbox's filter, as bubblewrap reads it.
pub(crate) fn program_bytes() -> Vec<u8> {
    program_bytes_for(Profile::Sandbox)
}

/// The filter of `profile`, as bubblewrap reads it.
pub(crate) fn program_bytes_for(profile: Profile) -> Vec<u8> {
    encode(&program(profile))
}

/// The syscalls that give a name to something in the file system, or take
/// a directory away: the creation guard (src/supervisor.rs, issue #12)
/// hands them to its supervisor, which refuses the protected names and
/// performs the rest itself. Numbers per ABI as in [`SYSCALLS`].
#[rustfmt::skip]
pub(crate) const CREATE_SYSCALLS: &[(&str, [i32; 5])] = &[
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
    // Not creations: Landlock, refused as on a kernel without it (ENOSYS).
    // The supervisor performs creations outside a caller's Landlock
    // domain, so a domain would hold for everything but them; a tool told
    // "no Landlock" knows it is not restricted instead of believing it is.
    ("landlock_create_ruleset", [444, 444, 444, 444, 444]),
    ("landlock_add_rule",       [445, 445, 445, 445, 445]),
    ("landlock_restrict_self",  [446, 446, 446, 446, 446]),
];

/// `O_CREAT` (the same on every ABI here).
pub(crate) const O_CREAT: u32 = 0o100;
/// `O_PATH` (the same on every ABI here): the kernel drops `O_CREAT` beside
/// it, so such an `open` creates nothing and is not the supervisor's (which
/// could not hand an `O_PATH` descriptor over anyway: `ADDFD` refuses it).
pub(crate) const O_PATH: u32 = 0o1000_0000;

/// `unlinkat`'s flag that makes it `rmdir`.
pub(crate) const AT_REMOVEDIR: u32 = 0x200;

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
    match name {
        "open" => GuardRule::NotifyIfAny(1, O_CREAT),
        "openat" => GuardRule::NotifyIfAny(2, O_CREAT),
        "unlinkat" => GuardRule::NotifyIfAny(2, AT_REMOVEDIR),
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
pub(crate) fn create_syscall(arch: u32, nr: u32) -> Option<&'static str> {
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
pub(crate) fn guard_program() -> Vec<Insn> {
    guard_program_for(arches())
}

fn guard_program_for(arches: &[(u32, &[Abi])]) -> Vec<Insn> {
    let mut a = Asm::default();
    a.load(OFF_ARCH);
    let blocks: Vec<Label> = arches.iter().map(|_| a.label()).collect();
    for ((arch, _), l) in arches.iter().zip(&blocks) {
        a.jump(BPF_JEQ_K, *arch, Some(*l), None);
    }
    a.ret(RET_ERRNO | ENOSYS);
    for ((_, abis), l) in arches.iter().zip(blocks) {
        a.bind(l);
        a.load(OFF_NR);
        let chains: Vec<Label> = abis.iter().map(|_| a.label()).collect();
        for c in chains.iter().skip(1) {
            a.jump(BPF_JSET_K, X32_BIT, Some(*c), None);
        }
        for (abi, c) in abis.iter().zip(chains) {
            a.bind(c);
            guard_chain(&mut a, *abi);
        }
    }
    a.finish()
}

fn guard_chain(a: &mut Asm, abi: Abi) {
    let (notify, enosys) = (a.label(), a.label());
    let mut checks = Vec::new();
    for (name, _) in CREATE_SYSCALLS {
        let Some(nr) = abi.nr_in(CREATE_SYSCALLS, name) else {
            continue;
        };
        let to = match guard_rule(name) {
            GuardRule::Notify => notify,
            GuardRule::Errno(ENOSYS) => enosys,
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
    for (l, i, mask) in checks {
        a.bind(l);
        a.load(off_arg(i));
        let (yes, no) = (a.label(), a.label());
        if mask == O_CREAT {
            // O_PATH drops O_CREAT: nothing to create.
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
pub(crate) fn load_with_listener(insns: &[Insn]) -> std::io::Result<std::os::fd::OwnedFd> {
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

/// The sandbox's filter as an x86_64 machine's binary builds it, whatever
/// this machine is: the golden plan table (src/golden.rs) pins its hash, so
/// the table holds on aarch64 too (issue #14).
#[cfg(test)]
pub(crate) fn x86_64_program_bytes() -> Vec<u8> {
    encode(&program_for(X86_ARCHES, Profile::Sandbox))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A classic-BPF interpreter for the instructions the filter uses, over
    /// `struct seccomp_data` {nr, arch, ip, args[6]} (little-endian).
    fn run(p: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                BPF_LD_W_ABS => {
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                }
                BPF_JEQ_K => pc += if acc == i.k { i.jt } else { i.jf } as usize,
                BPF_JSET_K => pc += if acc & i.k != 0 { i.jt } else { i.jf } as usize,
                BPF_RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    fn arg0(v: u64) -> [u64; 6] {
        [v, 0, 0, 0, 0, 0]
    }

    fn arg1(v: u64) -> [u64; 6] {
        [0, v, 0, 0, 0, 0]
    }

    const DENIED: u32 = RET_ERRNO | EPERM;
    const NOSYS: u32 = RET_ERRNO | ENOSYS;

    const ALL_ARCHES: [&[(u32, &[Abi])]; 2] = [X86_ARCHES, AARCH64_ARCHES];
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
        run(&p, abi.arch(), nr, args)
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
                                run(&p, arch, nr, *args),
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
        assert_eq!(run(&p, 0x1234, 1, [0; 6]), NOSYS, "unknown arch refused");
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
                    assert_eq!(run(&p, abi.arch(), nr, args), RET_ALLOW, "{abi:?} {name}");
                }
            }
        }
        // i386's socketcall multiplexer keeps its arguments in memory: allowed (as Docker).
        assert_eq!(
            run(
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

    /// `#define __NR_name n` (x32: `(__X32_SYSCALL_BIT + n)`) of a kernel header.
    fn header_numbers(text: &str) -> BTreeMap<String, i32> {
        text.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("#define __NR_")?;
                let (name, v) = rest.split_once(char::is_whitespace)?;
                let v = v
                    .trim()
                    .trim_start_matches("(__X32_SYSCALL_BIT + ")
                    .trim_end_matches(')');
                Some((name.to_string(), v.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn numbers_match_the_kernel_headers_installed_here() {
        let headers = [
            ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", Abi::X86_64),
            ("/usr/include/x86_64-linux-gnu/asm/unistd_x32.h", Abi::X32),
            ("/usr/include/x86_64-linux-gnu/asm/unistd_32.h", Abi::I386),
            ("/usr/include/asm-generic/unistd.h", Abi::Aarch64),
        ];
        let mut checked = 0;
        for (path, abi) in headers {
            let Ok(text) = std::fs::read_to_string(path) else {
                eprintln!("{path} absent: its column is not checked");
                continue;
            };
            let h = header_numbers(&text);
            assert!(h.len() > 250, "{path}: {} numbers", h.len());
            for (name, cols) in SYSCALLS {
                let ours = cols[abi.column()];
                match h.get(*name) {
                    // The generic header's time64 calls are for 32-bit ABIs only (an #if).
                    Some(_) if abi == Abi::Aarch64 && ours == N && name.ends_with("64") => {}
                    Some(n) => assert_eq!(ours, *n, "{path}: {name}"),
                    // Newer than the header, or not on this ABI.
                    None => assert!(ours == N || ours >= 452, "{path}: {name} {ours}"),
                }
                checked += 1;
            }
        }
        eprintln!("{checked} numbers checked against kernel headers");
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

    const NOTIFY: u32 = RET_USER_NOTIF;

    #[test]
    fn guard_sends_every_creation_to_the_supervisor_on_every_abi() {
        for set in ALL_ARCHES {
            let p = guard_program_for(set);
            for (arch, abis) in set {
                for abi in *abis {
                    let nr = |n: &str| abi.nr_in(CREATE_SYSCALLS, n);
                    let run1 = |n: &str, args| nr(n).map(|nr| run(&p, *arch, nr, args));
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
                    assert_eq!(
                        run1("openat", [0, 0, 2, 0, 0, 0]),
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
                    assert_eq!(run(&p, *arch, read, [0; 6]), RET_ALLOW);
                }
            }
            assert_eq!(
                run(&p, 0x1234, 2, [0; 6]),
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
