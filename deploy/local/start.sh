#!/usr/bin/env bash
# Starts PostgreSQL, NATS JetStream and moto (S3 + KMS) on loopback, each only if nothing
# answers on its port yet, then prints `export VAR=...` lines for tests and services:
#     eval "$(deploy/local/start.sh)"
# Running services are reused, never restarted. Progress goes to stderr. Run install.sh first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"

[[ $(id -u) -eq 0 ]] || die "run start.sh as root (PostgreSQL runs as the postgres user)"

# nats_ready: a NATS server greets every client with an INFO line.
nats_ready() {
    local greeting
    greeting="$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/${CAIRN_NATS_PORT} && head -c 4 <&3" 2>/dev/null)" || return 1
    [[ "${greeting}" == "INFO" ]]
}

# wait_daemon NAME PID SECONDS CHECK LOG: wait for CHECK while the started process lives.
wait_daemon() {
    local name="$1" pid="$2" secs="$3" check="$4" logfile="$5" deadline
    deadline=$((SECONDS + secs))
    until "${check}"; do
        if ! kill -0 "${pid}" 2>/dev/null; then
            # It may have lost a race for the port to an instance started by someone else.
            "${check}" && break
            tail -n 20 "${logfile}" >&2 || true
            die "${name} exited before it was ready (log: ${logfile})"
        fi
        ((SECONDS < deadline)) || die "${name} not ready after ${secs}s (log: ${logfile})"
        sleep 0.5
    done
    log "${name} is ready on 127.0.0.1"
}

take_lock start

# --- PostgreSQL -------------------------------------------------------------------------

start_postgres() {
    local rc=0
    "${PG_BIN}/pg_isready" -q -h 127.0.0.1 -p "${CAIRN_PG_PORT}" -t 2 || rc=$?
    case "${rc}" in
    0)
        log "PostgreSQL already answering on port ${CAIRN_PG_PORT}; reusing it"
        return
        ;;
    1)
        log "PostgreSQL on port ${CAIRN_PG_PORT} is starting up; waiting for it"
        wait_for "PostgreSQL" 120 pg_ready || die "PostgreSQL on port ${CAIRN_PG_PORT} never became ready"
        return
        ;;
    esac
    [[ -x "${PG_BIN}/pg_ctl" ]] || die "PostgreSQL ${PG_VERSION} is not installed; run deploy/local/install.sh"
    if tcp_open "${CAIRN_PG_PORT}"; then
        die "port ${CAIRN_PG_PORT} is taken by something that is not PostgreSQL"
    fi

    mkdir -p "${PG_ROOT}"
    chown postgres:postgres "${PG_ROOT}"
    chmod 0755 "${PG_ROOT}"
    if [[ ! -f "${PG_DATA}/PG_VERSION" ]]; then
        if [[ -d "${PG_DATA}" ]] && [[ -n "$(ls -A "${PG_DATA}")" ]]; then
            die "${PG_DATA} is not empty but holds no cluster; move it away and run again"
        fi
        log "initdb ${PG_DATA}"
        as_postgres "${PG_BIN}/initdb" -D "${PG_DATA}" -A trust -U postgres -E UTF8 \
            --locale=C.UTF-8 </dev/null >&2 9>&-
    fi
    # A postmaster.pid left by a killed server whose pid now belongs to another program would
    # make PostgreSQL refuse to start; one naming a live postgres is left for pg_ctl to judge.
    local pidfile="${PG_DATA}/postmaster.pid" oldpid
    if [[ -f "${pidfile}" ]]; then
        oldpid="$(head -n 1 "${pidfile}")"
        if ! [[ "$(cat "/proc/${oldpid}/comm" 2>/dev/null)" =~ postgres ]]; then
            log "removing stale ${pidfile} (pid ${oldpid} is not a running postgres)"
            rm -f "${pidfile}"
        fi
    fi
    touch "${PG_LOG}"
    chown postgres:postgres "${PG_LOG}"
    log "starting PostgreSQL on 127.0.0.1:${CAIRN_PG_PORT} (log: ${PG_LOG})"
    (
        close_extra_fds
        as_postgres "${PG_BIN}/pg_ctl" -D "${PG_DATA}" -l "${PG_LOG}" -w -t 120 -o \
            "-p ${CAIRN_PG_PORT} -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=500 -c fsync=off" \
            start </dev/null >&2
    ) || {
        tail -n 20 "${PG_LOG}" >&2 || true
        die "pg_ctl start failed (log: ${PG_LOG})"
    }
    wait_for "PostgreSQL" 60 pg_ready || die "PostgreSQL not ready (log: ${PG_LOG})"
}

psql_admin() {
    "${PG_BIN}/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${CAIRN_PG_PORT}" -U postgres -d postgres "$@"
}

ensure_cairn_database() {
    local exists
    exists="$(psql_admin -tAc "select 1 from pg_database where datname = 'cairn'")"
    if [[ "${exists}" != "1" ]]; then
        log "creating database cairn"
        # A concurrent creator may win the race; that is fine if the database exists after.
        psql_admin -c 'create database cairn' >&2 ||
            [[ "$(psql_admin -tAc "select 1 from pg_database where datname = 'cairn'")" == "1" ]] ||
            die "could not create database cairn"
    fi
}

# --- NATS -------------------------------------------------------------------------------

start_nats() {
    if nats_ready; then
        log "NATS already answering on port ${CAIRN_NATS_PORT}; reusing it"
        return
    fi
    if tcp_open "${CAIRN_NATS_PORT}"; then
        die "port ${CAIRN_NATS_PORT} is taken by something that is not NATS"
    fi
    command -v nats-server >/dev/null || die "nats-server is not installed; run deploy/local/install.sh"
    # The local server holds only test and demo streams: start each time from an empty store,
    # so streams of earlier test runs do not pile up.
    rm -rf "${NATS_STORE}"
    mkdir -p "${NATS_STORE}"
    log "starting NATS JetStream on 127.0.0.1:${CAIRN_NATS_PORT} (log: ${NATS_LOG})"
    daemon "${NATS_LOG}" nats-server -a 127.0.0.1 -p "${CAIRN_NATS_PORT}" -js -sd "${NATS_STORE}" \
        -P "${NATS_PIDFILE}"
    wait_daemon NATS $! 30 nats_ready "${NATS_LOG}"
}

# --- moto -------------------------------------------------------------------------------

start_moto() {
    if moto_ready; then
        log "moto already answering on port ${CAIRN_MOTO_PORT}; reusing it"
        return
    fi
    if tcp_open "${CAIRN_MOTO_PORT}"; then
        die "port ${CAIRN_MOTO_PORT} is taken by something that is not moto"
    fi
    if venv_busy; then
        log "another process is installing into ${MOTO_VENV}; waiting for it"
        wait_for "moto venv (installed by another process)" 900 venv_idle || die "the install into ${MOTO_VENV} did not finish"
    fi
    [[ -x "${MOTO_VENV}/bin/moto_server" ]] || die "moto is not installed; run deploy/local/install.sh"
    log "starting moto on 127.0.0.1:${CAIRN_MOTO_PORT} (log: ${MOTO_LOG})"
    daemon "${MOTO_LOG}" "${MOTO_VENV}/bin/moto_server" -H 127.0.0.1 -p "${CAIRN_MOTO_PORT}"
    local pid=$!
    echo "${pid}" >"${MOTO_PIDFILE}"
    wait_daemon moto "${pid}" 90 moto_ready "${MOTO_LOG}"
}

start_postgres
ensure_cairn_database
start_nats
start_moto

pg_base="postgres://postgres@127.0.0.1:${CAIRN_PG_PORT}"
nats_url="nats://127.0.0.1:${CAIRN_NATS_PORT}"
aws_endpoint="http://127.0.0.1:${CAIRN_MOTO_PORT}"
emit() { printf 'export %s=%q\n' "$1" "$2"; }
emit CAIRN_TEST_DATABASE_URL "${pg_base}/postgres"
emit CAIRN_TEST_NATS_URL "${nats_url}"
emit CAIRN_TEST_AWS_ENDPOINT "${aws_endpoint}"
emit CAIRN_DATABASE_URL "${pg_base}/cairn"
emit CAIRN_NATS_URL "${nats_url}"
emit AWS_ACCESS_KEY_ID test
emit AWS_SECRET_ACCESS_KEY test
emit AWS_REGION us-east-1
log "services up: PostgreSQL :${CAIRN_PG_PORT}, NATS :${CAIRN_NATS_PORT}, moto :${CAIRN_MOTO_PORT}"
