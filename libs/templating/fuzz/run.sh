#!/usr/bin/env bash
# Runs the libFuzzer target of the template parser for a bounded time (default 5 s; CI) or
# longer on demand: FUZZ_SECONDS=600 libs/templating/fuzz/run.sh
# Needs the nightly toolchain (rustup) and cargo-fuzz (installed from crates.io if missing).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SECONDS:-5}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# The seed corpus holds the fixture template; libFuzzer adds what it finds next to it.
mkdir -p corpus/parse
cp ../tests/fixtures/templates/webapp.yaml corpus/parse/
exec cargo +nightly fuzz run parse -j1 -- -max_total_time="$seconds" -rss_limit_mb=2048
