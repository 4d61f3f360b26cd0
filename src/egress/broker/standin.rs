//! A stand-in drawn for a real value ([`draw`]): random characters of the
//! value's own shape (`egress::policy::broker::standin`), from the system's
//! random generator. The launch's credentials (`mod.rs`) and Claude Code's
//! login at each refresh (`oauth.rs`) draw theirs here.

use crate::egress::policy::broker::standin;

/// A stand-in for `real`, from the system's random generator (a draw
/// equal to the real value, for a very short one, is drawn again).
pub(super) fn draw(
    provider: &rustls::crypto::CryptoProvider,
    real: &str,
) -> Result<String, String> {
    for _ in 0..16 {
        let mut rnd = vec![0u8; real.len()];
        provider
            .secure_random
            .fill(&mut rnd)
            .map_err(|_| "no random numbers".to_string())?;
        if let Some(s) = standin(real, &rnd) {
            return Ok(s);
        }
    }
    Err(format!(
        "no stand-in differs from a credential of {} characters",
        real.len()
    ))
}
