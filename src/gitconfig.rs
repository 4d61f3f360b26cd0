//! The curated git configuration of SPEC §4.6, rendered per launch.

/// The template, compiled in (the installer writes it to `/etc/claude-gitconfig`).
pub(crate) const TEMPLATE: &str = include_str!("../etc/claude-gitconfig");

const IDENTITY: &str = "# @IDENTITY@\n";
const FORGE_BEGIN: &str = "# @FORGE-BEGIN@";
const FORGE_END: &str = "# @FORGE-END@\n";

/// Quote a value for a git config file: one line, `"` and `\` escaped.
fn quote(v: &str) -> String {
    let one_line: String = v.chars().filter(|c| !c.is_control()).collect();
    format!(
        "\"{}\"",
        one_line.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// The git config text for a launch: the user's identity (when known) and,
/// unless `forge` is false, the GitHub/GitLab credential helpers and
/// ssh→https rewrites.
pub(crate) fn render(name: Option<&str>, email: Option<&str>, forge: bool) -> String {
    let mut identity = String::new();
    if name.is_some() || email.is_some() {
        identity.push_str("[user]\n");
        if let Some(n) = name {
            identity.push_str(&format!("\tname = {}\n", quote(n)));
        }
        if let Some(e) = email {
            identity.push_str(&format!("\temail = {}\n", quote(e)));
        }
    }
    let mut text = TEMPLATE.replacen(IDENTITY, &identity, 1);
    if let (Some(b), Some(e)) = (text.find(FORGE_BEGIN), text.find(FORGE_END)) {
        let end = e + FORGE_END.len();
        if forge {
            // Keep the block, drop only the two marker lines.
            let body_start = b + text[b..].find('\n').map_or(0, |i| i + 1);
            text = format!("{}{}{}", &text[..b], &text[body_start..e], &text[end..]);
        } else {
            text.replace_range(b..end, "");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_forge() {
        let t = render(Some("Dev \"Q\" Eloper"), Some("dev@example.com"), true);
        assert!(
            t.contains(
                "[user]\n\tname = \"Dev \\\"Q\\\" Eloper\"\n\temail = \"dev@example.com\"\n"
            ),
            "{t}"
        );
        assert!(t.contains("helper = !gh auth git-credential"));
        assert!(t.contains("helper = !glab auth git-credential"));
        assert!(t.contains("insteadOf = git@github.com:"));
        assert!(t.contains("defaultBranch = main"));
        assert!(t.contains("directory = *"));
        assert!(
            !t.contains('@') || !t.contains("@FORGE"),
            "markers removed: {t}"
        );
    }

    #[test]
    fn no_forge_and_no_identity() {
        let t = render(None, None, false);
        assert!(!t.contains("[user]"));
        assert!(!t.contains("credential"));
        assert!(!t.contains("insteadOf"));
        assert!(t.contains("defaultBranch = main"));
    }

    #[test]
    fn newline_in_name_cannot_inject_config() {
        let t = render(Some("x\n[core]\n\tfsmonitor = evil"), None, false);
        assert!(!t.contains("\n[core]"), "{t}");
    }
}
