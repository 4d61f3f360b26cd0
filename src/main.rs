fn main() {
    let code = match claude_sandbox::main_with(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("claude-sandbox: {e:#}");
            claude_sandbox::exit_code(&e)
        }
    };
    std::process::exit(code);
}
