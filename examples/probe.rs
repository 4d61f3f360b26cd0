//! A stand-in for the real Claude Code in end-to-end tests: placed at
//! /usr/libexec/claude-sandbox/claude, it reports what it can see and do from
//! inside the sandbox. First argument is always the injected `--no-chrome`.
//!
//! Modes: `report [DECOY…]`, `exit N`, `cat`, `signals`, `wait`, `tiocsti`, `keyctl`, `unix PATH…`,
//! `shell CMD` (run CMD with /bin/sh -c), `argv`, `syscalls` (raw calls the
//! seccomp filter refuses and everyday ones it lets through: errno of each).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

fn status_field(key: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{key}:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn writable(p: &Path) -> bool {
    let probe = if p.is_dir() {
        p.join(".csb-probe-write")
    } else {
        p.to_path_buf()
    };
    let ok = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&probe)
        .is_ok();
    if ok && p.is_dir() {
        let _ = std::fs::remove_file(&probe);
    }
    ok
}

fn report(decoys: &[String]) {
    let home = std::env::var("HOME").unwrap_or_default();
    let mut readable = Vec::new();
    for d in decoys {
        if let Ok(s) = std::fs::read_to_string(d) {
            if !s.is_empty() {
                readable.push(d.clone());
            }
        }
    }
    // ~/.claude persistence: report what an earlier launch left, then leave a mark.
    let marker = Path::new(&home).join(".claude/probe-marker");
    let previous_marker = std::fs::read_to_string(&marker).unwrap_or_default();
    let marker_written = std::fs::write(&marker, "written-inside").is_ok();
    let tmp: Vec<String> = std::fs::read_dir("/tmp")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let cwd = std::env::current_dir().unwrap_or_default();
    let v = serde_json::json!({
        "readable_decoys": readable,
        "cwd": cwd,
        "cwd_writable": writable(&cwd),
        "root_writable": writable(Path::new("/")),
        "shadow_writable": writable(Path::new("/usr/local/bin/claude")),
        "real_writable": writable(Path::new("/usr/libexec/claude-sandbox/claude")),
        "previous_marker": previous_marker,
        "marker_written": marker_written,
        "tmp_entries": tmp,
        "env": env,
        "no_new_privs": status_field("NoNewPrivs"),
        "cap_eff": status_field("CapEff"),
        "sig_blk": status_field("SigBlk"),
        "sig_ign": status_field("SigIgn"),
        "nspid": status_field("NSpid"),
        "pid_ns": std::fs::read_link("/proc/self/ns/pid").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default(),
        "uid": nix::unistd::getuid().as_raw(),
    });
    println!("{v}");
}

extern "C" fn on_signal(sig: i32) {
    let msg: &[u8] = match sig {
        nix::libc::SIGWINCH => b"GOT SIGWINCH\n",
        nix::libc::SIGTERM => b"GOT SIGTERM\n",
        nix::libc::SIGINT => b"GOT SIGINT\n",
        _ => b"GOT OTHER\n",
    };
    unsafe { nix::libc::write(1, msg.as_ptr().cast(), msg.len()) };
    if sig == nix::libc::SIGTERM {
        unsafe { nix::libc::_exit(143) };
    }
}

/// errno of a raw syscall's result (0: it succeeded).
fn errno(r: nix::libc::c_long) -> i32 {
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

/// `socket(family, ty, 0)` made raw, the socket closed again: its result.
fn socket_closed(family: i32, ty: i32) -> nix::libc::c_long {
    use nix::libc::{self, c_long};
    let r = unsafe {
        libc::syscall(
            libc::SYS_socket,
            family as c_long,
            ty as c_long,
            0 as c_long,
        )
    };
    if r >= 0 {
        unsafe { libc::close(r as i32) };
    }
    r
}

/// A raw `clone` that must not create a process; if it ever does, the child
/// leaves at once and the parent reaps it.
fn clone_flags(flags: nix::libc::c_long) -> nix::libc::c_long {
    use nix::libc::{self, c_long};
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            0 as c_long,
            0 as c_long,
            0 as c_long,
            0 as c_long,
        )
    };
    if r == 0 {
        unsafe { libc::_exit(0) }
    }
    if r > 0 {
        unsafe { libc::waitpid(r as i32, std::ptr::null_mut(), 0) };
    }
    r
}

/// Raw syscalls: those the seccomp filter refuses (decision 0007), each with
/// arguments the kernel itself rejects (EFAULT, EINVAL, EBADF…) or that do
/// nothing, so the call is harmless without the filter too; and everyday ones
/// that must reach the kernel. Prints one JSON object: name -> errno.
fn syscalls() {
    use nix::libc::{self, c_long, syscall};
    const NULL: c_long = 0;
    const BAD_PTR: c_long = 1;
    let ns: [(&str, c_long); 7] = [
        ("newns", libc::CLONE_NEWNS as c_long),
        ("newcgroup", libc::CLONE_NEWCGROUP as c_long),
        ("newuts", libc::CLONE_NEWUTS as c_long),
        ("newipc", libc::CLONE_NEWIPC as c_long),
        ("newuser", libc::CLONE_NEWUSER as c_long),
        ("newpid", libc::CLONE_NEWPID as c_long),
        ("newnet", libc::CLONE_NEWNET as c_long),
    ];
    let mut refused: BTreeMap<String, i32> = BTreeMap::new();
    let mut put = |name: &str, r: c_long| {
        refused.insert(name.to_string(), errno(r));
    };
    unsafe {
        for (n, f) in ns {
            // Bit 0 is no unshare flag: EINVAL.
            put(&format!("unshare-{n}"), syscall(libc::SYS_unshare, f | 1));
            // CLONE_SIGHAND without CLONE_VM: EINVAL before any process exists.
            put(
                &format!("clone-{n}"),
                clone_flags(f | libc::CLONE_SIGHAND as c_long),
            );
        }
        put(
            "unshare-newtime",
            syscall(libc::SYS_unshare, 0x80 as c_long | 1),
        );
        put("setns", syscall(libc::SYS_setns, -1 as c_long, NULL));
        put("clone3", syscall(libc::SYS_clone3, NULL, NULL));
        put("bpf", syscall(libc::SYS_bpf, NULL, NULL, 8 as c_long));
        put(
            "perf_event_open",
            syscall(
                libc::SYS_perf_event_open,
                NULL,
                NULL,
                -1 as c_long,
                -1 as c_long,
                -1 as c_long,
            ),
        );
        put("userfaultfd", syscall(libc::SYS_userfaultfd, 3 as c_long));
        put(
            "io_uring_setup",
            syscall(libc::SYS_io_uring_setup, NULL, NULL),
        );
        put(
            "io_uring_enter",
            syscall(
                libc::SYS_io_uring_enter,
                -1 as c_long,
                NULL,
                NULL,
                NULL,
                NULL,
                NULL,
            ),
        );
        put(
            "io_uring_register",
            syscall(libc::SYS_io_uring_register, -1 as c_long, NULL, NULL, NULL),
        );
        put(
            "mount",
            syscall(libc::SYS_mount, NULL, NULL, NULL, NULL, NULL),
        );
        put("umount2", syscall(libc::SYS_umount2, NULL, NULL));
        put("pivot_root", syscall(libc::SYS_pivot_root, NULL, NULL));
        put(
            "open_tree",
            syscall(libc::SYS_open_tree, -1 as c_long, NULL, NULL),
        );
        put(
            "move_mount",
            syscall(
                libc::SYS_move_mount,
                -1 as c_long,
                NULL,
                -1 as c_long,
                NULL,
                NULL,
            ),
        );
        put("fsopen", syscall(libc::SYS_fsopen, NULL, NULL));
        put(
            "fsconfig",
            syscall(libc::SYS_fsconfig, -1 as c_long, NULL, NULL, NULL, NULL),
        );
        put(
            "fsmount",
            syscall(libc::SYS_fsmount, -1 as c_long, NULL, NULL),
        );
        put(
            "fspick",
            syscall(libc::SYS_fspick, -1 as c_long, NULL, NULL),
        );
        put(
            "mount_setattr",
            syscall(
                libc::SYS_mount_setattr,
                -1 as c_long,
                NULL,
                NULL,
                NULL,
                NULL,
            ),
        );
        put(
            "open_tree_attr",
            syscall(467, -1 as c_long, NULL, NULL, NULL, NULL),
        );
        // An invalid flag: EINVAL before anything is loaded or unloaded.
        put(
            "kexec_load",
            syscall(libc::SYS_kexec_load, NULL, NULL, NULL, 0x8000 as c_long),
        );
        put(
            "kexec_file_load",
            syscall(
                libc::SYS_kexec_file_load,
                -1 as c_long,
                -1 as c_long,
                NULL,
                NULL,
                0x4000_0000 as c_long,
            ),
        );
        put(
            "init_module",
            syscall(libc::SYS_init_module, NULL, NULL, NULL),
        );
        put(
            "finit_module",
            syscall(libc::SYS_finit_module, -1 as c_long, NULL, NULL),
        );
        put(
            "delete_module",
            syscall(libc::SYS_delete_module, NULL, NULL),
        );
        // Bad magic: EINVAL.
        put("reboot", syscall(libc::SYS_reboot, NULL, NULL, NULL, NULL));
        put("swapon", syscall(libc::SYS_swapon, NULL, -1 as c_long));
        put("swapoff", syscall(libc::SYS_swapoff, BAD_PTR));
        put("acct", syscall(libc::SYS_acct, BAD_PTR));
        put(
            "settimeofday",
            syscall(libc::SYS_settimeofday, BAD_PTR, NULL),
        );
        put(
            "clock_settime",
            syscall(libc::SYS_clock_settime, NULL, BAD_PTR),
        );
        put(
            "syslog",
            syscall(libc::SYS_syslog, 9999 as c_long, NULL, NULL),
        );
        // The one call with an effect when allowed: it hangs up the controlling
        // terminal. So the tests' control run outside is unprivileged.
        put("vhangup", syscall(libc::SYS_vhangup));
        put(
            "lookup_dcookie",
            syscall(libc::SYS_lookup_dcookie, NULL, NULL, NULL),
        );
        put(
            "quotactl",
            syscall(libc::SYS_quotactl, -1 as c_long, NULL, NULL, NULL),
        );
        put(
            "quotactl_fd",
            syscall(libc::SYS_quotactl_fd, -1 as c_long, NULL, NULL, NULL),
        );
        put(
            "nfsservctl",
            syscall(libc::SYS_nfsservctl, NULL, NULL, NULL),
        );
        put(
            "open_by_handle_at",
            syscall(libc::SYS_open_by_handle_at, -1 as c_long, NULL, NULL),
        );
        #[cfg(target_arch = "x86_64")]
        {
            put("iopl", syscall(libc::SYS_iopl, 99 as c_long));
            put("ioperm", syscall(libc::SYS_ioperm, NULL, NULL, NULL));
            put("uselib", syscall(libc::SYS_uselib, BAD_PTR));
            put("ustat", syscall(libc::SYS_ustat, NULL, NULL));
            put("sysfs", syscall(libc::SYS_sysfs, 99 as c_long, NULL, NULL));
            put("_sysctl", syscall(libc::SYS__sysctl, NULL));
            put("create_module", syscall(174, NULL, NULL));
            put("get_kernel_syms", syscall(177, NULL));
            put("query_module", syscall(178, NULL, NULL, NULL, NULL, NULL));
        }
        put(
            "add_key",
            syscall(libc::SYS_add_key, NULL, NULL, NULL, NULL, NULL),
        );
        put(
            "request_key",
            syscall(libc::SYS_request_key, NULL, NULL, NULL, NULL),
        );
        put(
            "keyctl",
            syscall(libc::SYS_keyctl, -1 as c_long, NULL, NULL, NULL, NULL),
        );
        put(
            "kcmp",
            syscall(
                libc::SYS_kcmp,
                -1 as c_long,
                -1 as c_long,
                99 as c_long,
                NULL,
                NULL,
            ),
        );
        put(
            "pidfd_getfd",
            syscall(libc::SYS_pidfd_getfd, -1 as c_long, NULL, NULL),
        );
        put(
            "process_madvise",
            syscall(
                libc::SYS_process_madvise,
                -1 as c_long,
                NULL,
                NULL,
                NULL,
                NULL,
            ),
        );
        put(
            "move_pages",
            syscall(
                libc::SYS_move_pages,
                NULL,
                NULL,
                NULL,
                NULL,
                NULL,
                0xffff as c_long,
            ),
        );
        put(
            "migrate_pages",
            syscall(libc::SYS_migrate_pages, -1 as c_long, NULL, NULL, NULL),
        );
        put(
            "fanotify_init",
            syscall(libc::SYS_fanotify_init, -1 as c_long, NULL),
        );
        put(
            "sethostname",
            syscall(libc::SYS_sethostname, BAD_PTR, 9999 as c_long),
        );
        put(
            "setdomainname",
            syscall(libc::SYS_setdomainname, BAD_PTR, 9999 as c_long),
        );
        put(
            "lsm_get_self_attr",
            syscall(459, NULL, NULL, NULL, 0xffff as c_long),
        );
        put(
            "lsm_set_self_attr",
            syscall(460, NULL, NULL, NULL, 0xffff as c_long),
        );
        put("lsm_list_modules", syscall(461, NULL, NULL, 0xff as c_long));
        // ADDR_NO_RANDOMIZE: allowed by the kernel; put the persona back if it was.
        let r = syscall(libc::SYS_personality, 0x0004_0000 as c_long);
        put("personality-addr-no-randomize", r);
        if r >= 0 {
            syscall(libc::SYS_personality, 0 as c_long);
        }
        for (name, family) in [
            ("socket-alg", libc::AF_ALG),
            ("socket-vsock", libc::AF_VSOCK),
        ] {
            put(name, socket_closed(family, libc::SOCK_SEQPACKET));
        }
        let null = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        let fd = null.as_raw_fd() as c_long;
        let b = b'x';
        put(
            "ioctl-tiocsti",
            syscall(
                libc::SYS_ioctl,
                fd,
                libc::TIOCSTI as c_long,
                &b as *const u8,
            ),
        );
        put(
            "ioctl-tioclinux",
            syscall(
                libc::SYS_ioctl,
                fd,
                libc::TIOCLINUX as c_long,
                &b as *const u8,
            ),
        );
    }
    let mut allowed: BTreeMap<String, i32> = BTreeMap::new();
    let mut ok = |name: &str, r: c_long| {
        allowed.insert(name.to_string(), errno(r));
    };
    unsafe {
        ok("clone-plain", clone_flags(libc::CLONE_SIGHAND as c_long));
        ok(
            "unshare-files-fs",
            syscall(
                libc::SYS_unshare,
                (libc::CLONE_FILES | libc::CLONE_FS) as c_long,
            ),
        );
        ok(
            "personality-query",
            syscall(libc::SYS_personality, 0xffff_ffff as c_long),
        );
        for (name, family) in [
            ("socket-inet", libc::AF_INET),
            ("socket-unix", libc::AF_UNIX),
        ] {
            ok(name, socket_closed(family, libc::SOCK_STREAM));
        }
        let mut ws: libc::winsize = std::mem::zeroed();
        let null = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        ok(
            "ioctl-tiocgwinsz",
            syscall(
                libc::SYS_ioctl,
                null.as_raw_fd() as c_long,
                libc::TIOCGWINSZ as c_long,
                &mut ws as *mut _,
            ),
        );
        ok(
            "ptrace-peek",
            syscall(
                libc::SYS_ptrace,
                libc::PTRACE_PEEKDATA as c_long,
                999_999 as c_long,
                NULL,
                NULL,
            ),
        );
        ok(
            "process_vm_readv",
            syscall(
                libc::SYS_process_vm_readv,
                libc::getpid() as c_long,
                NULL,
                NULL,
                NULL,
                NULL,
                NULL,
            ),
        );
        let mut tx: libc::timex = std::mem::zeroed();
        ok(
            "adjtimex-read",
            syscall(libc::SYS_adjtimex, &mut tx as *mut _),
        );
        ok(
            "get_mempolicy",
            syscall(libc::SYS_get_mempolicy, NULL, NULL, NULL, NULL, NULL),
        );
        ok(
            "name_to_handle_at",
            syscall(
                libc::SYS_name_to_handle_at,
                libc::AT_FDCWD as c_long,
                c"/".as_ptr(),
                NULL,
                NULL,
                NULL,
            ),
        );
        ok(
            "getrandom",
            syscall(
                libc::SYS_getrandom,
                &mut [0u8; 8] as *mut _,
                8 as c_long,
                NULL,
            ),
        );
    }
    // glibc creates threads and spawns with clone3 first, then clone on ENOSYS.
    let thread = std::thread::spawn(|| 7).join().ok() == Some(7);
    let spawn = std::process::Command::new("/bin/true")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let fork = match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => unsafe { nix::libc::_exit(7) },
        Ok(nix::unistd::ForkResult::Parent { child }) => matches!(
            nix::sys::wait::waitpid(child, None),
            Ok(nix::sys::wait::WaitStatus::Exited(_, 7))
        ),
        Err(_) => false,
    };
    println!(
        "{}",
        serde_json::json!({
            "refused": refused,
            "allowed": allowed,
            "thread": thread,
            "spawn": spawn,
            "fork": fork,
        })
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<String> = match args.first().map(String::as_str) {
        Some("--no-chrome") => args[1..].to_vec(),
        _ => {
            eprintln!("probe: first argument was not --no-chrome: {args:?}");
            std::process::exit(90);
        }
    };
    let mode = args.first().map(String::as_str).unwrap_or("report");
    match mode {
        "report" => report(&args[1..]),
        "argv" => println!("{}", serde_json::json!(args)),
        "exit" => std::process::exit(args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0)),
        "cat" => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).unwrap();
            print!("stdin:{s}");
        }
        "signals" => {
            for sig in [nix::libc::SIGWINCH, nix::libc::SIGTERM, nix::libc::SIGINT] {
                unsafe { nix::libc::signal(sig, on_signal as extern "C" fn(i32) as usize) };
            }
            let mut ws: nix::libc::winsize = unsafe { std::mem::zeroed() };
            unsafe { nix::libc::ioctl(0, nix::libc::TIOCGWINSZ, &mut ws) };
            println!("READY {}x{}", ws.ws_row, ws.ws_col);
            std::io::stdout().flush().unwrap();
            for _ in 0..300 {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            println!("TIMEOUT");
        }
        "wait" => {
            // Default dispositions: a signal ends it as it would end a program.
            println!("READY");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(std::time::Duration::from_secs(30));
            println!("TIMEOUT");
        }
        "tiocsti" => {
            let mut failed = 0;
            let mut errno = String::new();
            for b in b"echo INJECTED\n" {
                let r = unsafe { nix::libc::ioctl(0, nix::libc::TIOCSTI, b as *const u8) };
                if r != 0 {
                    failed += 1;
                    errno = std::io::Error::last_os_error().to_string();
                }
            }
            println!("TIOCSTI failed={failed} errno={errno}");
        }
        "keyctl" => {
            // KEYCTL_GET_KEYRING_ID of the session keyring: the caller's keys are reachable if this works.
            let r = unsafe { nix::libc::syscall(nix::libc::SYS_keyctl, 0, -3i64, 0) };
            if r < 0 {
                println!("KEYCTL errno={}", std::io::Error::last_os_error());
            } else {
                println!("KEYCTL ok id={r}");
            }
        }
        "unix" => {
            // Connect to each unix socket path and print what it says.
            for path in &args[1..] {
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(mut s) => {
                        let mut got = String::new();
                        let _ = s.read_to_string(&mut got);
                        println!("{path} REACHED {got}");
                    }
                    Err(e) => println!("{path} BLOCKED {e}"),
                }
            }
        }
        "syscalls" => syscalls(),
        "shell" => {
            let st = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(&args[1])
                .status()
                .unwrap();
            std::process::exit(st.code().unwrap_or(1));
        }
        other => {
            eprintln!("probe: unknown mode {other}");
            std::process::exit(91);
        }
    }
}
