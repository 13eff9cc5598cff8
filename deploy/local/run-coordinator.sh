#!/usr/bin/env bash
# Starts the state coordinator on embedded defaults (local directory object store, local key
# file) against the local PostgreSQL and NATS, with a freshly generated demo signing key.
# Prints a 15-minute platform-admin token and the addresses, then runs in the foreground
# (Ctrl-C stops it gracefully).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=common.sh
. "${here}/common.sh"
cd "${here}/../.."

if ! command -v cargo >/dev/null && [[ -x "${HOME:-/root}/.cargo/bin/cargo" ]]; then
    PATH="${HOME:-/root}/.cargo/bin:${PATH}"
fi

"${here}/install.sh"
eval "$("${here}/start.sh")"

data="${CAIRN_DEMO_DIR:-${CAIRN_LOCAL_DIR}/demo}"
mkdir -p "${data}"
chmod 700 "${data}"

b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# A demo Ed25519 signing key and its JWKS (tenancy issues real ones; see README).
key="${data}/demo-signing-key.pem"
[[ -f "${key}" ]] || openssl genpkey -algorithm ed25519 -out "${key}" 2>/dev/null
chmod 600 "${key}"
x="$(openssl pkey -in "${key}" -pubout -outform DER | tail -c 32 | b64url)"
printf '{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","kid":"demo","x":"%s"}]}\n' \
    "${x}" >"${data}/jwks.json"

now="$(date +%s)"
header="$(printf '{"alg":"EdDSA","typ":"JWT","kid":"demo"}' | b64url)"
claims="$(printf '{"sub":"demo-admin","tid":"%s","role":"admin","scopes":["platform:admin"],"iat":%d,"exp":%d,"jti":"%s","iss":"cairn-tenancy","aud":"cairn"}' \
    "00000000-0000-4000-8000-000000000001" "${now}" "$((now + 900))" "$(cat /proc/sys/kernel/random/uuid)" | b64url)"
# Ed25519 signs in one shot, so openssl needs the input as a file.
printf '%s.%s' "${header}" "${claims}" >"${data}/signing-input"
sig="$(openssl pkeyutl -sign -inkey "${key}" -rawin -in "${data}/signing-input" | b64url)"
rm -f "${data}/signing-input"
token="${header}.${claims}.${sig}"

export CAIRN_DATABASE_URL="${CAIRN_DATABASE_URL}"
export CAIRN_NATS_URL="${CAIRN_NATS_URL}"
export CAIRN_JWT_PUBLIC_KEYS_FILE="${data}/jwks.json"
export CAIRN_OBJECT_STORE="${CAIRN_OBJECT_STORE:-file://${data}/objects}"
export CAIRN_KMS_KEY="${CAIRN_KMS_KEY:-local:${data}/keys.json}"

log "building cairn-state-coordinator"
cargo build -q -p cairn-state-coordinator
bin="${CARGO_TARGET_DIR:-target}/debug/cairn-state-coordinator"

cat >&2 <<MSG

  Cairn state coordinator (embedded defaults)
    gRPC:          ${CAIRN_GRPC_ADDR:-127.0.0.1:50053}   (health + reflection without a token)
    HTTP backend:  http://${CAIRN_HTTP_ADDR:-127.0.0.1:8453}/v1/states/<state_id>
    objects:       ${CAIRN_OBJECT_STORE}
    keys:          ${CAIRN_KMS_KEY}
    admin token (15 min, tenant 00000000-0000-4000-8000-000000000001):
      ${token}

MSG
exec "${bin}"
