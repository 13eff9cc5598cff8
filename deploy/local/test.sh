#!/usr/bin/env bash
# The project's one test command: format check, clippy and the docs with warnings denied, then
# every test in the workspace against real PostgreSQL, NATS and moto. When the CAIRN_TEST_*
# variables are not all set, it installs and starts the local services first (install.sh,
# start.sh).
# Extra arguments go to the test runner, e.g. `deploy/local/test.sh -p cairn-db`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"
cd "${here}/../.."

if ! command -v cargo >/dev/null && [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]]; then
    PATH="${HOME:-/root}/.cargo/bin:${PATH}"
fi

# phase NAME COMMAND...: run COMMAND, reporting its elapsed time on stderr.
phase() {
    local name="$1" start=${SECONDS} rc=0
    shift
    log "=== ${name}: $*"
    "$@" || rc=$?
    if ((rc == 0)); then
        log "=== ${name}: ok in $((SECONDS - start))s"
    else
        log "=== ${name}: FAILED (exit ${rc}) after $((SECONDS - start))s"
        exit "${rc}"
    fi
}

start_services() {
    local exports
    # Explicit: phase runs this under `||`, where set -e does not apply.
    exports="$("${here}/start.sh")" || return
    eval "${exports}"
}

if [[ -z "${CAIRN_TEST_DATABASE_URL:-}" || -z "${CAIRN_TEST_NATS_URL:-}" ||
    -z "${CAIRN_TEST_AWS_ENDPOINT:-}" ]]; then
    log "CAIRN_TEST_* not all set: installing and starting the local services"
    phase install "${here}/install.sh"
    phase services start_services
else
    log "using services from the environment: ${CAIRN_TEST_DATABASE_URL}, ${CAIRN_TEST_NATS_URL}, ${CAIRN_TEST_AWS_ENDPOINT}"
fi
export CAIRN_TEST_DATABASE_URL CAIRN_TEST_NATS_URL CAIRN_TEST_AWS_ENDPOINT

# Real OpenTofu outputs the tests compare against: ../shared/tofu-fixtures next to the
# checkout, or the workplace copy when the checkout lives elsewhere (CI clones).
if [[ -z "${CAIRN_TOFU_FIXTURES:-}" ]]; then
    for dir in "${PWD}/../shared/tofu-fixtures" /work/shared/tofu-fixtures; do
        if [[ -d "${dir}" ]]; then
            CAIRN_TOFU_FIXTURES="$(cd "${dir}" && pwd)"
            break
        fi
    done
fi
[[ -n "${CAIRN_TOFU_FIXTURES:-}" ]] ||
    die "OpenTofu fixtures not found: set CAIRN_TOFU_FIXTURES to the tofu-fixtures folder"
export CAIRN_TOFU_FIXTURES
log "OpenTofu fixtures: ${CAIRN_TOFU_FIXTURES}"

# Every test creates its own database and roles (cairn_t_<unix seconds>_<random>); drop those
# of earlier runs that are more than an hour old (never those of tests running right now).
drop_test_databases() {
    local cutoff=$(($(date +%s) - 3600)) name born
    for name in $(psql -Atqc "SELECT datname FROM pg_database WHERE datname ~ '^cairn_t_[0-9]+_'" "${CAIRN_TEST_DATABASE_URL}"); do
        born="${name#cairn_t_}"; born="${born%%_*}"
        ((born < cutoff)) && psql -qc "DROP DATABASE IF EXISTS ${name} WITH (FORCE)" "${CAIRN_TEST_DATABASE_URL}" >/dev/null
    done
    for name in $(psql -Atqc "SELECT rolname FROM pg_roles WHERE rolname ~ '^cairn_t_[0-9]+_'" "${CAIRN_TEST_DATABASE_URL}"); do
        born="${name#cairn_t_}"; born="${born%%_*}"
        ((born < cutoff)) && psql -qc "DROP ROLE IF EXISTS ${name}" "${CAIRN_TEST_DATABASE_URL}" >/dev/null
    done
    return 0
}

phase fmt cargo fmt --all -- --check
phase clippy cargo clippy --workspace --all-targets -- -D warnings
# The crates' documentation builds with its links resolved (warnings denied).
phase docs env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
phase cleanup drop_test_databases
if cargo nextest --version >/dev/null 2>&1; then
    phase tests cargo nextest run --workspace --no-fail-fast "$@"
else
    phase tests cargo test --workspace --no-fail-fast "$@"
fi
log "all checks passed in ${SECONDS}s"
