//! Test support for both seccomp filters' unit tests (the sandbox's here,
//! the creation guard's in `creation_guard`): a classic-BPF interpreter to
//! run a program on a syscall, every architecture set, and the numbers of
//! the kernel headers installed here.

use std::collections::BTreeMap;

use super::abi::{Abi, AARCH64_ARCHES, X86_ARCHES};
use super::asm::{Insn, BPF_JEQ_K, BPF_JSET_K, BPF_LD_W_ABS, BPF_RET_K};

/// The architecture sets of both machines this builds for.
pub(crate) const ALL_ARCHES: [&[(u32, &[Abi])]; 2] = [X86_ARCHES, AARCH64_ARCHES];

/// A classic-BPF interpreter for the instructions the filters use, over
/// `struct seccomp_data` {nr, arch, ip, args[6]} (little-endian).
pub(crate) fn interpret(p: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
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

/// `#define __NR_name n` (x32: `(__X32_SYSCALL_BIT + n)`) of a kernel header.
pub(crate) fn header_numbers(text: &str) -> BTreeMap<String, i32> {
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
