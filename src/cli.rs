//! The command line: `claude` (the shadow) and `claude-sandbox SUBCOMMAND`.

use std::ffi::OsString;
use std::path::Path;

use clap::{Parser, Subcommand};

use crate::{
    config, install, install::doctor, install::hooks, install::promote, launch, sys::paths,
    tripwire, verify,
};

#[derive(Debug, Parser)]
#[command(
    name = "claude-sandbox",
    version,
    about = "Runs Claude Code inside an OS-level sandbox (bubblewrap + egress jail)",
    long_about = "Runs Claude Code inside an OS-level sandbox (bubblewrap + egress jail).\n\n\
        Installed as /usr/local/bin/claude, this binary is the shadow: typing `claude` launches the \
        real Claude Code sandboxed. As `claude-sandbox` it offers the subcommands below.\n\n\
        Exit status: the real binary's own; 2 bad input; 125 sandbox could not be built; \
        126 integrity refusal; 127 not installed; 128+N killed by signal N. \
        `review`: 0 nothing left, 1 something left (changes to review, or paths a revert refused). \
        `egress report`: 0 printed."
)]
struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Launch the real Claude Code sandboxed, exactly as `claude ARGS` does.
    Run {
        /// Arguments for Claude Code (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Print the bubblewrap command a launch would execute, one argument per line.
    Plan {
        /// Print the typed description of the sandbox (mounts, environment,
        /// network mode, command) as JSON instead.
        #[arg(long)]
        json: bool,
        /// Arguments for Claude Code (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Install the sandbox on this machine (as root).
    Install(install::Args),
    /// Remove what `install` placed and restore the real binary.
    Uninstall(install::UninstallArgs),
    /// Explain what is and is not in place.
    Doctor(doctor::Args),
    /// Claude Code hooks of the integrity guard.
    Hook(hooks::Args),
    /// Run the verification battery (from inside a session).
    Verify(verify::Args),
    /// Wire the devcontainer feature and slash commands into a workspace.
    Promote(promote::Args),
    /// List what sessions changed that runs outside the sandbox (git config
    /// keys, hooks, editor and devcontainer files, Claude Code settings keys),
    /// as recorded by the tripwire at the end of each session.
    #[command(
        long_about = "List what sessions changed that runs outside the sandbox, as recorded by the \
            tripwire at the end of each session (git config keys that run commands, git hooks, \
            .vscode/.devcontainer/.idea, .envrc, .mcp.json, and the hooks, apiKeyHelper, \
            mcpServers, env and statusLine keys of Claude Code's settings). The record lives in \
            ~/.local/state/claude-sandbox/tripwire/, out of the sandbox's reach.\n\n\
            With --revert, undo them: an added file or directory is removed, a changed one gets \
            its old content back, a removed one is recreated; settings keys get their old values, \
            the rest of the file stays as it is. A path that no longer holds exactly what the \
            session left is not touched (one line names it).\n\n\
            It also lists what a session held for you instead of writing it where host git \
            would run or obey it: git hooks and git config keys outside what git writes in \
            ordinary work (core.hooksPath, helpers, proxies…), each in full with why. \
            --apply ID puts one in place (a hook written, a key's lines appended to the config \
            file; nothing is run), after showing it, and only when the target is as the \
            session left it.\n\n\
            Exit status: 0 nothing left (no change recorded, or all reverted or applied); 1 \
            something left (changes or held items listed, or a path the revert or apply \
            refused); 2 bad input."
    )]
    Review {
        /// Undo the recorded changes where nothing changed them since.
        #[arg(long, conflicts_with_all = ["apply", "apply_all"])]
        revert: bool,
        /// Put the held item ID in place on the host (after showing it);
        /// repeatable.
        #[arg(long, value_name = "ID")]
        apply: Vec<String>,
        /// Put every held item in place (each shown first).
        #[arg(long, conflicts_with = "apply")]
        apply_all: bool,
    },
    /// The connection logs of `egress = allowlist` sessions.
    Egress {
        #[command(subcommand)]
        command: EgressCmd,
    },
}

#[derive(Debug, Subcommand)]
enum EgressCmd {
    /// Summarise one session's connection log: requests per domain, every
    /// refusal, and a risk score.
    #[command(long_about = "Summarise one allowlist session's connection log \
            (~/.local/state/claude-sandbox/egress/SESSION.jsonl, written by the proxy outside the \
            sandbox): one header line, the requests per domain (ports, allowed, refused, bytes up \
            and down), every refusal with its reason, and a risk score from 0 to 100 with the \
            reasons for it. Lines of the log that cannot be read are counted and skipped.\n\n\
            Without SESSION, or with --last, the newest session's log.\n\n\
            Exit status: 0 the report was printed; 2 bad input (not a session id, no such log, \
            a log that cannot be read).")]
    Report {
        /// The session id (the log's file name without `.jsonl`, e.g.
        /// 20261123T184501Z-4242).
        #[arg(conflicts_with = "last")]
        session: Option<String>,
        /// The newest session (the default).
        #[arg(long)]
        last: bool,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Entry point. `argv0` decides the personality.
pub fn main_with(argv: Vec<OsString>) -> anyhow::Result<i32> {
    let argv0 = argv.first().cloned().unwrap_or_default();
    let name = Path::new(&argv0).file_name().unwrap_or_default();
    if name == "claude" {
        return launch::shadow_main(&argv[1..]);
    }
    if name == "claude-wrapper" {
        return launch::wrapper_main(&argv[1..]);
    }
    // The shim runs on every launch inside the sandbox: no argument parser.
    if argv.get(1).is_some_and(|a| a == "__shim") {
        return Ok(launch::shim_main(&argv[2..]));
    }
    if argv.get(1).is_some_and(|a| a == "__pasta-keeper") {
        return Ok(crate::egress::keeper_main(&argv[2..]));
    }
    if argv.get(1).is_some_and(|a| a == "__jail-ns") {
        return Ok(crate::egress::jail_ns_main(&argv[2..]));
    }
    if argv.get(1).is_some_and(|a| a == "__holder") {
        return Ok(crate::egress::holder_main(&argv[2..]));
    }
    if argv.get(1).is_some_and(|a| a == "__holder-allowlist") {
        return Ok(crate::egress::allowlist_holder_main(&argv[2..]));
    }
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                crate::error::EXIT_BAD_INPUT
            } else {
                0
            };
            let _ = e.print();
            return Ok(code);
        }
    };
    match cli.command {
        Cmd::Run { args } => launch::shadow_main(&args),
        Cmd::Plan { json, args } => print_plan(&args, json),
        Cmd::Install(a) => install::main(&a),
        Cmd::Uninstall(a) => install::uninstall(&a),
        Cmd::Doctor(a) => doctor::main(&a),
        Cmd::Hook(a) => hooks::main(&a),
        Cmd::Verify(a) => verify::main(&a),
        Cmd::Promote(a) => promote::main(&a),
        Cmd::Review {
            revert,
            apply,
            apply_all,
        } => tripwire::review_main(if revert {
            tripwire::Ask::Revert
        } else if apply_all || !apply.is_empty() {
            tripwire::Ask::Apply {
                ids: apply,
                all: apply_all,
            }
        } else {
            tripwire::Ask::List
        }),
        // `--last` is the default: only its conflict with SESSION matters.
        Cmd::Egress {
            command: EgressCmd::Report { session, json, .. },
        } => crate::egress::report_main(session.as_deref(), json),
    }
}

fn print_plan(args: &[OsString], json: bool) -> anyhow::Result<i32> {
    // Refused or reported exactly as a launch would.
    let loaded = config::load(Path::new(paths::CONFIG_FILE), &config::process_env)?;
    for w in &loaded.weakened {
        eprintln!("claude-sandbox: {}", w.notice());
    }
    let (sb, _) = launch::sandbox(&loaded.config, args, crate::plan::ProcMode::Fresh)?;
    print!("{}", plan_text(&sb, json)?);
    Ok(0)
}

/// What `claude-sandbox plan` prints: the rendered bubblewrap command, one
/// argument per line, or with `--json` the typed description.
pub(crate) fn plan_text(sb: &crate::sandbox::Sandbox, json: bool) -> anyhow::Result<String> {
    if json {
        let mut s = serde_json::to_string_pretty(sb).map_err(|e| {
            crate::error::bad_input(format!(
                "cannot print the plan as JSON: {e}; `plan` without --json prints it"
            ))
        })?;
        s.push('\n');
        return Ok(s);
    }
    let mut out = String::from("bwrap\n");
    for a in crate::sandbox::render(sb).args {
        out.push_str(&a.to_string_lossy());
        out.push('\n');
    }
    Ok(out)
}
