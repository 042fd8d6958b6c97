"""The weights hash remembered across runs (symtrans.numeric.hashcache): reused only for an unchanged file.

Each test that reuses a digest has its false case: the same path, size and mtime with other bytes (mtime set
back with os.utime, or the file replaced by another inode) must be hashed again, and the loader's
``weights_hash`` must then equal the checker's own hash of the new bytes.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from symtrans.checker.reader import model_hash
from symtrans.numeric import hashcache, weights
from symtrans.numeric.hashcache import cached_digest, file_identity

pytestmark = pytest.mark.quick


def _aged(path, seconds=10.0):
    """Set ``path``'s mtime ``seconds`` back (its ctime moves to now: the racy rule still applies)."""
    old = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(old, old))


class _Counter:
    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


def test_an_unchanged_file_reuses_its_digest(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 100)
    first = _Counter("d1")
    assert cached_digest([f], first, store=tmp_path / "h", min_bytes=0, racy_seconds=0) == "d1"
    again = _Counter("d2")
    assert cached_digest([f], again, store=tmp_path / "h", min_bytes=0, racy_seconds=0) == "d1"
    assert (first.calls, again.calls) == (1, 0)


def test_same_size_and_mtime_with_other_bytes_is_hashed_again(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 100)
    cached_digest([f], _Counter("old"), store=tmp_path / "h", min_bytes=0, racy_seconds=0)
    st = os.stat(f)
    f.write_bytes(b"b" * 100)  # the same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime: only the ctime tells
    assert file_identity(f)[3:5] == (st.st_size, st.st_mtime_ns)
    fresh = _Counter("new")
    assert cached_digest([f], fresh, store=tmp_path / "h", min_bytes=0, racy_seconds=0) == "new"
    assert fresh.calls == 1


def test_a_file_replaced_by_another_inode_is_hashed_again(tmp_path):
    f, other = tmp_path / "w.bin", tmp_path / "other.bin"
    f.write_bytes(b"a" * 100)
    cached_digest([f], _Counter("old"), store=tmp_path / "h", min_bytes=0, racy_seconds=0)
    other.write_bytes(b"b" * 100)
    os.replace(other, f)
    assert cached_digest([f], _Counter("new"), store=tmp_path / "h", min_bytes=0, racy_seconds=0) == "new"


def test_a_recently_written_file_gets_no_entry(tmp_path):
    """The racy rule: a file whose ctime is within RACY_SECONDS of the hash is never remembered."""
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 100)
    _aged(f)
    cached_digest([f], _Counter("d"), store=tmp_path / "h", min_bytes=0)
    assert not (tmp_path / "h").exists() or not list((tmp_path / "h").iterdir())
    # the false case of this test: with the rule off the same call does store an entry
    cached_digest([f], _Counter("d"), store=tmp_path / "h", min_bytes=0, racy_seconds=0)
    assert len(list((tmp_path / "h").glob("*.json"))) == 1


def test_a_corrupt_or_unwritable_store_only_costs_the_hash(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 100)
    store = tmp_path / "h"
    cached_digest([f], _Counter("d"), store=store, min_bytes=0, racy_seconds=0)
    (entry,) = store.glob("*.json")
    entry.write_text("{not json")
    assert cached_digest([f], _Counter("e"), store=store, min_bytes=0, racy_seconds=0) == "e"
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    assert cached_digest([f], _Counter("g"), store=blocked / "h", min_bytes=0, racy_seconds=0) == "g"


def test_the_loaders_hash_follows_the_bytes_not_the_stat(tmp_path, monkeypatch):
    """End to end: load, rewrite one weight byte keeping size and mtime, load again: the checker's hash."""
    from symtrans.checker.reader import bundled_model_path

    src = bundled_model_path()
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(src / name, ckpt / name)
    monkeypatch.setenv("SYMTRANS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hashcache, "RACY_SECONDS", 0.0)
    files = [ckpt / "model.safetensors"]
    first = weights.stream_model(str(ckpt)).weights_hash
    assert first == model_hash(ckpt / "config.json", files)
    assert len(list((tmp_path / "cache" / "hashes").glob("*.json"))) == 1  # remembered (the file is > MIN_BYTES)
    st = os.stat(files[0])
    with open(files[0], "r+b") as fh:  # the last byte of the last tensor's data
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    os.utime(files[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    second = weights.stream_model(str(ckpt), hash_weights=True).weights_hash
    assert second == model_hash(ckpt / "config.json", files)
    assert second != first
