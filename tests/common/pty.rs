//! A real pseudo-terminal for end-to-end tests.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::libc;

/// Start `cmd` as a session leader whose controlling terminal is a fresh pty's
/// slave. Returns (child, master, slave).
pub(crate) fn spawn_on_pty(mut cmd: Command) -> (Child, OwnedFd, OwnedFd) {
    let pty = nix::pty::openpty(None, None).unwrap();
    // openpty's fds are inherited by default; the child must not hold the
    // master, or closing ours would never hang the terminal up.
    for fd in [pty.master.as_raw_fd(), pty.slave.as_raw_fd()] {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .unwrap();
    }
    let slave_fd = pty.slave.as_raw_fd();
    cmd.stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave.try_clone().unwrap()));
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let _ = slave_fd;
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    (child, pty.master, pty.slave)
}

/// Read what the terminal shows until `needle` appears or `timeout` passes.
pub(crate) fn read_until(master: &OwnedFd, needle: &str, timeout: Duration) -> String {
    let mut seen = String::new();
    let deadline = Instant::now() + timeout;
    let mut f = std::fs::File::from(master.try_clone().unwrap());
    nix::fcntl::fcntl(
        master.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .unwrap();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline && !seen.contains(needle) {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => break, // EIO: every slave holder is gone
        }
    }
    seen
}
