//! `cairn-drift`: the scaffold of libs/service runs it (config, telemetry, signals, start,
//! graceful stop; exit 2 with the whole error chain when it cannot start).
fn main() -> std::process::ExitCode {
    cairn_service::run::<cairn_drift::Server>()
}
