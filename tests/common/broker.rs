//! The credential broker's test world (issue #25; tests/broker.rs and
//! tests/broker_accept.rs): the private site network of [`super::lan`]
//! with [`super::site`]'s test CA as the "public" one, real tokens made
//! per test (never in the repository), the caller's `gh` configuration
//! holding the real GitHub token, sessions run from the LAN host, and the
//! searches for real values inside.

use super::lan::*;
use super::site::Site;
use super::*;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

pub(crate) const CONF: &str = "egress = allowlist\nallow-domain = allowed.test\nallow-domains = github\npass-env = ANTHROPIC_API_KEY\n";

/// The test CA is "public": added to `w`'s system bundle, which the
/// broker verifies upstreams against.
pub(crate) fn trust_site(w: &World, site: &Site) {
    let o = w.run_root_raw(&format!(
        "cat {} >> /etc/ssl/certs/ca-certificates.crt",
        site.ca().display()
    ));
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A world named `name` with the real Claude Code (`real_bin`) under
/// `conf`, resolving through the site's resolver and trusting its CA.
pub(crate) fn real_claude_world(
    name: &str,
    real_bin: &std::path::Path,
    conf: &str,
    site: &Site,
) -> World {
    let w = World::new(name);
    w.install_by_hand(real_bin, conf);
    let o = w.run_root_raw(&format!(
        "rm -f /etc/resolv.conf && echo 'nameserver {}' > /etc/resolv.conf",
        super::site::RESOLVER
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    trust_site(&w, site);
    w
}

/// The fake Messages API (`tests/fixtures/fake_anthropic.py`) as the
/// internet host's 443, where every name resolves, with the site's
/// resolver: it accepts only `key`, and with `refresh` also exchanges that
/// refresh token once at its token endpoint. Its log.
pub(crate) fn fake_api(lan: &mut Lan, site: &Site, key: &str, refresh: Option<&str>) -> PathBuf {
    let l = lan.lan.clone();
    lan.listen(&l, &["dns", super::site::RESOLVER, "240"]);
    let api_log = site.dir.join("api.log");
    std::fs::write(&api_log, "").unwrap();
    let d = site.dir.to_path_buf();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &l, "python3"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/fake_anthropic.py"
        ))
        .args(["443"])
        .arg(&api_log)
        .args(["240", "203.0.113.10", "--tls"])
        .arg(d.join("server.pem"))
        .arg(d.join("server.key"))
        .args(["--require-key", key]);
    if let Some(r) = refresh {
        cmd.args(["--oauth-refresh", r]);
    }
    lan.listeners.push(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    lan.wait_listening(
        &l,
        &["203.0.113.10:443"],
        &[&format!("{}:53", super::site::RESOLVER)],
    );
    api_log
}

/// The real values: each test world gets its own.
pub(crate) struct Reals {
    pub(crate) gh: String,
    pub(crate) api_key: String,
}

/// `PREFIX` and 36 characters of this test's own: never in the repository.
pub(crate) fn real(prefix: &str, salt: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("{salt}-{}", std::process::id()).as_bytes());
    let tail: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{}", &tail[..36])
}

/// A grep pattern for `s` that does not match itself (`gho_[a]bc…`), so a
/// search inside never finds its own command line.
pub(crate) fn pattern(s: &str) -> String {
    format!("{}[{}]{}", &s[..4], &s[4..5], &s[5..])
}

pub(crate) struct Net {
    pub(crate) lan: Lan,
    pub(crate) site: Site,
    pub(crate) w: World,
    pub(crate) reals: Reals,
}

pub(crate) fn net(name: &str) -> Net {
    let mut lan = Lan::up();
    let site = Site::new(name);
    let reals = Reals {
        gh: real("gho_", name),
        api_key: real("sk-ant-api03-", name),
    };
    std::fs::write(
        site.dir.join("auth-token"),
        format!("{}\n{}\n", reals.gh, reals.api_key),
    )
    .unwrap();
    site.start(&mut lan);
    let w = jail_world(name, CONF);
    trust_site(&w, &site);
    for who in BOTH {
        site.ca_into(&w, who);
        w.put(
            who,
            ".config/gh/hosts.yml",
            &format!(
                "github.com:\n    users:\n        octo:\n            oauth_token: {0}\n    git_protocol: https\n    oauth_token: {0}\n    user: octo\n",
                reals.gh
            ),
        );
    }
    Net {
        lan,
        site,
        w,
        reals,
    }
}

/// Run `script` inside (`claude shell`) as `who`, `ANTHROPIC_API_KEY` set
/// to the real key in the launching environment.
pub(crate) fn session(n: &Net, who: Who, script: &str) -> Output {
    let cmd = n.w.command_with_setup(
        who,
        &n.w.workspace(who),
        "",
        &[("ANTHROPIC_API_KEY", &n.reals.api_key)],
        &["claude", "shell", script],
    );
    in_netns(&n.lan.host, &cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub(crate) fn shown(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        stdout(o),
        stderr(o)
    )
}

/// The value after `NAME=` on a line of `out`.
pub(crate) fn value<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in\n{out}"))
}

/// The newest connection log of `who`, as text.
pub(crate) fn newest_log(n: &Net, who: Who) -> String {
    let dir = n.w.home(who).join(".local/state/claude-sandbox/egress");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    logs.sort();
    std::fs::read_to_string(logs.last().expect("a log")).unwrap()
}

/// curl from the host's side (the "devcontainer", outside any sandbox),
/// to `url` at the internet host, with `header`.
pub(crate) fn from_host(n: &Net, host: &str, path: &str, header: &str) -> String {
    let mut c = Command::new("curl");
    c.args(["-sS", "-m", "10", "--cacert"])
        .arg(n.site.ca())
        .args([
            "--resolve",
            &format!("{host}:443:203.0.113.10"),
            "-H",
            header,
        ])
        .arg(format!("https://{host}{path}"));
    let o = in_netns(&n.lan.host, &c).output().unwrap();
    stdout(&o)
}

/// A search for the real values in every readable file that could hold
/// one inside and every process's environment and command line: the files
/// it found, on one line.
pub(crate) fn search(n: &Net) -> String {
    format!(
        "$(grep -rlsaE '{}|{}' ~ /etc /tmp /usr/libexec \"$PWD\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\n' ' ')",
        pattern(&n.reals.gh),
        pattern(&n.reals.api_key)
    )
}
