//! An existing FIFO's `open`, waited for on a thread of its own, given up
//! as soon as its caller is gone.
//!
//! PROMISES. The wait ends when the FIFO's other end comes (the open's
//! result is returned) or when the caller's notification is no longer
//! valid (the caller was killed, or its call interrupted): then nothing is
//! left waiting on the FIFO. The kernel drops a killed writer's open; an
//! open left waiting here would be a writer nobody has, which a later
//! reader would meet, and whose end-of-file it would take for the real
//! writer's (`cat fifo` returning at once, empty).
//!
//! How: a signal of its own ([`look_signal`], a real-time one) is blocked
//! in every thread of the supervisor ([`hold`], before any thread starts)
//! and caught, doing nothing, without `SA_RESTART`. The waiting thread
//! unblocks it for itself alone and has a timer send it to that thread
//! every [`LOOK_EVERY`]: the `open` fails with `EINTR`, the thread asks
//! the kernel whether the notification is still valid, and opens again or
//! gives up. A process inside that sends the signal to the supervisor
//! reaches only such a waiting thread, which looks once more.
//!
//! Exports: [`hold`] (for `fork.rs`), [`wait_open`].

use std::time::Duration;

use nix::libc;

use super::resolve::{last_errno, Errno};

/// How often a waiting open looks whether its caller is still there.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The signal that interrupts a waiting open (glibc keeps the first few
/// real-time signals for itself).
fn look_signal() -> libc::c_int {
    libc::SIGRTMIN() + 6
}

/// The signal's handler: nothing; its delivery is what matters.
extern "C" fn interrupted(_: libc::c_int) {}

/// Block or unblock [`look_signal`] in this thread.
fn mask(how: libc::c_int) {
    // SAFETY: this thread's own signal mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, look_signal());
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// Block [`look_signal`] in this thread (and so in every thread it starts)
/// and catch it without `SA_RESTART`. Called once, before the supervisor's
/// threads start.
pub(super) fn hold() {
    mask(libc::SIG_BLOCK);
    // SAFETY: a handler that does nothing.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = interrupted as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = 0;
        libc::sigaction(look_signal(), &act, std::ptr::null_mut());
    }
}

/// This thread's timer, sending it [`look_signal`] every [`LOOK_EVERY`],
/// with the signal unblocked for this thread while it lives.
struct Looking(libc::timer_t);

impl Looking {
    fn start() -> Result<Looking, Errno> {
        // SAFETY: a timer aimed at this thread; its own signal mask.
        unsafe {
            let mut ev: libc::sigevent = std::mem::zeroed();
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = look_signal();
            ev.sigev_notify_thread_id = libc::gettid();
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut ev, &mut timer) != 0 {
                return Err(last_errno());
            }
            let every = libc::timespec {
                tv_sec: 0,
                tv_nsec: LOOK_EVERY.as_nanos() as libc::c_long,
            };
            let spec = libc::itimerspec {
                it_interval: every,
                it_value: every,
            };
            if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
                let e = last_errno();
                libc::timer_delete(timer);
                return Err(e);
            }
            mask(libc::SIG_UNBLOCK);
            Ok(Looking(timer))
        }
    }
}

impl Drop for Looking {
    fn drop(&mut self) {
        mask(libc::SIG_BLOCK);
        // SAFETY: this thread's own timer.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// `open` (which may wait for the FIFO's other end) until it returns
/// something other than `EINTR`, or until `caller_there` says the caller
/// is gone: `None` then, and nothing is left open or waiting. Without a
/// timer for this thread the open fails with what `timer_create` said
/// rather than wait unwatched.
pub(super) fn wait_open<T>(
    open: impl Fn() -> Result<T, Errno>,
    caller_there: impl Fn() -> bool,
) -> Option<Result<T, Errno>> {
    let _looking = match Looking::start() {
        Ok(l) => l,
        Err(e) => return Some(Err(e)),
    };
    loop {
        match open() {
            Err(libc::EINTR) if caller_there() => continue,
            Err(libc::EINTR) => return None,
            done => return Some(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::creation_guard::resolve::openat;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    fn fifo(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("csb-fifo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        p
    }

    fn open_writer(p: &std::path::Path) -> Result<std::os::fd::OwnedFd, Errno> {
        openat(
            libc::AT_FDCWD,
            p.as_os_str().as_encoded_bytes(),
            libc::O_WRONLY,
            0,
        )
    }

    #[test]
    fn a_wait_whose_caller_is_gone_ends_and_leaves_no_writer() {
        let p = fifo("gone");
        let looks = AtomicUsize::new(0);
        let t = Instant::now();
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                hold();
                wait_open(
                    || open_writer(&p),
                    || looks.fetch_add(1, Ordering::SeqCst) < 2,
                )
            })
            .join()
            .unwrap()
        });
        assert!(got.is_none());
        assert_eq!(looks.load(Ordering::SeqCst), 3);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // Nobody holds the writing end: a reader that does not wait reads
        // end-of-file at once (with a writer there it would be `EAGAIN`).
        let r = openat(
            libc::AT_FDCWD,
            p.as_os_str().as_encoded_bytes(),
            libc::O_RDONLY | libc::O_NONBLOCK,
            0,
        )
        .unwrap();
        let mut b = [0u8; 1];
        // SAFETY: reading into a local buffer.
        assert_eq!(
            unsafe { libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), 1) },
            0
        );
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_wait_whose_caller_stays_gets_the_other_end_however_late() {
        let p = fifo("stays");
        let got = std::thread::scope(|s| {
            let w = s.spawn(|| {
                hold();
                wait_open(|| open_writer(&p), || true)
            });
            // Several looks go by before the reader comes.
            std::thread::sleep(LOOK_EVERY * 3);
            let r = std::fs::File::open(&p).unwrap();
            (w.join().unwrap(), r)
        });
        assert!(matches!(got.0, Some(Ok(_))));
        let _ = std::fs::remove_file(&p);
    }
}
