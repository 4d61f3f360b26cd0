//! How the guard's threads are scheduled, for speed alone (issue #23):
//! the receiving threads at `SCHED_BATCH`, and another CPU kept awake while
//! creations come in bursts.
//!
//! `SCHED_BATCH`: when a caller has taken the descriptor `ADDFD` placed, it
//! wakes the receiving thread that placed it, which must not preempt it (it has nothing to
//! do but wait for the next call, and the caller's next call will wake it
//! anyway); a batch thread does not preempt on wake-up, and keeps the normal
//! weight, so it is never starved. `bench/notif-floor.c` under load here:
//! 7.7 µs a round trip, 5.5 µs with the batch policy.
//!
//! An `open(O_CREAT)` is answered with `SECCOMP_IOCTL_NOTIF_ADDFD`, and the
//! kernel wakes the caller from there with a plain wake-up: the scheduler
//! puts it on an idle CPU, and waking a halted virtual CPU costs ~40 µs on
//! this project's 2-core VM (a bare notification answered with `SEND`,
//! which honours `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`, costs ~4.5 µs; the
//! same with `ADDFD`, ~45 µs; `bench/notif-floor.c` measures both). A CPU
//! that runs only a `SCHED_IDLE` task counts as idle to the scheduler but is
//! not halted, so the wake-up is cheap (~8 µs).
//!
//! So one thread of the lowest policy spins while notifications keep
//! coming, and sleeps on a futex once none came for [`WINDOW`]. It yields to
//! every other task at once (that is what `SCHED_IDLE` means), holds no
//! lock, reads nothing of the callers and decides nothing: the guard's
//! answers are the same with it or without it (without it, slower).
//!
//! Exports: [`serving_policy`] (the receiving threads'), [`Warm`] (`touch`
//! from the receiving threads, `spin` as a thread).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::libc;

/// Put the calling thread at `SCHED_BATCH`; left as it is where refused.
pub(super) fn serving_policy() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes this thread's own policy to one of the same weight.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
}

/// How long the spinner goes on after the last notification: a little
/// longer than a creating tool's gap between two files.
const WINDOW: Duration = Duration::from_micros(500);

/// The receiving threads' count of notifications, and the spinner's sleep.
#[derive(Default)]
pub(super) struct Warm {
    seen: AtomicU64,
    /// 1 while the spinner sleeps (the futex word).
    asleep: AtomicU32,
}

impl Warm {
    /// A notification came: count it, and wake the spinner if it sleeps
    /// (one futex call per burst, none inside one).
    pub(super) fn touch(&self) {
        self.seen.fetch_add(1, Ordering::Relaxed);
        if self.asleep.load(Ordering::Relaxed) == 1 && self.asleep.swap(0, Ordering::AcqRel) == 1 {
            // SAFETY: a futex wake on a word this struct owns.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.asleep.as_ptr(),
                    libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                    1,
                )
            };
        }
    }

    /// The spinner's life: at the lowest policy, sleep until a burst
    /// starts, spin until it has been quiet for [`WINDOW`], again.
    pub(super) fn spin(&self) {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: lowers this thread's own policy; on failure the thread
        // sleeps instead of spinning (it must never take a CPU from work).
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
            return;
        }
        loop {
            self.asleep.store(1, Ordering::Release);
            // A touch between the store and the wait finds asleep == 1 and
            // wakes us, or has already cleared it and the wait returns at once.
            // SAFETY: a futex wait on a word this struct owns.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.asleep.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    1,
                    std::ptr::null::<libc::timespec>(),
                )
            };
            self.burst();
        }
    }

    /// Spin until no notification has come for [`WINDOW`].
    fn burst(&self) {
        let mut last = self.seen.load(Ordering::Relaxed);
        let mut quiet_since = Instant::now();
        loop {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            let now = self.seen.load(Ordering::Relaxed);
            if now != last {
                last = now;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() > WINDOW {
                return;
            }
        }
    }
}
