#!/usr/bin/env bash
# Builds the Cairn images, each FROM scratch with a static binary (no base image is pulled,
# no registry is involved), and checks each one:
#   <prefix>/tenancy, templates, state-coordinator, runner, deployments, drift   the services
#                                                  (non-root user 65532, no shell)
#   <prefix>/cli                                   the `cairn` CLI (admin Jobs: verify-all, …)
#   <prefix>/tofu-sim                              the OpenTofu emulator (as tofu-sim/build.sh)
#   <prefix>/tofu (only with --tofu PATH)          the runner's tofu image: the OpenTofu binary
#                                                  given, the module library at /work/modules,
#                                                  CA roots
# All binaries are built by ONE cargo invocation (static glibc, --target
# x86_64-unknown-linux-gnu, release), so the dependencies build once with one feature set.
#
#   deploy/images/build.sh [--tag TAG] [--prefix PREFIX] [--tofu PATH] [--tofu-image REF] [--quick] [IMAGE...]
#
# --quick (CI): the workspace's own crates at opt-level 1, the dependencies as in release (so
# their cached builds are reused); a check of the images, not a release build of them.
#
# IMAGE: any of tenancy templates state-coordinator runner deployments drift cli tofu-sim
# (default: all of them; a subset builds only its packages, with their own feature set).
# Defaults: --tag dev, --prefix cairn, --tofu-image <prefix>/tofu:<tag>. Honours
# CARGO_TARGET_DIR. Checks: every binary is static; every image's entrypoint answers --help
# inside a container (tofu images: `version` too); the service images run as 65532:65532 and
# hold no shell (their layers are listed); the CLI image resolves a name through /etc/hosts
# and through Docker's DNS (a static glibc binary resolving in a FROM scratch image).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
target=x86_64-unknown-linux-gnu
target_dir="${CARGO_TARGET_DIR:-${root}/target}"
out="${target_dir}/${target}/release"

tag=dev prefix=cairn tofu="" tofu_image="" quick=""
selected=()
while (($#)); do
    case "$1" in
    --tag) tag="$2" && shift 2 ;;
    --prefix) prefix="$2" && shift 2 ;;
    --tofu) tofu="$2" && shift 2 ;;
    --tofu-image) tofu_image="$2" && shift 2 ;;
    --quick) quick=1 && shift ;;
    -h | --help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' && exit 0 ;;
    -*) echo "build.sh: unknown option $1" >&2 && exit 2 ;;
    *) selected+=("$1") && shift ;;
    esac
done
tofu_image="${tofu_image:-${prefix}/tofu:${tag}}"
[[ -z "${tofu}" || "${tofu}" == /* ]] || tofu="${PWD}/${tofu}"
say() { printf '[images] %s\n' "$*" >&2; }
die() { say "$*" && exit 1; }

# image name -> "cargo package:binary"
declare -A binary=(
    [tenancy]=cairn-tenancy:cairn-tenancy
    [templates]=cairn-templates:cairn-templates
    [state-coordinator]=cairn-state-coordinator:cairn-state-coordinator
    [runner]=cairn-runner:cairn-runner
    [deployments]=cairn-deployments:cairn-deployments
    [drift]=cairn-drift:cairn-drift
    [cli]=cairn-cli:cairn
    [tofu-sim]=tofu-sim:tofu
)
all=(tenancy templates state-coordinator runner deployments drift cli tofu-sim)
services=(tenancy templates state-coordinator runner deployments drift)
((${#selected[@]})) || selected=("${all[@]}")
for name in "${selected[@]}"; do
    [[ -n "${binary[${name}]:-}" ]] || die "unknown image ${name} (one of: ${all[*]})"
done

is_service() {
    local s
    for s in "${services[@]}"; do [[ "$1" == "${s}" ]] && return 0; done
    return 1
}

# --- binaries ------------------------------------------------------------------------------
cd "${root}"
cargo_args=()
if [[ -n "${quick}" ]]; then
    # By name: a `package."*"` or profile-wide override would change the dependencies' (and
    # build scripts') settings too, and so rebuild all of them.
    while read -r member; do
        cargo_args+=(--config "profile.release.package.${member}.opt-level=1")
    done < <(cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; [print(p["name"]) for p in json.load(sys.stdin)["packages"]]')
fi
for name in "${selected[@]}"; do cargo_args+=(-p "${binary[${name}]%%:*}" --bin "${binary[${name}]#*:}"); done
t=${SECONDS}
# --target keeps build scripts and proc macros dynamic; only the binaries are static.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target "${target}" "${cargo_args[@]}"
# cairn-copy-tree (tenancy's and the runner's images): a package of its own, std only, so
# it shares nothing with the workspace's build and has a target directory of its own.
if [[ " ${selected[*]} " == *" runner "* || " ${selected[*]} " == *" tenancy "* ]]; then
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --target "${target}" \
        --manifest-path "${here}/copy-tree/Cargo.toml" --target-dir "${target_dir}/copy-tree" --locked
fi
say "binaries: $((SECONDS - t))s"

static() {
    if ldd "$1" 2>&1 | grep -q '=>'; then die "$1 is not statically linked"; fi
}

# --- image contexts ------------------------------------------------------------------------
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# The files every service image shares: users, NSS (files, then DNS: glibc's built-in
# modules, no shared object), the CA roots (AWS S3/KMS/STS/Secrets Manager, webhooks, system
# roots of gRPC clients) and a world-writable /tmp.
ca_bundle=/etc/ssl/certs/ca-certificates.crt
[[ -s "${ca_bundle}" ]] || die "no CA bundle at ${ca_bundle} (apt-get install ca-certificates)"
rootfs() {
    local dir="$1"
    mkdir -p "${dir}/etc/ssl/certs" "${dir}/usr/local/bin"
    mkdir -m 1777 "${dir}/tmp"
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
        'cairn:x:65532:65532:cairn:/nonexistent:/sbin/nologin' >"${dir}/etc/passwd"
    printf '%s\n' 'root:x:0:' 'cairn:x:65532:' >"${dir}/etc/group"
    printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"${dir}/etc/nsswitch.conf"
    cp "${ca_bundle}" "${dir}/etc/ssl/certs/ca-certificates.crt"
}

revision="$(git -C "${root}" rev-parse HEAD 2>/dev/null || echo unknown)"
build_image() { # NAME DIR REF
    if ! docker build --pull=false --quiet \
        --label "org.opencontainers.image.revision=${revision}" \
        --label "org.opencontainers.image.title=cairn-$1" \
        -t "$3" "$2" >"${work}/docker-build.log" 2>&1; then
        cat "${work}/docker-build.log" >&2
        die "docker build of $3 failed"
    fi
    say "built $3"
}

for name in "${selected[@]}"; do
    bin_name="${binary[${name}]#*:}"
    bin="${out}/${bin_name}"
    static "${bin}"
    ctx="${work}/${name}"
    mkdir -p "${ctx}"
    cp "${here}/${name}/Dockerfile" "${ctx}/Dockerfile"
    if [[ "${name}" == tofu-sim ]]; then
        # As tofu-sim/build.sh: the emulator and /tmp only (no CA roots: tests rely on it).
        cp "${bin}" "${ctx}/tofu"
        mkdir -m 1777 "${ctx}/tmp"
    else
        rootfs "${ctx}/rootfs"
        cp "${bin}" "${ctx}/${bin_name}"
    fi
    case "${name}" in
    templates | runner) cp -r "${root}/modules" "${ctx}/modules" ;;
    esac
    if [[ "${name}" == runner || "${name}" == tenancy ]]; then
        helper="${target_dir}/copy-tree/${target}/release/cairn-copy-tree"
        static "${helper}"
        cp "${helper}" "${ctx}/cairn-copy-tree"
    fi
    build_image "${name}" "${ctx}" "${prefix}/${name}:${tag}"
done

if [[ -n "${tofu}" ]]; then
    # (Checked only now: it may be a binary the cargo build above just made.)
    [[ -f "${tofu}" && -x "${tofu}" ]] || die "--tofu ${tofu}: not an executable file"
    static "${tofu}"
    ctx="${work}/tofu"
    mkdir -p "${ctx}"
    cp "${here}/tofu/Dockerfile" "${ctx}/Dockerfile"
    rootfs "${ctx}/rootfs"
    cp "${tofu}" "${ctx}/tofu"
    cp -r "${root}/modules" "${ctx}/modules"
    build_image tofu "${ctx}" "${tofu_image}"
fi

# --- checks --------------------------------------------------------------------------------
# Every path in an image's layers (docker save: an OCI layout or the legacy one).
image_paths() {
    docker save "$1" | python3 -c '
import io, json, sys, tarfile
outer = tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()))
for layer in json.load(outer.extractfile("manifest.json"))[0]["Layers"]:
    for m in tarfile.open(fileobj=outer.extractfile(layer)).getmembers():
        print(m.name)
'
}

check_help() { # REF ARGS...
    local ref="$1" text
    shift
    text="$(docker run --rm --network none "${ref}" "$@" 2>&1)" ||
        die "${ref} $*: exit $? inside the container: ${text}"
    grep -qi 'usage' <<<"${text}" || die "${ref} $*: no usage text: ${text}"
}

for name in "${selected[@]}"; do
    ref="${prefix}/${name}:${tag}"
    check_help "${ref}" --help
    case "${name}" in
    tenancy) check_help "${ref}" serve --help ;;
    runner)
        check_help "${ref}" serve --help
        check_help "${ref}" summarize-plan --help
        ;;
    esac
    case "${name}" in
    tenancy | runner)
        docker run --rm --network none --entrypoint /usr/local/bin/cairn-copy-tree "${ref}" --help >/dev/null ||
            die "${ref}: cairn-copy-tree --help failed"
        ;;
    tofu-sim) docker run --rm --network none "${ref}" version >/dev/null || die "${ref} version failed" ;;
    esac
    if is_service "${name}" || [[ "${name}" == cli ]]; then
        user="$(docker image inspect -f '{{.Config.User}}' "${ref}")"
        [[ "${user}" == 65532:65532 ]] || die "${ref} runs as '${user}', not 65532:65532"
        if shells="$(image_paths "${ref}" | grep -E '(^|/)(sh|bash|dash|ash|busybox)$')"; then
            die "${ref} holds a shell: ${shells}"
        fi
    fi
    say "checked ${ref}"
done
if [[ -n "${tofu}" ]]; then
    check_help "${tofu_image}" --help
    docker run --rm --network none "${tofu_image}" version >/dev/null || die "${tofu_image} version failed"
    docker run --rm --network none --entrypoint /usr/local/bin/tofu "${tofu_image}" -chdir=/work/modules version >/dev/null ||
        die "${tofu_image}: no module library at /work/modules"
    say "checked ${tofu_image}"
fi

# Name resolution of a static glibc binary FROM scratch: the CLI asks tenancy at a name that
# /etc/hosts (--add-host) or Docker's DNS (a network alias of its own container) resolves to
# a port where nothing listens: "connection refused" shows the name resolved; a resolver
# failure reads "dns error" / "failed to lookup address".
if [[ " ${selected[*]} " == *" cli "* ]]; then
    ref="${prefix}/cli:${tag}"
    conf="${work}/cli-config"
    mkdir -p "${conf}"
    printf '%s\n' 'current_context = "check"' '' '[contexts.check]' \
        'tenancy = "http://cairn-name-check:1"' >"${conf}/config.toml"
    chmod -R a+rX "${conf}"
    net="cairn-image-check-$$"
    docker network create "${net}" >/dev/null
    resolve() { # what it printed, expected to say the connection was refused
        docker run --rm -v "${conf}:/config:ro" -e CAIRN_CONFIG_DIR=/config -e CAIRN_API_TOKEN=cairn_name_check \
            "$@" "${ref}" whoami 2>&1 || true
    }
    via_hosts="$(resolve --network "${net}" --add-host cairn-name-check:127.0.0.1)"
    via_dns="$(resolve --network "${net}" --network-alias cairn-name-check)"
    docker network rm "${net}" >/dev/null
    for answer in "${via_hosts}" "${via_dns}"; do
        if grep -qiE 'dns error|failed to lookup|name or service' <<<"${answer}" ||
            ! grep -qi 'refused' <<<"${answer}"; then
            die "${ref} did not resolve a name inside the container: ${answer}"
        fi
    done
    say "checked name resolution in ${ref} (/etc/hosts and Docker's DNS)"
fi
