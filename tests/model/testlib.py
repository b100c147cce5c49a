"""Shared helpers of the Python model tests: a check counter that prints the closing
"N passed, N failed" line CI reads, and a cheap copy of a checkpoint folder."""
import os
import shutil
import sys

_counts = {"passed": 0, "failed": 0}


def check(cond, what):
    """Counts one assertion; prints what failed."""
    if cond:
        _counts["passed"] += 1
    else:
        _counts["failed"] += 1
        print("FAIL:", what, flush=True)


def finish(name):
    """Prints the closing line and exits non-zero on any failure (or no check at all)."""
    print(f"{name}: {_counts['passed']} passed, {_counts['failed']} failed")
    sys.exit(1 if _counts["failed"] or not _counts["passed"] else 0)


def link_copy(src, dst, copy_suffixes=(".json",)):
    """Copy of a checkpoint folder: files with the given suffixes are copied (so a test can
    edit them), everything else is a symlink to the original."""
    shutil.rmtree(dst, ignore_errors=True)
    for root, _, files in os.walk(src):
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            s, d = os.path.join(root, f), os.path.join(dst, rel, f)
            if f.endswith(copy_suffixes):
                shutil.copy(s, d)
            else:
                os.symlink(os.path.abspath(s), d)
    return dst
