"""`kztts info -m owner/tiny` against tests/hub/fake_hub.py serving the tiny checkpoint:
download into an empty cache, reuse of the cache, offline use, resume after a dropped
or stalled connection, and every failure a user can meet (lying endpoint, wrong size,
404, 401, 500, unreachable endpoint, truncated transfer, a server that restarts every
resumed transfer and drops it, malformed listing entries, a looping pagination link,
write error), and --quiet on every command that downloads. A failure must exit non-zero with one line on stderr and leave no file at
its final place in the cache. Retries wait 20 ms (KZTTS_HUB_RETRY_MS) except where a
case says otherwise.

Each case starts its own fake hub (its own port and request log) and, unless it builds
on an earlier case, its own cache. Every process runs under a timeout.
"""
import argparse
import filecmp
import hashlib
import json
import os
import pty
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = "owner/tiny"
FILES = ("config.json", "generation_config.json", "model.safetensors",
         "preprocessor_config.json", "speech_tokenizer/config.json",
         "speech_tokenizer/model.safetensors", "speech_tokenizer/preprocessor_config.json")
CUT = 10_000_000  # where connections drop inside model.safetensors (23.9 MB)

passed = failed = 0
A = None  # parsed arguments


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)
    return cond


class Hub:
    """A fake hub process; .requests() reads its request log."""

    def __init__(self, name, *opts, root=None):
        self.log = os.path.join(A.work, name + ".log")
        cmd = [sys.executable, A.fake_hub, "--root", root or A.tiny, "--repo", REPO,
               "--log", self.log] + list(opts)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError("fake hub did not start: " + " ".join(cmd))
        self.url = "http://127.0.0.1:%d" % int(line.split()[1])

    def requests(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def file_requests(self, name=None):
        """Requests for files (resolve URLs and redirect targets), or for one file."""
        out = []
        for r in self.requests():
            p = r["path"].split("?")[0]
            if p.startswith("/" + REPO + "/resolve/"):
                path = p.split("/", 5)[5]  # /owner/tiny/resolve/REV/PATH
            elif p.startswith("/cdn/"):
                path = p.split("/", 3)[3]  # /cdn/SHA256/PATH
            else:
                continue
            if name is None or path == name:
                out.append(r)
        return out

    def tree_requests(self):
        return [r for r in self.requests() if r["path"].startswith("/api/models/")]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def closed_port_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port


def new_cache(name):
    path = os.path.join(A.work, "cache_" + name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def snapshot(cache):
    return os.path.join(cache, "models", "owner--tiny", "main")


def env_for(endpoint, cache, **extra):
    """The environment of one run; retries wait 20 ms instead of 1 s unless extra says
    otherwise (KZTTS_HUB_RETRY_MS=None: the default)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "KZTTS_", "XDG_CACHE"))}
    env["KZTTS_HUB_RETRY_MS"] = "20"
    if endpoint:
        env["KZTTS_HF_ENDPOINT"] = endpoint
    if cache:
        env["KZTTS_CACHE"] = cache
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def run(env, model=REPO, timeout=120, **kw):
    """Runs `kztts info -m model`; a run past the timeout is killed and reported as exit
    status None with "timed out" on stderr (a hang is a failure, not a crash of the test)."""
    cmd = [A.kztts, "info", "-m", model]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess(cmd, None, "", f"timed out after {timeout} s")
    r.seconds = time.monotonic() - t0
    return r


def same_as_source(cache, files=FILES):
    snap = snapshot(cache)
    return all(os.path.isfile(os.path.join(snap, f)) and
               filecmp.cmp(os.path.join(A.tiny, f), os.path.join(snap, f), shallow=False)
               for f in files)


def partials(cache):
    out = []
    for root, _, names in os.walk(cache):
        out += [os.path.join(root, n) for n in names if n.endswith(".incomplete")]
    return out


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def expect_ok(name, r, quiet=True):
    err = r.stderr.strip()
    ok = check(r.returncode == 0, f"{name}: exit {r.returncode}, stderr {err!r}")
    if quiet:
        check(err == "", f"{name}: expected a quiet stderr, got {err!r}")
    return ok


def expect_fail(name, r, *needles):
    err = r.stderr.strip()
    check(r.returncode == 1, f"{name}: exit {r.returncode} (want 1), stderr {err!r}")
    check(len(err.splitlines()) == 1, f"{name}: expected one line on stderr, got {err!r}")
    for n in needles:
        check(n in err, f"{name}: message {err!r} lacks {n!r}")
    print(f"ok   {name}: {err}", flush=True)


def expect_absent(name, cache, path, partial_too=True):
    final = os.path.join(snapshot(cache), path)
    check(not os.path.exists(final), f"{name}: {path} exists in the cache")
    if partial_too:
        check(not os.path.exists(final + ".incomplete"), f"{name}: {path}.incomplete left")


# --- cases --------------------------------------------------------------------------

def case_first_download():
    cache = new_cache("main")
    with Hub("first") as hub:
        r = run(env_for(hub.url, cache))
        expect_ok("first download", r)
        check(same_as_source(cache), "first download: cached files differ from the source")
        check(partials(cache) == [], "first download: .incomplete files left")
        check(snapshot(cache) in r.stdout, "first download: info does not show the cache path")
        for f in FILES:
            n = len([q for q in hub.file_requests(f) if q["status"] in (200, 206)])
            check(n == 1, f"first download: {f} fetched {n} times")
        check(any(q["path"].startswith("/cdn/") for q in hub.file_requests()),
              "first download: LFS files did not go through the redirect")
    print("ok   first download", flush=True)
    return cache


def case_second_run(cache):
    with Hub("second") as hub:
        r = run(env_for(hub.url, cache))
        expect_ok("second run", r)
        check(hub.file_requests() == [], f"second run: file requests {hub.file_requests()}")
        check(len(hub.tree_requests()) == 1, "second run: expected one listing request")
    print("ok   second run: no file requests", flush=True)


def case_offline(cache):
    with Hub("offline") as hub:
        r = run(env_for(hub.url, cache, HF_HUB_OFFLINE="1"))
        expect_ok("HF_HUB_OFFLINE=1", r)
        check(hub.requests() == [], "HF_HUB_OFFLINE=1: the hub was contacted")
    r = run(env_for(closed_port_url(), cache))
    expect_ok("unreachable endpoint, cached", r, quiet=False)
    err = r.stderr.strip()
    check(len(err.splitlines()) == 1 and "warning" in err and "cached copy" in err,
          f"unreachable endpoint, cached: expected one warning line, got {err!r}")
    print(f"ok   offline and unreachable with a cached copy: {err}", flush=True)
    r = run(env_for(closed_port_url(), new_cache("unreachable")))
    expect_fail("unreachable endpoint", r, "cannot reach", "127.0.0.1", "not in the cache")
    r = run(env_for(None, new_cache("offline_empty"), HF_HUB_OFFLINE="1"))
    expect_fail("offline, nothing cached", r, "HF_HUB_OFFLINE")


def case_resume_in_run():
    cache = new_cache("resume_once")
    with Hub("resume_once", "--drop", f"model.safetensors:{CUT}:1") as hub:
        r = run(env_for(hub.url, cache))
        expect_ok("drop once", r)
        check(same_as_source(cache), "drop once: cached files differ from the source")
        ranges = [q["range"] for q in hub.file_requests("model.safetensors")]
        check(f"bytes={CUT}-" in ranges, f"drop once: no resume request, saw {ranges}")
    print("ok   connection dropped mid-file, resumed in the same run", flush=True)


def case_truncated_then_resume():
    cache = new_cache("truncated")
    with Hub("truncated", "--drop", f"model.safetensors:{CUT}") as hub:
        r = run(env_for(hub.url, cache))
        expect_fail("truncated transfer", r, "model.safetensors", "cut off",
                    "gave up after 5 attempts", "run again")
        n = len([q for q in hub.file_requests("model.safetensors")
                 if q["path"].startswith("/cdn/")])
        check(n == 5, f"truncated transfer: {n} attempts, want 5")
    expect_absent("truncated transfer", cache, "model.safetensors", partial_too=False)
    part = os.path.join(snapshot(cache), "model.safetensors.incomplete")
    check(os.path.exists(part) and os.path.getsize(part) == CUT,
          "truncated transfer: the partial file was not kept for resuming")
    other = new_cache("ignore_range")
    shutil.copytree(cache, other)
    with Hub("resume_later") as hub:
        r = run(env_for(hub.url, cache))
        expect_ok("resume in a later run", r)
        check(same_as_source(cache), "resume in a later run: files differ from the source")
        got = hub.file_requests("model.safetensors")
        ranges = [q["range"] for q in got if q["path"].startswith("/cdn/")]
        check(ranges == [f"bytes={CUT}-"], f"resume in a later run: requests {ranges}")
        check(hub.file_requests("config.json") == [],
              "resume in a later run: config.json fetched again")
    print("ok   resume in a later run", flush=True)
    with Hub("ignore_range", "--ignore-range") as hub:
        r = run(env_for(hub.url, other))
        expect_ok("server ignores Range", r)
        check(same_as_source(other), "server ignores Range: files differ from the source")
        check(partials(other) == [], "server ignores Range: .incomplete files left")
    print("ok   server ignoring Range: restarted the file", flush=True)


def case_lying():
    want = sha256_of(os.path.join(A.tiny, "model.safetensors"))
    cache = new_cache("corrupt")
    with Hub("corrupt", "--corrupt", "model.safetensors") as hub:
        expect_fail("corrupted body", run(env_for(hub.url, cache)), "sha256 mismatch", want,
                    "model.safetensors")
    expect_absent("corrupted body", cache, "model.safetensors")
    cache = new_cache("wrong_sha")
    with Hub("wrong_sha", "--wrong-sha", "speech_tokenizer/model.safetensors") as hub:
        expect_fail("wrong sha256 listed", run(env_for(hub.url, cache)), "sha256 mismatch",
                    "speech_tokenizer/model.safetensors")
    expect_absent("wrong sha256 listed", cache, "speech_tokenizer/model.safetensors")
    cache = new_cache("corrupt_json")
    with Hub("corrupt_json", "--corrupt", "config.json") as hub:
        expect_fail("corrupted small file", run(env_for(hub.url, cache)), "sha1 mismatch",
                    "config.json")
    expect_absent("corrupted small file", cache, "config.json")
    for delta in ("100", "-100"):
        cache = new_cache("size" + delta)
        with Hub("size" + delta, "--wrong-size", "model.safetensors:" + delta) as hub:
            expect_fail(f"wrong size ({delta} bytes)", run(env_for(hub.url, cache)),
                        "size mismatch", "model.safetensors")
        expect_absent(f"wrong size ({delta} bytes)", cache, "model.safetensors")


def case_http_errors():
    with Hub("errors") as hub:
        cache = new_cache("errors")
        expect_fail("unknown repo", run(env_for(hub.url, cache), model="owner/missing"),
                    "owner/missing", "not found", "404")
        check(not os.path.exists(os.path.join(cache, "models", "owner--missing")),
              "unknown repo: left a folder in the cache")
        expect_fail("unknown revision", run(env_for(hub.url, cache), model="owner/tiny@v9"),
                    "revision 'v9'", "404")
    cache = new_cache("file404")
    with Hub("file404", "--status", "speech_tokenizer/model.safetensors:404") as hub:
        expect_fail("file 404", run(env_for(hub.url, cache)),
                    "speech_tokenizer/model.safetensors", "not found", "404")
    expect_absent("file 404", cache, "speech_tokenizer/model.safetensors")
    cache = new_cache("hidden")
    with Hub("hidden", "--hide", "model.safetensors") as hub:
        expect_fail("no weights in the repo", run(env_for(hub.url, cache)),
                    "has no model.safetensors")
    cache = new_cache("tree500")
    with Hub("tree500", "--status", "tree:500") as hub:
        expect_fail("listing answers 500", run(env_for(hub.url, cache)), "HTTP 500")
        n = len(hub.tree_requests())
        check(n == 5, f"listing answers 500: {n} attempts, want 5")
    cache = new_cache("file500")
    with Hub("file500", "--status", "model.safetensors:503:1") as hub:  # the default wait
        expect_ok("file answers 503 once",
                  run(env_for(hub.url, cache, KZTTS_HUB_RETRY_MS=None)))
        check(same_as_source(cache), "file answers 503 once: files differ from the source")
    print("ok   file answers 503 once: retried", flush=True)
    cache = new_cache("auth")
    with Hub("auth", "--token", "s3cret") as hub:
        expect_fail("private repo, no token", run(env_for(hub.url, cache)), "HTTP 401",
                    "HF_TOKEN")
        expect_fail("private repo, wrong token", run(env_for(hub.url, cache, HF_TOKEN="nope")),
                    "HTTP 401", "HF_TOKEN")
        expect_ok("private repo, HF_TOKEN", run(env_for(hub.url, cache, HF_TOKEN="s3cret")))
        check(same_as_source(cache), "private repo: files differ from the source")
    print("ok   private repo with HF_TOKEN", flush=True)


def case_restart_and_drop():
    """B5: a server that answers every Range request with the whole file and drops at the
    same byte makes no progress; kztts stops after 5 attempts instead of looping."""
    cache = new_cache("restart_drop")
    with Hub("restart_drop", "--ignore-range", "--drop", f"model.safetensors:{CUT}") as hub:
        r = run(env_for(hub.url, cache), timeout=60)
        expect_fail("Range ignored, then dropped", r, "model.safetensors", "cut off",
                    "gave up after 5 attempts", "ignores Range")
        got = [q for q in hub.file_requests("model.safetensors") if q["path"].startswith("/cdn/")]
        check(len(got) == 5, f"Range ignored, then dropped: {len(got)} attempts, want 5")
        check(all(q["status"] == 200 for q in got),
              "Range ignored, then dropped: the fake hub answered a Range request with 206")
    expect_absent("Range ignored, then dropped", cache, "model.safetensors", partial_too=False)


def case_bad_listing():
    """B1 and the pagination loop: a malformed entry or a looping "next" link is one line
    naming the problem, at once, and leaves nothing in the cache."""
    zeros = "0" * 40
    bad = [("negative size", 'config.json:{"size": -5, "oid": "%s"}' % zeros,
            "malformed entry for config.json"),
           ("fractional size", 'config.json:{"size": 1.5}', "malformed entry for config.json"),
           ("size as a string", 'config.json:{"size": "12"}', "malformed entry for config.json"),
           ("huge size", 'config.json:{"size": 1e300}', "malformed entry for config.json"),
           ("LFS entry without sha256", 'model.safetensors:{"lfs": {"size": 5}}',
            "malformed entry for model.safetensors"),
           ("LFS entry with a short sha256", 'model.safetensors:{"lfs": {"size": 5, "oid": "ab"}}',
            "malformed entry for model.safetensors")]
    for i, (name, patch, needle) in enumerate(bad):
        cache = new_cache("bad_entry")
        with Hub(f"bad_entry{i}", "--patch-entry", patch) as hub:
            expect_fail(name, run(env_for(hub.url, cache), timeout=60), needle, hub.url)
            check(hub.file_requests() == [], f"{name}: files were fetched")
        check(not os.path.exists(os.path.join(cache, "models")), f"{name}: cache touched")
    # The listing has an entry per file and per folder of the checkpoint, 2 a page.
    n_entries = sum(len(files) + len(dirs) for _, dirs, files in os.walk(A.tiny))
    last = (n_entries + 1) // 2
    for name, opts, pages, needle in (("next link to itself", ["--loop-link"], 1,
                                       "page 1 links to itself"),
                                      ("next links in a cycle", ["--loop-link", "--page-size", "2"],
                                       last, f"page {last} links back to page 1")):
        cache = new_cache("loop")
        with Hub(f"loop{pages}", *opts) as hub:
            expect_fail(name, run(env_for(hub.url, cache), timeout=60), "loops", needle)
            n = len(hub.tree_requests())
            check(n == pages, f"{name}: {n} listing requests, want {pages}")
        check(not os.path.exists(os.path.join(cache, "models")), f"{name}: cache touched")


def case_stall():
    cache = new_cache("stall")
    with Hub("stall", "--stall", f"model.safetensors:{CUT}:1") as hub:
        r = run(env_for(hub.url, cache, HF_HUB_DOWNLOAD_TIMEOUT="2"), timeout=60)
        expect_ok("stalled transfer", r)
        check(same_as_source(cache), "stalled transfer: files differ from the source")
        check(r.seconds < 30, f"stalled transfer: took {r.seconds:.1f} s")
    print(f"ok   stalled transfer detected and resumed ({r.seconds:.1f} s)", flush=True)


def case_write_error():
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    cache = new_cache("fsize")
    with Hub("fsize") as hub:
        r = run(env_for(hub.url, cache), preexec_fn=limit_file_size)
        expect_fail("write error", r, "cannot write", "File too large", "model.safetensors")
    expect_absent("write error", cache, "model.safetensors", partial_too=False)


def case_concurrent():
    cache = new_cache("concurrent")
    with Hub("concurrent", "--slow", "20000000") as hub:
        env = env_for(hub.url, cache)
        cmd = [A.kztts, "info", "-m", REPO]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for p in procs:
            try:
                _, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            check(p.returncode == 0, f"concurrent: exit {p.returncode}, stderr {err!r}")
        check(same_as_source(cache), "concurrent: files differ from the source")
        for f in FILES:
            n = len([q for q in hub.file_requests(f) if q["status"] in (200, 206)])
            check(n == 1, f"concurrent: {f} fetched {n} times")
    print("ok   two processes at once: each file fetched once", flush=True)


def case_upstream_change(base):
    cache = new_cache("changed")
    shutil.copytree(base, cache)
    root = os.path.join(A.work, "changed_root")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(A.tiny, root)
    with open(os.path.join(root, "config.json"), "a") as f:
        f.write("\n\n")
    with Hub("changed", root=root) as hub:
        expect_ok("file changed upstream", run(env_for(hub.url, cache)))
        got = [q["path"] for q in hub.file_requests()]
        check(got == ["/owner/tiny/resolve/main/config.json"],
              f"file changed upstream: fetched {got}")
        check(filecmp.cmp(os.path.join(root, "config.json"),
                          os.path.join(snapshot(cache), "config.json"), shallow=False),
              "file changed upstream: config.json not updated")
    with Hub("removed", "--hide", "generation_config.json") as hub:
        expect_ok("file removed upstream", run(env_for(hub.url, cache)))
        check(not os.path.exists(os.path.join(snapshot(cache), "generation_config.json")),
              "file removed upstream: still in the cache")
        got = [q["path"] for q in hub.file_requests()]
        check(got == ["/owner/tiny/resolve/main/config.json"],
              f"file removed upstream: fetched {got}")
    print("ok   upstream changes: changed file fetched, removed file dropped", flush=True)


def case_environment():
    with Hub("env") as hub:
        cache = new_cache("env")
        r = run(env_for(None, cache, HF_ENDPOINT=hub.url + "/"))
        expect_ok("HF_ENDPOINT", r)
        r = run(env_for(hub.url, cache, HF_ENDPOINT=closed_port_url()))
        expect_ok("KZTTS_HF_ENDPOINT before HF_ENDPOINT", r)
        check(len(hub.tree_requests()) == 2, "KZTTS_HF_ENDPOINT was not preferred")
        xdg = new_cache("xdg")
        r = run(env_for(hub.url, None, XDG_CACHE_HOME=xdg))
        expect_ok("XDG_CACHE_HOME", r)
        check(same_as_source(os.path.join(xdg, "kztts")), "XDG_CACHE_HOME: files not there")
        paged = new_cache("paged")
    with Hub("paged", "--page-size", "2") as hub:
        expect_ok("paginated listing", run(env_for(hub.url, paged)))
        check(same_as_source(paged), "paginated listing: files differ from the source")
        check(len(hub.tree_requests()) > 3, "paginated listing: Link pages not followed")
    with Hub("local") as hub:
        cwd = os.path.join(A.work, "cwd")
        shutil.rmtree(cwd, ignore_errors=True)
        os.makedirs(os.path.join(cwd, "owner"))
        os.symlink(os.path.abspath(A.tiny), os.path.join(cwd, "owner", "tiny"))
        r = run(env_for(hub.url, new_cache("local")), cwd=cwd)
        expect_ok("local directory named like a repo", r)
        check(hub.requests() == [], "local directory named like a repo: the hub was contacted")
    print("ok   endpoint, cache and local-path rules", flush=True)


def on_tty(cmd, env):
    """Runs cmd with stderr on a pseudo-terminal; returns (exit status, what it got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return p.returncode, out.decode(errors="replace")


def case_progress():
    cache = new_cache("tty")
    with Hub("tty", "--slow", "40000000") as hub:
        rc, text = on_tty([A.kztts, "info", "-m", REPO], env_for(hub.url, cache))
        check(rc == 0, f"progress bar: exit {rc}")
        for needle in ("downloading owner/tiny@main", "model.safetensors", "23.9 MB", "100%",
                       "MB/s"):
            check(needle in text, f"progress bar: {needle!r} not in {text[-300:]!r}")
    last = [s for s in text.replace("\r", "\n").splitlines() if "model.safetensors" in s][-1:]
    print(f"ok   progress bar on a terminal: {last}", flush=True)


def case_quiet():
    """Every command that can download takes --quiet / -q: on a terminal, into an empty
    cache, nothing reaches stderr."""
    codes = os.path.join(A.work, "quiet.codes")
    open(codes, "w").write(("0 " * 16).strip() + "\n")
    out = os.path.join(A.work, "quiet.wav")
    commands = {"info": [], "speakers": [], "tokenize": ["hi"],
                "synth": ["-s", "ryan", "--frames", "2", "-o", out, "hi"],
                "decode": ["--codes", codes, "-o", out],
                "bench": ["--decoder-only", "--frames", "2", "--repeat", "1", "--peak-gflops", "1"],
                "quality": ["--ref", REPO, "--frames", "2"]}
    with Hub("quiet", "--slow", "40000000") as hub:
        for i, (name, extra) in enumerate(commands.items()):
            flag = "-q" if i % 2 else "--quiet"
            rc, text = on_tty([A.kztts, name, "-m", REPO, flag] + extra,
                              env_for(hub.url, new_cache("quiet_" + name)))
            check(rc == 0 and text.strip() == "", f"{name} {flag} on a terminal: {rc} {text!r}")
    print("ok   --quiet / -q on every command that downloads", flush=True)


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--fake-hub", required=True)
    ap.add_argument("--work", required=True)
    A = ap.parse_args()
    if os.path.exists(A.work):
        shutil.rmtree(A.work)
    os.makedirs(A.work)
    base = case_first_download()
    case_second_run(base)
    case_offline(base)
    case_resume_in_run()
    case_truncated_then_resume()
    case_lying()
    case_http_errors()
    case_restart_and_drop()
    case_bad_listing()
    case_stall()
    case_write_error()
    case_concurrent()
    case_upstream_change(base)
    case_environment()
    case_progress()
    case_quiet()
    print(f"test_hub: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
