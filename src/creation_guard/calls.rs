//! A notification's syscall and arguments, decoded into the call the
//! supervisor performs ([`Call`]): the plain forms are the `*at` forms from
//! the caller's working directory; descriptors and flags are read as the
//! kernel reads them, on their low 32 bits.

use nix::libc;

use super::filter::AT_REMOVEDIR;

/// One decoded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Call {
    Open {
        dirfd: i32,
        path: u64,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        dirfd: i32,
        path: u64,
        mode: u32,
    },
    Mknod {
        dirfd: i32,
        path: u64,
        mode: u32,
        dev: u32,
    },
    Symlink {
        target: u64,
        dirfd: i32,
        path: u64,
    },
    Link {
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: i32,
    },
    Rename {
        olddirfd: i32,
        old: u64,
        newdirfd: i32,
        new: u64,
        flags: u32,
    },
    Unlink {
        dirfd: i32,
        path: u64,
        flags: i32,
    },
    /// `bind(fd, addr, len)`: a path-named unix socket is a new name
    /// (issue #45).
    Bind {
        fd: i32,
        addr: u64,
        len: u32,
    },
    /// i386's `socketcall(op, args)`: `bind` when `op` is `SYS_BIND`, its
    /// arguments in memory at `args`.
    Socketcall {
        op: u32,
        args: u64,
    },
}

/// The call a notification of syscall `name` (one the guard's filter sends)
/// makes with arguments `a`; None for any other syscall.
pub(super) fn decode(name: &str, a: [u64; 6]) -> Option<Call> {
    let a = Args(a);
    decode_open(name, a)
        .or_else(|| decode_make(name, a))
        .or_else(|| decode_move(name, a))
        .or_else(|| decode_remove(name, a))
        .or_else(|| decode_socket(name, a))
}

/// `bind`, and i386's `socketcall`.
fn decode_socket(name: &str, a: Args) -> Option<Call> {
    Some(match name {
        "bind" => Call::Bind {
            fd: a.int(0),
            addr: a.ptr(1),
            len: a.word(2),
        },
        "socketcall" => Call::Socketcall {
            op: a.word(0),
            args: a.ptr(1),
        },
        _ => return None,
    })
}

/// A notification's raw arguments.
#[derive(Clone, Copy)]
struct Args([u64; 6]);

impl Args {
    /// A descriptor or flags: an int, whatever the high bits say (so
    /// `AT_FDCWD` is a 32-bit -100).
    fn int(self, i: usize) -> i32 {
        self.0[i] as u32 as i32
    }

    /// A mode, a device number or an unsigned flags word.
    fn word(self, i: usize) -> u32 {
        self.0[i] as u32
    }

    /// A pointer into the caller's memory.
    fn ptr(self, i: usize) -> u64 {
        self.0[i]
    }
}

const CWD: i32 = libc::AT_FDCWD;

/// `open`, `creat`, `openat`.
fn decode_open(name: &str, a: Args) -> Option<Call> {
    Some(match name {
        "open" => Call::Open {
            dirfd: CWD,
            path: a.ptr(0),
            flags: a.int(1),
            mode: a.word(2),
        },
        "creat" => Call::Open {
            dirfd: CWD,
            path: a.ptr(0),
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: a.word(1),
        },
        "openat" => Call::Open {
            dirfd: a.int(0),
            path: a.ptr(1),
            flags: a.int(2),
            mode: a.word(3),
        },
        _ => return None,
    })
}

/// `mkdir`, `mknod`, `symlink` and their `*at` forms: one new name.
fn decode_make(name: &str, a: Args) -> Option<Call> {
    Some(match name {
        "mkdir" => Call::Mkdir {
            dirfd: CWD,
            path: a.ptr(0),
            mode: a.word(1),
        },
        "mkdirat" => Call::Mkdir {
            dirfd: a.int(0),
            path: a.ptr(1),
            mode: a.word(2),
        },
        "mknod" => Call::Mknod {
            dirfd: CWD,
            path: a.ptr(0),
            mode: a.word(1),
            dev: a.word(2),
        },
        "mknodat" => Call::Mknod {
            dirfd: a.int(0),
            path: a.ptr(1),
            mode: a.word(2),
            dev: a.word(3),
        },
        "symlink" => Call::Symlink {
            target: a.ptr(0),
            dirfd: CWD,
            path: a.ptr(1),
        },
        "symlinkat" => Call::Symlink {
            target: a.ptr(0),
            dirfd: a.int(1),
            path: a.ptr(2),
        },
        _ => return None,
    })
}

/// `link`, `rename` and their `*at` forms: an old name and a new one.
fn decode_move(name: &str, a: Args) -> Option<Call> {
    Some(match name {
        "link" => Call::Link {
            olddirfd: CWD,
            old: a.ptr(0),
            newdirfd: CWD,
            new: a.ptr(1),
            flags: 0,
        },
        "linkat" => Call::Link {
            olddirfd: a.int(0),
            old: a.ptr(1),
            newdirfd: a.int(2),
            new: a.ptr(3),
            flags: a.int(4),
        },
        "rename" => Call::Rename {
            olddirfd: CWD,
            old: a.ptr(0),
            newdirfd: CWD,
            new: a.ptr(1),
            flags: 0,
        },
        "renameat" => Call::Rename {
            olddirfd: a.int(0),
            old: a.ptr(1),
            newdirfd: a.int(2),
            new: a.ptr(3),
            flags: 0,
        },
        "renameat2" => Call::Rename {
            olddirfd: a.int(0),
            old: a.ptr(1),
            newdirfd: a.int(2),
            new: a.ptr(3),
            flags: a.word(4),
        },
        _ => return None,
    })
}

/// `rmdir`, and `unlinkat` (the filter sends it only with `AT_REMOVEDIR`).
fn decode_remove(name: &str, a: Args) -> Option<Call> {
    Some(match name {
        "rmdir" => Call::Unlink {
            dirfd: CWD,
            path: a.ptr(0),
            flags: AT_REMOVEDIR as i32,
        },
        "unlinkat" => Call::Unlink {
            dirfd: a.int(0),
            path: a.ptr(1),
            flags: a.int(2),
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_maps_every_creating_call() {
        let a = [1, 2, 0o100 | 1, 0o644, 5, 6];
        assert_eq!(
            decode("openat", a),
            Some(Call::Open {
                dirfd: 1,
                path: 2,
                flags: 0o101,
                mode: 0o644
            })
        );
        assert_eq!(
            decode("creat", [7, 0o600, 0, 0, 0, 0]),
            Some(Call::Open {
                dirfd: libc::AT_FDCWD,
                path: 7,
                flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
                mode: 0o600
            })
        );
        // AT_FDCWD arrives as a 32-bit -100, whatever the high bits say.
        let at = decode("mkdirat", [0xffff_ff9c, 9, 0o755, 0, 0, 0]);
        assert_eq!(
            at,
            Some(Call::Mkdir {
                dirfd: libc::AT_FDCWD,
                path: 9,
                mode: 0o755
            })
        );
        assert_eq!(
            decode("rmdir", [3, 0, 0, 0, 0, 0]),
            Some(Call::Unlink {
                dirfd: libc::AT_FDCWD,
                path: 3,
                flags: 0x200
            })
        );
        assert_eq!(
            decode("renameat2", [1, 2, 3, 4, 1 << 32 | 2, 0]),
            Some(Call::Rename {
                olddirfd: 1,
                old: 2,
                newdirfd: 3,
                new: 4,
                flags: 2
            })
        );
        assert_eq!(
            decode("renameat", [1, 2, 3, 4, 2, 0]),
            decode("renameat2", [1, 2, 3, 4, 0, 0])
        );
        assert_eq!(decode("read", a), None);
        for (name, _) in crate::creation_guard::filter::CREATE_SYSCALLS {
            // Refused by the filter itself, never sent here; or noted and
            // let through before any decoding.
            let noted = crate::creation_guard::filter::NOTED.contains(name);
            let refused =
                matches!(*name, "openat2" | "pidfd_getfd") || name.starts_with("landlock_");
            if !refused && !noted {
                assert!(decode(name, a).is_some(), "{name}");
            }
        }
    }
}
