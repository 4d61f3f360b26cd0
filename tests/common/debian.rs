//! The cached minimal Debian root that tests/feature.rs and tests/docker.rs
//! start from.

use super::{shell_quote, stderr, stdout};
use std::path::PathBuf;
use std::process::Command;

/// Cached debootstrapped roots: one per suite, never keyed by date. Remove
/// the directory to force a fresh debootstrap.
pub(crate) const ROOT_CACHE: &str = "/var/cache/claude-sandbox-tests";
pub(crate) const SUITE: &str = "bookworm";

/// The Debian mirror this machine's apt uses (`CSB_DEBIAN_MIRROR` overrides;
/// deb.debian.org when the sources name none, e.g. on Ubuntu).
pub(crate) fn debian_mirror() -> String {
    if let Ok(m) = std::env::var("CSB_DEBIAN_MIRROR") {
        return m;
    }
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        more.sort();
        files.extend(more);
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
            // One-line format (`deb [opts] URI suite…`) or deb822 (`URIs: URI…`).
            let uris: Vec<&str> = if let Some(rest) = line.strip_prefix("URIs:") {
                rest.split_whitespace().collect()
            } else if let Some(rest) = line.strip_prefix("deb ") {
                let rest = match rest.trim_start().strip_prefix('[') {
                    Some(r) => r.split_once(']').map_or("", |(_, after)| after),
                    None => rest,
                };
                rest.split_whitespace().take(1).collect()
            } else {
                Vec::new()
            };
            if let Some(u) = uris
                .into_iter()
                .map(|u| u.trim_end_matches('/'))
                .find(|u| u.starts_with("http") && u.ends_with("/debian"))
            {
                return u.to_string();
            }
        }
    }
    "http://deb.debian.org/debian".to_string()
}

/// The cached minimal root, made once (under a lock) when missing.
pub(crate) fn base_root() -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "amd64"
    };
    let base = PathBuf::from(format!("{ROOT_CACHE}/debootstrap-{SUITE}-minbase-{arch}"));
    let script = format!(
        r#"set -euo pipefail
mkdir -p {cache}
exec 9>{cache}/.lock
flock 9
base={base}
if [ -f "$base.complete" ] && [ -d "$base" ]; then exit 0; fi
rm -rf "$base" "$base.tmp" "$base.complete"
start=$(date +%s)
debootstrap --variant=minbase --arch={arch} {suite} "$base.tmp" {mirror} > "$base.log" 2>&1 \
    || {{ tail -20 "$base.log"; exit 1; }}
# As the official Debian image has it: no package files left behind, and
# dpkg without fsync (the image build's apt-get is then as fast as in Docker).
rm -f "$base.tmp"/var/cache/apt/archives/*.deb
echo force-unsafe-io > "$base.tmp/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
mv "$base.tmp" "$base"
touch "$base.complete"
echo "debootstrap of {suite} took $(( $(date +%s) - start )) s" >&2
"#,
        cache = ROOT_CACHE,
        base = base.display(),
        suite = SUITE,
        mirror = shell_quote(&debian_mirror()),
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    eprint!("{}", stderr(&o));
    assert!(
        o.status.success(),
        "debootstrap failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    base
}
