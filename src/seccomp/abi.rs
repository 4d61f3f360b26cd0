//! The ABIs through which a process can enter the kernel, grouped by audit
//! architecture as a filter sees them (x86_64, x32 and i386 on x86_64;
//! aarch64 and arm on aarch64), the per-ABI numbers of every syscall the
//! sandbox's filter looks at, and the opening both filters share: dispatch
//! on the architecture (an unknown one is refused), then on x32's bit.

use super::asm::{Asm, Insn, Label, BPF_JEQ_K, BPF_JSET_K, ENOSYS, OFF_ARCH, OFF_NR, RET_ERRNO};

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
pub(super) const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
pub(super) const X32_BIT: u32 = 0x4000_0000;

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

    pub(crate) fn column(self) -> usize {
        self as usize
    }

    /// The number the filter sees for `name` through this ABI.
    pub(crate) fn nr(self, name: &str) -> Option<u32> {
        self.nr_in(SYSCALLS, name)
    }

    /// The number the filter sees for `name` of `table` through this ABI.
    pub(crate) fn nr_in(self, table: &[(&str, [i32; 5])], name: &str) -> Option<u32> {
        let row = table.iter().find(|(n, _)| *n == name)?;
        let n = u32::try_from(row.1[self.column()]).ok()?;
        Some(if self == Abi::X32 { n | X32_BIT } else { n })
    }

    /// The ABI a `struct seccomp_data` {nr, arch} came through, among `set`.
    pub(crate) fn of(set: &[(u32, &[Abi])], arch: u32, nr: u32) -> Option<Abi> {
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
pub(crate) fn arches() -> &'static [(u32, &'static [Abi])] {
    if cfg!(target_arch = "aarch64") {
        AARCH64_ARCHES
    } else {
        X86_ARCHES
    }
}

pub(super) const X86_ARCHES: &[(u32, &[Abi])] = &[
    (AUDIT_ARCH_X86_64, &[Abi::X86_64, Abi::X32]),
    (AUDIT_ARCH_I386, &[Abi::I386]),
];
pub(super) const AARCH64_ARCHES: &[(u32, &[Abi])] = &[
    (AUDIT_ARCH_AARCH64, &[Abi::Aarch64]),
    (AUDIT_ARCH_ARM, &[Abi::Arm]),
];

/// Absent from that ABI.
pub(crate) const N: i32 = -1;

/// Every syscall the filter looks at, with its number per ABI: x86_64, x32
/// (without bit 30), i386, aarch64, arm (EABI). From the kernel's syscall
/// tables (arch/x86/entry/syscalls, include/uapi/asm-generic/unistd.h,
/// arch/arm/tools/syscall.tbl); numbers from 424 on are the same on every
/// ABI. A unit test checks the x86 and aarch64 columns against the kernel
/// headers installed here. The ones with an argument check come first: they
/// are evaluated on every call (the kernel caches the others' verdict).
#[rustfmt::skip]
pub(super) const SYSCALLS: &[(&str, [i32; 5])] = &[
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

/// A filter for `arches`: the architecture picks a block (an unknown one
/// gets ENOSYS), the block loads the syscall number, x32's bit picks its
/// chain, and `chain` emits each ABI's comparisons and their returns (the
/// syscall number in the accumulator). Every chain carries its own
/// returns, so no jump is longer than one chain.
pub(crate) fn by_abi(arches: &[(u32, &[Abi])], mut chain: impl FnMut(&mut Asm, Abi)) -> Vec<Insn> {
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
            chain(&mut a, *abi);
        }
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seccomp::header_numbers;

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
}
