//! The seccomp filter bubblewrap loads for the whole sandbox (`--seccomp`):
//!
//! - **terminal injection** (SPEC §4.4): `ioctl(TIOCSTI)` and
//!   `ioctl(TIOCLINUX)` fail with EPERM. Chosen over `bwrap --new-session`: the
//!   sandbox keeps the caller's controlling terminal, so job control, Ctrl-C,
//!   `/dev/tty` and SIGWINCH on resize keep working with no relaying
//!   (docs/decisions/0001-tiocsti-seccomp.md).
//! - **kernel keyrings**: `add_key`, `request_key` and `keyctl` fail with
//!   EPERM. The sandbox inherits the caller's session keyring, and a key in it
//!   (a Kerberos ticket, a cached token) is readable by whoever possesses the
//!   keyring, whatever the namespaces; container runtimes block these too.
//!
//! The `cmd` argument of ioctl is an `unsigned int`: only its low 32 bits are
//! compared, as the kernel does, so high bits cannot smuggle the request past
//! the filter. Syscalls made through a foreign ABI (x32, i386/arm compat) are
//! checked against that ABI's numbers; an unknown architecture is refused.

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

/// One ABI the kernel may be entered through: its audit architecture, its
/// ioctl syscall number(s), and its `add_key`, `request_key`, `keyctl`.
struct Abi {
    arch: u32,
    ioctl: &'static [u32],
    denied: &'static [u32],
}

fn abis() -> &'static [Abi] {
    if cfg!(target_arch = "aarch64") {
        &[
            Abi {
                arch: AUDIT_ARCH_AARCH64,
                ioctl: &[29],
                denied: &[217, 218, 219],
            },
            Abi {
                arch: AUDIT_ARCH_ARM,
                ioctl: &[54],
                denied: &[309, 310, 311],
            },
        ]
    } else {
        &[
            Abi {
                arch: AUDIT_ARCH_X86_64,
                // x32 shares the keyring numbers (with the x32 bit); its ioctl is 514.
                ioctl: &[16, X32_BIT | 514],
                denied: &[248, 249, 250, X32_BIT | 248, X32_BIT | 249, X32_BIT | 250],
            },
            Abi {
                arch: AUDIT_ARCH_I386,
                ioctl: &[54],
                denied: &[286, 287, 288],
            },
        ]
    }
}

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
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

fn jump(from: usize, to: usize) -> u8 {
    u8::try_from(to - from - 1).expect("seccomp filter too long for a BPF jump")
}

/// The filter program.
pub(crate) fn program() -> Vec<Insn> {
    // Layout:
    //   ld arch
    //   per ABI: jeq arch ? next : skip block; ld nr;
    //            jeq ioctl -> CHECK …; jeq denied -> DENY …; ret ALLOW
    //   ret ERRNO(ENOSYS)            (unknown architecture)
    //   CHECK: ld arg1; jeq TIOCSTI -> DENY; jeq TIOCLINUX -> DENY; ret ALLOW
    //   DENY: ret ERRNO(EPERM)
    let mut p = vec![stmt(BPF_LD_W_ABS, OFF_ARCH)];
    let (mut to_check, mut to_deny) = (Vec::new(), Vec::new());
    for abi in abis() {
        let block_len = 1 + abi.ioctl.len() + abi.denied.len() + 1;
        p.push(Insn {
            code: BPF_JEQ_K,
            jt: 0,
            jf: block_len as u8,
            k: abi.arch,
        });
        p.push(stmt(BPF_LD_W_ABS, OFF_NR));
        for nr in abi.ioctl {
            to_check.push(p.len());
            p.push(Insn {
                code: BPF_JEQ_K,
                jt: 0,
                jf: 0,
                k: *nr,
            });
        }
        for nr in abi.denied {
            to_deny.push(p.len());
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
    let deny = p.len();
    p.push(stmt(BPF_RET_K, RET_ERRNO | EPERM));
    for i in to_check {
        p[i].jt = jump(i, check);
    }
    for i in to_deny {
        p[i].jt = jump(i, deny);
    }
    p
}

/// The program as bubblewrap reads it from `--seccomp FD`: raw `sock_filter`s.
pub(crate) fn program_bytes() -> Vec<u8> {
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

    const DENIED: u32 = RET_ERRNO | EPERM;

    #[test]
    fn tiocsti_refused_everything_else_allowed() {
        let p = program();
        let native = &abis()[0];
        let ioctl = native.ioctl[0];
        assert_eq!(run(&p, native.arch, ioctl, TIOCSTI as u64), DENIED);
        assert_eq!(run(&p, native.arch, ioctl, TIOCLINUX as u64), DENIED);
        // High bits do not hide the request: the kernel truncates cmd to 32 bits.
        assert_eq!(
            run(
                &p,
                native.arch,
                ioctl,
                0xdead_0000_0000_0000 | TIOCSTI as u64
            ),
            DENIED
        );
        assert_eq!(run(&p, native.arch, ioctl, 0x5413), RET_ALLOW, "TIOCGWINSZ");
        assert_eq!(run(&p, native.arch, ioctl, 0x5414), RET_ALLOW, "TIOCSWINSZ");
        assert_eq!(
            run(&p, native.arch, 0, TIOCSTI as u64),
            RET_ALLOW,
            "read() with that value is fine"
        );
        for abi in abis() {
            for nr in abi.ioctl {
                assert_eq!(
                    run(&p, abi.arch, *nr, TIOCSTI as u64),
                    DENIED,
                    "{:#x}/{nr}",
                    abi.arch
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

    #[test]
    fn keyring_syscalls_refused_on_every_abi() {
        let p = program();
        for abi in abis() {
            for nr in abi.denied {
                assert_eq!(run(&p, abi.arch, *nr, 0), DENIED, "{:#x}/{nr}", abi.arch);
            }
            // Neighbouring syscalls are untouched.
            let last = abi
                .denied
                .iter()
                .copied()
                .filter(|n| n & X32_BIT == 0)
                .max()
                .unwrap();
            assert_eq!(run(&p, abi.arch, last + 1, 0), RET_ALLOW);
        }
    }
}
