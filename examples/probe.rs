//! A stand-in for the real Claude Code in end-to-end tests: placed at
//! /usr/libexec/claude-sandbox/claude, it reports what it can see and do from
//! inside the sandbox. First argument is always the injected `--no-chrome`.
//!
//! Modes: `report [DECOY…]`, `exit N`, `cat`, `signals`, `wait`, `tiocsti`, `keyctl`, `unix PATH…`,
//! `shell CMD` (run CMD with /bin/sh -c), `argv`.

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
