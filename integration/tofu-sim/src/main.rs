//! `tofu`: an emulator of the OpenTofu CLI contract (test infrastructure for Cairn).
// A synchronous program without a tokio runtime: blocking sleeps are what it needs.
#![allow(clippy::disallowed_methods)]

mod args;
mod backend;
mod commands;
mod config;
mod core;
mod eval;
mod faults;
mod functions;
mod http;
mod planjson;
mod providers;
mod state;
mod tls;
mod types;
mod ui;
mod value;
mod vars;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = commands::run(argv);
    std::process::exit(code);
}
