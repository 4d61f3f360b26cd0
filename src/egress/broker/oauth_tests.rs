//! Claude Code's login through the broker (decision 0017): the refresh's
//! body and answer rewritten on the token endpoint only, the hostile
//! requests a session can send there, and the write-back.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::mpsc::channel;
use std::sync::Arc;

use super::http::{LoginHook, Requests};
use super::oauth::Oauth;
use super::responses::Responses;
use crate::egress::policy::broker::{Swap, GITHUB};
use crate::egress::policy::claude_oauth::tokens;

const ACCESS: &str = "sk-ant-oat01-REALACCESSREALACCESSREALACCESS";
const REFRESH: &str = "sk-ant-ort01-REALREFRESHREALREFRESHREALREFRESH";
const NEW_ACCESS: &str = "sk-ant-oat01-NEWACCESSNEWACCESSNEWACCESS0";
const NEW_REFRESH: &str = "sk-ant-ort01-NEWREFRESHNEWREFRESHNEWREFRESH0";

fn file_text() -> String {
    format!(
        r#"{{"claudeAiOauth":{{"accessToken":"{ACCESS}","refreshToken":"{REFRESH}","expiresAt":1,"scopes":["user:inference"],"subscriptionType":"max"}}}}"#
    )
}

struct Login {
    dir: PathBuf,
    oauth: Oauth,
    /// The sandbox's copy.
    inside: String,
}

fn login(name: &str) -> Login {
    let dir = std::env::temp_dir().join(format!("csb-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(".credentials.json");
    std::fs::write(&path, file_text()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (oauth, inside) = Oauth::start(&path, provider, &file_text())
        .unwrap()
        .unwrap();
    Login { dir, oauth, inside }
}

impl Drop for Login {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One connection to the token endpoint's host: `requests` from the
/// client, then `answer` from the server; what went up, what came down
/// (or why the connection ended), and the swaps logged.
fn exchange(
    l: &Login,
    requests: &str,
    answer: &str,
) -> (Result<String, String>, Result<String, String>, Vec<String>) {
    let github = [Swap {
        credential: GITHUB,
        standin: "gho_STANDIN",
        real: "gho_REALREAL",
    }];
    let (tx, rx) = channel();
    let mut req = Requests::new(&github, "platform.claude.com").with_login(LoginHook {
        login: &l.oauth,
        endpoint: Some(("/v1/oauth/token", tx)),
    });
    let mut up = Vec::new();
    let mut seen = Vec::new();
    let mut up_r = Ok(());
    for piece in requests.as_bytes().chunks(5) {
        up_r = req.feed(piece, &mut up, &mut |m, c| seen.push(format!("{m} {c}")));
        if up_r.is_err() {
            break;
        }
    }
    let mut resp = Responses::new(&l.oauth, rx);
    let mut down = Vec::new();
    let mut down_r = Ok(());
    for piece in answer.as_bytes().chunks(7) {
        down_r = resp.feed(piece, &mut down);
        if down_r.is_err() {
            break;
        }
    }
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (up_r.map(|_| text(up)), down_r.map(|_| text(down)), seen)
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: platform.claude.com\r\nAccept-Encoding: gzip, br\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn standins(l: &Login) -> (String, String) {
    let t = tokens(&l.inside).unwrap();
    (t.access, t.refresh)
}

#[test]
fn a_refresh_gets_the_real_token_in_and_standins_out() {
    let l = login("refresh");
    let (access, refresh) = standins(&l);
    assert!(access.starts_with("sk-ant-oat01-") && access.len() == ACCESS.len());
    assert!(refresh.starts_with("sk-ant-ort01-") && refresh != REFRESH);
    assert!(!l.inside.contains("REAL") && l.inside.contains("subscriptionType"));
    let body =
        format!(r#"{{"grant_type":"refresh_token","refresh_token":"{refresh}","client_id":"c"}}"#);
    let requests = format!(
        "{}GET /host HTTP/1.1\r\nAuthorization: Bearer {access}\r\n\r\n",
        post("/v1/oauth/token", &body)
    );
    let json = format!(
        r#"{{"access_token":"{NEW_ACCESS}","refresh_token":"{NEW_REFRESH}","expires_in":28800,"scope":"user:inference user:profile"}}"#
    );
    // Chunked, in two chunks, with a trailer; then the second response.
    let (a, b) = json.split_at(10);
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        a.len(),
        b.len()
    );
    let (up, down, seen) = exchange(&l, &requests, &answer);
    let (up, down) = (up.unwrap(), down.unwrap());
    let sent =
        format!(r#"{{"grant_type":"refresh_token","refresh_token":"{REFRESH}","client_id":"c"}}"#);
    assert!(
        up.contains(&format!(
            "Content-Length: {}\r\nAccept-Encoding: identity\r\n\r\n{sent}GET /host",
            sent.len()
        )),
        "{up}"
    );
    assert!(!up.contains("gzip") && !up.contains(&refresh), "{up}");
    // The access stand-in in the header: the real one.
    assert!(
        up.contains(&format!("Authorization: Bearer {ACCESS}")),
        "{up}"
    );
    assert_eq!(seen, ["POST claude-oauth", "GET claude-oauth"]);
    // Down: stand-ins, framed by a length; the next response untouched.
    assert!(!down.contains("NEW") && !down.contains("chunked"), "{down}");
    let (head, rest) = down.split_once("\r\n\r\n").unwrap();
    let (got, next) = rest.split_at(rest.find("HTTP/1.1").unwrap());
    assert!(
        head.contains(&format!("Content-Length: {}", got.len())),
        "{down}"
    );
    assert_eq!(next, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let v: serde_json::Value = serde_json::from_str(got).unwrap();
    let new_access = v["access_token"].as_str().unwrap().to_string();
    let new_refresh = v["refresh_token"].as_str().unwrap().to_string();
    assert!(new_access.starts_with("sk-ant-oat01-") && new_access != access);
    assert!(new_refresh.starts_with("sk-ant-ort01-") && new_refresh != refresh);
    assert_eq!(v["expires_in"], 28800);
    // The new stand-ins work from now on, the old access one still does.
    let swaps = l.oauth.access();
    assert!(swaps.contains(&(new_access.clone(), NEW_ACCESS.into())));
    assert!(swaps.contains(&(access.clone(), ACCESS.into())));
    let again = format!(r#"{{"grant_type":"refresh_token","refresh_token":"{new_refresh}"}}"#);
    assert!(l
        .oauth
        .request(again.as_bytes())
        .unwrap()
        .unwrap()
        .windows(NEW_REFRESH.len())
        .any(|w| w == NEW_REFRESH.as_bytes()));
    // The old refresh stand-in is worth nothing now.
    let old = format!(r#"{{"grant_type":"refresh_token","refresh_token":"{refresh}"}}"#);
    assert_eq!(l.oauth.request(old.as_bytes()), Ok(None));
    // The host's file: the new real tokens, the mode kept, no stand-in.
    assert_eq!(l.oauth.write_back(), Ok(true));
    let path = l.dir.join(".credentials.json");
    let host = std::fs::read_to_string(&path).unwrap();
    let t = tokens(&host).unwrap();
    assert_eq!(
        (t.access.as_str(), t.refresh.as_str()),
        (NEW_ACCESS, NEW_REFRESH)
    );
    assert!(
        host.contains(r#""scopes":["user:inference","user:profile"],"subscriptionType":"max""#),
        "{host}"
    );
    assert!(!host.contains(&new_access) && !host.contains(&access));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        std::fs::read_dir(&l.dir).unwrap().count(),
        1,
        "no temporary file left"
    );
}

#[test]
fn hostile_token_requests_stay_standins_or_end_the_connection() {
    let l = login("hostile");
    let (access, refresh) = standins(&l);
    let real_answer =
        format!(r#"{{"access_token":"{NEW_ACCESS}","refresh_token":"{NEW_REFRESH}"}}"#);
    let ok = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{real_answer}",
        real_answer.len()
    );
    // The refresh stand-in in another field, the access stand-in or
    // another credential's as the refresh token, another grant, the
    // revocation path: sent as they are, the answer not touched.
    for (path, body) in [
        (
            "/v1/oauth/token",
            format!(r#"{{"grant_type":"refresh_token","refresh_token":"x","scope":"{refresh}"}}"#),
        ),
        (
            "/v1/oauth/token",
            format!(r#"{{"grant_type":"refresh_token","refresh_token":"{access}"}}"#),
        ),
        (
            "/v1/oauth/token",
            r#"{"grant_type":"refresh_token","refresh_token":"gho_STANDIN"}"#.to_string(),
        ),
        (
            "/v1/oauth/token",
            format!(r#"{{"grant_type":"authorization_code","code":"{refresh}"}}"#),
        ),
        (
            "/v1/oauth/token/revoke",
            format!(r#"{{"token":"{refresh}"}}"#),
        ),
    ] {
        let (up, down, seen) = exchange(&l, &post(path, &body), &ok);
        let up = up.unwrap();
        assert!(up.ends_with(&body) && !up.contains("REAL"), "{up}");
        assert_eq!(down.unwrap(), ok, "{body}");
        assert!(seen.is_empty(), "{seen:?}");
    }
    // A query does not dodge the rewriting.
    let body = format!(r#"{{"grant_type":"refresh_token","refresh_token":"{refresh}"}}"#);
    let (up, down, _) = exchange(&l, &post("/v1/oauth/token?x=1", &body), &ok);
    assert!(up.unwrap().contains(REFRESH));
    assert!(!down.unwrap().contains("NEW"));
    assert_eq!(l.oauth.access().len(), 2, "that refresh went through");
}

#[test]
fn token_requests_and_answers_of_unclear_shape_end_the_connection() {
    let l = login("unclear");
    let (_, refresh) = standins(&l);
    let body = format!(r#"{{"grant_type":"refresh_token","refresh_token":"{refresh}"}}"#);
    for bad in [
        format!("POST /v1/oauth/token HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n", body.len()),
        "POST /v1/oauth/token HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
        "GET /v1/oauth/token HTTP/1.1\r\n\r\n".to_string(),
        post("/v1/oauth/token", &format!("grant_type=refresh_token&refresh_token={refresh}")),
        format!("POST /v1/oauth/token HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n{body}"),
    ] {
        let (up, _, _) = exchange(&l, &bad, "");
        let up = up.err().unwrap_or_else(|| panic!("sent: {bad}"));
        assert!(up.contains("token request"), "{up}");
    }
    // A refresh's answer compressed, or without a length, or no JSON.
    let json = format!(r#"{{"access_token":"{NEW_ACCESS}"}}"#);
    for answer in [
        format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        ),
        format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{json}"),
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_string(),
    ] {
        let (_, down, _) = exchange(&l, &post("/v1/oauth/token", &body), &answer);
        assert!(down.is_err(), "{answer}");
    }
    // An error answer passes as it is and changes nothing.
    let err = "HTTP/1.1 400 Bad Request\r\nContent-Length: 25\r\n\r\n{\"error\":\"invalid_grant\"}";
    let (_, down, _) = exchange(&l, &post("/v1/oauth/token", &body), err);
    assert_eq!(down.unwrap(), err);
    assert_eq!(l.oauth.write_back(), Ok(false), "no refresh went through");
    assert_eq!(
        std::fs::read_to_string(l.dir.join(".credentials.json")).unwrap(),
        file_text()
    );
}

#[test]
fn a_login_changed_outside_meanwhile_is_not_overwritten() {
    let l = login("changed");
    let (_, refresh) = standins(&l);
    let body = format!(r#"{{"grant_type":"refresh_token","refresh_token":"{refresh}"}}"#);
    let json = format!(r#"{{"access_token":"{NEW_ACCESS}","refresh_token":"{NEW_REFRESH}"}}"#);
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    );
    let (_, down, _) = exchange(&l, &post("/v1/oauth/token", &body), &answer);
    assert!(!down.unwrap().contains("NEW"));
    let path = l.dir.join(".credentials.json");
    let other = file_text().replace(REFRESH, "sk-ant-ort01-OTHER");
    std::fs::write(&path, &other).unwrap();
    let e = l.oauth.write_back().unwrap_err();
    assert!(e.contains("another login"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), other);
}
