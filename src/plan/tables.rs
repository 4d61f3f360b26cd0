//! The filesystem view's tables (SPEC §4.1–4.3, §4.8): the paths under
//! `$HOME` and of the system that the plan binds back, keeps private,
//! masks or empties. Data only: the gatherer's questions (`facts.rs`), the
//! mounts (`mounts.rs`), the limits (`limits.rs`) and, through `plan`'s
//! exports, the tripwire, the installer and the battery read them.

/// Claude Code's own state under `$HOME`, bound back read-write when present (§4.2).
pub(crate) const HOME_RW: &[&str] = &[".claude", ".claude.json"];

/// Directories every tool both writes and runs code from (completions,
/// systemd and D-Bus units, editor plugins, tool installs). Inside they are
/// the sandbox's own persistent directories, [`PRIVATE_STATE`]`/NAME` under
/// `$HOME` on the host, never the user's (§4.8): nothing written there is
/// read by a host tool, and nothing of the host's shows inside.
pub(crate) const HOME_PRIVATE: &[(&str, &str)] = &[(".cache", "cache"), (".local/share", "share")];

/// Where the private directories live on the host, relative to `$HOME`
/// (hidden from the sandbox like the rest of `$HOME`).
pub(crate) const PRIVATE_STATE: &str = ".local/state/claude-sandbox";

/// Forge token directories, bound back read-only unless `no-forge`: `gh`
/// aliases and extensions written there would run on the host.
pub(crate) const HOME_FORGE: &[&str] = &[".config/gh", ".config/glab-cli"];

/// The forges' token files under `$HOME`, each in its directory of
/// [`HOME_FORGE`]: what the credential broker reads at launch (and binds
/// its stand-in copies over), and what doctor looks for to tell which
/// credentials a session would hold.
pub(crate) const FORGE_FILES: ForgeFiles = ForgeFiles {
    gh: ".config/gh/hosts.yml",
    glab: ".config/glab-cli/config.yml",
};

/// [`FORGE_FILES`]: one forge tool's token file each.
pub(crate) struct ForgeFiles {
    /// `gh`'s `hosts.yml` (every host's `oauth_token`).
    pub(crate) gh: &'static str,
    /// `glab`'s `config.yml` (every host's `token`).
    pub(crate) glab: &'static str,
}

/// Claude Code's own runtime writes under `.local/share`, kept ephemeral.
pub(crate) const HOME_SHARE_MASKED: &[&str] = &[".local/share/applications", ".local/share/claude"];

/// Under a bound-back `~/.claude`, masked by a tmpfs: `~/.claude/local` is
/// where Claude Code's old npm-local install lived, and its launcher alias
/// (`alias claude=~/.claude/local/claude`, still in many shell startup
/// files) runs whatever is there, unsandboxed (issue #24). A session
/// writes there into the tmpfs, which goes with it. The first launch
/// leaves the mount point, an empty directory, in the host's `~/.claude`.
pub(crate) const HOME_CLAUDE_MASKED: &[&str] = &[".claude/local"];
/// The masked entries of [`HOME_SHARE_MASKED`] Claude Code writes to: a
/// tmpfs sized like `/tmp` (`tmpfs-size`), not like a mask.
pub(crate) const HOME_SCRATCH: &[&str] = &[".local/share/claude"];

/// Where tools put temporary files that outlive a reboot. Inside it is
/// the host's, read-only like the rest of `/`, except where a root
/// launch's view masks it (whole, or with `/var`): there it is a tmpfs
/// sized like `/tmp` (`tmpfs-size`), not like a mask (issue #45), so a
/// tool writing more than a mask holds there does not fail with ENOSPC.
pub(crate) const VAR_TMP: &str = "/var/tmp";

/// uv's binaries: bound back read-only, so nothing inside can trojan a
/// program the user later runs outside the sandbox.
pub(crate) const HOME_RO: &[&str] = &[".local/bin/uv", ".local/bin/uvx"];

/// Files under `$HOME` that always read as empty inside.
pub(crate) const HOME_NULLED: &[&str] = &[".netrc", ".Xauthority", ".ICEauthority"];

/// System files that always read as empty inside, where they exist.
pub(crate) const SYSTEM_NULLED: &[&str] = &["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];

/// The memory files of the sandbox's PID 1 in a fresh `/proc`, masked
/// with the empty file (which bubblewrap's `nodev` bind makes unopenable:
/// EACCES): PID 1 is bubblewrap's init, with the session's uid and outside
/// the seccomp filter, so its memory written from inside would run code
/// free of it (the filter refuses `ptrace` and `process_vm_writev` of PID 1).
pub(crate) const PID1_MEM: &[&str] = &["/proc/1/mem", "/proc/1/task/1/mem"];

/// Directories replaced by an empty tmpfs, where they exist as directories:
/// every socket, secret and per-user runtime directory under `/run` is gone,
/// including those a daemon creates after the launch (§4.1, issue #13).
pub(crate) const SYSTEM_TMPFS: &[&str] = &["/run", "/var/run"];

/// What a session needs from `/run`, bound back read-only where it exists:
/// systemd-resolved's files and lookup socket (name resolution). The target
/// of `/etc/resolv.conf`, when it points into `/run`, is bound back too
/// ([`super::Facts::run_keep`]).
pub(crate) const RUN_KEEP: &[&str] = &["/run/systemd/resolve"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_forge_file_is_in_its_forge_directory() {
        for (file, dir) in [
            (FORGE_FILES.gh, HOME_FORGE[0]),
            (FORGE_FILES.glab, HOME_FORGE[1]),
        ] {
            let rest = file.strip_prefix(dir).and_then(|r| r.strip_prefix('/'));
            assert!(
                rest.is_some_and(|r| !r.is_empty() && !r.contains('/')),
                "{file} {dir}"
            );
        }
    }
}
