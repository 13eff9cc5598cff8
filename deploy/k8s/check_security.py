"""Asserts the security settings of every pod a rendered overlay would run.

    python3 deploy/k8s/check_security.py RENDERED.yaml [--production]

Every pod outside the runners' namespace (the one privileged part, checked on its own terms
below) must satisfy the restricted Pod Security Standard and this project's rules: non-root
(pod and every container), read-only root file system, no privilege escalation, every
capability dropped, RuntimeDefault seccomp, no host namespaces or host paths, no service
account token, resource requests (and a memory limit), probes on every long-running container,
a PodDisruptionBudget for every Deployment and the restricted label on its namespace. With
--production also: CAIRN_PROFILE=production with TLS and NATS credentials in the settings every
pod reads, https peer URLs, versioned-S3 and KMS settings for the coordinator, the Docker
executor for the runner, no image without a pinned tag, and every long-running container's
probes gRPC health on its plaintext health-only port (CAIRN_HEALTH_ADDR, a declared container
port; kubelet's grpc probe speaks no TLS, so never the TLS gRPC port, never a bare TCP check).

The runners (namespace cairn-runners) may have exactly what they need: the Docker socket and
the two host paths, as root but still without privilege escalation or capabilities, on the
labelled node pool.

`--self-test` breaks a copy of the rendered objects in each way the check guards against and
fails unless every one is reported. Exit 1 with one line per problem; 0 when clean.
"""

import copy
import sys

import yaml

RUNNERS_NAMESPACE = "cairn-runners"
RUNNER_HOST_PATHS = {"/var/run/docker.sock", "/dev/shm/cairn-runner", "/var/lib/cairn-runner"}
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod"}


def pod_spec(obj):
    kind = obj["kind"]
    if kind == "Pod":
        return obj["spec"]
    if kind == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def name_of(obj):
    meta = obj["metadata"]
    return f'{obj["kind"]}/{meta.get("namespace", "default")}/{meta["name"]}'


def config_maps(objs):
    return {(o["metadata"].get("namespace"), o["metadata"]["name"]): o.get("data", {})
            for o in objs if o["kind"] == "ConfigMap"}


def container_env(obj, container, maps):
    """The CAIRN_* settings a container gets from its ConfigMaps and plain env entries."""
    ns = obj["metadata"].get("namespace")
    env = {}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        if ref:
            env.update(maps.get((ns, ref["name"]), {}))
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
        elif "valueFrom" in entry:
            env[entry["name"]] = "<from " + next(iter(entry["valueFrom"])) + ">"
    return env


def check_container(where, c, pod_sc, problems, runner):
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: allowPrivilegeEscalation is not false")
    if sc.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: readOnlyRootFilesystem is not true")
    if sc.get("privileged"):
        problems.append(f"{where}: privileged")
    caps = sc.get("capabilities", {})
    if "ALL" not in caps.get("drop", []):
        problems.append(f"{where}: capabilities not all dropped")
    if caps.get("add"):
        problems.append(f"{where}: capabilities added: {caps['add']}")
    seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        problems.append(f"{where}: seccomp profile {seccomp!r}, not RuntimeDefault")
    if not runner:
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        user = sc.get("runAsUser", pod_sc.get("runAsUser"))
        if non_root is not True:
            problems.append(f"{where}: runAsNonRoot is not true")
        if user == 0:
            problems.append(f"{where}: runs as uid 0")
    requests = c.get("resources", {}).get("requests", {})
    for r in ("cpu", "memory"):
        if r not in requests:
            problems.append(f"{where}: no {r} request")
    if "memory" not in c.get("resources", {}).get("limits", {}):
        problems.append(f"{where}: no memory limit")
    image = c.get("image", "")
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    if not tag or tag == "latest":
        problems.append(f"{where}: image {image!r} has no pinned tag")


def check_pod(obj, problems):
    spec = pod_spec(obj)
    runner = obj["metadata"].get("namespace") == RUNNERS_NAMESPACE
    name = name_of(obj)
    pod_sc = spec.get("securityContext", {})
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            problems.append(f"{name}: {host}")
    if spec.get("automountServiceAccountToken") is not False:
        problems.append(f"{name}: the service account token is mounted")
    host_paths = {v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
    if runner:
        if host_paths - RUNNER_HOST_PATHS:
            problems.append(f"{name}: host paths beyond the runner's: {sorted(host_paths - RUNNER_HOST_PATHS)}")
        if spec.get("nodeSelector", {}).get("cairn.dev/runner") != "true":
            problems.append(f"{name}: not confined to the cairn.dev/runner node pool")
    elif host_paths:
        problems.append(f"{name}: host path volumes {sorted(host_paths)}")
    if not runner and pod_sc.get("runAsNonRoot") is not True:
        problems.append(f"{name}: pod runAsNonRoot is not true")
    long_running = obj["kind"] not in ("Job", "CronJob")
    for c in spec.get("initContainers", []) + spec.get("containers", []):
        check_container(f'{name} container {c["name"]}', c, pod_sc, problems, runner)
    if long_running:
        for c in spec.get("containers", []):
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in c:
                    problems.append(f'{name} container {c["name"]}: no {probe}')


PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def check_health_probes(where, c, env, problems):
    """Every probe is gRPC health on the port of CAIRN_HEALTH_ADDR, declared by the container."""
    addr = env.get("CAIRN_HEALTH_ADDR", "")
    port = addr.rpartition(":")[2]
    if not port.isdigit():
        problems.append(f"{where}: CAIRN_HEALTH_ADDR {addr!r} names no port (the probes' health listener)")
        return
    port = int(port)
    if port not in {p.get("containerPort") for p in c.get("ports", [])}:
        problems.append(f"{where}: the health port {port} is not a declared container port")
    for probe in PROBES:
        if probe not in c:
            continue
        grpc = c[probe].get("grpc")
        if grpc is None:
            problems.append(f"{where}: {probe} is not a gRPC health probe")
        elif grpc.get("port") != port:
            problems.append(f"{where}: {probe} probes port {grpc.get('port')!r}, not the health port {port}")


def check_production(objs, problems):
    maps = config_maps(objs)
    for obj in objs:
        if obj["kind"] not in WORKLOADS:
            continue
        for c in pod_spec(obj).get("containers", []):
            where = f'{name_of(obj)} container {c["name"]}'
            env = container_env(obj, c, maps)
            expect = {"CAIRN_PROFILE": "production"}
            for key, value in expect.items():
                if env.get(key) != value:
                    problems.append(f"{where}: {key} is {env.get(key)!r}, not {value!r}")
            for key in ("CAIRN_NATS_CREDS", "CAIRN_TLS_CA"):
                if not env.get(key):
                    problems.append(f"{where}: {key} unset")
            if obj["kind"] != "Job":
                for key in ("CAIRN_TLS_CERT", "CAIRN_TLS_KEY"):
                    if not env.get(key):
                        problems.append(f"{where}: {key} unset")
            for key in ("CAIRN_TENANCY_URL", "CAIRN_TEMPLATES_URL", "CAIRN_COORDINATOR_URL"):
                if key in env and not env[key].startswith("https://"):
                    problems.append(f"{where}: {key} {env[key]!r} is not https")
            if not env.get("CAIRN_NATS_URL", "").startswith("tls://"):
                problems.append(f"{where}: CAIRN_NATS_URL {env.get('CAIRN_NATS_URL')!r} is not tls://")
            if "CAIRN_WEBHOOK_ALLOW_LOOPBACK" in env:
                problems.append(f"{where}: CAIRN_WEBHOOK_ALLOW_LOOPBACK is set")
            component = obj["metadata"]["name"]
            if component == "cairn-state-coordinator":
                if not env.get("CAIRN_OBJECT_STORE", "").startswith("s3://"):
                    problems.append(f"{where}: CAIRN_OBJECT_STORE is not s3://")
                if env.get("CAIRN_KMS_KEY", "local:").startswith("local:"):
                    problems.append(f"{where}: CAIRN_KMS_KEY is a local key file")
                if not env.get("CAIRN_PUBLIC_HTTP_URL", "").startswith("https://"):
                    problems.append(f"{where}: CAIRN_PUBLIC_HTTP_URL is not https")
            if component == "cairn-runner" and env.get("CAIRN_EXECUTOR") != "docker":
                problems.append(f"{where}: CAIRN_EXECUTOR is not docker")
            if obj["kind"] not in ("Job", "CronJob"):
                check_health_probes(where, c, env, problems)


def check(objs, production):
    problems = []
    workloads = [o for o in objs if o["kind"] in WORKLOADS]
    if not workloads:
        problems.append("no workloads rendered")
    for obj in workloads:
        check_pod(obj, problems)
    namespaces = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Namespace"}
    for obj in workloads:
        ns = obj["metadata"].get("namespace")
        if ns == RUNNERS_NAMESPACE:
            continue
        labels = namespaces.get(ns, {}).get("metadata", {}).get("labels", {})
        if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
            problems.append(f"{name_of(obj)}: namespace {ns} does not enforce the restricted profile")
    pdbs = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    for obj in workloads:
        if obj["kind"] != "Deployment":
            continue
        labels = obj["spec"]["template"]["metadata"].get("labels", {})
        covered = any(
            p["metadata"].get("namespace") == obj["metadata"].get("namespace")
            and all(labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items())
            for p in pdbs)
        if not covered:
            problems.append(f"{name_of(obj)}: no PodDisruptionBudget")
    if production:
        check_production(objs, problems)
    return problems


def self_test(objs, production):
    """Each way of breaking the install must be reported; returns the ones that were not."""
    def first(o, kind, namespace="cairn"):
        return next(m for m in o if m["kind"] == kind and m["metadata"].get("namespace") == namespace)

    def main_container(o, kind, namespace="cairn"):
        return pod_spec(first(o, kind, namespace))["containers"][0]

    def set_config(prefix, key, value):
        def breakage(o):
            for m in o:
                if m["kind"] == "ConfigMap" and m["metadata"]["name"].startswith(prefix):
                    m["data"][key] = value
        return breakage

    breakages = {
        "writable root": lambda o: main_container(o, "Deployment")["securityContext"].update(readOnlyRootFilesystem=False),
        "escalation": lambda o: main_container(o, "Job")["securityContext"].pop("allowPrivilegeEscalation"),
        "capability": lambda o: main_container(o, "Deployment")["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
        "root": lambda o: pod_spec(first(o, "Deployment"))["securityContext"].update(runAsNonRoot=False),
        "host path": lambda o: pod_spec(first(o, "Deployment"))["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "no requests": lambda o: main_container(o, "Deployment")["resources"].pop("requests"),
        "no probe": lambda o: main_container(o, "Deployment").pop("readinessProbe"),
        "token": lambda o: pod_spec(first(o, "Deployment")).pop("automountServiceAccountToken"),
        "latest image": lambda o: main_container(o, "Deployment").update(image="cairn/tenancy:latest"),
        "runner host path": lambda o: pod_spec(first(o, "DaemonSet", RUNNERS_NAMESPACE))["volumes"].append({"name": "h", "hostPath": {"path": "/etc"}}),
        "runner privileged": lambda o: main_container(o, "DaemonSet", RUNNERS_NAMESPACE)["securityContext"].update(privileged=True),
        "no PDB": lambda o: o.remove(first(o, "PodDisruptionBudget")),
        "namespace not restricted": lambda o: first(o, "Namespace", None)["metadata"]["labels"].pop("pod-security.kubernetes.io/enforce"),
    }
    if production:
        breakages["local profile"] = set_config("cairn-common", "CAIRN_PROFILE", "local")
        breakages["no NATS credentials"] = set_config("cairn-common", "CAIRN_NATS_CREDS", "")
        breakages["plaintext peer"] = set_config("cairn-common", "CAIRN_TENANCY_URL", "http://cairn-tenancy:50051")
        breakages["local key file"] = set_config("cairn-state-coordinator", "CAIRN_KMS_KEY", "local:/k.json")
        breakages["local object store"] = set_config("cairn-state-coordinator", "CAIRN_OBJECT_STORE", "file:///o")
        breakages["process executor"] = set_config("cairn-runner", "CAIRN_EXECUTOR", "process")
        breakages["no health listener"] = set_config("cairn-tenancy", "CAIRN_HEALTH_ADDR", "")
        breakages["TCP probe"] = lambda o: main_container(o, "Deployment").update(
            readinessProbe={"tcpSocket": {"port": "grpc"}, "periodSeconds": 10})
        breakages["probe on the TLS gRPC port"] = lambda o: main_container(o, "DaemonSet", RUNNERS_NAMESPACE).update(
            livenessProbe={"grpc": {"port": 50054}, "periodSeconds": 20})
        breakages["health port undeclared"] = lambda o: main_container(o, "Deployment").update(
            ports=[p for p in main_container(o, "Deployment")["ports"] if p.get("name") != "health"])
    missed = []
    for what, breakage in breakages.items():
        broken = copy.deepcopy(objs)
        breakage(broken)
        if not check(broken, production):
            missed.append(what)
    return missed


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    production = "--production" in argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    with open(args[0]) as f:
        objs = [o for o in yaml.safe_load_all(f) if o]
    problems = check(objs, production)
    for p in problems:
        print(f"security: {p}", file=sys.stderr)
    if problems:
        return 1
    if "--self-test" in argv:
        missed = self_test(objs, production)
        for m in missed:
            print(f"security self-test: breaking '{m}' was not reported", file=sys.stderr)
        if missed:
            return 1
    pods = sum(1 for o in objs if o["kind"] in WORKLOADS)
    print(f"security: {args[0]}: {pods} workloads checked, no problem")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
