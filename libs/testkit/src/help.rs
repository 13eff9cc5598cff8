//! A binary's `--help` as its user reads it: [`assert_help_lists`] runs it and checks that
//! every setting named is listed as an option read from its environment variable.

use tokio::process::Command;

/// Runs `bin args…` (e.g. `["serve", "--help"]`) and asserts it succeeds and lists each of
/// `settings` as clap prints an option's variable (`[env: NAME=…]`), naming the missing ones.
pub async fn assert_help_lists<S: AsRef<str>>(bin: &str, args: &[&str], settings: &[S]) {
    let out = match Command::new(bin).args(args).env_clear().output().await {
        Ok(out) => out,
        Err(e) => panic!("run {bin} {args:?}: {e}"),
    };
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{bin} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!settings.is_empty(), "no settings to look for");
    let missing: Vec<&str> = settings
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| !help.contains(&format!("[env: {name}=")))
        .collect();
    assert!(
        missing.is_empty(),
        "{bin} {args:?} does not list {missing:?}:\n{help}"
    );
}
