"""A model's ``weights_hash`` remembered across runs, keyed by what the file system says about each file.

Hashing a checkpoint reads every byte: about 2 s of CPU for the 1.1 GB bundled Gemma 3, on every report. A
file's identity on disk (device, inode, size, modification and status-change times in nanoseconds) changes
whenever its bytes can have changed: writing a file sets its mtime and ctime, and the ctime cannot be set back
by a user (``os.utime`` sets mtime and moves ctime to now). So a digest computed for one identity is reused for
that identity, as git's index and ccache reuse theirs.

The one gap is a coarse clock: a file written twice within one tick of its file system's timestamps keeps its
identity. A digest is therefore stored only for files whose mtime and ctime were at least
:data:`RACY_SECONDS` old when the hash began (git's "racy" rule): a later write then has a later timestamp.
Checkpoints below :data:`MIN_BYTES` are hashed every time (under 0.1 s), so test and scratch checkpoints leave
no entries. Entries are small JSON files in ``hashes/`` under the cache directory
(:func:`~symtrans.numeric.bundled.cache_root`); delete it at any time. An unwritable cache is skipped.

The rule that defines the digest is the checker's (:func:`symtrans.checker.reader.model_hash`); the independent
checker (``symtrans verify``) never reads this cache: it hashes the files itself.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> d = Path(tempfile.mkdtemp()); f = d / "w"; _ = f.write_bytes(b"x")
>>> cached_digest([f], lambda: "digest", store=d)  # below MIN_BYTES: computed, not stored
'digest'
>>> list(d.glob("*.json"))
[]
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["RACY_SECONDS", "MIN_BYTES", "file_identity", "cached_digest"]

#: a digest is stored only when every file's mtime and ctime are this much older than the start of the hash
#: (FAT's 2 s timestamps are the coarsest a checkpoint is likely to sit on)
RACY_SECONDS = 2.0

#: checkpoints smaller than this are hashed every time (SHA-256 reads ~1 GB/s here: under 0.1 s)
MIN_BYTES = 64 << 20


def file_identity(path: Path) -> tuple[str, int, int, int, int, int]:
    """``(resolved path, device, inode, size, mtime_ns, ctime_ns)``: what changes when the file's bytes can.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> f = Path(tempfile.mkdtemp()) / "w"; _ = f.write_bytes(b"x")
    >>> before = file_identity(f); os.utime(f, ns=(before[4], before[4]))  # mtime set back to itself
    >>> file_identity(f)[:5] == before[:5], file_identity(f)[5] >= before[5]  # ctime is never set back
    (True, True)
    """
    st = os.stat(path)
    return (str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _entry(store: Path, key: list[tuple[str, int, int, int, int, int]]) -> Path:
    return store / (hashlib.sha256(repr(key).encode()).hexdigest() + ".json")


def cached_digest(files: list[Path], compute: Callable[[], str], *, store: Path | None = None,
                  min_bytes: int | None = None, racy_seconds: float | None = None) -> str:
    """``compute()``, or the digest it gave before for the same :func:`file_identity` of every file.

    ``store`` is the directory of entries (default: ``hashes/`` in the cache directory); ``min_bytes`` and
    ``racy_seconds`` are :data:`MIN_BYTES` and :data:`RACY_SECONDS` unless a test lowers them. The identities
    are read before ``compute`` runs and again after it: a file that changed while it was hashed gets no entry.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> d = Path(tempfile.mkdtemp()); f = d / "w"; _ = f.write_bytes(b"x")
    >>> cached_digest([f], lambda: "first", store=d, min_bytes=0), len(list(d.glob("*.json")))  # just written
    ('first', 0)
    >>> cached_digest([f], lambda: "first", store=d, min_bytes=0, racy_seconds=0), len(list(d.glob("*.json")))
    ('first', 1)
    >>> cached_digest([f], lambda: "recomputed", store=d, min_bytes=0)  # the same identity: the stored digest
    'first'
    >>> _ = f.write_bytes(b"y"); cached_digest([f], lambda: "recomputed", store=d, min_bytes=0)
    'recomputed'
    """
    if store is None:
        from symtrans.numeric.bundled import cache_root

        store = cache_root() / "hashes"
    min_bytes = MIN_BYTES if min_bytes is None else min_bytes
    racy_seconds = RACY_SECONDS if racy_seconds is None else racy_seconds
    try:
        key = [file_identity(f) for f in files]
    except OSError:
        return compute()
    small = sum(k[3] for k in key) < min_bytes
    entry = _entry(store, key)
    if not small:
        try:
            with open(entry) as fh:
                got = json.load(fh)
            if [tuple(k) for k in got["files"]] == key and isinstance(got["sha256"], str):
                return got["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    start = time.time_ns()
    digest = compute()
    try:
        settled = all(start - max(k[4], k[5]) >= racy_seconds * 1e9 for k in key)
        if small or not settled or [file_identity(f) for f in files] != key:
            return digest
        store.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"files": key, "sha256": digest, "hashed_at_ns": start}))
        os.replace(tmp, entry)
    except OSError:  # an unwritable cache: the digest stands, nothing is remembered
        pass
    return digest
