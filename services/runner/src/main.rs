//! `cairn-runner`: the runner service (`serve`) and its offline tool (`summarize-plan`).

fn main() -> std::process::ExitCode {
    cairn_service::run::<cairn_runner::serve::Runner>()
}
