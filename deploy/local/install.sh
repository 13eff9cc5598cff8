#!/usr/bin/env bash
# Installs what the local services need, only what is missing: PostgreSQL 15 and nats-server
# from Debian, and moto[server] pinned in a venv. Safe to run again; run as root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"

[[ $(id -u) -eq 0 ]] || die "run install.sh as root (it uses apt-get)"
export DEBIAN_FRONTEND=noninteractive

apt_updated=0
apt_update() {
    if ((apt_updated == 0)); then
        log "apt-get update"
        apt-get update -qq >&2
        apt_updated=1
    fi
}

# apt_install PKG...: install, refreshing the package lists first when they lack a candidate.
apt_install() {
    local pkg
    for pkg in "$@"; do
        if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]'; then
            apt_update
            break
        fi
    done
    log "apt-get install $*"
    if ! apt-get install -y -qq --no-install-recommends "$@" >&2; then
        ((apt_updated == 0)) || die "apt-get install $* failed"
        apt_update
        apt-get install -y -qq --no-install-recommends "$@" >&2
    fi
}

missing=()
[[ -x "${PG_BIN}/postgres" && -x "${PG_BIN}/initdb" && -x "${PG_BIN}/pg_ctl" ]] ||
    missing+=("postgresql-${PG_VERSION}")
command -v psql >/dev/null && [[ -x "${PG_BIN}/pg_isready" ]] ||
    missing+=("postgresql-client-${PG_VERSION}")
command -v nats-server >/dev/null || missing+=(nats-server)
command -v curl >/dev/null || missing+=(curl ca-certificates)
command -v python3 >/dev/null || missing+=(python3)
command -v flock >/dev/null && command -v runuser >/dev/null || missing+=(util-linux)

take_lock install

if ((${#missing[@]})); then
    apt_install "${missing[@]}"
else
    log "Debian packages already present (postgresql ${PG_VERSION}, nats-server, curl, python3)"
fi

# --- moto in its own venv ---------------------------------------------------------------

moto_installed() {
    [[ -x "${MOTO_VENV}/bin/moto_server" ]] &&
        [[ "$("${MOTO_VENV}/bin/python" -c \
            'import importlib.metadata as m, moto.server, flask, flask_cors; print(m.version("moto"))' \
            2>/dev/null)" == "${MOTO_VERSION}" ]]
}

if venv_busy; then
    log "another process is installing into ${MOTO_VENV}; waiting for it"
    wait_for "moto venv (installed by another process)" 900 venv_idle ||
        die "the other install into ${MOTO_VENV} did not finish within 15 minutes"
fi

if moto_installed; then
    log "moto ${MOTO_VERSION} already installed in ${MOTO_VENV}"
else
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
        apt_install python3-venv
    fi
    if [[ ! -x "${MOTO_VENV}/bin/python" ]] || ! "${MOTO_VENV}/bin/python" -c 'import pip' >/dev/null 2>&1; then
        log "creating venv ${MOTO_VENV}"
        mkdir -p "$(dirname "${MOTO_VENV}")"
        python3 -m venv --clear "${MOTO_VENV}"
    fi
    log "pip install moto[server]==${MOTO_VERSION} (takes a minute)"
    "${MOTO_VENV}/bin/python" -m pip install --quiet --disable-pip-version-check \
        "moto[server]==${MOTO_VERSION}" >&2
    moto_installed || die "moto ${MOTO_VERSION} still not importable from ${MOTO_VENV}"
    log "moto ${MOTO_VERSION} installed"
fi
