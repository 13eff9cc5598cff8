#!/usr/bin/env bash
# Runs the Cairn services that exist today — tenancy (50051), templates (50052), the state
# coordinator (50053, OpenTofu HTTP backend on 8453) and a runner (50054) — on embedded
# defaults: local directory object store, local key file, signing keys made by
# `cairn-tenancy keys generate`, against the local PostgreSQL and NATS (installed and started
# first). On the first run it bootstraps the demo tenant and stores the owner's one-time API
# token in the data dir (0600). The runner serves the demo tenant's `local` target with the
# process executor and `tofu` from PATH; without one it runs every command in a container of
# CAIRN_TOFU_IMAGE, by default the tofu-sim emulator image (built here when missing).
# Runs in the foreground; Ctrl-C stops every service gracefully.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"
repo="$(cd "${here}/../.." && pwd)"
cd "${repo}"

if ! command -v cargo >/dev/null && [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]]; then
    PATH="${HOME:-/root}/.cargo/bin:${PATH}"
fi

"${here}/install.sh"
exports="$("${here}/start.sh")"
eval "${exports}"

data="${CAIRN_DEMO_DIR:-${CAIRN_LOCAL_DIR}/platform}"
mkdir -p "${data}"
chmod 700 "${data}"

log "building the services"
cargo build -q -p cairn-tenancy -p cairn-templates -p cairn-state-coordinator -p cairn-runner
bin="${CARGO_TARGET_DIR:-${repo}/target}/debug"

# Signing keys (tenancy) and the public key set every service verifies tokens with.
keys="${data}/signing-keys.json"
if [[ ! -f "${keys}" ]]; then
    "${bin}/cairn-tenancy" keys generate --private-keys-file "${keys}" --kid "demo-$(date +%Y%m%d%H%M%S)" --activate >&2
fi
"${bin}/cairn-tenancy" keys export --private-keys-file "${keys}" >"${data}/jwks.json"

export CAIRN_DATABASE_URL CAIRN_NATS_URL
export CAIRN_JWT_PUBLIC_KEYS_FILE="${data}/jwks.json"

# The first tenant and its owner, once per database.
token_file="${data}/owner-api-token"
if [[ ! -s "${token_file}" ]]; then
    if out="$("${bin}/cairn-tenancy" bootstrap --tenant-slug demo --tenant-name "Demo" \
        --owner-email owner@demo.example --owner-name "Demo Owner")"; then
        (umask 077 && printf '%s\n' "${out}" | sed -n 's/^api_token=//p' >"${token_file}")
        printf '%s\n' "${out}" | grep -v '^api_token=' >"${data}/bootstrap.txt"
    else
        log "bootstrap refused (this database was bootstrapped before); the owner token is wherever you kept it"
    fi
fi

# The runner: a service API token (exchanged with tenancy) and a credential registry that
# names the demo tenant's `local` target.
runner_token="${data}/runner-service-token"
if [[ ! -s "${runner_token}" ]]; then
    "${bin}/cairn-tenancy" service-token --name runner --out "${runner_token}" >&2
fi
tenant_id="$(sed -n 's/^tenant_id=//p' "${data}/bootstrap.txt" 2>/dev/null || true)"
[[ -n "${tenant_id}" ]] || die "no demo tenant id in ${data}/bootstrap.txt; remove ${data} and the cairn database to start afresh"
[[ -s "${data}/local-target-credential" ]] ||
    (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${data}/local-target-credential")
cat >"${data}/credentials.json" <<JSON
{"entries": [{"tenant_id": "${tenant_id}", "target_id": "local", "reference": "local",
  "vars": {"LOCAL_TARGET_TOKEN": {"file": "${data}/local-target-credential"}}}]}
JSON
runner_env=(CAIRN_SERVICE_TOKEN_FILE="${runner_token}" CAIRN_TENANCY_URL=http://127.0.0.1:50051
    CAIRN_CREDENTIALS_FILE="${data}/credentials.json" CAIRN_MODULES_DIR="${repo}/modules"
    CAIRN_RUNNER_INSTANCE="${CAIRN_RUNNER_INSTANCE:-local-runner}")
if [[ -z "${CAIRN_TOFU_IMAGE:-}" ]] && command -v tofu >/dev/null; then
    runner_env+=(CAIRN_EXECUTOR=process CAIRN_TOFU_BIN="$(command -v tofu)")
    tofu_note="process executor, $(command -v tofu)"
else
    image="${CAIRN_TOFU_IMAGE:-cairn/tofu-sim:dev}"
    if [[ "${image}" == cairn/tofu-sim:dev ]] && ! docker image inspect "${image}" >/dev/null 2>&1; then
        log "no OpenTofu binary here: building the tofu-sim emulator image ${image}"
        "${repo}/deploy/images/tofu-sim/build.sh" >&2
    fi
    runner_env+=(CAIRN_EXECUTOR=docker CAIRN_TOFU_IMAGE="${image}" CAIRN_DOCKER_NETWORK=host)
    tofu_note="Docker executor, image ${image}"
fi

pids=()
stop_all() {
    trap - INT TERM EXIT
    if ((${#pids[@]})); then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
}
trap stop_all INT TERM EXIT

start_service() { # NAME PORT COMMAND...
    local name="$1" port="$2"
    shift 2
    tcp_open "${port}" && die "port ${port} is taken; is ${name} already running?"
    "$@" >"${data}/${name}.log" 2>&1 &
    pids+=("$!")
    wait_for "${name} on :${port}" 60 tcp_open "${port}" ||
        die "${name} did not start; see ${data}/${name}.log"
}

CAIRN_JWT_PRIVATE_KEYS_FILE="${keys}" start_service tenancy 50051 "${bin}/cairn-tenancy" serve
CAIRN_MODULES_DIR="${repo}/modules" start_service templates 50052 "${bin}/cairn-templates"
CAIRN_OBJECT_STORE="file://${data}/objects" CAIRN_KMS_KEY="local:${data}/state-keys.json" \
    start_service state-coordinator 50053 "${bin}/cairn-state-coordinator"

start_service runner 50054 env "${runner_env[@]}" "${bin}/cairn-runner" serve

cat >&2 <<MSG

  Cairn is running (embedded defaults)
    tenancy            127.0.0.1:50051   gRPC cairn.tenancy.v1 (health + reflection need no token)
    templates          127.0.0.1:50052   gRPC cairn.templates.v1, modules from ${repo}/modules
    state coordinator  127.0.0.1:50053   gRPC cairn.state.v1
                       http://127.0.0.1:8453/v1/states/<state_id>   OpenTofu HTTP backend
    runner             127.0.0.1:50054   gRPC cairn.runner.v1 admin; target "local" (${tofu_note})
    data               ${data}   (logs: *.log)
    owner API token    ${token_file}   (exchange it with Tokens/ExchangeApiToken for access tokens)

  Ctrl-C stops everything.
MSG

# If any service exits, stop the others and report it.
rc=0
wait -n "${pids[@]}" || rc=$?
log "a service stopped (exit ${rc}); stopping the others"
exit "${rc:-1}"
