#!/usr/bin/env bash
# Stops the local PostgreSQL, NATS and moto that start.sh starts (local development only:
# anyone else using them loses them). Data stays; start.sh brings them back.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"

[[ $(id -u) -eq 0 ]] || die "run stop.sh as root"

# pid_of NAME PIDFILE PATTERN: the pid from PIDFILE if that process still matches PATTERN,
# else the one process whose command line matches PATTERN exactly as start.sh launches it.
pid_of() {
    local name="$1" pidfile="$2" pattern="$3" pid=""
    if [[ -s "${pidfile}" ]]; then
        pid="$(<"${pidfile}")"
        if ! [[ "${pid}" =~ ^[0-9]+$ ]] || ! tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qE -- "${pattern}"; then
            pid=""
        fi
    fi
    if [[ -z "${pid}" ]]; then
        pid="$(pgrep -f -- "${pattern}" | head -n 1 || true)"
    fi
    [[ -n "${pid}" ]] || log "${name}: no running instance found"
    printf '%s' "${pid}"
}

# stop_pid NAME PID: SIGTERM, then wait up to 20 s for the process to go.
stop_pid() {
    local name="$1" pid="$2" i
    [[ -n "${pid}" ]] || return 0
    log "stopping ${name} (pid ${pid})"
    kill -TERM "${pid}" 2>/dev/null || return 0
    for ((i = 0; i < 40; i++)); do
        kill -0 "${pid}" 2>/dev/null || { log "${name} stopped"; return 0; }
        sleep 0.5
    done
    die "${name} (pid ${pid}) did not stop within 20 s"
}

stop_pid moto "$(pid_of moto "${MOTO_PIDFILE}" \
    "moto_server -H 127\.0\.0\.1 -p ${CAIRN_MOTO_PORT}( |$)")"
rm -f "${MOTO_PIDFILE}"

stop_pid NATS "$(pid_of NATS "${NATS_PIDFILE}" \
    "nats-server -a 127\.0\.0\.1 -p ${CAIRN_NATS_PORT}( |$)")"
rm -f "${NATS_PIDFILE}"

if [[ -f "${PG_DATA}/postmaster.pid" ]]; then
    log "stopping PostgreSQL (${PG_DATA})"
    as_postgres "${PG_BIN}/pg_ctl" -D "${PG_DATA}" -m fast -w -t 60 stop >&2
else
    log "PostgreSQL: no cluster running from ${PG_DATA}"
fi
