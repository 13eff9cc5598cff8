#!/usr/bin/env bash
# Runs the whole Cairn platform on embedded defaults and deploys the demo: tenancy (50051),
# templates (50052), the state coordinator (50053, OpenTofu HTTP backend on 8453), a runner
# (50054), deployments (50055) and drift (50056), with a local directory object store, a
# local key file and signing keys made by `cairn-tenancy keys generate`, against the local
# PostgreSQL and NATS (installed and started first). On the first run it bootstraps the demo
# tenant, stores the owner's one-time API token in the data dir (0600) and logs the `cairn`
# CLI in with it. Then, through the CLI: the `local` target (files under
# <data>/targets/local), the runner's credential registry for that target's id,
# modules/examples/web-stack published, the `demo` instance, and a deployment of it with live
# progress. The runner uses `tofu` from PATH with the process executor; without one it runs
# every command in a container of CAIRN_TOFU_IMAGE, by default the tofu-sim emulator image
# (built here when missing). NATS runs with a user per service: `cairn-tenancy nats
# credentials` writes each service's nkey seed (0600) and the server configuration into
# <data>/nats once, a NATS server of the platform's own serves them (port
# CAIRN_PLATFORM_NATS_PORT, 54223 by default; JetStream store <data>/nats-store; stopped with
# the platform), `cairn-tenancy nats setup` creates the streams as the admin, and every
# service connects with its own CAIRN_NATS_CREDS. The local profile: loopback webhooks are
# allowed. Running it
# again reuses what exists. Runs in the foreground; Ctrl-C stops every service gracefully.
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
cargo build -q -p cairn-tenancy -p cairn-templates -p cairn-state-coordinator -p cairn-runner \
    -p cairn-deployments -p cairn-drift -p cairn-cli
bin="${CARGO_TARGET_DIR:-${repo}/target}/debug"

# Signing keys (tenancy) and the public key set every service verifies tokens with.
keys="${data}/signing-keys.json"
if [[ ! -f "${keys}" ]]; then
    "${bin}/cairn-tenancy" keys generate --private-keys-file "${keys}" --kid "demo-$(date +%Y%m%d%H%M%S)" --activate >&2
fi
"${bin}/cairn-tenancy" keys export --private-keys-file "${keys}" >"${data}/jwks.json"

export CAIRN_DATABASE_URL
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

tenant_id="$(sed -n 's/^tenant_id=//p' "${data}/bootstrap.txt" 2>/dev/null || true)"
[[ -n "${tenant_id}" ]] || die "no demo tenant id in ${data}/bootstrap.txt; remove ${data} and the cairn database to start afresh"

# Service API tokens (exchanged with tenancy for access tokens): the runner's, the
# workflow's and drift's.
for svc in runner deployments drift; do
    if [[ ! -s "${data}/${svc}-service-token" ]]; then
        "${bin}/cairn-tenancy" service-token --name "${svc}" --out "${data}/${svc}-service-token" >&2
    fi
done

pids=()
nats_pid=""
stop_all() {
    trap - INT TERM EXIT
    if ((${#pids[@]})); then
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
    # NATS last: the services hand back their work through it while they stop.
    if [[ -n "${nats_pid}" ]]; then
        kill -TERM "${nats_pid}" 2>/dev/null || true
        wait "${nats_pid}" 2>/dev/null || true
    fi
}
trap stop_all INT TERM EXIT

# NATS with a user per service: the users (kept when they exist) and the server
# configuration granting each its permissions, a server of the platform's own with them,
# and the streams created by the admin user (the services only check that they exist).
nats_dir="${data}/nats"
nats_port="${CAIRN_PLATFORM_NATS_PORT:-54223}"

# The platform's fixed ports (50051-50056 and NATS's) lie in Linux's ephemeral range
# (32768-60999 by default), so a connection any process opens may get one of them as its
# local port, and the service that listens there then cannot bind it (seen: the runner's
# bind of 50054 refused as in use, once nothing else listened there). Linux's answer for fixed ports in
# that range is to reserve them from ephemeral use; the setting lasts until the next boot
# (undo: write the previous value back). Where /proc/sys is read-only (a container), say so.
reserve_ports() {
    local file=/proc/sys/net/ipv4/ip_local_reserved_ports wanted="50051-50056,${nats_port}" now
    now="$(cat "${file}" 2>/dev/null)" || return 0
    case ",${now}," in *",50051-50056,"*",${nats_port},"* | *",50051-50056,${nats_port},"*) return 0 ;; esac
    if printf '%s\n' "${now:+${now},}${wanted}" >"${file}" 2>/dev/null; then
        log "reserved ports ${wanted} from ephemeral use (${file}, was '${now}')"
    else
        log "could not reserve ports ${wanted} from ephemeral use (${file} is read-only); a service may rarely find its port held by an outgoing connection: run this again if so"
    fi
}
reserve_ports
"${bin}/cairn-tenancy" nats credentials --dir "${nats_dir}" >&2
tcp_open "${nats_port}" && die "port ${nats_port} is taken; is the platform's NATS server already running? (CAIRN_PLATFORM_NATS_PORT)"
command -v nats-server >/dev/null || die "nats-server is not installed; run deploy/local/install.sh"
nats-server -c "${nats_dir}/nats-server.conf" -a 127.0.0.1 -p "${nats_port}" -js \
    -sd "${data}/nats-store" >"${data}/nats.log" 2>&1 &
nats_pid="$!"
wait_for "NATS (with users) on :${nats_port}" 30 tcp_open "${nats_port}" ||
    die "the NATS server did not start; see ${data}/nats.log"
export CAIRN_NATS_URL="nats://127.0.0.1:${nats_port}"
CAIRN_NATS_CREDS="${nats_dir}/admin.creds" "${bin}/cairn-tenancy" nats setup >&2
creds() { printf 'CAIRN_NATS_CREDS=%s/%s.creds' "${nats_dir}" "$1"; }

start_service() { # NAME PORT COMMAND...
    local name="$1" port="$2"
    shift 2
    tcp_open "${port}" && die "port ${port} is taken; is ${name} already running?"
    "$@" >"${data}/${name}.log" 2>&1 &
    pids+=("$!")
    wait_for "${name} on :${port}" 60 tcp_open "${port}" ||
        die "${name} did not start; see ${data}/${name}.log"
}

CAIRN_JWT_PRIVATE_KEYS_FILE="${keys}" CAIRN_WEBHOOK_ALLOW_LOOPBACK=1 \
    start_service tenancy 50051 env "$(creds tenancy)" "${bin}/cairn-tenancy" serve
CAIRN_MODULES_DIR="${repo}/modules" start_service templates 50052 "${bin}/cairn-templates"
CAIRN_OBJECT_STORE="file://${data}/objects" CAIRN_KMS_KEY="local:${data}/state-keys.json" \
    start_service state-coordinator 50053 env "$(creds state-coordinator)" "${bin}/cairn-state-coordinator"
CAIRN_SERVICE_TOKEN_FILE="${data}/deployments-service-token" \
    CAIRN_TENANCY_URL=http://127.0.0.1:50051 CAIRN_TEMPLATES_URL=http://127.0.0.1:50052 \
    CAIRN_COORDINATOR_URL=http://127.0.0.1:50053 \
    start_service deployments 50055 env "$(creds deployments)" "${bin}/cairn-deployments"
CAIRN_SERVICE_TOKEN_FILE="${data}/drift-service-token" \
    CAIRN_TENANCY_URL=http://127.0.0.1:50051 CAIRN_COORDINATOR_URL=http://127.0.0.1:50053 \
    CAIRN_DRIFT_CHECK_INTERVAL="${CAIRN_DRIFT_CHECK_INTERVAL:-10m}" \
    start_service drift 50056 env "$(creds drift)" "${bin}/cairn-drift"

# The CLI, logged in as the demo owner (the default context, local ports) unless it already
# holds a credential that works.
cairn() { "${bin}/cairn" "$@"; }
if ! cairn whoami >/dev/null 2>&1; then
    [[ -s "${token_file}" ]] || die "the cairn CLI is not logged in and there is no owner token in ${token_file}"
    cairn login --api-token-file "${token_file}" >&2
fi
json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# The `local` target (created once), then the runner's credential registry naming its id:
# the target's credential reference and the demo database password's reference.
targets_dir="${data}/targets/local"
mkdir -p "${targets_dir}"
if ! target_json="$(cairn targets get local -o json 2>/dev/null)"; then
    log "creating the local target (files under ${targets_dir})"
    target_json="$(cairn targets create local --local-dir "${targets_dir}" --max-concurrent 2 -o json)"
fi
target_id="$(printf '%s' "${target_json}" | json_field target_id)"
credential_ref="$(printf '%s' "${target_json}" | json_field credential_ref)"
db_password_ref="arn:aws:secretsmanager:us-east-1:000000000000:secret:cairn-demo/db-admin-password"
for secret in local-target-credential db-admin-password; do
    [[ -s "${data}/${secret}" ]] ||
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${data}/${secret}")
done
(umask 077 && cat >"${data}/credentials.json" <<JSON
{"entries": [
  {"tenant_id": "${tenant_id}", "target_id": "${target_id}", "reference": "${credential_ref}",
   "vars": {"LOCAL_TARGET_TOKEN": {"file": "${data}/local-target-credential"}}},
  {"tenant_id": "${tenant_id}", "target_id": "${target_id}", "reference": "${db_password_ref}",
   "vars": {"DB_ADMIN_PASSWORD": {"file": "${data}/db-admin-password"}}}
]}
JSON
)

runner_env=("$(creds runner)" CAIRN_SERVICE_TOKEN_FILE="${data}/runner-service-token" CAIRN_TENANCY_URL=http://127.0.0.1:50051
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
start_service runner 50054 env "${runner_env[@]}" "${bin}/cairn-runner" serve

# The demo: web-stack published (a no-op when this version exists), the `demo` instance, and
# a deployment of it followed live.
template_file="${repo}/modules/examples/web-stack/template.yaml"
if cairn templates get web-stack >/dev/null 2>&1; then
    cairn templates publish web-stack -f "${template_file}" >&2
else
    cairn templates create web-stack -f "${template_file}" \
        --description "The demo web service, database and queue (modules/examples/web-stack)" >&2
fi
if ! cairn instances get demo >/dev/null 2>&1; then
    cairn instances create demo --template web-stack --target local --env development \
        --param app_name=demo --param "db_admin_password=${db_password_ref}" >&2
fi
log "deploying the demo instance"
deploy_rc=0
cairn deploy demo --watch || deploy_rc=$?
case "${deploy_rc}" in
    0) deploy_note="succeeded" ;;
    3) deploy_note="awaiting approval (cairn deployments list --instance demo; cairn approve ID)" ;;
    *) deploy_note="FAILED (exit ${deploy_rc}; cairn deployments list --instance demo, then cairn deployments logs ID)" ;;
esac

cat >&2 <<MSG

  Cairn is running (embedded defaults); the demo deployment ${deploy_note}
    NATS               ${CAIRN_NATS_URL}   a user per service (${nats_dir}), JetStream in ${data}/nats-store
    tenancy            127.0.0.1:50051   gRPC cairn.tenancy.v1 (health + reflection need no token)
    templates          127.0.0.1:50052   gRPC cairn.templates.v1, modules from ${repo}/modules
    state coordinator  127.0.0.1:50053   gRPC cairn.state.v1
                       http://127.0.0.1:8453/v1/states/<state_id>   OpenTofu HTTP backend
    runner             127.0.0.1:50054   gRPC cairn.runner.v1 admin; target "local" ${target_id} (${tofu_note})
    deployments        127.0.0.1:50055   gRPC cairn.deployments.v1
    drift              127.0.0.1:50056   gRPC cairn.drift.v1, every resource scanned every ${CAIRN_DRIFT_CHECK_INTERVAL:-10m}
    demo files         ${targets_dir}/demo/
    data               ${data}   (logs: *.log)
    owner API token    ${token_file}   (the cairn CLI is logged in with it)

  Try next (the CLI is ${bin}/cairn):
    cairn instances get demo
    cairn deploy demo --param replicas=3 --watch
    cairn deployments list --instance demo
    cairn drift status demo            (edit a file under the demo files, then: cairn drift scan demo)
    cairn destroy demo --yes --watch

  Ctrl-C stops everything.
MSG

# If any service exits, stop the others and report it.
rc=0
wait -n "${pids[@]}" "${nats_pid}" || rc=$?
log "a service or NATS stopped (exit ${rc}); stopping the others"
exit "${rc:-1}"
