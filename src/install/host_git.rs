//! Host git hardening (issue #22, item 5): `safe.bareRepository = explicit`
//! in the system git config of every git on the machine, so a bare-style
//! directory a session planted in the workspace (`HEAD`, `objects/`,
//! `refs/`, a `config` with `core.fsmonitor`…) is never used by host git
//! through discovery: `git status` there fails instead of running it.
//!
//! Install appends one marked block to each system config that does not set
//! the key, never editing other lines; the manifest records the exact text,
//! and uninstall takes out that text only (an admin's own lines stay). A
//! system config that already sets another value is the admin's choice: it
//! is left as it is, with a one-line warning, and `doctor` fails on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::manifest::{rebase, Appended, Ctx};

/// The key and the only value that hardens (git compares it case-sensitively:
/// any other spelling is a fatal error for every git command).
pub(super) const KEY: &str = "safe.bareRepository";
pub(super) const VALUE: &str = "explicit";

/// Where a git may live; each one's own system config is hardened.
const HOST_GITS: [&str; 3] = ["/usr/local/bin/git", "/usr/bin/git", "/bin/git"];
/// Debian's git (and any git built with prefix /usr) reads this one; it is
/// hardened even before a git is installed.
const DEBIAN_SYSTEM_CONFIG: &str = "/etc/gitconfig";

/// The block install appends (uninstall removes exactly this text).
pub(super) const BLOCK: &str =
    "# Added by claude-sandbox install: host git ignores bare repositories it\n\
# discovers (a bare-style directory planted in a workspace); `claude-sandbox\n\
# uninstall` removes these lines.\n\
[safe]\n\
\tbareRepository = explicit\n";

/// Each distinct git on the machine with its system config (from git itself).
pub(super) fn host_gits() -> Vec<(PathBuf, PathBuf)> {
    let mut out: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut seen = Vec::new();
    for g in HOST_GITS.map(Path::new) {
        let Ok(real) = g.canonicalize() else { continue };
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let config = system_config_of(g).unwrap_or_else(|| DEBIAN_SYSTEM_CONFIG.into());
        out.push((g.to_path_buf(), config));
    }
    out
}

/// `git`'s compiled-in system config: `git var GIT_CONFIG_SYSTEM` (git
/// 2.42+), else the file `git config --system` names, else None. The
/// environment's overrides are removed, so the answer is the file's.
fn system_config_of(git: &Path) -> Option<PathBuf> {
    let run = |args: &[&str]| {
        Command::new(git)
            .args(args)
            .env_remove("GIT_CONFIG_SYSTEM")
            .env_remove("GIT_CONFIG_NOSYSTEM")
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .ok()
    };
    if let Some(o) = run(&["var", "GIT_CONFIG_SYSTEM"]).filter(|o| o.status.success()) {
        let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
        return (!p.is_empty()).then(|| p.into());
    }
    let o = run(&["config", "--system", "--show-origin", "--list"])?;
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    // "file:/etc/gitconfig\tkey=value", or "unable to read config file '/x'".
    let named = out
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("file:"))
        .and_then(|l| l.split('\t').next())
        .or_else(|| err.split('\'').nth(1));
    named.filter(|p| p.starts_with('/')).map(PathBuf::from)
}

/// The value(s) of [`KEY`] that `file` sets, as git reads it (includes
/// followed); an empty list when it sets none. Without any git, only this
/// block counts.
fn values_in(file: &Path, git: Option<&Path>) -> Vec<String> {
    let Some(git) = git else {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        return if text.contains(BLOCK) {
            vec![VALUE.into()]
        } else {
            Vec::new()
        };
    };
    Command::new(git)
        .args(["config", "--includes", "--file"])
        .arg(file)
        .args(["--get-all", KEY])
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Install's step: harden every git's system config (under the install
/// root), recording what was appended.
pub(super) fn harden(ctx: &mut Ctx) -> anyhow::Result<()> {
    let gits = host_gits();
    let mut configs: Vec<(PathBuf, Option<PathBuf>)> = vec![(DEBIAN_SYSTEM_CONFIG.into(), None)];
    for (git, config) in &gits {
        match configs.iter_mut().find(|(c, _)| c == config) {
            Some(entry) => entry.1 = entry.1.take().or(Some(git.clone())),
            None => configs.push((config.clone(), Some(git.clone()))),
        }
    }
    let any_git = gits.first().map(|(g, _)| g.clone());
    for (config, git) in configs {
        let file = rebase(&ctx.root, &config);
        harden_one(ctx, &file, git.as_ref().or(any_git.as_ref()))?;
    }
    Ok(())
}

/// Append [`BLOCK`] to `file` unless it already sets [`KEY`]; another value
/// is left alone with a warning (the admin's choice; `doctor` fails on it).
fn harden_one(ctx: &mut Ctx, file: &Path, git: Option<&PathBuf>) -> anyhow::Result<()> {
    let values = values_in(file, git.map(PathBuf::as_path));
    match values.last().map(String::as_str) {
        Some(VALUE) => return Ok(()),
        Some(other) => {
            eprintln!(
                "claude-sandbox: warning: {} sets {KEY} = {other}, left as it is: host git will use a bare-style directory planted in a workspace; to harden it run: sudo git config --file {} {KEY} {VALUE}",
                file.display(),
                file.display()
            );
            return Ok(());
        }
        None => {}
    }
    let existing = match std::fs::read(file) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(super::manifest::fail(format!(
                "cannot read {}: {e}; fix it and re-run install",
                file.display()
            )))
        }
    };
    let mut text = String::new();
    if existing
        .as_ref()
        .is_some_and(|b| !b.is_empty() && !b.ends_with(b"\n"))
    {
        text.push('\n');
    }
    text.push_str(BLOCK);
    let mut content = existing.clone().unwrap_or_default();
    content.extend_from_slice(text.as_bytes());
    if let Some(parent) = file.parent() {
        ctx.dir(parent, 0o755)?;
    }
    // An admin's file keeps its mode.
    let mode = file.metadata().map_or(0o644, |m| {
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
    });
    ctx.file(file, &content, mode)?;
    // The file is not ours as a whole: uninstall takes out the text only.
    ctx.manifest.created.retain(|c| c != file);
    ctx.manifest.git_hardened.push(Appended {
        path: file.to_path_buf(),
        text,
        created: existing.is_none(),
    });
    Ok(())
}

/// Uninstall's step: take out of each file exactly the text install
/// appended (its last occurrence), removing a file install created once
/// nothing else is left in it. An edited block is named and left.
pub(super) fn unharden(appended: &[Appended]) -> anyhow::Result<()> {
    for a in appended.iter().rev() {
        let Ok(text) = std::fs::read_to_string(&a.path) else {
            continue;
        };
        let Some(at) = text.rfind(&a.text) else {
            println!(
                "claude-sandbox: left {} as it is: the lines install added there were changed; remove {KEY} yourself if you want it gone",
                a.path.display()
            );
            continue;
        };
        let rest = format!("{}{}", &text[..at], &text[at + a.text.len()..]);
        if rest.is_empty() && a.created {
            fs_err::remove_file(&a.path)?;
        } else {
            fs_err::write(&a.path, rest)?;
        }
    }
    Ok(())
}

/// What `doctor` says: for each git, its effective value as the user running
/// doctor gets it (system, global and environment, exactly as git reads
/// them). `Err` names the git, where the value came from, and the fix.
pub(super) fn check() -> Result<String, String> {
    let gits = host_gits();
    if gits.is_empty() {
        return Ok(format!("no git at {}", HOST_GITS.join(", ")));
    }
    let mut ok = Vec::new();
    for (git, config) in &gits {
        let o = Command::new(git)
            .args(["config", "--show-origin", "--get", KEY])
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", git.display()))?;
        if !o.status.success() && o.status.code() != Some(1) {
            let err = String::from_utf8_lossy(&o.stderr);
            return Err(format!(
                "{} cannot read its config: {}; fix that file (a wrong spelling of {VALUE} stops every git command)",
                git.display(),
                err.lines().next().unwrap_or("").trim()
            ));
        }
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let (origin, value) = line.split_once('\t').unwrap_or(("", ""));
        if value == VALUE {
            ok.push(format!(
                "{} ({})",
                git.display(),
                origin.trim_start_matches("file:")
            ));
            continue;
        }
        // The file this git reads as its system config here (the environment may move it).
        let config = std::env::var_os("GIT_CONFIG_SYSTEM").map_or(config.clone(), PathBuf::from);
        let fix = format!(
            "sudo {} config --system {KEY} {VALUE} (or: sudo claude-sandbox install)",
            git.display()
        );
        return Err(if value.is_empty() {
            format!(
                "{} does not set {KEY} = {VALUE} ({} lacks it): host git would run the config of a bare-style directory planted in a workspace; run: {fix}",
                git.display(),
                config.display()
            )
        } else {
            format!(
                "{} gets {KEY} = {value} from {origin}: host git would run the config of a bare-style directory planted in a workspace; set it to {VALUE} there (for the system config: {fix})",
                git.display(),
            )
        });
    }
    Ok(format!(
        "ignores bare repositories it discovers: {KEY} = {VALUE} for {}",
        ok.join(", ")
    ))
}
