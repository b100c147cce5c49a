"""Where `kztts synth`, `decode` and `quantize` write, on the tiny checkpoint.

- Devices and FIFOs are written through (exit 0) and stay what they are; a symlink is
  followed to the end of its chain and its target replaced in the target's own folder
  (keeping its permissions; a dangling link's target is created), the link stays a link.
- A write that fails (/dev/full, stdout on /dev/full, a file size limit standing in for
  a full disk) is one line naming the output and the reason, exit 1, and leaves nothing
  behind; -o and --dump-codes are committed together or not at all. Text on stdout
  (tokenize, speakers, info, bench --json, help) that cannot be written fails the same way.
- --dump-codes naming the file -o writes (also as ./x, through a link, a hard link, or "-"
  twice) exits 2 before any work.
- A signal removes only the process's own temporary file: two processes writing the
  same OUT, one interrupted, the other's file stays (and a quantize interrupted beside a
  synth writing the same name).
- On a terminal (a pseudo-terminal here) synth and decode to a file and quantize draw a
  progress line on stderr; without a terminal, or with --quiet, stderr stays empty.
  With --speed 2 synth's line ends at the seconds the file plays.
As root, the device cases use device nodes made in the work folder, so that a
regression could never replace the system's /dev/null or /dev/full.
"""
import argparse
import os
import pty
import resource
import shutil
import signal
import stat
import subprocess
import threading
import time

import testlib
from testlib import check, finish

WAV_BYTES = 44 + 5 * 1920 * 2  # 5 frames of 16-bit mono


class Env:
    def __init__(self, kztts, tiny, work):
        self.k, self.tiny, self.work = kztts, tiny, work
        self.synth = [kztts, "synth", "-m", tiny, "-s", "ryan", "--token-ids", "1,2,3",
                      "--frames", "5"]
        self.null, self.full = devices(work)

    def folder(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d)
        return d


def devices(work):
    """(null, full) character devices to write to, or (None, None) when none can be had."""
    if os.geteuid() != 0:
        return "/dev/null", "/dev/full"
    d = os.path.join(work, "dev")
    os.makedirs(d)
    nodes = []
    for name, minor in (("null", 3), ("full", 7)):
        path = os.path.join(d, name)
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            open(path, "wb").close()  # a nodev mount refuses this
        except OSError as e:
            print(f"note: no device nodes in {d} ({e}): the direct device cases are skipped")
            return None, None
        nodes.append(path)
    return nodes[0], nodes[1]


def failures():
    return testlib._counts["failed"]


def passed(failures_before, what):
    """Prints the section's "ok" line when none of its checks failed."""
    if failures() == failures_before:
        print("ok   " + what)


def link_text(path):
    return os.readlink(path) if os.path.islink(path) else None


def run(args, **kw):
    return subprocess.run(args, capture_output=True, timeout=300, **kw)


def is_chr(path):
    return stat.S_ISCHR(os.lstat(path).st_mode)


def partials(folder):
    return sorted(f for f in os.listdir(folder) if ".partial-" in f)


def one_line_failure(name, r, *needles):
    err = r.stderr.decode("utf-8", "replace").strip()
    check(r.returncode == 1, f"{name}: exit status {r.returncode}, want 1 ({err!r})")
    check(len(err.splitlines()) == 1, f"{name}: want one line on stderr, got {err!r}")
    for n in needles:
        check(n.lower() in err.lower(), f"{name}: {err!r} lacks {n!r}")
    return err


def ok_run(name, r):
    check(r.returncode == 0, f"{name}: exit status {r.returncode}: {r.stderr.decode()!r}")
    check(r.stderr == b"", f"{name}: stderr {r.stderr.decode()!r}")


def read_fifo(path, into):
    with open(path, "rb") as f:
        into.append(f.read())


# ---- B2: devices, FIFOs, symlinks -------------------------------------------------------

def devices_written_through(e, codes):
    f0 = failures()
    if not e.null:
        return
    for name, args in (("synth", e.synth),
                       ("decode", [e.k, "decode", "-m", e.tiny, "--codes", codes]),
                       ("quantize", [e.k, "quantize", "-m", e.tiny])):
        r = run(args + ["-o", e.null])
        check(r.returncode == 0, f"{name} -o null: {r.returncode} {r.stderr.decode()!r}")
        check(is_chr(e.null), f"{name} -o null: the device became a file")
        check(partials(os.path.dirname(e.null)) == [], f"{name} -o null: partial file left")
    r = run(e.synth + ["-o", os.path.join(e.work, "dumped.wav"), "--dump-codes", e.null])
    ok_run("synth --dump-codes null", r)
    check(is_chr(e.null), "--dump-codes null: the device became a file")
    passed(f0, "synth, decode, quantize -o NULL and --dump-codes NULL: written through")


def symlinks_followed(e):
    f0 = failures()
    d = e.folder("links")
    targets = e.folder("links_targets")
    target = os.path.join(targets, "t.wav")
    with open(target, "wb") as f:
        f.write(b"old")
    os.chmod(target, 0o640)
    link = os.path.join(d, "link.wav")
    os.symlink("../links_targets/t.wav", link)
    chain = os.path.join(d, "chain.wav")
    os.symlink("link.wav", chain)
    r = run(e.synth + ["-o", chain])
    ok_run("synth -o a chain of symlinks", r)
    check(link_text(chain) == "link.wav" and link_text(link) == "../links_targets/t.wav",
          "the symlinks were replaced")
    check(os.path.getsize(target) == WAV_BYTES, f"the target holds {os.path.getsize(target)} bytes")
    check(stat.S_IMODE(os.stat(target).st_mode) == 0o640, "the target lost its permissions")
    dangling = os.path.join(d, "dangling.f32")
    os.symlink("../links_targets/new.f32", dangling)
    r = run(e.synth + ["-o", dangling])
    ok_run("synth -o a dangling symlink", r)
    created = os.path.join(targets, "new.f32")
    check(os.path.islink(dangling) and os.path.exists(created) and
          os.path.getsize(created) == 5 * 1920 * 4,
          "a dangling link's target was not created")
    gguf_link = os.path.join(d, "q.gguf")
    os.symlink("../links_targets/q.gguf", gguf_link)
    r = run([e.k, "quantize", "-m", e.tiny, "-o", gguf_link])
    check(r.returncode == 0, f"quantize -o symlink: {r.stderr.decode()!r}")
    check(os.path.islink(gguf_link), "quantize replaced the symlink")
    check(run([e.k, "info", "-m", os.path.join(targets, "q.gguf")]).returncode == 0,
          "quantize through a symlink: the target does not load")
    null_link = os.path.join(d, "null.wav")  # to the system's device: never replaced here
    os.symlink("/dev/null", null_link)
    r = run(e.synth + ["-o", null_link])
    ok_run("synth -o symlink to /dev/null", r)
    check(link_text(null_link) == "/dev/null",
          "the link to /dev/null was replaced")
    check(partials(d) == [] and partials(targets) == [], "partial files left")
    r = run(e.synth + ["-o", targets])
    one_line_failure("synth -o a folder", r, targets, "is a directory")
    passed(f0, "symlinks followed (chain, dangling, to a device), links and permissions kept")


def fifos_written_through(e):
    f0 = failures()
    d = e.folder("fifo")
    fifo = os.path.join(d, "pipe")
    os.mkfifo(fifo)
    for name, args, head in (("synth", e.synth, b"RIFF"),
                             ("quantize", [e.k, "quantize", "-m", e.tiny], b"GGUF")):
        got = []
        reader = threading.Thread(target=read_fifo, args=(fifo, got), daemon=True)
        reader.start()
        r = run(args + ["-o", fifo])
        reader.join(timeout=60)
        check(r.returncode == 0, f"{name} -o FIFO: {r.returncode} {r.stderr.decode()!r}")
        check(got and got[0][:4] == head, f"{name} -o FIFO: the reader got {got[:1]!r:.60}")
        check(stat.S_ISFIFO(os.lstat(fifo).st_mode), f"{name} -o FIFO: not a FIFO any more")
    # A format that must seek back fails at once, without waiting for a reader.
    r = run(e.synth + ["-o", fifo, "--format", "flac"])
    one_line_failure("synth -o FIFO --format flac", r, fifo, "seek")
    check(sorted(os.listdir(d)) == ["pipe"], f"FIFO folder: {os.listdir(d)}")
    passed(f0, "synth and quantize -o FIFO: written through to the reader")


# ---- B4, B10: failed writes ------------------------------------------------------------

def limited(n_bytes):
    """preexec_fn: files larger than n_bytes fail with EFBIG (a full disk's stand-in)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, n_bytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return apply


def failed_writes(e, codes):
    f0 = failures()
    if e.full:
        r = run(e.synth + ["-o", e.full])
        one_line_failure("synth -o FULL", r, e.full, "No space left on device")
        check(is_chr(e.full), "synth -o FULL: the device became a file")
        r = run([e.k, "quantize", "-m", e.tiny, "-o", e.full])
        one_line_failure("quantize -o FULL", r, e.full, "No space left on device")
        d = e.folder("codes_full")
        r = run(e.synth + ["-o", os.path.join(d, "out.wav"), "--dump-codes", e.full])
        one_line_failure("synth --dump-codes FULL", r, e.full, "No space left on device")
        check(os.listdir(d) == [], f"--dump-codes FULL: left {os.listdir(d)}")
    with open("/dev/full", "wb") as full:  # a shell's "> /dev/full"
        r = subprocess.run(e.synth + ["-o", "-"], stdout=full, stderr=subprocess.PIPE,
                           timeout=300)
    one_line_failure("synth -o - > /dev/full", r, "stdout", "No space left on device")
    # A regular file that cannot grow: the audio (and the codes with it) are not kept.
    d = e.folder("too_large")
    out, dumped = os.path.join(d, "out.wav"), os.path.join(d, "codes.txt")
    r = run(e.synth + ["-o", out, "--dump-codes", dumped], preexec_fn=limited(10000))
    one_line_failure("synth, file size limit", r, out, "File too large")
    check(os.listdir(d) == [], f"synth, file size limit: left {os.listdir(d)}")
    for fmt in ("flac", "f32"):
        decoded = os.path.join(d, "out." + fmt)
        r = run([e.k, "decode", "-m", e.tiny, "--codes", codes, "-o", decoded],
                preexec_fn=limited(1000))
        one_line_failure(f"decode to {fmt}, file size limit", r, decoded, "File too large")
    gguf = os.path.join(d, "q.gguf")
    r = run([e.k, "quantize", "-m", e.tiny, "-o", gguf], preexec_fn=limited(1 << 20))
    one_line_failure("quantize, file size limit", r, gguf, "File too large")
    check(os.listdir(d) == [], f"decode/quantize, file size limit: left {os.listdir(d)}")
    passed(f0, "full device, full stdout, size limit: one line naming the output, nothing left")


def text_to_failed_stdout(e):
    """Commands whose product is text on stdout (ids, lists, reports, JSON, help): a
    write that fails there is the same one-line failure, never exit 0 with the text lost."""
    f0 = failures()
    m = ["-m", e.tiny]
    commands = (("tokenize", ["tokenize"] + m + ["Hello there."]), ("speakers", ["speakers"] + m),
                ("info", ["info"] + m), ("synth --help", ["synth", "--help"]),
                ("bench --json", ["bench"] + m + ["--decoder-only", "--frames", "2", "--repeat",
                                                  "1", "--peak-gbs", "1", "--peak-gflops", "1",
                                                  "--json"]))
    for name, args in commands:
        with open("/dev/full", "wb") as full:  # a shell's "> /dev/full"
            r = subprocess.run([e.k] + args, stdout=full, stderr=subprocess.PIPE, timeout=300)
        one_line_failure(f"{name} > /dev/full", r, "stdout", "No space left on device")
    r = run([e.k, "tokenize"] + m + ["Hello there."], preexec_fn=lambda: os.close(1))
    one_line_failure("tokenize with stdout closed", r, "stdout", "Bad file descriptor")
    passed(f0, "text on a full or closed stdout: one line naming stdout, exit 1")


# ---- B3: signals and other processes' files ----------------------------------------------

def wait_for(cond, what):
    deadline = time.time() + 120
    while not cond() and time.time() < deadline:
        time.sleep(0.01)
    check(cond(), f"timed out waiting for {what}")


def start(args):
    # SIGINT as a terminal would deliver it, even if this test runs with it ignored.
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def two_writers(e):
    f0 = failures()
    d = e.folder("two_writers")
    out = os.path.join(d, "out.wav")
    foreign = out + ".partial-foreign"
    open(foreign, "wb").close()
    long_synth = e.synth[:-1] + ["100000", "-o", out]  # --frames 100000: runs until stopped
    a = start(long_synth)
    wait_for(lambda: len(partials(d)) == 2, "the first writer's partial file")
    a_file = [f for f in partials(d) if f != os.path.basename(foreign)]
    b = start(long_synth)
    wait_for(lambda: len(partials(d)) == 3, "the second writer's partial file")
    b_file = [f for f in partials(d) if f != os.path.basename(foreign) and f not in a_file]
    a.send_signal(signal.SIGINT)
    a.wait(timeout=60)
    check(a.returncode == -signal.SIGINT, f"first writer: exit status {a.returncode}")
    left = partials(d)
    check(left == sorted([os.path.basename(foreign)] + b_file),
          f"after SIGINT to one writer: {left} (want the other's {b_file} and the foreign one)")
    check(b.poll() is None, "the second writer stopped")
    b.send_signal(signal.SIGTERM)
    b.wait(timeout=60)
    check(b.returncode == -signal.SIGTERM, f"second writer: exit status {b.returncode}")
    check(os.listdir(d) == [os.path.basename(foreign)], f"after both: {os.listdir(d)}")
    passed(f0, "two processes writing one OUT: a signal removes only the signalled one's file")

    # quantize (its temporary file is the library's) beside a synth writing the same name
    f0 = failures()
    gguf = os.path.join(d, "q.gguf")
    other = start(e.synth[:-1] + ["100000", "--format", "wav", "-o", gguf])
    wait_for(lambda: any(f.startswith("q.gguf.partial-") for f in os.listdir(d)),
             "the synth writing q.gguf")
    others = [f for f in partials(d) if f.startswith("q.gguf.")]
    statuses = set()
    for delay in (0.0, 0.1, 0.3, 0.6):
        q = start([e.k, "quantize", "-m", e.tiny, "-o", gguf, "--type", "q4_0"])
        time.sleep(delay)
        q.send_signal(signal.SIGTERM)
        q.wait(timeout=120)
        statuses.add(q.returncode)
        check(q.returncode in (0, -signal.SIGTERM), f"quantize: exit status {q.returncode}")
        left = [f for f in partials(d) if f.startswith("q.gguf.")]
        check(left == others, f"quantize, SIGTERM after {delay} s: partial files {left}")
        if os.path.exists(gguf):  # finished before the signal: complete
            check(run([e.k, "info", "-m", gguf]).returncode == 0, "an incomplete q.gguf")
            os.unlink(gguf)
    other.send_signal(signal.SIGTERM)
    other.wait(timeout=60)
    check(os.listdir(d) == [os.path.basename(foreign)], f"at the end: {os.listdir(d)}")
    passed(f0, f"quantize interrupted beside another writer of its name (statuses {statuses})")


# ---- -o and --dump-codes naming one file ----------------------------------------------

def same_file(e):
    """--dump-codes naming the file -o writes (by any spelling, link or stdout) exits 2 with
    one line before any work and writes nothing; an existing file named so stays as it was.
    Two names of one device (/dev/null) and two different files are fine."""
    f0 = failures()
    d = e.folder("same")
    old = os.path.join(d, "old.wav")
    open(old, "wb").write(b"old")
    os.link(old, os.path.join(d, "hard.wav"))
    os.symlink("old.wav", os.path.join(d, "to_old.wav"))
    os.symlink("new.wav", os.path.join(d, "to_new.wav"))  # dangling: new.wav is created
    os.makedirs(os.path.join(d, "sub"))
    rel = os.path.relpath(d)
    cases = [("x and x", "new.wav", "new.wav"), ("x and ./x", "new.wav", "./new.wav"),
             ("x and its absolute path", "new.wav", os.path.join(d, "new.wav")),
             ("x and sub/../x", "new.wav", "sub/../new.wav"),
             ("a dangling link and its target", "to_new.wav", "new.wav"),
             ("an existing file twice", "old.wav", "./old.wav"),
             ("a link and its target", "old.wav", "to_old.wav"),
             ("a hard link", "hard.wav", "old.wav"),
             ("stdout twice", "-", "-")]
    for name, out, dumped in cases:
        for a, b in ((out, dumped), (dumped, out)):
            r = run(e.synth + ["-o", a, "--dump-codes", b], cwd=d)
            err = r.stderr.decode().strip()
            check(r.returncode == 2 and len(err.splitlines()) == 1 and "same file" in err,
                  f"-o {a} --dump-codes {b} ({name}): {r.returncode} {err!r}")
            check(r.stdout == b"" and sorted(os.listdir(d)) == ["hard.wav", "old.wav", "sub",
                                                                "to_new.wav", "to_old.wav"],
                  f"{name}: wrote {len(r.stdout)} bytes, left {sorted(os.listdir(d))}")
            check(open(os.path.join(d, "old.wav"), "rb").read() == b"old", f"{name}: old.wav")
    # stdout and its name under /dev (a pipe here), and stdout redirected into the file.
    r = run(e.synth + ["-o", "-", "--dump-codes", "/dev/stdout"])
    check(r.returncode == 2 and r.stdout == b"", f"-o - --dump-codes /dev/stdout: {r.returncode}")
    with open(os.path.join(d, "old.wav"), "ab") as f:
        r = subprocess.run(e.synth + ["--dump-codes", "-", "-o", "old.wav"], cwd=d, stdout=f,
                           stderr=subprocess.PIPE, timeout=300)
    check(r.returncode == 2, f"--dump-codes - into old.wav -o old.wav: {r.returncode}")
    r = run(e.synth + ["-o", os.path.join(rel, "a.wav"), "--dump-codes",
                       os.path.join(rel, "a.codes")])
    ok_run("-o a.wav --dump-codes a.codes", r)
    if e.null:
        r = run(e.synth + ["-o", e.null, "--dump-codes", e.null])
        ok_run("-o NULL --dump-codes NULL", r)
    passed(f0, "-o and --dump-codes naming one file: exit 2, nothing written")


# ---- progress on a terminal --------------------------------------------------------------

def on_tty(args):
    """Runs args with stderr on a pseudo-terminal; returns (status, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: every holder of the terminal closed it
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=300)
    os.close(master)
    return p.returncode, b"".join(chunks).decode("utf-8", "replace")


def progress_lines(e, codes):
    f0 = failures()
    d = e.folder("progress")
    out = os.path.join(d, "out.wav")
    cases = (("synth", e.synth + ["-o", out], ("synth: ", "s of audio", "real time")),
             ("decode", [e.k, "decode", "-m", e.tiny, "--codes", codes, "-o", out],
              ("decode: ", "0.4 / 0.4 s of audio", "real time")),
             ("quantize", [e.k, "quantize", "-m", e.tiny, "-o", os.path.join(d, "q.gguf")],
              ("quantize: 0/", "tensors")))
    for name, args, needles in cases:
        rc, tty = on_tty(args)
        check(rc == 0, f"{name} on a terminal: exit status {rc}: {tty!r}")
        for n in needles:
            check(n in tty, f"{name} on a terminal: {tty!r} lacks {n!r}")
        check("\r" in tty, f"{name} on a terminal: the line is not redrawn in place: {tty!r}")
        if name == "quantize":
            last = tty.strip().split("\r")[-1]
            words = last.split()
            count = words[1].split("/") if len(words) == 3 else []
            check(len(count) == 2 and count[0] == count[1], f"quantize progress ends at {last!r}")
        rc, tty = on_tty(args + ["--quiet"])
        check(rc == 0 and tty.strip() == "", f"{name} --quiet on a terminal: {tty!r}")
        r = run(args)
        check(r.returncode == 0 and r.stderr == b"", f"{name} without a terminal: {r.stderr!r}")
    rc, tty = on_tty(e.synth + ["-o", "-"])
    check(rc == 0 and "synth:" not in tty, f"synth to stdout on a terminal: {tty[:200]!r}")
    progress_with_speed(e, d, codes)
    passed(f0, "progress lines on a terminal only, not with --quiet")


def progress_with_speed(e, d, codes):
    """synth and decode --speed 2: the progress line counts the audio written (about half
    of what was made), which is what the file plays; decode's total is the same."""
    out = os.path.join(d, "fast.s16")
    cases = (("synth", e.synth[:-1] + ["25"]),  # --frames 25: 2 s of audio made
             ("decode", [e.k, "decode", "-m", e.tiny, "--codes", codes]))
    for name, args in cases:
        rc, tty = on_tty(args + ["--speed", "2", "-o", out])
        last = tty.strip().split("\r")[-1]
        words = last.split()
        said = float(words[1]) if rc == 0 and len(words) > 2 and words[0] == name + ":" else -1.0
        played = os.path.getsize(out) / 2 / 24000 if rc == 0 else -2.0
        check(abs(said - played) <= 0.051 and played < 1.5,
              f"{name} --speed 2 progress ends at {last!r}; the file plays {played:.3f} s")
        if name == "decode":
            total = float(words[3]) if len(words) > 3 and words[2] == "/" else -1.0
            check(abs(total - played) <= 0.051, f"decode --speed 2 total in {last!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kztts", required=True)
    ap.add_argument("--tiny", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    if os.path.exists(a.work):
        shutil.rmtree(a.work)
    os.makedirs(a.work)
    e = Env(a.kztts, a.tiny, a.work)
    codes = os.path.join(a.work, "codes.txt")
    r = run(e.synth + ["-o", os.path.join(a.work, "first.wav"), "--dump-codes", codes])
    ok_run("synth --dump-codes", r)
    devices_written_through(e, codes)
    symlinks_followed(e)
    fifos_written_through(e)
    failed_writes(e, codes)
    text_to_failed_stdout(e)
    two_writers(e)
    same_file(e)
    progress_lines(e, codes)
    finish("test_outputs")


if __name__ == "__main__":
    main()
