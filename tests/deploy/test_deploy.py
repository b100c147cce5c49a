#!/usr/bin/env python3
"""The deployment files in deploy/ against the server they deploy.

Each file is parsed by the tool that will read it (PyYAML for the Kubernetes manifests,
`systemd-analyze verify` for the unit, `nginx -t` for the nginx example), then its
values are checked against the server: every option it passes is one `kztts serve --help`
lists, the probes ask /health and /ready on the port the server listens on, the grace
periods exceed the drain, the autoscaler's metric is one the server exports, and the
image carries the shared libraries the built binary needs. Nothing is started for real:
nginx and systemd only check their files, in a temporary prefix.

Usage: test_deploy.py --source SRC --kztts BUILD/kztts
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from testlib import check, finish  # noqa: E402

import yaml  # noqa: E402  (Debian python3-yaml)

DRAIN_DEFAULT = 25.0      # serve.h: drain_timeout default
REQUEST_TIMEOUT = 600.0   # serve.h: request_timeout default
MAX_BODY = 16 << 20       # serve.h: max_body default


def server_options(kztts):
    """The long options `kztts serve --help` lists, plus -m."""
    r = subprocess.run([kztts, "serve", "--help"], capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    opts = set(re.findall(r"(--[a-z][a-z0-9-]*)", text))
    check(r.returncode == 0 and "--port" in opts,
          f"`kztts serve --help` exits {r.returncode} and lists --port: {text[:200]!r}")
    return opts | {"-m"}


def parse_args(words):
    """Option -> value (None for a flag) of a `serve` argument list."""
    out, i = {}, 0
    while i < len(words):
        w = words[i]
        if w.startswith("-") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[w] = words[i + 1]
            i += 2
        else:
            out[w] = None
            i += 1
    return out


def check_options(where, args, known):
    for o in args:
        check(o in known, f"{where}: option {o} is not one `kztts serve --help` lists")


# --- Kubernetes -------------------------------------------------------------------------

def load_k8s(d):
    objs = {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".yaml"):
            continue
        try:
            docs = [x for x in yaml.safe_load_all(open(os.path.join(d, f))) if x]
        except yaml.YAMLError as e:
            check(False, f"{f}: YAML does not parse: {e}")
            continue
        check(len(docs) > 0, f"{f}: holds a document")
        objs[f] = docs
    return objs


def port_of(container, port):
    """A probe's or Service's port (a name or a number) as a number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    return None


def prestop_seconds(container):
    pre = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in pre:
        return float(pre["sleep"]["seconds"])
    cmd = pre.get("exec", {}).get("command", [])
    if len(cmd) == 2 and os.path.basename(cmd[0]) == "sleep":
        return float(cmd[1])
    return None


def mount_of(container, volumes, path):
    """(volume, mount) whose mountPath holds path, or (None, None)."""
    best = (None, None)
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best[1] is None or len(mp) > len(best[1]["mountPath"]):
                best = (volumes.get(m["name"]), m)
    return best


def check_k8s(src, known):
    d = os.path.join(src, "deploy", "k8s")
    objs = load_k8s(d)
    by_kind = {}
    for f, docs in objs.items():
        for o in docs:
            by_kind.setdefault(o.get("kind", "(values)"), []).append((f, o))
    for kind in ("Deployment", "Service", "PersistentVolumeClaim", "HorizontalPodAutoscaler",
                 "PodDisruptionBudget"):
        check(kind in by_kind, f"deploy/k8s has a {kind}")

    kust = objs.get("kustomization.yaml", [{}])[0]
    listed = set(kust.get("resources", []))
    for f, docs in objs.items():
        if any("apiVersion" in o and o.get("kind") != "Kustomization" for o in docs):
            check(f in listed, f"kustomization.yaml lists {f}")
    for f in listed:
        check(f in objs, f"kustomization.yaml's {f} exists")

    dep = by_kind.get("Deployment", [(None, {})])[0][1]
    pod = dep.get("spec", {}).get("template", {})
    spec = pod.get("spec", {})
    containers = spec.get("containers", [])
    check(len(containers) == 1, "the Deployment has one container")
    if not containers:
        return
    c = containers[0]
    words = [str(w) for w in c.get("command", []) + c.get("args", [])]
    check("serve" in words, f"the container runs `kztts serve`: {words}")
    args = parse_args(words[words.index("serve") + 1:] if "serve" in words else [])
    check_options("deployment.yaml", args, known)
    port = int(args.get("--port", 8000))
    check(args.get("--host") == "0.0.0.0", "the server listens on the pod's addresses (--host 0.0.0.0)")
    check(port_of(c, "http") == port, f"containerPort 'http' is the server's --port {port}")

    for probe, path in (("livenessProbe", "/health"), ("readinessProbe", "/ready"),
                        ("startupProbe", "/health")):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path, f"{probe} asks {path}: {get}")
        check(port_of(c, get.get("port")) == port, f"{probe} asks port {port}: {get}")
    check(c.get("readinessProbe", {}).get("failureThreshold", 3) == 1,
          "readiness fails at the first 503 (a draining pod leaves the endpoints at once)")

    drain = float(args.get("--drain-timeout", DRAIN_DEFAULT))
    pre = prestop_seconds(c)
    grace = spec.get("terminationGracePeriodSeconds", 30)
    check(pre is not None and pre > 0, f"a preStop sleep delays SIGTERM: {c.get('lifecycle')}")
    check(grace > drain + (pre or 0), f"terminationGracePeriodSeconds {grace} > drain {drain} + preStop {pre}")

    res = c.get("resources", {})
    for k in ("requests", "limits"):
        check("cpu" in res.get(k, {}) and "memory" in res.get(k, {}), f"resources.{k} has cpu and memory")

    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    pvcs = {o["metadata"]["name"]: o for _, o in by_kind.get("PersistentVolumeClaim", [])}
    v, m = mount_of(c, volumes, args.get("--voices-dir", ""))
    claim = (v or {}).get("persistentVolumeClaim", {}).get("claimName")
    check(claim in pvcs, f"--voices-dir is on a PersistentVolumeClaim of pvc.yaml: {claim}")
    if claim in pvcs:
        check("ReadWriteMany" in pvcs[claim]["spec"]["accessModes"], f"{claim} is ReadWriteMany (shared by replicas)")
    check(m is not None and not m.get("readOnly", False), "the voices volume is writable")
    v, m = mount_of(c, volumes, args.get("-m", ""))
    claim = (v or {}).get("persistentVolumeClaim", {}).get("claimName")
    check(claim in pvcs, f"the model (-m) is on a PersistentVolumeClaim of pvc.yaml: {claim}")
    check(m is not None and m.get("readOnly") is True, "the model volume is mounted read-only")
    v, m = mount_of(c, volumes, args.get("--api-key-file", ""))
    check(v is not None and "secret" in v, f"--api-key-file is in a Secret volume: {v}")

    sc = c.get("securityContext", {})
    check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True,
          "the container cannot escalate and has a read-only root")
    check(spec.get("securityContext", {}).get("runAsNonRoot") is True, "the pod runs as non-root")

    labels = pod.get("metadata", {}).get("labels", {})
    for f, pdb in by_kind.get("PodDisruptionBudget", []):
        sel = pdb["spec"].get("selector", {}).get("matchLabels", {})
        check(sel and all(labels.get(k) == v for k, v in sel.items()), f"{f}: selector matches the pods")
    for f, svc in by_kind.get("Service", []):
        sel = svc["spec"].get("selector", {})
        check(sel and all(labels.get(k) == v for k, v in sel.items()), f"{f}: selector matches the pods")
        for p in svc["spec"]["ports"]:
            check(port_of(c, p["targetPort"]) == port, f"{f}: targetPort reaches the server's port")

    metrics_h = open(os.path.join(src, "tools", "kztts", "serve", "metrics.h")).read()
    for f, hpa in by_kind.get("HorizontalPodAutoscaler", []):
        ref = hpa["spec"]["scaleTargetRef"]
        check(ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"],
              f"{f}: scales the Deployment")
        names = [mm["pods"]["metric"]["name"] for mm in hpa["spec"]["metrics"] if mm["type"] == "Pods"]
        check(names == ["kztts_requests_queued"], f"{f}: scales on kztts_requests_queued: {names}")
        for n in names:
            check(n in metrics_h, f"{f}: the server exports {n} (metrics.h)")
    adapter = objs.get("prometheus-adapter-values.yaml", [{}])[0]
    rules = adapter.get("rules", {}).get("custom", [])
    check(any("kztts_requests_queued" in r.get("seriesQuery", "") and
              r.get("name", {}).get("as") == "kztts_requests_queued" for r in rules),
          "prometheus-adapter-values.yaml serves kztts_requests_queued")
    ann = pod.get("metadata", {}).get("annotations", {})
    check(ann.get("prometheus.io/path") == "/metrics" and int(ann.get("prometheus.io/port", 0)) == port,
          "the scrape annotations point at /metrics on the server's port")


# --- systemd ----------------------------------------------------------------------------

def unit_values(text):
    vals = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            k, v = line.split("=", 1)
            vals.setdefault(k, []).append(v)
    return vals


def env_file(path):
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env


def seconds(v):
    m = re.fullmatch(r"(\d+)(s|min)?", v.strip())
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1) if m else None


def check_systemd(src, kztts, known):
    unit_path = os.path.join(src, "deploy", "kztts.service")
    text = open(unit_path).read()
    u = unit_values(text)
    env = env_file(os.path.join(src, "deploy", "kztts.env"))
    check(u.get("KillSignal") == ["SIGTERM"], "KillSignal=SIGTERM (the server drains on it)")
    check(u.get("Restart") == ["on-failure"], "Restart=on-failure")
    for k, v in (("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                 ("PrivateTmp", "yes")):
        check(u.get(k) == [v], f"{k}={v}")
    check(u.get("User", ["root"])[0] not in ("root", "0"), "runs as a dedicated user")
    check(any(e.endswith("/kztts.env") for e in u.get("EnvironmentFile", [])), "reads kztts.env")

    exec_start = u["ExecStart"][0]
    for var in re.findall(r"\$\{?([A-Z_]+)\}?", exec_start):
        check(var in env or var == "CREDENTIALS_DIRECTORY", f"ExecStart's ${var} is set by kztts.env or systemd")
    expanded = re.sub(r"\$\{?([A-Z_]+)\}?", lambda mm: env.get(mm.group(1), "/run/credentials/x"), exec_start)
    words = shlex.split(expanded)
    check(words[1:2] == ["serve"], f"ExecStart runs `kztts serve`: {words[:2]}")
    args = parse_args(words[2:])
    check_options("kztts.service + kztts.env", args, known)
    drain = float(args.get("--drain-timeout", DRAIN_DEFAULT))
    stop = seconds(u.get("TimeoutStopSec", ["90"])[0])
    check(stop is not None and stop > drain, f"TimeoutStopSec {stop} > --drain-timeout {drain}")
    cred = [c.split(":", 1)[0] for c in u.get("LoadCredential", [])]
    key = args.get("--api-key-file", "")
    check(os.path.basename(key) in cred, f"--api-key-file {key} is a LoadCredential= name {cred}")

    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("skipped: systemd-analyze verify (systemd-analyze not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        # verify wants ExecStart's program to exist: point it at the built binary.
        copy = os.path.join(tmp, "kztts.service")
        with open(copy, "w") as f:
            f.write(text.replace("/usr/local/bin/kztts", os.path.abspath(kztts)))
        r = subprocess.run([analyze, "verify", copy], capture_output=True, text=True, cwd=tmp, timeout=120)
        check(r.returncode == 0 and "kztts.service" not in r.stderr,
              f"systemd-analyze verify: exit {r.returncode}: {r.stderr.strip()}")


# --- nginx ------------------------------------------------------------------------------

def size_bytes(v):
    m = re.fullmatch(r"(\d+)([kKmMgG]?)", v)
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def check_nginx(src):
    conf = os.path.abspath(os.path.join(src, "deploy", "nginx.conf"))
    text = re.sub(r"#.*", "", open(conf).read())
    directives = {}
    for m in re.finditer(r"^\s*([a-z_]+)\s+([^;{]*)[;{]", text, re.M):
        directives.setdefault(m.group(1), []).append(m.group(2).strip())
    check("least_conn" in text, "the upstream balances on least_conn")
    check(directives.get("proxy_buffering") == ["off"], "proxy_buffering off (streaming)")
    nxt = " ".join(directives.get("proxy_next_upstream", [])).split()
    for w in ("error", "http_503", "http_429", "non_idempotent"):
        check(w in nxt, f"proxy_next_upstream retries on {w}")
    check("timeout" not in nxt, "proxy_next_upstream does not retry a timed-out synthesis")
    rt = [seconds(v) for v in directives.get("proxy_read_timeout", [])]
    check(rt and rt[0] > REQUEST_TIMEOUT, f"proxy_read_timeout {rt} above --request-timeout's default")
    mb = [size_bytes(v) for v in directives.get("client_max_body_size", [])]
    check(mb and mb[0] >= MAX_BODY, f"client_max_body_size {mb} admits --max-body's default")
    check("Authorization $http_authorization" in directives.get("proxy_set_header", []),
          "the Authorization header reaches the replicas")
    check(len(directives.get("server", [])) >= 2, "the upstream names several replicas")

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    check(nginx is not None, "nginx is installed (scripts/install-deps.sh)")
    if not nginx:
        return
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "logs"))
        # -p: every relative path (pid, temp dirs) in tmp; -e: not the system error log.
        r = subprocess.run([nginx, "-t", "-p", tmp + "/", "-c", conf, "-e", os.path.join(tmp, "logs", "error.log")],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "test is successful" in r.stderr,
              f"nginx -t: exit {r.returncode}: {r.stderr.strip()}")


# --- container image --------------------------------------------------------------------

def check_dockerfile(src, kztts):
    text = open(os.path.join(src, "deploy", "Dockerfile")).read()
    stages = re.split(r"^FROM ", text, flags=re.M)
    check(len(stages) == 3, "the Dockerfile has a build and a runtime stage")
    runtime = stages[-1] if stages else ""
    build = stages[1] if len(stages) > 1 else ""
    deps = open(os.path.join(src, "scripts", "install-deps.sh")).read()
    for pkg in re.findall(r"\b(lib[a-z0-9.+-]+-dev)\b", build):
        check(pkg in deps, f"the image's build dependency {pkg} is one of scripts/install-deps.sh's")
    check(re.search(r"^USER (?!0|root)", runtime, re.M) is not None, "the image runs as a non-root user")
    r = subprocess.run(["readelf", "-d", kztts], capture_output=True, text=True, timeout=60)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout)
    check(len(needed) > 0, f"readelf lists the binary's libraries: {r.stderr.strip()}")
    for lib in needed:
        # The C library, and the sanitizer runtimes of a sanitized test build (CI's ASan
        # pass), which no release image carries.
        if re.match(r"(libc|libm|ld-linux[^.]*|libpthread|libdl|libasan|libubsan|libtsan|liblsan)\.so", lib):
            continue  # libc6: in every image
        q = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True, timeout=60)
        pkgs = {line.split(":")[0] for line in q.stdout.splitlines() if line}
        check(any(re.search(rf"\b{re.escape(p)}\b", runtime) for p in pkgs),
              f"the runtime image installs {lib} (Debian package {sorted(pkgs)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--kztts", required=True)
    a = ap.parse_args()
    known = server_options(a.kztts)
    check_k8s(a.source, known)
    check_systemd(a.source, a.kztts, known)
    check_nginx(a.source)
    check_dockerfile(a.source, a.kztts)
    finish("test_deploy")


if __name__ == "__main__":
    main()
