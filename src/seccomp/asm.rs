//! A tiny classic-BPF assembler for seccomp filters: the opcodes and return
//! values both filters use (the sandbox's deny list and the creation
//! guard's), the offsets of `struct seccomp_data`, straight-line code with
//! forward jumps to labels, and the raw `sock_filter` bytes bubblewrap reads.

// Classic BPF opcodes (linux/bpf_common.h).
pub(super) const BPF_LD_W_ABS: u16 = 0x20;
pub(crate) const BPF_JEQ_K: u16 = 0x15;
pub(crate) const BPF_JSET_K: u16 = 0x45;
pub(super) const BPF_RET_K: u16 = 0x06;

pub(crate) const RET_ALLOW: u32 = 0x7fff_0000;
pub(crate) const RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub(crate) const EPERM: u32 = 1;
pub(crate) const ENOSYS: u32 = 38;

pub(super) const OFF_NR: u32 = 0;
pub(super) const OFF_ARCH: u32 = 4;
/// Low 32 bits of args[i] (little-endian: every ABI here is).
pub(crate) const fn off_arg(i: u32) -> u32 {
    16 + 8 * i
}

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub(crate) code: u16,
    pub(crate) jt: u8,
    pub(crate) jf: u8,
    pub(crate) k: u32,
}

/// A forward-jump target in [`Asm`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Label(usize);

/// A tiny assembler: straight-line code with forward jumps to labels.
#[derive(Default)]
pub(crate) struct Asm {
    code: Vec<Insn>,
    bound: Vec<Option<usize>>,
    /// (instruction, true for jt / false for jf, target)
    fixups: Vec<(usize, bool, Label)>,
}

impl Asm {
    pub(crate) fn label(&mut self) -> Label {
        self.bound.push(None);
        Label(self.bound.len() - 1)
    }

    pub(crate) fn bind(&mut self, l: Label) {
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

    pub(crate) fn load(&mut self, off: u32) {
        self.stmt(BPF_LD_W_ABS, off);
    }

    pub(crate) fn ret(&mut self, k: u32) {
        self.stmt(BPF_RET_K, k);
    }

    /// Jump to `jt` when the test holds, else to `jf`; None: the next instruction.
    pub(crate) fn jump(&mut self, code: u16, k: u32, jt: Option<Label>, jf: Option<Label>) {
        let at = self.code.len();
        self.stmt(code, k);
        if let Some(l) = jt {
            self.fixups.push((at, true, l));
        }
        if let Some(l) = jf {
            self.fixups.push((at, false, l));
        }
    }

    pub(crate) fn finish(mut self) -> Vec<Insn> {
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

/// `insns` as bubblewrap reads them from `--seccomp FD`: raw `sock_filter`s.
pub(super) fn encode(insns: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(insns.len() * 8);
    for i in insns {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}
