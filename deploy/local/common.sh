# shellcheck shell=bash disable=SC2034  # the settings are used by the scripts that source this
# Shared settings and helpers for the deploy/local scripts (sourced, not run).

CAIRN_LOCAL_DIR="${CAIRN_LOCAL_DIR:-${HOME:-/root}/.cache/cairn}"
CAIRN_PG_PORT="${CAIRN_PG_PORT:-55432}"
CAIRN_NATS_PORT="${CAIRN_NATS_PORT:-54222}"
CAIRN_MOTO_PORT="${CAIRN_MOTO_PORT:-55000}"

PG_VERSION=15
PG_BIN="/usr/lib/postgresql/${PG_VERSION}/bin"
# PostgreSQL's files live outside $HOME: the postgres user cannot read /root.
PG_ROOT="${CAIRN_PG_ROOT:-/var/lib/cairn-local}"
PG_DATA="${PG_ROOT}/pg"
PG_LOG="${PG_ROOT}/pg.log"

MOTO_VERSION=5.1.22
MOTO_VENV="${CAIRN_MOTO_VENV:-${CAIRN_LOCAL_DIR}/moto-venv}"

RUN_DIR="${CAIRN_LOCAL_DIR}/local"
NATS_STORE="${RUN_DIR}/nats"
NATS_LOG="${RUN_DIR}/nats.log"
NATS_PIDFILE="${RUN_DIR}/nats.pid"
MOTO_LOG="${RUN_DIR}/moto.log"
MOTO_PIDFILE="${RUN_DIR}/moto.pid"

# Progress messages go to stderr so stdout stays machine-readable.
log() { printf '[cairn-local] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# True when something accepts TCP connections on 127.0.0.1:$1.
tcp_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

pg_ready() { "${PG_BIN}/pg_isready" -q -h 127.0.0.1 -p "${CAIRN_PG_PORT}" -t 2 >/dev/null 2>&1; }
moto_ready() { curl -sf -o /dev/null --max-time 3 "http://127.0.0.1:${CAIRN_MOTO_PORT}/moto-api/"; }

# wait_for DESCRIPTION SECONDS COMMAND...: poll COMMAND every half second until it succeeds.
wait_for() {
    local what="$1" secs="$2" deadline
    shift 2
    deadline=$((SECONDS + secs))
    until "$@"; do
        if ((SECONDS >= deadline)); then
            return 1
        fi
        sleep 0.5
    done
    log "${what} is ready"
}

# Run a command as the postgres user from a directory it can read.
as_postgres() { (cd / && runuser -u postgres -- "$@"); }

# Close every inherited descriptor above stderr (lock files, a caller's pipes) in the current
# (sub)shell, so a daemon started from it holds nothing its starter waits on.
close_extra_fds() {
    local fd
    for fd in /proc/"${BASHPID}"/fd/*; do
        fd="${fd##*/}"
        if ((fd > 2)); then
            eval "exec ${fd}>&-" 2>/dev/null || true
        fi
    done
}

# daemon LOG COMMAND...: start COMMAND detached (own session, stdin from /dev/null, output
# appended to LOG, no inherited descriptors); its pid is in $! afterwards.
daemon() {
    local logfile="$1"
    shift
    (
        close_extra_fds
        exec nohup setsid "$@" </dev/null >>"${logfile}" 2>&1
    ) &
}

# Take an exclusive lock on $RUN_DIR/$1.lock for the rest of the calling script.
take_lock() {
    mkdir -p "${RUN_DIR}"
    exec 9>"${RUN_DIR}/$1.lock"
    if ! flock -n 9; then
        log "waiting for another $1 to finish (lock ${RUN_DIR}/$1.lock)"
        flock 9
    fi
}

# True while another process (one that does not take our lock) creates the moto venv or runs
# pip in it.
venv_busy() {
    local v="${MOTO_VENV}"
    pgrep -f -- "(-m venv .*${v}|${v}/bin/pip|${v}/bin/python[0-9.]* -m pip)" >/dev/null 2>&1
}
venv_idle() { ! venv_busy; }
