//! What a session may write into a repository's git config (issue #44,
//! docs/decisions/0026): an allow-list of the keys, and of their values'
//! forms, that git itself writes in ordinary work — clone, init, remote,
//! branch tracking, push `-u`, submodules, sparse checkout, `git lfs
//! install`, identity. Everything else — a command, a helper, a proxy, TLS
//! verification, a CA or cookie file, extra headers, a URL rewrite, an
//! include, a program picked by name — is *unlisted*: the creation guard
//! does not let it into a git directory and the tripwire reports it.
//!
//! Pure: names as `git config --list` spells them (section and key
//! lower-case, subsection as written), values as git reads them. Exports
//! [`listed`], [`split_name`].

/// `section[.subsection].key` split as git splits a name: the section up to
/// the first dot, the key after the last.
pub(crate) fn split_name(name: &[u8]) -> (&[u8], Option<&[u8]>, &[u8]) {
    let first = name.iter().position(|&b| b == b'.');
    let last = name.iter().rposition(|&b| b == b'.');
    match (first, last) {
        (Some(f), Some(l)) if f < l => (&name[..f], Some(&name[f + 1..l]), &name[l + 1..]),
        (Some(f), _) => (&name[..f], None, &name[f + 1..]),
        _ => (&name[..0], None, name),
    }
}

/// Which subsection a row takes.
#[derive(Debug, Clone, Copy)]
enum Sub {
    /// `section.key` only.
    No,
    /// `section.<sub>.key` only.
    Yes,
}

/// The values a row takes.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// Any value: the key chooses no program, file or endpoint.
    Any,
    /// A plain URL git fetches from or pushes to itself ([`plain_url`]).
    Url,
    /// An `http(s)` URL only (git-lfs's endpoints).
    HttpUrl,
    /// One of these, compared exactly.
    OneOf(&'static [&'static str]),
}

/// One row: section, subsection rule, the keys (lower-case), their values.
type Row = (&'static str, Sub, &'static [&'static str], Value);

use Sub::{No, Yes};
use Value::{Any, HttpUrl, OneOf, Url};

/// The keys git writes in ordinary work, and nothing that picks a program,
/// a file to read, or where and how host git connects
/// (docs/decisions/0026 has the same table in prose, with the reasons).
const LISTED: &[Row] = &[
    (
        "core",
        No,
        &[
            "repositoryformatversion",
            "filemode",
            "bare",
            "logallrefupdates",
            "ignorecase",
            "precomposeunicode",
            "symlinks",
            "sparsecheckout",
            "sparsecheckoutcone",
            "autocrlf",
            "eol",
            "safecrlf",
            "quotepath",
            "longpaths",
            "untrackedcache",
            "splitindex",
            "commitgraph",
            "multipackindex",
            "preloadindex",
            "checkstat",
            "trustctime",
            "abbrev",
        ],
        Any,
    ),
    (
        "extensions",
        No,
        &[
            "worktreeconfig",
            "objectformat",
            "refstorage",
            "partialclone",
            "preciousobjects",
            "noop",
        ],
        Any,
    ),
    ("index", No, &["sparse", "version"], Any),
    (
        "user",
        No,
        &["name", "email", "useconfigonly", "signingkey"],
        Any,
    ),
    ("author", No, &["name", "email"], Any),
    ("committer", No, &["name", "email"], Any),
    ("init", No, &["defaultbranch"], Any),
    ("remote", Yes, &["url", "pushurl"], Url),
    (
        "remote",
        Yes,
        &[
            "fetch",
            "push",
            "tagopt",
            "prune",
            "prunetags",
            "mirror",
            "skipdefaultupdate",
            "skipfetchall",
            "promisor",
            "partialclonefilter",
            "followremotehead",
            "gh-resolved",
        ],
        Any,
    ),
    ("remote", No, &["pushdefault"], Any),
    (
        "branch",
        Yes,
        &["remote", "pushremote", "merge", "rebase", "description"],
        Any,
    ),
    (
        "branch",
        No,
        &["autosetupmerge", "autosetuprebase", "sort"],
        Any,
    ),
    ("submodule", Yes, &["url"], Url),
    (
        "submodule",
        Yes,
        &[
            "path",
            "active",
            "branch",
            "shallow",
            "fetchrecursesubmodules",
            "ignore",
        ],
        Any,
    ),
    (
        "submodule",
        Yes,
        &["update"],
        OneOf(&["checkout", "rebase", "merge", "none"]),
    ),
    ("submodule", No, &["active", "recurse", "fetchjobs"], Any),
    ("pull", No, &["rebase", "ff"], Any),
    (
        "push",
        No,
        &[
            "default",
            "autosetupremote",
            "followtags",
            "recursesubmodules",
            "useforceifincludes",
            "negotiate",
        ],
        Any,
    ),
    (
        "fetch",
        No,
        &[
            "prune",
            "prunetags",
            "recursesubmodules",
            "writecommitgraph",
            "parallel",
            "showforcedupdates",
            "fsckobjects",
            "output",
            "negotiationalgorithm",
            "unpacklimit",
            "all",
        ],
        Any,
    ),
    (
        "gc",
        No,
        &[
            "auto",
            "autodetach",
            "autopacklimit",
            "packrefs",
            "pruneexpire",
            "worktreepruneexpire",
            "reflogexpire",
            "reflogexpireunreachable",
            "aggressivedepth",
            "aggressivewindow",
            "writecommitgraph",
            "bigpackthreshold",
            "cruftpacks",
            "logexpiry",
            "rerereresolved",
            "rerereunresolved",
        ],
        Any,
    ),
    ("maintenance", No, &["auto", "strategy"], Any),
    ("maintenance", Yes, &["enabled", "schedule", "auto"], Any),
    ("rerere", No, &["enabled", "autoupdate"], Any),
    (
        "rebase",
        No,
        &["autostash", "autosquash", "updaterefs"],
        Any,
    ),
    ("merge", No, &["conflictstyle", "ff"], Any),
    ("diff", No, &["renames", "algorithm"], Any),
    ("status", No, &["showuntrackedfiles"], Any),
    ("lfs", No, &["url", "pushurl"], HttpUrl),
    ("lfs", No, &["repositoryformatversion", "locksverify"], Any),
    ("lfs", Yes, &["access", "locksverify"], Any),
    // Exactly what `git lfs install` writes: git-lfs, from the user's own
    // PATH, with fixed arguments (docs/decisions/0026).
    ("filter", Yes, &["clean"], OneOf(&["git-lfs clean -- %f"])),
    ("filter", Yes, &["smudge"], OneOf(&["git-lfs smudge -- %f"])),
    (
        "filter",
        Yes,
        &["process"],
        OneOf(&["git-lfs filter-process"]),
    ),
    ("filter", Yes, &["required"], OneOf(&["true"])),
];

/// Whether `name = value` (`None`: a bare key) is one git writes in
/// ordinary work, in a form that picks no program, file or endpoint.
pub(crate) fn listed(name: &[u8], value: Option<&[u8]>) -> bool {
    let (section, sub, key) = split_name(name);
    // `filter.lfs.*` is the one driver listed, and only under that name.
    if section == b"filter" && sub != Some(b"lfs".as_slice()) {
        return false;
    }
    LISTED.iter().any(|(s, rule, keys, form)| {
        section == s.as_bytes()
            && matches!((rule, sub), (Sub::No, None) | (Sub::Yes, Some(_)))
            && keys.iter().any(|k| key == k.as_bytes())
            && value_fits(*form, value)
    })
}

fn value_fits(form: Value, value: Option<&[u8]>) -> bool {
    match (form, value) {
        (Value::Any, _) => true,
        (Value::OneOf(vals), Some(v)) => vals.iter().any(|x| v == x.as_bytes()),
        (Value::OneOf(vals), None) => vals.contains(&"true"),
        (Value::Url, Some(v)) => plain_url(v),
        (Value::HttpUrl, Some(v)) => {
            plain_url(v) && (v.starts_with(b"https://") || v.starts_with(b"http://"))
        }
        (Value::Url | Value::HttpUrl, None) => false,
    }
}

/// Schemes git speaks itself; any other `scheme://` runs the helper
/// `git-remote-<scheme>`.
const SCHEMES: &[&[u8]] = &[
    b"https://",
    b"http://",
    b"ssh://",
    b"git://",
    b"git+ssh://",
    b"ssh+git://",
    b"file://",
];

/// A URL git fetches from with its own transports: one of [`SCHEMES`], an
/// scp-like `[user@]host:path`, or a local path. Never a `<helper>::`
/// address (`ext::` runs a command), an unknown `scheme://` (runs
/// `git-remote-<scheme>`), a leading `-` (read as an option), or a
/// control character.
fn plain_url(v: &[u8]) -> bool {
    if v.is_empty()
        || v.starts_with(b"-")
        || v.iter().any(|b| b.is_ascii_control())
        || v.windows(2).any(|w| w == b"::")
    {
        return false;
    }
    let lower = v.to_ascii_lowercase();
    if let Some(i) = lower.windows(3).position(|w| w == b"://") {
        let scheme = &lower[..i + 3];
        return SCHEMES.contains(&scheme) && i + 3 < lower.len();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str, value: &str) -> bool {
        listed(name.as_bytes(), Some(value.as_bytes()))
    }

    #[test]
    fn what_git_writes_in_ordinary_work_is_listed() {
        for (n, v) in [
            ("core.repositoryformatversion", "0"),
            ("core.filemode", "true"),
            ("core.bare", "false"),
            ("core.logallrefupdates", "true"),
            ("core.sparsecheckout", "true"),
            ("core.sparsecheckoutcone", "true"),
            ("extensions.worktreeconfig", "true"),
            ("extensions.partialclone", "origin"),
            ("user.email", "dev@example.com"),
            ("user.name", "Dev"),
            ("remote.origin.url", "https://github.com/o/r.git"),
            ("remote.upstream.url", "git@github.com:o/r.git"),
            ("remote.local.url", "../bare.git"),
            ("remote.abs.url", "/srv/repos/r.git"),
            ("remote.f.url", "file:///srv/r.git"),
            ("remote.s.pushurl", "ssh://git@host:2222/r.git"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("remote.origin.promisor", "true"),
            ("remote.origin.partialclonefilter", "blob:none"),
            ("remote.Up Stream.gh-resolved", "base"),
            ("branch.feat.remote", "origin"),
            ("branch.feat.merge", "refs/heads/feat"),
            ("branch.Feat/X.rebase", "true"),
            ("submodule.lib.url", "https://github.com/o/lib"),
            ("submodule.lib.active", "true"),
            ("submodule.lib.update", "rebase"),
            ("submodule.active", "."),
            ("pull.rebase", "false"),
            ("push.autosetupremote", "true"),
            ("fetch.prune", "true"),
            ("init.defaultbranch", "main"),
            ("gc.auto", "0"),
            ("maintenance.strategy", "incremental"),
            ("maintenance.gc.enabled", "false"),
            ("rerere.enabled", "true"),
            ("lfs.repositoryformatversion", "0"),
            ("lfs.https://github.com/o/r.git/info/lfs.access", "basic"),
            ("lfs.url", "https://lfs.example.com/r"),
            ("filter.lfs.clean", "git-lfs clean -- %f"),
            ("filter.lfs.smudge", "git-lfs smudge -- %f"),
            ("filter.lfs.process", "git-lfs filter-process"),
            ("filter.lfs.required", "true"),
        ] {
            assert!(ok(n, v), "{n} = {v} must be listed");
        }
        assert!(listed(b"core.bare", None), "a bare key");
        assert!(listed(b"filter.lfs.required", None), "bare true");
    }

    #[test]
    fn what_steers_host_git_is_not_listed() {
        for (n, v) in [
            // Transport: where and how host git connects, with the user's
            // credential helper answering.
            ("http.proxy", "http://127.0.0.1:8080"),
            ("http.sslverify", "false"),
            ("http.https://github.com/.sslverify", "false"),
            ("http.https://github.com/.proxy", "http://x"),
            ("http.sslcainfo", "/ws/ca.pem"),
            ("http.sslcapath", "/ws"),
            ("http.cookiefile", "/ws/c"),
            ("http.extraheader", "Authorization: x"),
            ("http.emptyauth", "true"),
            ("https.proxy", "http://x"),
            ("remote.origin.proxy", "http://x"),
            ("remote.origin.proxyauthmethod", "basic"),
            ("url.https://evil/.insteadof", "https://github.com/"),
            ("url.https://evil/.pushinsteadof", "https://github.com/"),
            ("credential.helper", "store"),
            ("credential.https://github.com.helper", "x"),
            ("credential.usehttppath", "true"),
            ("fetch.bundleuri", "https://evil/b"),
            ("remote.origin.url", "ext::sh -c x"),
            ("remote.origin.url", "EXT::sh -c x"),
            ("remote.origin.url", "fd::3"),
            ("remote.origin.url", "persistent-https://h/r"),
            ("remote.origin.url", "evil://h/r"),
            ("remote.origin.url", "-oProxyCommand=x"),
            ("remote.origin.url", "https://h/r\nx"),
            ("remote.origin.pushurl", "gcrypt::https://h/r"),
            ("submodule.s.url", "ext::sh -c x"),
            ("lfs.url", "file:///ws/lfs"),
            ("lfs.url", "ssh://h/r"),
            // Programs and more configuration.
            ("core.fsmonitor", "x"),
            ("core.hookspath", ".husky/_"),
            ("core.sshcommand", "x"),
            ("core.gitproxy", "x"),
            ("core.askpass", "x"),
            ("core.pager", "x"),
            ("core.editor", "x"),
            ("core.worktree", "../.."),
            ("core.excludesfile", "/etc/shadow"),
            ("core.attributesfile", "x"),
            ("core.sharedrepository", "0777"),
            ("include.path", "x"),
            ("includeif.gitdir:/.path", "x"),
            ("alias.st", "status"),
            ("pager.log", "x"),
            ("filter.d.clean", "x"),
            ("filter.lfs.clean", "git-lfs clean -- %f; x"),
            ("filter.lfs.smudge", "sh -c x"),
            ("filter.lfsx.clean", "git-lfs clean -- %f"),
            ("diff.external", "x"),
            ("diff.d.textconv", "x"),
            ("merge.d.driver", "x"),
            ("gpg.program", "x"),
            ("commit.gpgsign", "true"),
            ("gc.recentobjectshook", "x"),
            ("uploadpack.packobjectshook", "x"),
            ("remote.o.uploadpack", "x"),
            ("remote.o.receivepack", "x"),
            ("remote.o.vcs", "x"),
            ("protocol.allow", "always"),
            ("submodule.s.update", "!x"),
            ("submodule.s.update", "  !x"),
            ("hook.h.command", "x"),
            ("init.templatedir", "/ws/t"),
            ("branch.b.mergeoptions", "-s evil"),
            ("pull.twohead", "evil"),
            ("push.gpgsign", "true"),
            ("sequence.editor", "x"),
            ("safe.directory", "*"),
        ] {
            assert!(!ok(n, v), "{n} = {v} must not be listed");
        }
        assert!(!listed(b"remote.origin.url", None), "a bare url key");
    }

    #[test]
    fn the_subsection_rule_holds() {
        assert!(!ok("user.x.email", "a"), "user takes no subsection");
        assert!(!ok("remote.url", "https://h/r"), "a url needs a remote");
        assert!(!ok("branch.merge", "x"), "branch keys need a branch");
        assert!(ok("branch.sort", "-committerdate"));
        assert!(!ok("core.x.filemode", "true"));
    }

    #[test]
    fn names_split_as_git_splits_them() {
        assert_eq!(split_name(b"a.b"), (&b"a"[..], None, &b"b"[..]));
        assert_eq!(
            split_name(b"a.x.y.b"),
            (&b"a"[..], Some(&b"x.y"[..]), &b"b"[..])
        );
        assert_eq!(split_name(b"nodot"), (&b""[..], None, &b"nodot"[..]));
    }
}
