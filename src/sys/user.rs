//! Who is launching: the caller's ids, login name and home, from the kernel,
//! the user database and `$HOME`.

use std::path::PathBuf;

/// Who is launching.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Login name, from the user database.
    pub user: String,
    /// `$HOME` (else the user database's), canonical.
    pub home: PathBuf,
}

/// Who is launching: uid, gid, login name and home directory.
pub(crate) fn identity() -> Result<Identity, String> {
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    let pw = nix::unistd::User::from_uid(uid).ok().flatten();
    let user = pw.as_ref().map(|p| p.name.clone()).ok_or_else(|| {
        format!(
            "uid {uid} has no entry in the user database; the sandbox needs the real user's name"
        )
    })?;
    // $HOME as the caller has it (tests and tools use a temporary HOME), else the user database.
    let home = match std::env::var_os("HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => h,
        _ => pw.map(|p| p.dir).unwrap_or_default(),
    };
    let home = home.canonicalize().map_err(|e| {
        format!(
            "home directory {} is not usable: {e}; set HOME to an existing directory",
            home.display()
        )
    })?;
    if !home.is_dir() {
        return Err(format!("HOME {} is not a directory", home.display()));
    }
    Ok(Identity {
        uid: uid.as_raw(),
        gid: gid.as_raw(),
        user,
        home,
    })
}
