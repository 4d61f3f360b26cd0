//! How the battery samples its own process from inside: the calls the
//! seccomp filter must refuse (made so the kernel would reject them
//! differently), the calls that would drive the sandbox's PID 1, a nested
//! user namespace tried in a forked child, and the namespace inodes.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;

use crate::sys::kernel::{ns_inode, NS_KINDS};

/// One refused call the battery tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SyscallSample {
    /// The call as a person reads it.
    pub(super) call: &'static str,
    /// The errno the seccomp filter answers.
    pub(super) want: i32,
    /// The errno it got (0: it succeeded).
    pub(super) got: i32,
}

fn errno_of(r: i64) -> i32 {
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    } else {
        0
    }
}

/// Tracing PID 1 and writing its memory, tried so that nothing happens to
/// it when they work: `PTRACE_SEIZE` does not stop it (and is undone at
/// once), `process_vm_writev` with no iovec writes nothing.
pub(super) fn pid1_samples() -> Vec<SyscallSample> {
    use nix::libc::{self, syscall};
    let null = std::ptr::null::<u8>();
    const PTRACE_SEIZE: libc::c_long = 0x4206;
    vec![
        sample("ptrace(PTRACE_SEIZE, 1)", libc::EPERM, &|| unsafe {
            let r = syscall(libc::SYS_ptrace, PTRACE_SEIZE, 1, 0, 0);
            if r == 0 {
                syscall(libc::SYS_ptrace, libc::PTRACE_DETACH, 1, 0, 0);
            }
            r
        }),
        sample("process_vm_writev(1, no iovec)", libc::EPERM, &|| unsafe {
            syscall(libc::SYS_process_vm_writev, 1, null, 0, null, 0, 0)
        }),
    ]
}

/// PID 1's memory files that open read-write as memory (a fresh /proc
/// masks them with the empty file; the host's is mounted read-only).
pub(super) fn pid1_mem_writable() -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    crate::plan::PID1_MEM
        .iter()
        .filter(|p| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| !m.file_type().is_char_device())
        })
        .map(|p| p.to_string())
        .collect()
}

/// errno of ioctl(TIOCSTI) on /dev/null (0 when it succeeds): the seccomp filter must refuse it.
pub(super) fn tiocsti_errno() -> i32 {
    match std::fs::File::open("/dev/null") {
        Ok(f) => {
            let b = b'x';
            errno_of(
                unsafe { nix::libc::ioctl(f.as_raw_fd(), nix::libc::TIOCSTI, &b as *const u8) }
                    as i64,
            )
        }
        Err(_) => 0,
    }
}

/// errno of keyctl(GET_KEYRING_ID) (0 when it succeeds): the seccomp filter must refuse it.
pub(super) fn keyctl_errno() -> i32 {
    errno_of(unsafe { nix::libc::syscall(nix::libc::SYS_keyctl, 0, -3i64, 0) })
}

/// Make the call `f` and record the errno it got against the one wanted.
fn sample(call: &'static str, want: i32, f: &dyn Fn() -> nix::libc::c_long) -> SyscallSample {
    let r = f();
    // c_long is i64 here, i32 on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let got = errno_of(r as i64);
    SyscallSample { call, want, got }
}

/// The refused calls the battery tries. Each is made with arguments the
/// kernel itself rejects with EFAULT, EINVAL or EBADF before doing anything,
/// even for root: so EPERM (ENOSYS for clone3) can only be the seccomp
/// filter's answer, and nothing happens if the filter is missing.
pub(super) fn syscall_samples() -> Vec<SyscallSample> {
    use nix::libc::{self, syscall};
    let (eperm, enosys) = (libc::EPERM, libc::ENOSYS);
    let null = std::ptr::null::<u8>();
    vec![
        // A NULL attribute: EFAULT (kernels before 6.5 check privilege first).
        sample("bpf(BPF_MAP_CREATE, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_bpf, 0, null, 8)
        }),
        // Unknown flags are refused before anything else: EINVAL.
        sample("perf_event_open(NULL, flags ~0)", eperm, &|| unsafe {
            syscall(libc::SYS_perf_event_open, null, 0, -1, -1, !0u64)
        }),
        // UFFD_USER_MODE_ONLY is open to everyone; the extra bit is EINVAL.
        sample("userfaultfd(UFFD_USER_MODE_ONLY | 2)", eperm, &|| unsafe {
            syscall(libc::SYS_userfaultfd, 1 | 2)
        }),
        sample("io_uring_setup(0, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_io_uring_setup, 0, null)
        }),
        // A NULL mount point: EFAULT.
        sample("mount(NULL, NULL)", eperm, &|| unsafe {
            syscall(libc::SYS_mount, null, null, null, 0, null)
        }),
        // Bit 0 is no unshare flag: EINVAL.
        sample("unshare(CLONE_NEWNS | 1)", eperm, &|| unsafe {
            syscall(libc::SYS_unshare, libc::CLONE_NEWNS | 1)
        }),
        // CLONE_SIGHAND without CLONE_VM: EINVAL before any process exists.
        sample("clone(CLONE_NEWNS | CLONE_SIGHAND)", eperm, &|| unsafe {
            let r = syscall(
                libc::SYS_clone,
                libc::CLONE_NEWNS | libc::CLONE_SIGHAND,
                0,
                0,
                0,
                0,
            );
            if r == 0 {
                libc::_exit(0)
            }
            if r > 0 {
                libc::waitpid(r as i32, std::ptr::null_mut(), 0);
            }
            r
        }),
        sample("setns(-1, 0)", eperm, &|| unsafe {
            syscall(libc::SYS_setns, -1, 0)
        }),
        // A size below the first version: EINVAL.
        sample("clone3(NULL, 0)", enosys, &|| unsafe {
            syscall(libc::SYS_clone3, null, 0)
        }),
    ]
}

/// errno of creating a user namespace, tried in a forked child (so this
/// process, which may have threads, keeps its own); 0 when it worked.
pub(super) fn userns_errno() -> i32 {
    use nix::sys::wait::{waitpid, WaitStatus};
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            let r = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWUSER) };
            let code = if r == 0 {
                0
            } else {
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(255)
            };
            unsafe { nix::libc::_exit(code.min(255)) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            _ => -1,
        },
        Err(_) => -1,
    }
}

/// This process's namespace inodes, by kind, to compare with the launcher's.
pub(super) fn ns_inodes() -> BTreeMap<String, u64> {
    let mut ns_ino = BTreeMap::new();
    for k in NS_KINDS {
        if let Some(i) = ns_inode(k) {
            ns_ino.insert(k.to_string(), i);
        }
    }
    ns_ino
}
