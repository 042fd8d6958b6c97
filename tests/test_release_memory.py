"""symtrans.threads.release_free_memory hands freed heap pages back: the resident set falls by what was freed.

A fresh interpreter fills 256 MiB of glibc heap (mmap and top trimming turned off, as after glibc raises its
thresholds), frees it and reads VmRSS; the false case is the same process without the call, where the freed
pages stay resident.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import ctypes, sys
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD: every block from the heap
libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: free() never trims the heap's top
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) // 1024
from symtrans.threads import release_free_memory
blocks = [libc.malloc(1 << 20) for _ in range(256)]
for b in blocks:
    libc.memset(b, 1, 1 << 20)
full = rss()
for b in blocks:
    libc.free(b)
freed = rss()
done = release_free_memory() if sys.argv[1] == "release" else None
print(full, freed, rss(), done)
"""


def _run(mode: str) -> tuple[int, int, int, str]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-2000:]
    full, freed, after, done = out.stdout.split()
    return int(full), int(freed), int(after), done


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists("/proc/self/status"),
                    reason="glibc and /proc: Linux only")
def test_freed_heap_pages_leave_the_resident_set_only_when_released():
    full, freed, after, done = _run("keep")  # the false case: freed, not released
    assert done == "None" and freed > full - 64 and after > full - 64
    full, freed, after, done = _run("release")
    assert done == "True" and freed > full - 64  # free() alone kept the pages
    assert after < full - 192  # 256 MiB freed: at least 192 MiB of it left the resident set
