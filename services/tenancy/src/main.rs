//! `cairn-tenancy`: serve (the default) or run a one-off subcommand; the scaffold of
//! libs/service runs it (telemetry, signals, start, graceful stop; exit 2 with the whole
//! error chain when it cannot start, 1 when a subcommand fails).
fn main() -> std::process::ExitCode {
    cairn_service::run::<cairn_tenancy::Server>()
}
