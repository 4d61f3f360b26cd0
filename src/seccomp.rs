//! The terminal-injection defence of SPEC §4.4: a seccomp filter, loaded by
//! bubblewrap (`--seccomp`), that makes `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`
//! fail with EPERM for every process in the sandbox.
//!
//! Chosen over `bwrap --new-session`: the sandbox keeps the caller's
//! controlling terminal, so job control, Ctrl-C, `/dev/tty` and SIGWINCH on
//! resize keep working with no relaying (see docs/decisions).
//!
//! The `cmd` argument of ioctl is an `unsigned int`: only its low 32 bits are
//! compared, as the kernel does, so high bits cannot smuggle the request past
//! the filter. Syscalls made through a foreign ABI (x32, i386/arm compat) are
//! checked against that ABI's ioctl number; an unknown architecture is refused.

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[1] (little-endian).
const OFF_ARG1_LO: u32 = 16 + 8;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
const AUDIT_ARCH_ARM: u32 = 0x4000_0028;
const X32_BIT: u32 = 0x4000_0000;

/// Architectures and their ioctl syscall numbers.
fn arches() -> &'static [(u32, &'static [u32])] {
    if cfg!(target_arch = "aarch64") {
        &[(AUDIT_ARCH_AARCH64, &[29]), (AUDIT_ARCH_ARM, &[54])]
    } else {
        &[
            (AUDIT_ARCH_X86_64, &[16, X32_BIT | 514]),
            (AUDIT_ARCH_I386, &[54]),
        ]
    }
}

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The filter program.
pub fn program() -> Vec<Insn> {
    // Layout:
    //   ld arch
    //   per arch: jeq arch ? next : skip block; ld nr; jeq nr_i -> CHECK ...; ret ALLOW
    //   ret ERRNO(ENOSYS)            (unknown architecture)
    //   CHECK: ld arg1; jeq TIOCSTI -> DENY; jeq TIOCLINUX -> DENY; ret ALLOW
    //   DENY: ret ERRNO(EPERM)
    let mut p = vec![stmt(BPF_LD_W_ABS, OFF_ARCH)];
    let mut check_jumps = Vec::new(); // (index of jeq nr) patched to CHECK
    for (arch, nrs) in arches() {
        let block_len = 1 + nrs.len() + 1; // ld nr, jeqs, ret allow
        p.push(Insn {
            code: BPF_JEQ_K,
            jt: 0,
            jf: block_len as u8,
            k: *arch,
        });
        p.push(stmt(BPF_LD_W_ABS, OFF_NR));
        for nr in *nrs {
            check_jumps.push(p.len());
            p.push(Insn {
                code: BPF_JEQ_K,
                jt: 0,
                jf: 0,
                k: *nr,
            });
        }
        p.push(stmt(BPF_RET_K, RET_ALLOW));
    }
    p.push(stmt(BPF_RET_K, RET_ERRNO | ENOSYS));
    let check = p.len();
    p.push(stmt(BPF_LD_W_ABS, OFF_ARG1_LO));
    p.push(Insn {
        code: BPF_JEQ_K,
        jt: 2,
        jf: 0,
        k: TIOCSTI,
    });
    p.push(Insn {
        code: BPF_JEQ_K,
        jt: 1,
        jf: 0,
        k: TIOCLINUX,
    });
    p.push(stmt(BPF_RET_K, RET_ALLOW));
    p.push(stmt(BPF_RET_K, RET_ERRNO | EPERM));
    for i in check_jumps {
        p[i].jt = (check - i - 1) as u8;
    }
    p
}

/// The program as bubblewrap reads it from `--seccomp FD`: raw `sock_filter`s.
pub fn program_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in program() {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions the filter uses.
    fn run(p: &[Insn], arch: u32, nr: u32, arg1: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        data[24..32].copy_from_slice(&arg1.to_le_bytes());
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = p[pc];
            match i.code {
                BPF_LD_W_ABS => {
                    let k = i.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                    pc += 1;
                }
                BPF_JEQ_K => pc += 1 + if acc == i.k { i.jt } else { i.jf } as usize,
                BPF_RET_K => return i.k,
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    #[test]
    fn tiocsti_refused_everything_else_allowed() {
        let p = program();
        let (native, nrs) = arches()[0];
        let ioctl = nrs[0];
        assert_eq!(run(&p, native, ioctl, TIOCSTI as u64), RET_ERRNO | EPERM);
        assert_eq!(run(&p, native, ioctl, TIOCLINUX as u64), RET_ERRNO | EPERM);
        // High bits do not hide the request: the kernel truncates cmd to 32 bits.
        assert_eq!(
            run(&p, native, ioctl, 0xdead_0000_0000_0000 | TIOCSTI as u64),
            RET_ERRNO | EPERM
        );
        assert_eq!(run(&p, native, ioctl, 0x5413), RET_ALLOW, "TIOCGWINSZ");
        assert_eq!(run(&p, native, ioctl, 0x5414), RET_ALLOW, "TIOCSWINSZ");
        assert_eq!(
            run(&p, native, 0, TIOCSTI as u64),
            RET_ALLOW,
            "read() with that value is fine"
        );
        // Every ABI's ioctl is covered.
        for (arch, nrs) in arches() {
            for nr in *nrs {
                assert_eq!(
                    run(&p, *arch, *nr, TIOCSTI as u64),
                    RET_ERRNO | EPERM,
                    "{arch:#x}/{nr}"
                );
            }
        }
        assert_eq!(
            run(&p, 0x1234, 1, 0),
            RET_ERRNO | ENOSYS,
            "unknown arch refused"
        );
        assert_eq!(program_bytes().len(), p.len() * 8);
    }
}
