//! `claude-sandbox doctor`: what is and is not in place, one line per fact;
//! exit 0 only when all is.

use std::path::Path;
use std::process::Command;

use crate::{config, hooks, integrity, jail, launch, paths};

/// Command-line arguments of `claude-sandbox doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {}

struct Report {
    failed: usize,
}

impl Report {
    fn line(&mut self, ok: bool, what: &str, detail: impl std::fmt::Display) {
        if !ok {
            self.failed += 1;
        }
        println!("{} {what}: {detail}", if ok { "ok  " } else { "FAIL" });
    }
}

/// A minimal sandbox with the namespaces every launch uses (no `/proc`: a
/// launch falls back to the host's when a fresh one is refused).
fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
    let out = Command::new(bwrap)
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--",
            "/bin/true",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let msg = String::from_utf8_lossy(&out.stderr)
        .trim()
        .replace('\n', " ");
    Err(if msg.is_empty() {
        format!("{} exited with {}", bwrap.display(), out.status)
    } else {
        msg
    })
}

/// Run `claude-sandbox doctor`; returns the number of failed facts (capped at 1 for the exit status).
pub fn main(_args: &Args) -> anyhow::Result<i32> {
    let mut r = Report { failed: 0 };
    // The shadow.
    let shadow_ok = std::fs::canonicalize(paths::SHADOW).ok()
        == std::fs::canonicalize(paths::SELF_BIN).ok()
        && Path::new(paths::SELF_BIN).exists();
    r.line(
        shadow_ok,
        "shadow",
        if shadow_ok {
            format!("{} -> {}", paths::SHADOW, paths::SELF_BIN)
        } else {
            format!(
                "{} is not the claude-sandbox binary; run: sudo claude-sandbox install",
                paths::SHADOW
            )
        },
    );
    // What a login shell of this user resolves `claude` to, and anything before it.
    let out = Command::new("/bin/bash")
        .args(["-lc", "type -ap claude"])
        .output();
    let found: Vec<String> = out
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let first_ok = found.first().map(String::as_str) == Some(paths::SHADOW);
    r.line(
        first_ok,
        "PATH",
        if first_ok { format!("a login shell runs {} for `claude`", paths::SHADOW) } else { format!("a login shell resolves `claude` to {:?}, not {}; fix PATH or remove the stray binary", found.first(), paths::SHADOW) },
    );
    let strays: Vec<&String> = found
        .iter()
        .filter(|p| p.as_str() != paths::SHADOW)
        .collect();
    r.line(
        strays.is_empty(),
        "stray claude on PATH",
        if strays.is_empty() {
            "none".to_string()
        } else {
            format!(
                "{strays:?}: remove them (claude-sandbox install relocates ~/.local/bin/claude)"
            )
        },
    );
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let stray_local = home
        .as_ref()
        .map(|h| h.join(".local/bin/claude"))
        .filter(|p| p.exists());
    r.line(stray_local.is_none(), "~/.local/bin/claude", match &stray_local { None => "absent".to_string(), Some(p) => format!("{} exists and would bypass the sandbox if PATH led there; remove it or re-run install", p.display()) });
    // Pin.
    match integrity::check(Path::new(paths::REAL_CLAUDE), Path::new(paths::PIN_FILE)) {
        Ok(()) => r.line(
            true,
            "pin",
            format!("{} matches {}", paths::REAL_CLAUDE, paths::PIN_FILE),
        ),
        Err(e) => r.line(false, "pin", e),
    }
    // Config.
    let cfg = config::load(Path::new(paths::CONFIG_FILE), &config::process_env);
    match &cfg {
        Ok(c) => r.line(
            true,
            "config",
            format!(
                "{} valid (egress jail {})",
                paths::CONFIG_FILE,
                if c.egress_jail { "on" } else { "off" }
            ),
        ),
        Err(e) => r.line(false, "config", e),
    }
    // Read-write paths named in the config must exist, or every launch refuses.
    if let Ok(c) = &cfg {
        let named = c
            .workspace_root
            .iter()
            .map(|p| ("workspace-root", p))
            .chain(c.allow_write.iter().map(|p| ("allow-write", p)));
        for (key, p) in named {
            let ok = p.exists();
            r.line(
                ok,
                key,
                if ok {
                    format!("{} exists", p.display())
                } else {
                    format!(
                        "{} does not exist, and every launch refuses until it does; create it or fix {}",
                        p.display(),
                        paths::CONFIG_FILE
                    )
                },
            );
        }
    }
    // Prerequisites.
    match launch::preflight() {
        Ok(b) => {
            r.line(
                true,
                "sandbox prerequisites",
                format!("bubblewrap at {}, user namespaces enabled", b.display()),
            );
            // The sysctls can say yes while a container's seccomp profile says
            // no: build a throw-away sandbox to know.
            match probe_bwrap(&b) {
                Ok(()) => r.line(true, "bubblewrap", "builds a sandbox here (user, PID and mount namespaces)"),
                Err(why) => r.line(false, "bubblewrap", format!("cannot build a sandbox here: {why}; inside a Docker container the usual cause is its default seccomp profile, which refuses new namespaces: add \"--security-opt\", \"seccomp=unconfined\" to runArgs in devcontainer.json (or use Podman) and rebuild")),
            }
        }
        Err(e) => r.line(false, "sandbox prerequisites", e),
    }
    if let Ok(c) = &cfg {
        if c.egress_jail {
            match jail::Jail::prepare(c) {
                Ok(_) => r.line(
                    true,
                    "egress jail prerequisites",
                    "pasta, ip and /dev/net/tun usable",
                ),
                Err(e) => r.line(false, "egress jail prerequisites", e),
            }
        } else {
            r.line(true, "egress jail", "deliberately off in the configuration");
        }
    }
    // Guard.
    let settings = std::fs::read_to_string(paths::MANAGED_SETTINGS).unwrap_or_default();
    let guard = settings.contains(hooks::SESSION_START_CMD)
        && settings.contains(hooks::PROMPT_GATE_CMD)
        && serde_json::from_str::<serde_json::Value>(&settings).is_ok();
    r.line(
        guard,
        "guard hooks",
        if guard {
            format!(
                "{} has the session-start and prompt-gate hooks",
                paths::MANAGED_SETTINGS
            )
        } else {
            format!(
                "{} lacks the guard hooks; run: sudo claude-sandbox install",
                paths::MANAGED_SETTINGS
            )
        },
    );
    if r.failed > 0 {
        println!("{} problem(s) found", r.failed);
        Ok(1)
    } else {
        println!("all in place: `claude` runs sandboxed");
        Ok(0)
    }
}
