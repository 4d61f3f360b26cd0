//! Claude Code's login brokered (decision 0017): the real tokens of
//! `~/.claude/.credentials.json` kept here, stand-ins in the sandbox's
//! private copy of the file; a refresh through the token endpoint gets the
//! real refresh token swapped into its body and its answer's new tokens
//! swapped for new stand-ins; at the end the newest real tokens are
//! written back to the host's file (only after a refresh, atomically,
//! never a stand-in).

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;

use super::standin::draw;
use crate::egress::policy::claude_oauth::{
    answer_with, issued, refresh_request, tokens, with_tokens, Fresh, Tokens,
};

/// The login of one launch.
pub(crate) struct Oauth {
    /// The host's credentials file.
    path: PathBuf,
    /// Its real refresh token at launch (the write-back's check that no
    /// one else replaced the login meanwhile).
    launched: String,
    provider: Arc<CryptoProvider>,
    state: Mutex<State>,
}

struct State {
    /// (stand-in, real) access tokens, newest last; each stays usable.
    access: Vec<(String, String)>,
    /// (stand-in, real) of the current refresh token.
    refresh: (String, String),
    /// Every stand-in handed out (none may ever reach the host's file).
    standins: Vec<String>,
    /// Set once a refresh went through: the host's file is to be updated.
    fresh: Option<Fresh>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Oauth {
    /// The login in `path` with stand-ins drawn by `draw`: the broker's
    /// half and the text of the sandbox's copy. `Ok(None)`: no login in it.
    pub(super) fn start(
        path: &Path,
        provider: Arc<CryptoProvider>,
        text: &str,
    ) -> Result<Option<(Oauth, String)>, String> {
        let Some(real) = tokens(text) else {
            return Ok(None);
        };
        let s = Tokens {
            access: draw(&provider, &real.access)?,
            refresh: draw(&provider, &real.refresh)?,
        };
        let inside = with_tokens(text, &s, None).ok_or("it cannot be rewritten")?;
        let o = Oauth {
            path: path.to_path_buf(),
            launched: real.refresh.clone(),
            provider,
            state: Mutex::new(State {
                access: vec![(s.access.clone(), real.access)],
                refresh: (s.refresh.clone(), real.refresh),
                standins: vec![s.access, s.refresh],
                fresh: None,
            }),
        };
        Ok(Some((o, inside)))
    }

    /// The host's credentials file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The real access and refresh tokens of the launch, for `verify`'s
    /// digests (decision 0015, "Visible").
    pub(super) fn launch_reals(&self) -> Vec<String> {
        let st = lock(&self.state);
        vec![st.access[0].1.clone(), self.launched.clone()]
    }

    /// The access tokens as (stand-in, real), for the header swap.
    pub(super) fn access(&self) -> Vec<(String, String)> {
        lock(&self.state).access.clone()
    }

    /// A token request's body: `Some(body)` with the real refresh token in
    /// when it is a refresh with this session's stand-in (its answer is then
    /// to be rewritten); `None`: sent as it is.
    pub(super) fn request(&self, body: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let st = lock(&self.state);
        refresh_request(body, &st.refresh.0, &st.refresh.1)
    }

    /// The answer (status 200) to a refresh this session sent: its new real
    /// tokens kept, new stand-ins in their place.
    pub(super) fn answer(&self, body: &[u8]) -> Result<Vec<u8>, String> {
        let i = issued(body)?;
        let access = draw(&self.provider, &i.access)?;
        let refresh = match &i.refresh {
            Some(r) => Some(draw(&self.provider, r)?),
            None => None,
        };
        let out = answer_with(body, &access, refresh.as_deref())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let mut st = lock(&self.state);
        st.access.push((access.clone(), i.access));
        st.standins.push(access);
        if let (Some(s), Some(r)) = (refresh, i.refresh) {
            st.standins.push(s.clone());
            st.refresh = (s, r);
        }
        st.fresh = Some(Fresh {
            expires_at_ms: i.expires_in.map(|e| now + e * 1000),
            scopes: i
                .scope
                .map(|s| s.split_whitespace().map(str::to_string).collect()),
        });
        Ok(out)
    }

    /// After the session: when a refresh went through, the host's file
    /// gets the newest real tokens (temp file and rename in its directory,
    /// its owner and mode kept). `Ok(false)`: nothing to write. `Err`:
    /// why the file was left as it was.
    pub(crate) fn write_back(&self) -> Result<bool, String> {
        let st = lock(&self.state);
        let Some(fresh) = &st.fresh else {
            return Ok(false);
        };
        let shown = self.path.display();
        let text = crate::sys::files::read_text(&self.path)
            .map_err(|e| format!("cannot read {shown}: {e:?}"))?;
        if tokens(&text).map(|t| t.refresh) != Some(self.launched.clone()) {
            return Err(format!("{shown} holds another login than at launch (changed outside the sandbox meanwhile); it is left as it is and the session's refreshed login is dropped"));
        }
        let newest = Tokens {
            access: st.access.last().map(|a| a.1.clone()).unwrap_or_default(),
            refresh: st.refresh.1.clone(),
        };
        let out = with_tokens(&text, &newest, Some(fresh))
            .ok_or_else(|| format!("cannot rewrite {shown}"))?;
        if st.standins.iter().any(|s| out.contains(s.as_str())) {
            return Err(format!("refusing to write a stand-in into {shown}"));
        }
        replace_file(&self.path, out.as_bytes()).map_err(|e| format!("{shown}: {e}"))?;
        Ok(true)
    }
}

/// Replace `path` by `data` atomically: a new file beside it with its
/// owner and mode, synced, renamed over it.
fn replace_file(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // The directory is the session's to write (~/.claude): a name it
    // cannot guess, never followed, never an existing file.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let tmp = path.with_file_name(format!(
        ".{name}.claude-sandbox-{}-{nanos:x}",
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&tmp)?;
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()))?;
        }
        f.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    let r = write();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}
