//! `/etc/claude-sandbox.conf` and its `CLAUDE_SANDBOX_*` overrides (SPEC §3).
//!
//! Parsing is pure: [`parse`] takes the text and a name for error messages,
//! [`apply_env`] takes a lookup function (and one that says whether a path is
//! the current directory). Only [`load`] touches the file system, and only at
//! the compile-time path the caller hands it.
//!
//! The environment may strengthen the sandbox but not weaken it (issue #12):
//! an override that gives the sandbox more than the file does is refused
//! unless the file itself says `allow-env-overrides`; with it, the override
//! is applied and reported ([`Applied::weakened`]) for the launch to print.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::egress::policy::{DomainRule, Egress, Preset};
use crate::error::bad_input;
use crate::sys::paths;

/// The default configuration file, compiled into the binary (the installer writes it).
pub(crate) const DEFAULT_CONFIG: &str = include_str!("../etc/claude-sandbox.conf");

/// The effective configuration of one launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub workspace_root: Option<PathBuf>,
    pub no_forge: bool,
    pub allow_write: Vec<PathBuf>,
    pub pass_env: Vec<String>,
    /// `egress` (or the older `egress-jail`): open jail by default.
    pub egress: Egress,
    pub allow_ip: Vec<Ipv4Addr>,
    /// `allow-domain` rules, in order (allowlist mode).
    pub allow_domain: Vec<DomainRule>,
    /// `allow-domains` presets, in order (allowlist mode).
    pub allow_domains: Vec<&'static Preset>,
    /// `allow-env-overrides`: `CLAUDE_SANDBOX_*` variables may weaken the
    /// sandbox. Only the file can say so; no variable sets it.
    pub allow_env_overrides: bool,
    /// The weakening overrides applied (`NAME=value`), for the launch record.
    pub weakened_by_env: Vec<String>,
    /// `broker` (default on): brokered credentials are stand-ins inside
    /// (issue #25, decision 0015); `broker = off` binds the real ones.
    pub broker: bool,
    /// `broker-host = HOST CREDENTIAL` lines (the file only): rows added
    /// to the broker's table (issue #25), each once, in order.
    pub broker_hosts: Vec<(String, String)>,
    /// `publish-port`: TCP ports a server inside listens on that the host's
    /// loopback reaches (SPEC §4.7), in order, each once.
    pub publish_port: Vec<u16>,
    /// `pids-limit`: the most processes (tasks) a session may have at once;
    /// `None`: `pids-limit = off`.
    pub pids_limit: Option<u32>,
    /// `tmpfs-size`: the size of each tmpfs a session writes to (`/tmp`,
    /// the tmpfs over `$HOME`, …).
    pub tmpfs_size: Amount,
    /// `private-state-max`: the most the private `~/.cache` and
    /// `~/.local/share` keep between sessions; `None`: `off`.
    pub private_state_max: Option<u64>,
    /// `claude-dir-warn`: past this size of `~/.claude` (read-write inside,
    /// kept on the host) `doctor` warns; `None`: `off`.
    pub claude_dir_warn: Option<u64>,
    /// `root-view-max-entries`: how many directory entries a root launch's
    /// walk examines afresh at most outside `/etc` (what the kept view
    /// reuses costs nothing); what it does not reach is masked whole.
    pub root_view_max_entries: usize,
}

/// A size: bytes, or a share of the machine's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Bytes(u64),
    /// Percent of the memory the sandbox can use (1–100).
    PercentOfMemory(u8),
}

impl Amount {
    /// In bytes, against `memory` bytes of memory (a share in whole MiB).
    pub(crate) fn bytes(self, memory: u64) -> u64 {
        match self {
            Amount::Bytes(b) => b,
            Amount::PercentOfMemory(p) => {
                let share = u128::from(memory) * u128::from(p) / 100;
                (share as u64) >> 20 << 20
            }
        }
    }

    /// As written in the file (`512M`, `6%`).
    pub(crate) fn text(self) -> String {
        match self {
            Amount::Bytes(b) => show_bytes(b),
            Amount::PercentOfMemory(p) => format!("{p}%"),
        }
    }
}

/// The default `pids-limit`.
pub(crate) const DEFAULT_PIDS_LIMIT: u32 = 4096;
/// The default `tmpfs-size`: four such mounts and the masks come to about
/// a quarter of the memory.
pub(crate) const DEFAULT_TMPFS_SIZE: Amount = Amount::PercentOfMemory(6);
/// The default `private-state-max`.
pub(crate) const DEFAULT_PRIVATE_STATE_MAX: u64 = 4 << 30;
/// The default `claude-dir-warn`.
pub(crate) const DEFAULT_CLAUDE_DIR_WARN: u64 = 4 << 30;

impl Default for Config {
    fn default() -> Self {
        Config {
            workspace_root: None,
            no_forge: false,
            allow_write: Vec::new(),
            pass_env: Vec::new(),
            egress: Egress::Open,
            allow_ip: Vec::new(),
            allow_domain: Vec::new(),
            allow_domains: Vec::new(),
            allow_env_overrides: false,
            weakened_by_env: Vec::new(),
            broker: true,
            broker_hosts: Vec::new(),
            publish_port: Vec::new(),
            pids_limit: Some(DEFAULT_PIDS_LIMIT),
            tmpfs_size: DEFAULT_TMPFS_SIZE,
            private_state_max: Some(DEFAULT_PRIVATE_STATE_MAX),
            claude_dir_warn: Some(DEFAULT_CLAUDE_DIR_WARN),
            root_view_max_entries: ROOT_VIEW_MAX_ENTRIES,
        }
    }
}

/// `root-view-max-entries` by default, and its range.
pub(crate) const ROOT_VIEW_MAX_ENTRIES: usize = 1_000_000;
const ROOT_VIEW_MAX_ENTRIES_RANGE: std::ops::RangeInclusive<usize> = 0..=10_000_000;

/// Environment variables that override the file.
pub const ENV_WORKSPACE_ROOT: &str = "CLAUDE_SANDBOX_WORKSPACE_ROOT";
pub const ENV_NO_FORGE: &str = "CLAUDE_SANDBOX_NO_FORGE";
pub const ENV_ALLOW_WRITE: &str = "CLAUDE_SANDBOX_ALLOW_WRITE";
pub const ENV_PASS_ENV: &str = "CLAUDE_SANDBOX_PASS_ENV";
pub const ENV_EGRESS_JAIL: &str = "CLAUDE_SANDBOX_EGRESS_JAIL";
pub const ENV_ALLOW_IP: &str = "CLAUDE_SANDBOX_ALLOW_IP";
pub const ENV_EGRESS: &str = "CLAUDE_SANDBOX_EGRESS";
pub const ENV_ALLOW_DOMAIN: &str = "CLAUDE_SANDBOX_ALLOW_DOMAIN";

/// Names `pass-env` may never forward: the sandbox sets them itself, or they
/// would let the launching environment undo a defence.
const NEVER_PASS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "IS_SANDBOX",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
];
/// Prefixes `pass-env` may never forward (`GIT_CONFIG*` would undo the curated
/// git config of §4.6 just as `GIT_CONFIG_GLOBAL` would).
const NEVER_PASS_PREFIX: &[&str] = &["LD_", "GIT_CONFIG"];

/// Why `name` may not be forwarded, if it may not.
pub(crate) fn pass_env_refusal(name: &str) -> Option<&'static str> {
    if !is_identifier(name) {
        return Some("is not a variable name (letters, digits and `_`, not starting with a digit)");
    }
    if NEVER_PASS.contains(&name) || NEVER_PASS_PREFIX.iter().any(|p| name.starts_with(p)) {
        return Some("is never forwarded: the sandbox sets it or it would undo a defence");
    }
    None
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Parse the text of a configuration file. `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> anyhow::Result<Config> {
    let mut cfg = Config::default();
    // The line that set the egress mode, for a contradiction's message.
    let mut egress_line: Option<(usize, String)> = None;
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line, None),
        };
        let l = Line {
            origin,
            lineno: idx + 1,
            text: line,
            key,
            value,
        };
        set(&mut cfg, &mut egress_line, &l)?;
    }
    Ok(cfg)
}

/// One line of a configuration file that says something (comment cut off).
struct Line<'a> {
    origin: &'a str,
    lineno: usize,
    text: &'a str,
    key: &'a str,
    value: Option<&'a str>,
}

impl Line<'_> {
    /// An error at this line.
    fn at(&self, what: String) -> anyhow::Error {
        bad_input(format!("{}:{}: {what}", self.origin, self.lineno))
    }

    /// The value, which this key cannot do without.
    fn need(&self) -> anyhow::Result<String> {
        match self.value {
            Some(v) if !v.is_empty() => Ok(v.to_string()),
            _ => Err(self.at(format!("`{0}` needs a value (`{0} = ...`)", self.key))),
        }
    }

    /// The value as an absolute path.
    fn path(&self) -> anyhow::Result<PathBuf> {
        let v = self.need()?;
        absolute_path(&v).map_err(|e| self.at(format!("{}: {e}", self.key)))
    }

    /// The value as a yes/no flag (no value: yes).
    fn flag(&self) -> anyhow::Result<bool> {
        flag(self.value).map_err(|e| self.at(format!("{}: {e}", self.key)))
    }
}

/// Apply one line to the configuration.
fn set(
    cfg: &mut Config,
    egress_line: &mut Option<(usize, String)>,
    l: &Line<'_>,
) -> anyhow::Result<()> {
    match l.key {
        "workspace-root" => cfg.workspace_root = Some(l.path()?),
        "allow-write" => cfg.allow_write.push(l.path()?),
        "no-forge" => cfg.no_forge = l.flag()?,
        "egress-jail" | "egress" => set_egress(cfg, egress_line, l)?,
        "allow-domain" => {
            let v = l.need()?;
            let r = DomainRule::parse(&v).map_err(|e| l.at(format!("allow-domain: {e}")))?;
            push_unique(&mut cfg.allow_domain, r);
        }
        "allow-domains" => add_presets(cfg, l)?,
        "allow-env-overrides" => cfg.allow_env_overrides = l.flag()?,
        "broker" => cfg.broker = l.flag()?,
        "broker-host" => {
            let v = l.need()?;
            let row = crate::egress::policy::broker::parse_broker_host(&v)
                .map_err(|e| l.at(format!("broker-host: {e}")))?;
            push_unique(&mut cfg.broker_hosts, row);
        }
        "pass-env" => {
            let v = l.need()?;
            for name in split_list(&v) {
                if let Some(why) = pass_env_refusal(name) {
                    return Err(l.at(format!("pass-env: `{name}` {why}")));
                }
                push_unique(&mut cfg.pass_env, name.to_string());
            }
        }
        "allow-ip" => {
            let v = l.need()?;
            let ip = parse_allow_ip(&v).map_err(|e| l.at(format!("allow-ip: {e}")))?;
            if !cfg.allow_ip.contains(&ip) {
                cfg.allow_ip.push(ip);
            }
        }
        "publish-port" => add_ports(cfg, l)?,
        "pids-limit" | "tmpfs-size" | "private-state-max" | "claude-dir-warn" => {
            set_limit(cfg, l)?
        }
        "root-view-max-entries" => {
            let v = l.need()?;
            cfg.root_view_max_entries = v
                .parse()
                .ok()
                .filter(|n| ROOT_VIEW_MAX_ENTRIES_RANGE.contains(n))
                .ok_or_else(|| {
                    l.at(format!(
                        "root-view-max-entries: `{v}` is not a whole number from {} to {}",
                        ROOT_VIEW_MAX_ENTRIES_RANGE.start(),
                        ROOT_VIEW_MAX_ENTRIES_RANGE.end()
                    ))
                })?;
        }
        other => {
            return Err(l.at(format!(
                "unknown key `{other}` (known: workspace-root, no-forge, allow-write, pass-env, egress, egress-jail, allow-ip, allow-domain, allow-domains, allow-env-overrides, pids-limit, tmpfs-size, private-state-max, claude-dir-warn, publish-port, broker, broker-host, root-view-max-entries)"
            )))
        }
    }
    Ok(())
}

/// `pids-limit = N | off`, `tmpfs-size = SIZE | N%`, `private-state-max =
/// SIZE | off` (issue #24): what a session can exhaust. The file only: a
/// variable cannot loosen them.
fn set_limit(cfg: &mut Config, l: &Line<'_>) -> anyhow::Result<()> {
    let v = l.need()?;
    let off = v == "off";
    let bad = |why: &str| l.at(format!("{}: `{v}` {why}", l.key));
    match l.key {
        "pids-limit" if off => cfg.pids_limit = None,
        "pids-limit" => {
            let n: u32 = v
                .parse()
                .ok()
                .filter(|n| (MIN_PIDS_LIMIT..=1 << 22).contains(n))
                .ok_or_else(|| {
                    bad(&format!(
                        "is not a process count ({MIN_PIDS_LIMIT} to 4194304) or `off`"
                    ))
                })?;
            cfg.pids_limit = Some(n);
        }
        "tmpfs-size" => {
            let a = parse_amount(&v, true).ok_or_else(|| {
                bad("is not a size (bytes, or with K, M, G or T: `512M`) or a share of the memory (`6%`)")
            })?;
            if a.bytes(u64::MAX) < MIN_SIZE {
                return Err(bad("is too small: at least 1M"));
            }
            cfg.tmpfs_size = a;
        }
        _ => {
            let size = if off {
                None
            } else {
                let a = parse_amount(&v, false).ok_or_else(|| {
                    bad("is not a size (bytes, or with K, M, G or T: `4G`) or `off`")
                })?;
                if a.bytes(0) < MIN_SIZE {
                    return Err(bad("is too small: at least 1M"));
                }
                Some(a.bytes(0))
            };
            if l.key == "claude-dir-warn" {
                cfg.claude_dir_warn = size;
            } else {
                cfg.private_state_max = size;
            }
        }
    }
    Ok(())
}

/// The smallest `pids-limit`: below it a session cannot start its tools.
pub(crate) const MIN_PIDS_LIMIT: u32 = 64;
/// The smallest `tmpfs-size` and `private-state-max`.
const MIN_SIZE: u64 = 1 << 20;

/// `4096`, `512K`, `64M`, `2G`, `1T` (powers of 1024), or with `percent`
/// also `N%` (1–100).
fn parse_amount(v: &str, percent: bool) -> Option<Amount> {
    if let Some(p) = v.strip_suffix('%').filter(|_| percent) {
        return p
            .parse::<u8>()
            .ok()
            .filter(|p| (1..=100).contains(p))
            .map(Amount::PercentOfMemory);
    }
    let (digits, shift) = match v.char_indices().last()? {
        (_, c) if c.is_ascii_digit() => (v, 0),
        (i, c) => (
            &v[..i],
            match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return None,
            },
        ),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1 << shift).map(Amount::Bytes)
}

/// `n` bytes for a person: `1.5G`, `512M`, `4096`.
pub(crate) fn show_bytes(n: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if n >= 1 << shift {
            let whole = n >> shift;
            let tenth = ((n - (whole << shift)) * 10) >> shift;
            return if tenth == 0 {
                format!("{whole}{unit}")
            } else {
                format!("{whole}.{tenth}{unit}")
            };
        }
    }
    n.to_string()
}

/// `egress = MODE` or `egress-jail = yes|no`; a second line may repeat the
/// mode but not contradict it.
fn set_egress(
    cfg: &mut Config,
    egress_line: &mut Option<(usize, String)>,
    l: &Line<'_>,
) -> anyhow::Result<()> {
    let mode = if l.key == "egress" {
        let v = l.need()?;
        Egress::parse(&v).ok_or_else(|| {
            l.at(format!(
                "egress: `{v}` is not a mode (open, allowlist or off)"
            ))
        })?
    } else if l.flag()? {
        Egress::Open
    } else {
        Egress::Off
    };
    if let Some((n, said)) = egress_line {
        if mode != cfg.egress {
            return Err(l.at(format!(
                "`{}` contradicts `{said}` on line {n}; keep one of them",
                l.text
            )));
        }
    }
    *egress_line = Some((l.lineno, l.text.to_string()));
    cfg.egress = mode;
    Ok(())
}

/// `allow-domains = PRESET, ...`: each name must be a preset.
fn add_presets(cfg: &mut Config, l: &Line<'_>) -> anyhow::Result<()> {
    let v = l.need()?;
    for name in split_list(&v) {
        let p = crate::egress::policy::preset(name).ok_or_else(|| {
            l.at(format!(
                "allow-domains: no preset `{name}` (presets: {})",
                crate::egress::policy::PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        push_unique(&mut cfg.allow_domains, p);
    }
    Ok(())
}

/// `publish-port = PORT[, PORT…]`: each a TCP port 1–65535, named once in
/// the whole file (a second mention is a mistake worth a line, not a no-op).
fn add_ports(cfg: &mut Config, l: &Line<'_>) -> anyhow::Result<()> {
    let v = l.need()?;
    for item in split_list(&v) {
        let port = parse_port(item).map_err(|e| l.at(format!("publish-port: {e}")))?;
        if cfg.publish_port.contains(&port) {
            return Err(l.at(format!(
                "publish-port: {port} is listed twice; name each port once"
            )));
        }
        cfg.publish_port.push(port);
    }
    Ok(())
}

/// A TCP port number, 1–65535, in decimal.
fn parse_port(v: &str) -> Result<u16, String> {
    match v.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) && v.bytes().all(|b| b.is_ascii_digit()) => Ok(p as u16),
        _ => Err(format!(
            "`{v}` is not a TCP port (a number from 1 to 65535, e.g. `3000`)"
        )),
    }
}

/// A `CLAUDE_SANDBOX_*` variable that gives the sandbox more than the file does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weakening {
    /// The variable's name.
    pub var: &'static str,
    /// Its value, as set.
    pub value: String,
    /// What it does, e.g. "turns the egress jail off".
    pub effect: String,
    /// The file line that would do the same, for the refusal's fix.
    pub key: &'static str,
}

impl Weakening {
    /// `NAME=VALUE`, on one line (control characters escaped).
    fn assignment(&self) -> String {
        format!("{}={}", self.var, self.value.escape_debug())
    }

    /// The line a launch prints when `allow-env-overrides` lets it through.
    pub fn notice(&self) -> String {
        format!(
            "{} weakens the sandbox (allowed by allow-env-overrides in {})",
            self.assignment(),
            paths::CONFIG_FILE
        )
    }

    /// The refusal (exit 2) without `allow-env-overrides`.
    fn refusal(&self) -> anyhow::Error {
        bad_input(format!(
            "environment {} would weaken the sandbox (it {}) and is refused; to allow it, add `allow-env-overrides` to {} (or set `{}` there instead)",
            self.assignment(),
            self.effect,
            paths::CONFIG_FILE,
            self.key
        ))
    }
}

/// The effective configuration and the overrides that weakened it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub config: Config,
    /// Empty unless the file says `allow-env-overrides`.
    pub weakened: Vec<Weakening>,
}

/// Apply `CLAUDE_SANDBOX_*` overrides to `file`, the configuration the file
/// gave. A variable that is set replaces what the file said for that key
/// (set but empty clears a list or the workspace root). One that weakens the
/// sandbox is refused (bad input) unless `file.allow_env_overrides`:
/// `CLAUDE_SANDBOX_EGRESS_JAIL` turning the jail off, `CLAUDE_SANDBOX_NO_FORGE`
/// undoing the file's `no-forge`, `CLAUDE_SANDBOX_ALLOW_WRITE`, `_ALLOW_IP`,
/// `_PASS_ENV` with an entry the file does not have, and
/// `CLAUDE_SANDBOX_WORKSPACE_ROOT` naming a directory that is neither the
/// current one (`is_cwd`) nor the file's `workspace-root`. Strengthening
/// overrides are always applied.
pub fn apply_env(
    file: Config,
    env: &dyn Fn(&str) -> Option<OsString>,
    is_cwd: &dyn Fn(&Path) -> bool,
) -> anyhow::Result<Applied> {
    let get = |name: &str| -> anyhow::Result<Option<String>> {
        match env(name) {
            None => Ok(None),
            Some(v) => v
                .into_string()
                .map(Some)
                .map_err(|v| bad_input(format!("environment {name}={v:?}: not valid UTF-8"))),
        }
    };
    let mut cfg = file.clone();
    let mut weakened = Vec::new();
    if let Some(v) = get(ENV_WORKSPACE_ROOT)? {
        weakened.extend(env_workspace_root(&file, &mut cfg, &v, is_cwd)?);
    }
    if let Some(v) = get(ENV_NO_FORGE)? {
        cfg.no_forge = env_bool(ENV_NO_FORGE, &v)?;
        if file.no_forge && !cfg.no_forge {
            weakened.push(weakening(
                ENV_NO_FORGE,
                &v,
                "binds the forge tokens the file's `no-forge` withholds".into(),
                "no-forge = 0",
            ));
        }
    }
    if let Some(v) = get(ENV_EGRESS_JAIL)? {
        // 1: at least the open jail (an allowlist stays); 0: off.
        cfg.egress = if env_bool(ENV_EGRESS_JAIL, &v)? {
            cfg.egress.max(Egress::Open)
        } else {
            Egress::Off
        };
        weakened.extend(egress_weakening(&file, cfg.egress, ENV_EGRESS_JAIL, &v));
    }
    if let Some(v) = get(ENV_EGRESS)? {
        cfg.egress = Egress::parse(v.trim()).ok_or_else(|| {
            bad_input(format!(
                "environment {ENV_EGRESS}={}: not a mode (open, allowlist or off)",
                v.escape_debug()
            ))
        })?;
        weakened.extend(egress_weakening(&file, cfg.egress, ENV_EGRESS, &v));
    }
    if let Some(v) = get(ENV_ALLOW_DOMAIN)? {
        weakened.extend(env_allow_domain(&file, &mut cfg, &v)?);
    }
    if let Some(v) = get(ENV_ALLOW_WRITE)? {
        weakened.extend(env_allow_write(&file, &mut cfg, &v)?);
    }
    if let Some(v) = get(ENV_PASS_ENV)? {
        weakened.extend(env_pass_env(&file, &mut cfg, &v)?);
    }
    if let Some(v) = get(ENV_ALLOW_IP)? {
        weakened.extend(env_allow_ip(&file, &mut cfg, &v)?);
    }
    if !file.allow_env_overrides
        && !crate::testhooks::active(crate::testhooks::Mutation::AcceptEnvOverrides)
    {
        if let Some(w) = weakened.first() {
            return Err(w.refusal());
        }
    }
    cfg.weakened_by_env = weakened
        .iter()
        .map(|w| format!("{}={}", w.var, w.value))
        .collect();
    Ok(Applied {
        config: cfg,
        weakened,
    })
}

/// The egress mode `now`, set by `var`, weakens the file's.
fn egress_weakening(file: &Config, now: Egress, var: &'static str, v: &str) -> Option<Weakening> {
    (now < file.egress).then(|| {
        weakening(
            var,
            v,
            match now {
                Egress::Off => "turns the egress jail off".into(),
                _ => format!(
                    "lets the sandbox reach every domain instead of the file's `egress = {}`",
                    file.egress.name()
                ),
            },
            match (now, var) {
                (Egress::Off, ENV_EGRESS_JAIL) => "egress-jail = 0",
                (Egress::Off, _) => "egress = off",
                _ => "egress = open",
            },
        )
    })
}

/// `CLAUDE_SANDBOX_ALLOW_DOMAIN=v` (rules separated by newlines or commas)
/// applied; weakening when it adds a rule.
fn env_allow_domain(file: &Config, cfg: &mut Config, v: &str) -> anyhow::Result<Option<Weakening>> {
    let mut rules = Vec::new();
    for item in split_list(v) {
        let r = DomainRule::parse(item)
            .map_err(|e| bad_input(format!("environment {ENV_ALLOW_DOMAIN}: {e}")))?;
        push_unique(&mut rules, r);
    }
    cfg.allow_domain = rules;
    let new = added(&cfg.allow_domain, &file.allow_domain, DomainRule::text);
    Ok((!new.is_empty()).then(|| {
        weakening(
            ENV_ALLOW_DOMAIN,
            v,
            format!("lets the sandbox reach {new}"),
            "allow-domain = NAME",
        )
    }))
}

fn weakening(var: &'static str, value: &str, effect: String, key: &'static str) -> Weakening {
    Weakening {
        var,
        value: value.to_string(),
        effect,
        key,
    }
}

/// `CLAUDE_SANDBOX_WORKSPACE_ROOT=v` applied to `cfg`; weakening unless it
/// names the current directory or the file's own `workspace-root`.
fn env_workspace_root(
    file: &Config,
    cfg: &mut Config,
    v: &str,
    is_cwd: &dyn Fn(&Path) -> bool,
) -> anyhow::Result<Option<Weakening>> {
    if v.is_empty() {
        cfg.workspace_root = None;
        return Ok(None);
    }
    let p = absolute_path(v)
        .map_err(|e| bad_input(format!("environment {ENV_WORKSPACE_ROOT}: {e}")))?;
    // The shadow passes the variable into the sandbox (§4.5), where a
    // nested launch from the same directory sets it to the current one.
    let w = (file.workspace_root.as_ref() != Some(&p) && !is_cwd(&p)).then(|| {
        weakening(
            ENV_WORKSPACE_ROOT,
            v,
            format!(
                "makes {} read-write instead of the current directory",
                p.display()
            ),
            "workspace-root = PATH",
        )
    });
    cfg.workspace_root = Some(p);
    Ok(w)
}

/// `CLAUDE_SANDBOX_ALLOW_WRITE=v` applied; weakening when it adds a path.
fn env_allow_write(file: &Config, cfg: &mut Config, v: &str) -> anyhow::Result<Option<Weakening>> {
    cfg.allow_write = v
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            absolute_path(l).map_err(|e| bad_input(format!("environment {ENV_ALLOW_WRITE}: {e}")))
        })
        .collect::<anyhow::Result<_>>()?;
    let new = added(&cfg.allow_write, &file.allow_write, |p| {
        p.display().to_string()
    });
    Ok((!new.is_empty()).then(|| {
        weakening(
            ENV_ALLOW_WRITE,
            v,
            format!("makes {new} read-write"),
            "allow-write = PATH",
        )
    }))
}

/// `CLAUDE_SANDBOX_PASS_ENV=v` applied; weakening when it adds a name.
fn env_pass_env(file: &Config, cfg: &mut Config, v: &str) -> anyhow::Result<Option<Weakening>> {
    let mut names = Vec::new();
    for name in split_list(v) {
        if let Some(why) = pass_env_refusal(name) {
            return Err(bad_input(format!(
                "environment {ENV_PASS_ENV}: `{name}` {why}"
            )));
        }
        push_unique(&mut names, name.to_string());
    }
    cfg.pass_env = names;
    let new = added(&cfg.pass_env, &file.pass_env, String::clone);
    Ok((!new.is_empty()).then(|| {
        weakening(
            ENV_PASS_ENV,
            v,
            format!("forwards {new} into the sandbox"),
            "pass-env = NAME",
        )
    }))
}

/// `CLAUDE_SANDBOX_ALLOW_IP=v` applied; weakening when it adds an address.
fn env_allow_ip(file: &Config, cfg: &mut Config, v: &str) -> anyhow::Result<Option<Weakening>> {
    let mut ips = Vec::new();
    for item in split_list(v) {
        let ip = parse_allow_ip(item)
            .map_err(|e| bad_input(format!("environment {ENV_ALLOW_IP}: {e}")))?;
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    cfg.allow_ip = ips;
    let new = added(&cfg.allow_ip, &file.allow_ip, Ipv4Addr::to_string);
    Ok((!new.is_empty()).then(|| {
        weakening(
            ENV_ALLOW_IP,
            v,
            format!("opens {new} through the egress jail"),
            "allow-ip = ADDR",
        )
    }))
}

/// The entries of `now` that `file` lacks, comma-separated ("" when none).
fn added<T: PartialEq>(now: &[T], file: &[T], show: impl Fn(&T) -> String) -> String {
    now.iter()
        .filter(|x| !file.contains(x))
        .map(show)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Read the file at `path` (a missing file means defaults), then apply the
/// environment ([`apply_env`], against the current directory).
pub(crate) fn load(path: &Path, env: &dyn Fn(&str) -> Option<OsString>) -> anyhow::Result<Applied> {
    use crate::sys::files::{read_text, ReadError};
    let cfg = match read_text(path) {
        Ok(text) => parse(&text, &path.display().to_string())?,
        Err(ReadError::Missing) => Config::default(),
        Err(e @ (ReadError::NotAFile(_) | ReadError::TooLarge(_) | ReadError::NotText)) => {
            return Err(bad_input(format!(
                "{}: {e}; it must be a short text file of `key = value` lines: fix or remove it (see docs/configuration.md)",
                path.display()
            )))
        }
        Err(e) => {
            return Err(bad_input(format!(
                "cannot read {}: {e}; fix its permissions (root 0644)",
                path.display()
            )))
        }
    };
    apply_env(cfg, env, &is_current_dir)
}

/// Whether `p` is the current directory (both canonicalized; false when
/// either cannot be).
fn is_current_dir(p: &Path) -> bool {
    match (
        p.canonicalize(),
        std::env::current_dir().and_then(|c| c.canonicalize()),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The process environment as a lookup function.
pub(crate) fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, s: T) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn flag(value: Option<&str>) -> Result<bool, String> {
    match value {
        None | Some("1") | Some("true") | Some("yes") | Some("on") => Ok(true),
        Some("0") | Some("false") | Some("no") | Some("off") => Ok(false),
        Some(v) => Err(format!("`{v}` is not a flag value (use 1 or 0)")),
    }
}

fn env_bool(name: &str, v: &str) -> anyhow::Result<bool> {
    match v.trim() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad_input(format!("environment {name}={v:?}: use 1 or 0"))),
    }
}

fn absolute_path(v: &str) -> Result<PathBuf, String> {
    let p = Path::new(v);
    if !p.is_absolute() {
        return Err(format!("`{v}` is a relative path; give an absolute one"));
    }
    if p.components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("`{v}` contains `..`; give a plain absolute path"));
    }
    Ok(p.to_path_buf())
}

/// A bare IPv4 address of a host (no prefix, port or name; not loopback,
/// unspecified, broadcast or multicast).
fn parse_allow_ip(v: &str) -> Result<Ipv4Addr, String> {
    let ip: Ipv4Addr = v.parse().map_err(|_| {
        format!("`{v}` is not a bare IPv4 address (write e.g. `10.0.0.5`, no prefix, port or name)")
    })?;
    if ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.octets()[0] == 0
    {
        return Err(format!(
            "`{v}` is not a host address the jail could route to"
        ));
    }
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{exit_code, EXIT_BAD_INPUT};
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    /// The current directory the tests' `apply_env` is told about.
    const CWD: &str = "/work/project";

    fn apply(file: Config, pairs: &[(&str, &str)]) -> anyhow::Result<Applied> {
        apply_env(file, &env_of(pairs), &|p: &Path| p == Path::new(CWD))
    }

    fn err_of(text: &str) -> String {
        let e = parse(text, "/etc/claude-sandbox.conf").unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT, "{e}");
        e.to_string()
    }

    #[test]
    fn egress_modes_and_their_older_spelling() {
        assert_eq!(
            parse("egress = allowlist", "f").unwrap().egress,
            Egress::Allowlist
        );
        assert_eq!(parse("egress = off", "f").unwrap().egress, Egress::Off);
        assert_eq!(parse("egress=open", "f").unwrap().egress, Egress::Open);
        assert_eq!(parse("egress-jail = 0", "f").unwrap().egress, Egress::Off);
        // Both, agreeing: fine; disagreeing: refused, naming both lines.
        assert_eq!(
            parse("egress = off\negress-jail = 0", "f").unwrap().egress,
            Egress::Off
        );
        let e = err_of("egress = allowlist\n# x\negress-jail = 1");
        assert!(
            e.contains(":3:") && e.contains("`egress = allowlist` on line 1"),
            "{e}"
        );
        let e = err_of("egress = closed");
        assert!(
            e.contains("`closed` is not a mode (open, allowlist or off)"),
            "{e}"
        );
        assert!(err_of("egress").contains("needs a value"));
    }

    #[test]
    fn allow_domain_and_presets() {
        let c = parse(
            "allow-domain = Allowed.test\nallow-domain = *.git.test:8443\nallow-domain = allowed.test\nallow-domains = github, npm\nallow-domains = github",
            "f",
        )
        .unwrap();
        let texts: Vec<String> = c.allow_domain.iter().map(DomainRule::text).collect();
        assert_eq!(texts, ["allowed.test", "*.git.test:8443"]);
        let names: Vec<&str> = c.allow_domains.iter().map(|p| p.name).collect();
        assert_eq!(names, ["github", "npm"]);
        let e = err_of("allow-domain = 10.0.0.1");
        assert!(
            e.contains("/etc/claude-sandbox.conf:1: allow-domain:") && e.contains("allow-ip"),
            "{e}"
        );
        let e = err_of("allow-domains = github, gitlab");
        assert!(
            e.contains("no preset `gitlab`")
                && e.contains("github, npm, pypi, crates, debian, ubuntu, go"),
            "{e}"
        );
    }

    #[test]
    fn the_environment_may_only_tighten_egress() {
        let open = Config::default();
        let allow = parse("egress = allowlist\nallow-domain = a.test", "f").unwrap();
        // Strengthening: always.
        let l = apply(open.clone(), &[(ENV_EGRESS, "allowlist")]).unwrap();
        assert_eq!(l.config.egress, Egress::Allowlist);
        assert!(l.weakened.is_empty());
        let l = apply(allow.clone(), &[(ENV_EGRESS_JAIL, "1")]).unwrap();
        assert_eq!(l.config.egress, Egress::Allowlist, "=1 keeps the allowlist");
        // Weakening: refused, naming the variable and the key.
        for (file, var, val, key) in [
            (allow.clone(), ENV_EGRESS, "open", "egress = open"),
            (allow.clone(), ENV_EGRESS_JAIL, "0", "egress-jail = 0"),
            (open.clone(), ENV_EGRESS, "off", "egress = off"),
            (
                allow.clone(),
                ENV_ALLOW_DOMAIN,
                "a.test, b.test",
                "allow-domain = NAME",
            ),
        ] {
            let e = apply(file, &[(var, val)]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{var}={val}")) && e.contains(key),
                "{e}"
            );
        }
        let e = apply(open.clone(), &[(ENV_EGRESS, "sideways")]).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
        // The file's own rules again, or fewer: not weakening.
        let l = apply(allow.clone(), &[(ENV_ALLOW_DOMAIN, "")]).unwrap();
        assert!(l.config.allow_domain.is_empty() && l.weakened.is_empty());
        // With the opt-in: applied and reported.
        let mut opted = allow;
        opted.allow_env_overrides = true;
        let l = apply(opted, &[(ENV_EGRESS, "open"), (ENV_ALLOW_DOMAIN, "b.test")]).unwrap();
        assert_eq!(l.config.egress, Egress::Open);
        assert_eq!(l.weakened.len(), 2);
    }

    #[test]
    fn default_file_parses_to_defaults() {
        assert_eq!(parse(DEFAULT_CONFIG, "default").unwrap(), Config::default());
        assert!(
            Config::default().egress.jailed(),
            "the jail is on by default"
        );
    }

    #[test]
    fn limits_parse_with_units_shares_and_off() {
        let cfg = parse(
            "pids-limit = 512\ntmpfs-size = 8M\nprivate-state-max = 2G\nclaude-dir-warn = 1G\n",
            "f",
        )
        .unwrap();
        assert_eq!(cfg.pids_limit, Some(512));
        assert_eq!(cfg.tmpfs_size, Amount::Bytes(8 << 20));
        assert_eq!(cfg.private_state_max, Some(2 << 30));
        assert_eq!(cfg.claude_dir_warn, Some(1 << 30));
        let cfg = parse(
            "pids-limit = off\ntmpfs-size = 25%\nprivate-state-max = off\nclaude-dir-warn = off",
            "f",
        )
        .unwrap();
        assert_eq!(cfg.pids_limit, None);
        assert_eq!(cfg.tmpfs_size, Amount::PercentOfMemory(25));
        assert_eq!(Amount::PercentOfMemory(25).bytes(8 << 30), 2 << 30);
        assert_eq!(cfg.private_state_max, None);
        assert_eq!(cfg.claude_dir_warn, None);
        for (text, want) in [
            ("4096", 4096),
            ("64k", 64 << 10),
            ("3T", 3 << 40),
            ("1g", 1 << 30),
        ] {
            assert_eq!(
                parse_amount(text, false),
                Some(Amount::Bytes(want)),
                "{text}"
            );
        }
        // The defaults, documented in etc/claude-sandbox.conf.
        let d = Config::default();
        assert_eq!(
            (
                d.pids_limit,
                d.tmpfs_size,
                d.private_state_max,
                d.claude_dir_warn
            ),
            (
                Some(4096),
                Amount::PercentOfMemory(6),
                Some(4 << 30),
                Some(4 << 30)
            )
        );
        for (bad, says) in [
            ("pids-limit = 10", "64 to"),
            ("pids-limit = many", "process count"),
            ("pids-limit", "needs a value"),
            ("tmpfs-size = 0%", "share of the memory"),
            ("tmpfs-size = 101%", "share of the memory"),
            ("tmpfs-size = 12Q", "not a size"),
            ("tmpfs-size = 512K", "too small"),
            ("tmpfs-size = off", "not a size"),
            ("tmpfs-size = 99999999999T", "not a size"),
            ("private-state-max = 10%", "not a size"),
            ("private-state-max = -1", "not a size"),
            ("private-state-max = 1K", "too small"),
            ("claude-dir-warn = 5%", "not a size"),
            ("claude-dir-warn = 1K", "too small"),
        ] {
            let e = err_of(bad);
            assert!(e.contains(":1:") && e.contains(says), "{bad}: {e}");
        }
        assert_eq!(show_bytes(1536 << 20), "1.5G");
        assert_eq!(show_bytes(8 << 20), "8M");
        assert_eq!(show_bytes(100), "100");
    }

    #[test]
    fn every_key() {
        let cfg = parse(
            "# comment\n\nworkspace-root = /workspaces/app\nno-forge\n\
             allow-write = /run/user/1000/podman/podman.sock  # trailing comment\n\
             allow-write = /srv/data\npass-env = FOO, BAR_2\npass-env = BAZ\n\
             egress-jail = 0\nallow-ip = 10.0.0.5\nallow-ip = 192.168.1.20\nallow-env-overrides\n",
            "f",
        )
        .unwrap();
        assert_eq!(cfg.workspace_root, Some(PathBuf::from("/workspaces/app")));
        assert!(cfg.no_forge);
        assert_eq!(
            cfg.allow_write,
            vec![
                PathBuf::from("/run/user/1000/podman/podman.sock"),
                PathBuf::from("/srv/data")
            ]
        );
        assert_eq!(cfg.pass_env, vec!["FOO", "BAR_2", "BAZ"]);
        assert!(!cfg.egress.jailed());
        assert_eq!(
            cfg.allow_ip,
            vec![Ipv4Addr::new(10, 0, 0, 5), Ipv4Addr::new(192, 168, 1, 20)]
        );
        assert!(cfg.allow_env_overrides);
    }

    #[test]
    fn jail_flag_forms() {
        assert!(parse("egress-jail", "f").unwrap().egress.jailed());
        assert!(parse("egress-jail = 1", "f").unwrap().egress.jailed());
        assert!(!parse("egress-jail = 0", "f").unwrap().egress.jailed());
        assert!(err_of("egress-jail = maybe").contains("maybe"));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e = err_of("no-forge\nallow-everything = 1\n");
        assert!(e.contains("/etc/claude-sandbox.conf:2"), "{e}");
        assert!(e.contains("allow-everything"), "{e}");
    }

    #[test]
    fn allow_ip_must_be_bare_ipv4() {
        for bad in [
            "10.0.0.0/8",
            "10.0.0.5:80",
            "example.com",
            "fd00::1",
            "127.0.0.1",
            "0.0.0.0",
            "10.0.0",
        ] {
            let e = err_of(&format!("allow-ip = {bad}"));
            assert!(e.contains(bad) && e.contains(":1:"), "{bad}: {e}");
        }
    }

    #[test]
    fn relative_paths_refused() {
        let e = err_of("allow-write = run/podman.sock");
        assert!(
            e.contains("run/podman.sock") && e.contains("relative"),
            "{e}"
        );
        let e = err_of("\n\nworkspace-root = ../x");
        assert!(e.contains(":3:") && e.contains("../x"), "{e}");
        assert!(err_of("allow-write = /srv/../etc").contains(".."));
    }

    #[test]
    fn pass_env_must_be_identifiers() {
        for bad in ["1ABC", "A-B", "A.B", "$HOME"] {
            let e = err_of(&format!("pass-env = {bad}"));
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn pass_env_never_forwards_protected_names() {
        for bad in [
            "LD_PRELOAD",
            "PATH",
            "IS_SANDBOX",
            "HOME",
            "USER",
            "GIT_CONFIG_GLOBAL",
            "GIT_CONFIG_SYSTEM",
            "GIT_CONFIG_COUNT",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "SHELLOPTS",
            "BASHOPTS",
            "IFS",
        ] {
            let e = err_of(&format!("pass-env = {bad}"));
            assert!(e.contains(bad), "{e}");
        }
        let e = apply(
            Config::default(),
            &[(ENV_PASS_ENV, "LD_PRELOAD, PATH, IS_SANDBOX")],
        )
        .unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
    }

    #[test]
    fn missing_value_is_an_error() {
        assert!(err_of("allow-write").contains("needs a value"));
        assert!(err_of("allow-ip =").contains("needs a value"));
    }

    #[test]
    fn env_takes_precedence() {
        let file = parse(
            "egress-jail = 0\nallow-ip = 10.0.0.5\nworkspace-root = /a\nallow-env-overrides\n",
            "f",
        )
        .unwrap();
        let cfg = apply(
            file.clone(),
            &[
                (ENV_EGRESS_JAIL, "1"),
                (ENV_ALLOW_IP, "10.1.1.1,10.2.2.2"),
                (ENV_WORKSPACE_ROOT, "/b"),
                (ENV_ALLOW_WRITE, "/x\n/y\n"),
                (ENV_PASS_ENV, "FOO BAR"),
                (ENV_NO_FORGE, "1"),
            ],
        )
        .unwrap()
        .config;
        assert!(cfg.egress.jailed());
        assert_eq!(
            cfg.allow_ip,
            vec![Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2)]
        );
        assert_eq!(cfg.workspace_root, Some(PathBuf::from("/b")));
        assert_eq!(
            cfg.allow_write,
            vec![PathBuf::from("/x"), PathBuf::from("/y")]
        );
        assert_eq!(cfg.pass_env, vec!["FOO", "BAR"]);
        assert!(cfg.no_forge);
        // Config on, env off: env wins.
        let on = parse("egress-jail = 1\nallow-env-overrides", "f").unwrap();
        assert!(!apply(on, &[(ENV_EGRESS_JAIL, "0")])
            .unwrap()
            .config
            .egress
            .jailed());
        // Nothing set: the file stands, and nothing weakened it.
        let same = apply(file.clone(), &[]).unwrap();
        assert_eq!((same.config, same.weakened), (file, vec![]));
    }

    #[test]
    fn bad_env_values_are_errors() {
        for (k, v) in [
            (ENV_EGRESS_JAIL, "nope"),
            (ENV_NO_FORGE, "2"),
            (ENV_ALLOW_IP, "10.0.0.0/8"),
            (ENV_ALLOW_WRITE, "relative/path"),
            (ENV_WORKSPACE_ROOT, "ws"),
        ] {
            let e = apply(Config::default(), &[(k, v)]).unwrap_err();
            assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    /// Each weakening override, with the file it is applied to.
    fn weakening_cases() -> Vec<(&'static str, &'static str, &'static str)> {
        vec![
            (ENV_EGRESS_JAIL, "0", ""),
            (ENV_EGRESS_JAIL, "off", ""),
            (ENV_NO_FORGE, "0", "no-forge\n"),
            (ENV_ALLOW_WRITE, "/srv/data", ""),
            (ENV_ALLOW_WRITE, "/srv/a\n/srv/b", "allow-write = /srv/a\n"),
            (ENV_ALLOW_IP, "10.0.0.5", ""),
            (ENV_PASS_ENV, "FOO", ""),
            (ENV_PASS_ENV, "FOO BAR", "pass-env = FOO\n"),
            (ENV_WORKSPACE_ROOT, "/elsewhere", ""),
            (ENV_WORKSPACE_ROOT, "/elsewhere", "workspace-root = /a\n"),
        ]
    }

    #[test]
    fn weakening_override_refused_without_the_opt_in() {
        for (var, value, file) in weakening_cases() {
            let e = apply(parse(file, "f").unwrap(), &[(var, value)]).unwrap_err();
            assert_eq!(exit_code(&e), EXIT_BAD_INPUT, "{var}={value:?}: {e}");
            let msg = e.to_string();
            assert_eq!(msg.lines().count(), 1, "one line: {msg}");
            for part in [
                &format!("{var}={}", value.escape_debug()),
                "allow-env-overrides",
                "/etc/claude-sandbox.conf",
                "weaken",
            ] {
                assert!(msg.contains(part), "{var}={value:?}: no {part:?} in {msg}");
            }
        }
        // The line docs/configuration.md shows.
        assert_eq!(
            apply(Config::default(), &[(ENV_EGRESS_JAIL, "0")])
                .unwrap_err()
                .to_string(),
            "environment CLAUDE_SANDBOX_EGRESS_JAIL=0 would weaken the sandbox (it turns the egress jail off) and is refused; to allow it, add `allow-env-overrides` to /etc/claude-sandbox.conf (or set `egress-jail = 0` there instead)"
        );
        // Refused even beside a strengthening one, and the file cannot be
        // outvoted: no variable sets allow-env-overrides.
        let e = apply(
            Config::default(),
            &[(ENV_NO_FORGE, "1"), (ENV_ALLOW_IP, "10.0.0.5")],
        )
        .unwrap_err();
        assert!(e.to_string().contains(ENV_ALLOW_IP), "{e}");
    }

    #[test]
    fn weakening_override_applied_and_reported_with_the_opt_in() {
        for (var, value, file) in weakening_cases() {
            let file = parse(&format!("{file}allow-env-overrides\n"), "f").unwrap();
            assert!(file.allow_env_overrides);
            let l = apply(file.clone(), &[(var, value)]).unwrap();
            assert_eq!(l.weakened.len(), 1, "{var}={value:?}: {:?}", l.weakened);
            let w = &l.weakened[0];
            assert_eq!((w.var, w.value.as_str()), (var, value));
            assert_eq!(
                w.notice(),
                format!(
                    "{var}={} weakens the sandbox (allowed by allow-env-overrides in /etc/claude-sandbox.conf)",
                    value.escape_debug()
                )
            );
            assert_ne!(l.config, file, "{var}={value:?} was applied");
        }
        let l = apply(
            parse("allow-env-overrides = 1", "f").unwrap(),
            &[(ENV_EGRESS_JAIL, "0"), (ENV_ALLOW_IP, "10.0.0.5")],
        )
        .unwrap();
        assert!(!l.config.egress.jailed());
        assert_eq!(l.config.allow_ip, vec![Ipv4Addr::new(10, 0, 0, 5)]);
        let vars: Vec<&str> = l.weakened.iter().map(|w| w.var).collect();
        assert_eq!(vars, [ENV_EGRESS_JAIL, ENV_ALLOW_IP]);
        // `allow-env-overrides = 0` is the default.
        assert!(apply(
            parse("allow-env-overrides = 0", "f").unwrap(),
            &[(ENV_EGRESS_JAIL, "0")]
        )
        .is_err());
    }

    #[test]
    fn strengthening_override_always_honoured() {
        for (file, pairs) in [
            ("egress-jail = 0\n", vec![(ENV_EGRESS_JAIL, "1")]),
            ("", vec![(ENV_EGRESS_JAIL, "1")]),
            ("", vec![(ENV_NO_FORGE, "1")]),
            ("no-forge\n", vec![(ENV_NO_FORGE, "1")]),
            ("", vec![(ENV_NO_FORGE, "0")]),
            ("egress-jail = 0\n", vec![(ENV_EGRESS_JAIL, "0")]),
            // Set but empty clears a list; a subset of the file's grants nothing new.
            (
                "allow-write = /srv/a\nallow-write = /srv/b\n",
                vec![(ENV_ALLOW_WRITE, "/srv/b\n")],
            ),
            ("allow-write = /srv/a\n", vec![(ENV_ALLOW_WRITE, "")]),
            ("allow-ip = 10.0.0.5\n", vec![(ENV_ALLOW_IP, "")]),
            ("allow-ip = 10.0.0.5\n", vec![(ENV_ALLOW_IP, "10.0.0.5")]),
            ("pass-env = FOO, BAR\n", vec![(ENV_PASS_ENV, "BAR")]),
            ("pass-env = FOO\n", vec![(ENV_PASS_ENV, "")]),
            ("", vec![(ENV_PASS_ENV, " , ")]),
            // Empty: the default, the current directory.
            ("workspace-root = /a\n", vec![(ENV_WORKSPACE_ROOT, "")]),
            ("workspace-root = /a\n", vec![(ENV_WORKSPACE_ROOT, "/a")]),
        ] {
            let l = apply(parse(file, "f").unwrap(), &pairs)
                .unwrap_or_else(|e| panic!("{file:?} {pairs:?}: {e}"));
            assert!(
                l.weakened.is_empty(),
                "{file:?} {pairs:?}: {:?}",
                l.weakened
            );
        }
        let l = apply(
            parse("egress-jail = 0\nallow-write = /srv/a\n", "f").unwrap(),
            &[
                (ENV_EGRESS_JAIL, "1"),
                (ENV_NO_FORGE, "1"),
                (ENV_ALLOW_WRITE, ""),
            ],
        )
        .unwrap();
        assert!(l.config.egress.jailed() && l.config.no_forge && l.config.allow_write.is_empty());
    }

    #[test]
    fn workspace_root_of_the_current_directory_is_not_weakening() {
        // A nested launch inside the sandbox gets the variable passed
        // through, naming the directory it runs from.
        for file in ["", "workspace-root = /a\n"] {
            let l = apply(parse(file, "f").unwrap(), &[(ENV_WORKSPACE_ROOT, CWD)]).unwrap();
            assert!(l.weakened.is_empty(), "{file:?}: {:?}", l.weakened);
            assert_eq!(l.config.workspace_root, Some(PathBuf::from(CWD)));
        }
        // Compared canonically by `load`: the current directory itself, and a
        // symlink to it, are not weakening; its parent is.
        let dir = std::env::current_dir().unwrap();
        let link = std::env::temp_dir().join(format!("csb-cwd-link-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let missing = Path::new("/nonexistent/claude-sandbox.conf");
        for p in [dir.clone(), link.clone()] {
            let v = p.display().to_string();
            let l = load(missing, &env_of(&[(ENV_WORKSPACE_ROOT, &v)])).unwrap();
            assert!(l.weakened.is_empty(), "{v}: {:?}", l.weakened);
        }
        std::fs::remove_file(&link).unwrap();
        let parent = dir.parent().unwrap().display().to_string();
        let e = load(missing, &env_of(&[(ENV_WORKSPACE_ROOT, &parent)])).unwrap_err();
        assert_eq!(exit_code(&e), EXIT_BAD_INPUT);
        assert!(e.to_string().contains(ENV_WORKSPACE_ROOT), "{e}");
    }

    #[test]
    fn allow_env_overrides_is_a_flag_of_the_file_only() {
        assert!(
            parse("allow-env-overrides", "f")
                .unwrap()
                .allow_env_overrides
        );
        assert!(
            parse("allow-env-overrides = yes", "f")
                .unwrap()
                .allow_env_overrides
        );
        assert!(
            !parse("allow-env-overrides = off", "f")
                .unwrap()
                .allow_env_overrides
        );
        assert!(err_of("allow-env-overrides = sure").contains("allow-env-overrides"));
        assert!(
            !parse(DEFAULT_CONFIG, "default")
                .unwrap()
                .allow_env_overrides
        );
    }

    #[test]
    fn load_missing_file_means_defaults() {
        let l = load(Path::new("/nonexistent/claude-sandbox.conf"), &env_of(&[])).unwrap();
        assert_eq!(l.config, Config::default());
        assert!(l.weakened.is_empty());
    }

    #[test]
    fn broker_host_lines_add_rows_each_once_and_bad_ones_are_named() {
        let cfg = parse(
            "broker-host = uploads.github.com github\nbroker-host = api.gitlab.example.test gitlab:gitlab.example.test\nbroker-host = UPLOADS.github.com github\n",
            "t",
        )
        .unwrap();
        assert_eq!(
            cfg.broker_hosts,
            [
                ("uploads.github.com".to_string(), "github".to_string()),
                (
                    "api.gitlab.example.test".to_string(),
                    "gitlab:gitlab.example.test".to_string()
                )
            ]
        );
        assert!(parse("", "t").unwrap().broker_hosts.is_empty());
        for (line, names) in [
            ("broker-host = uploads.github.com nosuch", "nosuch"),
            ("broker-host = *.github.com github", "*.github.com"),
            ("broker-host = 192.0.2.1 github", "192.0.2.1"),
            ("broker-host = bad_name.test github", "bad_name.test"),
            ("broker-host = uploads.github.com", "uploads.github.com"),
            ("broker-host", "broker-host"),
        ] {
            let e = parse(
                &format!("egress = allowlist\n{line}\n"),
                "/etc/claude-sandbox.conf",
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("/etc/claude-sandbox.conf:2") && e.contains(names) && !e.contains('\n'),
                "{line}: {e}"
            );
        }
    }

    #[test]
    fn the_broker_is_on_unless_turned_off() {
        assert!(parse("", "t").unwrap().broker);
        assert!(!parse("broker = off\n", "t").unwrap().broker);
        assert!(parse("broker = on\n", "t").unwrap().broker);
        let e = parse("broker = maybe\n", "t").unwrap_err().to_string();
        assert!(e.contains("t:1") && e.contains("maybe"), "{e}");
    }

    #[test]
    fn publish_port_lists_ports_once_each() {
        let c = parse("publish-port = 3000\npublish-port = 8888, 5173 9229\n", "f").unwrap();
        assert_eq!(c.publish_port, [3000, 8888, 5173, 9229]);
        assert_eq!(
            parse("publish-port=1,65535", "f").unwrap().publish_port,
            [1, 65535]
        );
        assert!(Config::default().publish_port.is_empty());
        assert!(parse(DEFAULT_CONFIG, "default")
            .unwrap()
            .publish_port
            .is_empty());
        // Each refusal is one line naming the file, the line and the value.
        for (text, says) in [
            ("publish-port = 0", "`0` is not a TCP port"),
            ("publish-port = 65536", "`65536` is not a TCP port"),
            ("publish-port = 3000, http", "`http` is not a TCP port"),
            ("publish-port = +80", "`+80` is not a TCP port"),
            ("publish-port = -1", "`-1` is not a TCP port"),
            ("publish-port = 3000:3001", "`3000:3001` is not a TCP port"),
            ("publish-port = 3000,3000", "3000 is listed twice"),
            (
                "publish-port = 3000\n\npublish-port = 8080 3000",
                "3000 is listed twice",
            ),
            ("publish-port", "`publish-port` needs a value"),
            ("publish-port =", "`publish-port` needs a value"),
        ] {
            let e = err_of(text);
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(e.starts_with("/etc/claude-sandbox.conf:"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert!(err_of("publish-port = 3000\n\npublish-port = 3000").contains(":3:"));
        // No environment variable publishes a port.
        let a = apply(Config::default(), &[("CLAUDE_SANDBOX_PUBLISH_PORT", "22")]).unwrap();
        assert!(a.config.publish_port.is_empty());
    }

    #[test]
    fn root_view_max_entries_is_a_bounded_whole_number() {
        assert_eq!(
            Config::default().root_view_max_entries,
            ROOT_VIEW_MAX_ENTRIES
        );
        let c = parse(
            "root-view-max-entries = 50000\n",
            "/etc/claude-sandbox.conf",
        )
        .unwrap();
        assert_eq!(c.root_view_max_entries, 50000);
        let c = parse("root-view-max-entries = 0\n", "/etc/claude-sandbox.conf").unwrap();
        assert_eq!(c.root_view_max_entries, 0);
        for bad in ["", "-1", "10000001", "1e6", "many"] {
            let e = err_of(&format!("root-view-max-entries = {bad}"));
            assert!(
                e.contains("root-view-max-entries") && e.contains(":1:"),
                "{bad}: {e}"
            );
        }
    }
}
