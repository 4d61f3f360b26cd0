//! The one host a brokered request goes to (issue #45): the host the
//! broker decided (the `CONNECT`'s, on the table, whose certificate it
//! verified), never one the session names. A shared front that routes by
//! `Host` (a CDN before several services) would otherwise hand the real
//! credential to whichever backend the session picked. So every request
//! head upstream carries exactly one `Host`, the decided one; the headers
//! some fronts route by instead ([`STEERING`]) are dropped; a request
//! target is sent in origin form (`/path`), an absolute one only when it
//! names the decided host; a `CONNECT` is refused. HTTP/2 is not spoken
//! (both sides offer `http/1.1` only), so there is no `:authority`.

/// Headers a front may route by: dropped from every request, `Host` then
/// written once, as the decided host.
pub(super) const STEERING: &[&str] = &[
    "host",
    "x-forwarded-host",
    "x-host",
    "x-original-host",
    "x-forwarded-server",
    "forwarded",
];

/// Whether the header `name` may steer a front ([`STEERING`]).
pub(super) fn steers(name: &str) -> bool {
    STEERING.iter().any(|s| name.eq_ignore_ascii_case(s))
}

/// The request target of `method` sent to `host`: a path as it is (not
/// one starting `//`), `*` for `OPTIONS`, an absolute `http(s)://` target
/// naming `host` (port 443 or none) as its path; anything else is refused
/// with why.
pub(super) fn origin_target(method: &str, target: &str, host: &str) -> Result<String, String> {
    if method.eq_ignore_ascii_case("CONNECT") {
        return Err(format!(
            "a CONNECT to `{}` inside the connection to {host}",
            shown(target)
        ));
    }
    // `//host/path` is a path to the letter, but a front or library that
    // reads it as a scheme-relative reference would route by its host.
    let path = target.starts_with('/') && !target.starts_with("//");
    if path || (target == "*" && method.eq_ignore_ascii_case("OPTIONS")) {
        return Ok(target.to_string());
    }
    let rest = ["https://", "http://"].iter().find_map(|s| {
        let head = target.get(..s.len())?;
        head.eq_ignore_ascii_case(s).then(|| &target[s.len()..])
    });
    let Some(rest) = rest else {
        return Err(format!(
            "a request target `{}` that is not a path",
            shown(target)
        ));
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let name = authority.strip_suffix(":443").unwrap_or(authority);
    if !name.eq_ignore_ascii_case(host) {
        return Err(format!(
            "a request for `{}` on the connection to {host}",
            shown(authority)
        ));
    }
    Ok(match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    })
}

/// At most 100 characters of `s`, for a log line.
fn shown(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "api.github.com";

    #[test]
    fn a_path_stays_and_an_absolute_target_for_the_host_becomes_its_path() {
        for (method, target, want) in [
            ("GET", "/user?x=1", "/user?x=1"),
            ("OPTIONS", "*", "*"),
            ("GET", "https://api.github.com/user", "/user"),
            ("GET", "HTTPS://API.GitHub.com:443/user", "/user"),
            ("GET", "http://api.github.com", "/"),
            ("GET", "https://api.github.com?q", "/?q"),
        ] {
            assert_eq!(origin_target(method, target, HOST).as_deref(), Ok(want));
        }
    }

    #[test]
    fn a_target_naming_another_host_or_no_path_is_refused() {
        for (method, target) in [
            ("GET", "https://backend.test/user"),
            ("GET", "https://api.github.com.backend.test/user"),
            ("GET", "https://api.github.com@backend.test/user"),
            ("GET", "https://backend.test@api.github.com/user"),
            ("GET", "https://api.github.com:8443/user"),
            ("GET", "https://api.github.com./user"),
            ("GET", "backend.test:443"),
            ("GET", "*"),
            ("GET", "//backend.test/user"),
            ("CONNECT", "backend.test:443"),
            ("connect", "api.github.com:443"),
        ] {
            let e = origin_target(method, target, HOST).expect_err(target);
            assert!(e.contains(HOST) || e.contains("not a path"), "{e}");
        }
    }

    #[test]
    fn every_spelling_of_a_steering_header_is_one() {
        for name in [
            "Host",
            "HOST",
            "host",
            "X-Forwarded-Host",
            "forwarded",
            "X-HOST",
        ] {
            assert!(steers(name), "{name}");
        }
        for name in ["Authorization", "Hostname", "X-Forwarded-For", "Origin"] {
            assert!(!steers(name), "{name}");
        }
    }
}
