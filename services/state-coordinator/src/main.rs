//! `cairn-state-coordinator`: the whole lifecycle (config, telemetry, signals, start, graceful
//! stop, exit 2 when start-up fails) is `cairn_service::run`.
fn main() -> std::process::ExitCode {
    cairn_service::run::<cairn_state_coordinator::Server>()
}
