//! API tests: a real templates service on port 0 against a fresh PostgreSQL database.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;
mod isolation;
mod outputs;
mod publish;
mod resolve;
