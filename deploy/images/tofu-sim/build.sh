#!/usr/bin/env bash
# Builds the tofu-sim emulator as a static binary and the Docker image cairn/tofu-sim:dev
# (FROM scratch, the emulator at /usr/local/bin/tofu). Never pulls from a registry.
#   deploy/images/tofu-sim/build.sh [TAG]      (default tag: cairn/tofu-sim:dev)
# Honours CARGO_TARGET_DIR. Checks the image with `docker run --rm TAG version`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../../.." && pwd)"
tag="${1:-cairn/tofu-sim:dev}"
target=x86_64-unknown-linux-gnu
target_dir="${CARGO_TARGET_DIR:-${root}/target}"

cd "${root}"
# --target keeps build scripts and proc macros dynamic; only the binary is static.
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --target "${target}" -p tofu-sim --bin tofu
bin="${target_dir}/${target}/release/tofu"
if ldd "${bin}" 2>&1 | grep -q '=>'; then
    echo "build.sh: ${bin} is not statically linked" >&2
    exit 1
fi

ctx="$(mktemp -d)"
trap 'rm -rf "${ctx}"' EXIT
cp "${bin}" "${ctx}/tofu"
cp "${here}/Dockerfile" "${ctx}/Dockerfile"
mkdir -m 1777 "${ctx}/tmp"
docker build --pull=false -t "${tag}" "${ctx}"
docker run --rm "${tag}" version
