//! Claude Code's own login brokered (issue #25, decision 0017), the pure
//! half: the shape of `~/.claude/.credentials.json`, its token endpoint,
//! and the JSON of a refresh request and of the endpoint's answer. The
//! runtime (`egress::broker::oauth`) keeps the real tokens and calls
//! these; nothing here holds a value.

use serde_json::Value;

/// The credential's name in the table and the log.
pub(crate) const CLAUDE_OAUTH: &str = "claude-oauth";

/// The credentials file, under `$HOME` (the plaintext store of Claude
/// Code on Linux; its `claudeAiOauth` holds the login).
pub(crate) const CREDENTIALS_REL: &str = ".claude/.credentials.json";

/// Where Claude Code refreshes its login (its `TOKEN_URL`,
/// `https://platform.claude.com/v1/oauth/token`): the only place a body
/// or a response is ever rewritten.
pub(crate) const TOKEN_ENDPOINTS: &[(&str, &str)] = &[("platform.claude.com", "/v1/oauth/token")];

/// The longest token request or answer body handled (both are a few
/// hundred bytes; anything longer is refused).
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// The token endpoint's path on `host`, if it has one.
pub(crate) fn token_path(host: &str) -> Option<&'static str> {
    TOKEN_ENDPOINTS
        .iter()
        .find(|(h, _)| *h == host)
        .map(|(_, p)| *p)
}

/// Whether a request target (`/v1/oauth/token?x`) names `path`: the query
/// is not part of the path (a query must not dodge the rewriting).
pub(crate) fn is_path(target: &str, path: &str) -> bool {
    target.split(['?', '#']).next() == Some(path)
}

/// The login's two tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub(crate) access: String,
    pub(crate) refresh: String,
}

/// What a refresh brought besides the tokens, for the host's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fresh {
    /// Milliseconds since the epoch, as Claude Code writes `expiresAt`.
    pub(crate) expires_at_ms: Option<u64>,
    /// The granted scopes (the answer's `scope`, split at spaces).
    pub(crate) scopes: Option<Vec<String>>,
}

/// The tokens of a credentials file: `claudeAiOauth`'s `accessToken` and
/// `refreshToken`, both non-empty strings, or `None`.
pub(crate) fn tokens(text: &str) -> Option<Tokens> {
    let v: Value = serde_json::from_str(text).ok()?;
    let o = v.get("claudeAiOauth")?;
    let s = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Some(Tokens {
        access: s("accessToken")?,
        refresh: s("refreshToken")?,
    })
}

/// `text` (a credentials file) with `claudeAiOauth`'s tokens set to `t`
/// and, when given, `expiresAt` and `scopes`; everything else as it was.
pub(crate) fn with_tokens(text: &str, t: &Tokens, fresh: Option<&Fresh>) -> Option<String> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    let o = v.get_mut("claudeAiOauth")?.as_object_mut()?;
    o.insert("accessToken".into(), t.access.clone().into());
    o.insert("refreshToken".into(), t.refresh.clone().into());
    if let Some(f) = fresh {
        if let Some(e) = f.expires_at_ms {
            o.insert("expiresAt".into(), e.into());
        }
        if let Some(s) = &f.scopes {
            o.insert("scopes".into(), s.clone().into());
        }
    }
    serde_json::to_string(&v).ok()
}

fn object(body: &[u8], what: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err(format!("{what} that is not a JSON object")),
    }
}

/// A request body to the token endpoint: `Ok(Some(body))` with the real
/// refresh token in place of `standin` when it is a refresh
/// (`grant_type` `refresh_token`) whose `refresh_token` is exactly the
/// stand-in; `Ok(None)`: anything else, sent as it is (a stand-in
/// elsewhere in it stays a stand-in). `Err`: not a JSON object.
pub(crate) fn refresh_request(
    body: &[u8],
    standin: &str,
    real: &str,
) -> Result<Option<Vec<u8>>, String> {
    let mut o = object(body, "a token request")?;
    let is = |k: &str, want: &str| o.get(k).and_then(Value::as_str) == Some(want);
    if !is("grant_type", "refresh_token") || !is("refresh_token", standin) {
        return Ok(None);
    }
    o.insert("refresh_token".into(), real.into());
    serde_json::to_vec(&Value::Object(o))
        .map(Some)
        .map_err(|e| e.to_string())
}

/// What the token endpoint issued: the new access token, the new refresh
/// token when it rotated it, and the rest for the host's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issued {
    pub(crate) access: String,
    pub(crate) refresh: Option<String>,
    pub(crate) expires_in: Option<u64>,
    pub(crate) scope: Option<String>,
}

/// The answer to a refresh (status 200): its tokens. `Err` when it is not
/// a JSON object with a non-empty `access_token`.
pub(crate) fn issued(body: &[u8]) -> Result<Issued, String> {
    let o = object(body, "a token answer")?;
    let s = |k: &str| {
        o.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Ok(Issued {
        access: s("access_token").ok_or("a token answer without an access_token")?,
        refresh: s("refresh_token"),
        expires_in: o.get("expires_in").and_then(Value::as_u64),
        scope: s("scope"),
    })
}

/// The answer with `access_token` (and `refresh_token`, when there is
/// one) replaced by the stand-ins; every other field as it was.
pub(crate) fn answer_with(
    body: &[u8],
    access: &str,
    refresh: Option<&str>,
) -> Result<Vec<u8>, String> {
    let mut o = object(body, "a token answer")?;
    o.insert("access_token".into(), access.into());
    if let (Some(r), Some(_)) = (refresh, o.get("refresh_token")) {
        o.insert("refresh_token".into(), r.into());
    }
    serde_json::to_vec(&Value::Object(o)).map_err(|e| e.to_string())
}

/// MCP servers' OAuth logins in the credentials file (`mcpOAuth`; issue
/// #45, decision 0030): the credential of a server's access token is
/// `mcp-oauth:HOST`, swapped towards its `serverUrl`'s host only.
pub(crate) const MCP_OAUTH: &str = "mcp-oauth";

/// One secret of `mcpOAuth`: an entry's `accessToken` (with the entry's
/// `serverUrl`), or any other string under a key naming a token or a
/// secret (`refreshToken`, `clientSecret`, …), which only gets a stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct McpSecret {
    pub(crate) server_url: Option<String>,
    pub(crate) access: bool,
    pub(crate) value: String,
}

/// Whether the key `k` of an `mcpOAuth` entry names a secret.
fn secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    k.contains("token") || k.contains("secret")
}

/// The secrets of `mcpOAuth` in a credentials file `text` (none when it
/// is not JSON: Claude Code reads nothing of it either).
pub(crate) fn mcp_secrets(text: &str) -> Vec<McpSecret> {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Some(Value::Object(servers)) = v.get("mcpOAuth") else {
        return out;
    };
    for entry in servers.values() {
        let url = entry.get("serverUrl").and_then(Value::as_str);
        mcp_walk(entry, None, url, &mut out);
    }
    out
}

fn mcp_walk(v: &Value, key: Option<&str>, url: Option<&str>, out: &mut Vec<McpSecret>) {
    match v {
        Value::String(s) if !s.is_empty() && key.is_some_and(secret_key) => {
            let access = key == Some("accessToken");
            out.push(McpSecret {
                server_url: url.filter(|_| access).map(str::to_string),
                access,
                value: s.clone(),
            });
        }
        Value::Object(m) => {
            for (k, v) in m {
                // Only an entry's own accessToken goes towards its server.
                let url = url.filter(|_| key.is_none());
                mcp_walk(v, Some(k), url, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| mcp_walk(v, key, None, out)),
        _ => {}
    }
}

/// `text` (a credentials file) with each string of `mcpOAuth` equal to a
/// real value of `pairs` (real, stand-in) replaced by its stand-in;
/// everything else as it was. `None`: not JSON.
pub(crate) fn with_mcp_standins(text: &str, pairs: &[(String, String)]) -> Option<String> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    if let Some(m) = v.get_mut("mcpOAuth") {
        replace_strings(m, pairs);
    }
    serde_json::to_string(&v).ok()
}

fn replace_strings(v: &mut Value, pairs: &[(String, String)]) {
    match v {
        Value::String(s) => {
            if let Some((_, standin)) = pairs.iter().find(|(r, _)| r == s) {
                *s = standin.clone();
            }
        }
        Value::Object(m) => m.values_mut().for_each(|v| replace_strings(v, pairs)),
        Value::Array(a) => a.iter_mut().for_each(|v| replace_strings(v, pairs)),
        _ => {}
    }
}

/// The Console API key Claude Code keeps in `~/.claude.json`
/// (`primaryApiKey`), when `text` holds one.
pub(crate) fn primary_api_key(text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text).ok()?;
    v.get("primaryApiKey")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `~/.claude.json`, under `$HOME`.
pub(crate) const CLAUDE_JSON_REL: &str = ".claude.json";

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-REAL","refreshToken":"sk-ant-ort01-REAL","expiresAt":1764000000000,"scopes":["user:inference"],"subscriptionType":"max"},"other":1}"#;

    #[test]
    fn the_file_keeps_its_shape_and_only_the_tokens_change() {
        let t = tokens(FILE).unwrap();
        assert_eq!(t.access, "sk-ant-oat01-REAL");
        assert_eq!(t.refresh, "sk-ant-ort01-REAL");
        let s = Tokens {
            access: "sk-ant-oat01-STAND".into(),
            refresh: "sk-ant-ort01-STAND".into(),
        };
        let out = with_tokens(FILE, &s, None).unwrap();
        assert_eq!(out, FILE.replace("REAL", "STAND"));
        let f = Fresh {
            expires_at_ms: Some(1),
            scopes: Some(vec!["a".into(), "b".into()]),
        };
        let out = with_tokens(FILE, &t, Some(&f)).unwrap();
        assert!(out.contains(r#""expiresAt":1,"scopes":["a","b"],"subscriptionType""#));
        for bad in ["", "{}", r#"{"claudeAiOauth":{"accessToken":""}}"#, "[1]"] {
            assert_eq!(tokens(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_a_refresh_with_the_standin_as_its_refresh_token_is_swapped() {
        let ok =
            br#"{"grant_type":"refresh_token","refresh_token":"S","client_id":"c","scope":"x"}"#;
        let out = refresh_request(ok, "S", "R").unwrap().unwrap();
        assert_eq!(
            out,
            br#"{"grant_type":"refresh_token","refresh_token":"R","client_id":"c","scope":"x"}"#
        );
        // The stand-in in another field, another grant, another value, a
        // stand-in inside a longer value: sent as they are.
        for other in [
            br#"{"grant_type":"refresh_token","refresh_token":"T","scope":"S"}"#.as_slice(),
            br#"{"grant_type":"authorization_code","refresh_token":"S"}"#,
            br#"{"grant_type":"refresh_token","refresh_token":"SS"}"#,
            br#"{"grant_type":"refresh_token","refresh_token":["S"]}"#,
            br#"{"token":"S","token_type_hint":"refresh_token"}"#,
        ] {
            assert_eq!(refresh_request(other, "S", "R"), Ok(None));
        }
        for bad in [
            b"grant_type=refresh_token&refresh_token=S".as_slice(),
            b"[]",
            b"",
        ] {
            assert!(refresh_request(bad, "S", "R").is_err());
        }
    }

    #[test]
    fn the_answer_gets_standins_and_keeps_the_rest() {
        let a = br#"{"token_type":"Bearer","access_token":"A2","expires_in":28800,"refresh_token":"R2","scope":"user:inference user:profile"}"#;
        let i = issued(a).unwrap();
        assert_eq!(
            i,
            Issued {
                access: "A2".into(),
                refresh: Some("R2".into()),
                expires_in: Some(28800),
                scope: Some("user:inference user:profile".into())
            }
        );
        let out = answer_with(a, "SA", Some("SR")).unwrap();
        assert_eq!(out, br#"{"token_type":"Bearer","access_token":"SA","expires_in":28800,"refresh_token":"SR","scope":"user:inference user:profile"}"#);
        // No rotation: no refresh_token appears.
        let out = answer_with(br#"{"access_token":"A2"}"#, "SA", Some("SR")).unwrap();
        assert_eq!(out, br#"{"access_token":"SA"}"#);
        assert!(issued(br#"{"error":"invalid_grant"}"#).is_err());
    }

    #[test]
    fn the_token_path_ignores_queries() {
        assert_eq!(token_path("platform.claude.com"), Some("/v1/oauth/token"));
        assert_eq!(token_path("api.anthropic.com"), None);
        assert!(is_path("/v1/oauth/token?x=1", "/v1/oauth/token"));
        assert!(!is_path("/v1/oauth/token/revoke", "/v1/oauth/token"));
        assert!(!is_path("/v1/oauth/tokens", "/v1/oauth/token"));
    }

    #[test]
    fn mcp_oauth_secrets_are_found_and_replaced_in_mcp_oauth_only() {
        let text = r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-A"},"mcpOAuth":{"linear|ab12":{"serverName":"linear","serverUrl":"https://mcp.linear.app/sse","accessToken":"lin_oauth_AAAA","refreshToken":"lin_refresh_BBBB","clientId":"cid","clientSecret":"shh-CCCC","expiresAt":1,"discoveryState":{"authorizationServerUrl":"https://linear.app"}},"x":{"accessToken":"tok-DDDD"}},"other":"lin_oauth_AAAA"}"#;
        let got = mcp_secrets(text);
        assert_eq!(
            got,
            [
                McpSecret {
                    server_url: Some("https://mcp.linear.app/sse".into()),
                    access: true,
                    value: "lin_oauth_AAAA".into()
                },
                McpSecret {
                    server_url: None,
                    access: false,
                    value: "lin_refresh_BBBB".into()
                },
                McpSecret {
                    server_url: None,
                    access: false,
                    value: "shh-CCCC".into()
                },
                McpSecret {
                    server_url: None,
                    access: true,
                    value: "tok-DDDD".into()
                },
            ]
        );
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|s| (s.value.clone(), format!("S-{}", s.value.len())))
            .collect();
        let out = with_mcp_standins(text, &pairs).unwrap();
        for s in &got {
            assert!(!out.contains(&format!("\"{}\"", s.value)) || s.value == "lin_oauth_AAAA");
        }
        // Outside mcpOAuth nothing changes (the login is decision 0017's).
        assert!(out.contains(r#""other":"lin_oauth_AAAA""#), "{out}");
        assert!(
            out.contains("sk-ant-oat01-A") && out.contains("\"cid\""),
            "{out}"
        );
        assert!(mcp_secrets("not json").is_empty());
        assert_eq!(
            primary_api_key(r#"{"primaryApiKey":"sk-ant-api03-X"}"#).as_deref(),
            Some("sk-ant-api03-X")
        );
        assert_eq!(primary_api_key(r#"{"primaryApiKey":""}"#), None);
    }
}
