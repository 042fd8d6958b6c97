"""Output directories written atomically, under a lock, never lost (light: no SymPy, torch or networkx).

A report directory ``DIR`` is written like this:

1. :func:`check_output_dir` refuses, before any work, a ``DIR`` that is a
   symbolic link, a file, a directory holding anything but report files, a
   name too long for the file system, or a parent where nothing can be created.
2. :class:`DirLock` takes an exclusive ``flock`` on ``.DIR.lock`` beside
   ``DIR`` for the whole run: a second writer into the same ``DIR`` is refused
   (exit 2) instead of silently losing its files. The lock dies with its
   process, so a killed run never blocks later ones.
3. Under the lock, :func:`recover` cleans up after killed runs: stale
   ``.DIR.tmp-*`` folders are removed, and if ``DIR`` is missing while a
   ``.DIR.old-*`` folder holds the previous report, that report is put back.
4. :func:`replace_dir` writes every file into a fresh ``.DIR.tmp-*`` folder
   (fsynced), then swaps it with ``DIR`` in one step (Linux ``renameat2``
   with ``RENAME_EXCHANGE``): at every instant ``DIR`` holds the complete old
   report or the complete new one. Where the exchange is unavailable the old
   report is first moved to ``.DIR.old-*/report`` (so a kill at that moment
   leaves it for step 3 to restore), then the new folder is renamed into place.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()) / "rep"
>>> with DirLock(d):
...     _ = replace_dir(d, {"report.md": "# one\\n"}, ("report.md",))
...     _ = replace_dir(d, {"report.md": "# two\\n"}, ("report.md",))
>>> (d / "report.md").read_text(), sorted(p.name for p in d.parent.iterdir())
('# two\\n', ['rep'])
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import terminal_safe

__all__ = ["OutputError", "output_path", "check_output_dir", "check_output_file", "confined_dir", "DirLock", "recover", "replace_dir", "write_file"]

class OutputError(SymtransError):
    """The output folder cannot be written (full disk, read-only, a link planted in it): no run can go on there.

    A sweep stops on it (one line, exit 2) rather than record it as one task's failure.

    Examples
    --------
    >>> isinstance(OutputError("x"), SymtransError)
    True
    """


_HELD: dict[str, int] = {}  # lock paths this process holds -> depth (re-entrant)


def _name_max(parent: Path) -> int:
    try:
        return int(os.pathconf(parent, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


def output_path(out: Any, option: str = "--out", what: str = "a report") -> Path:
    """The absolute path of an output directory ``out`` (``option`` names it in messages; ``what`` is what goes there).

    Refused in one line: anything but a non-empty path without NUL, a relative path in a working directory
    deleted under us, and the root directory.

    Examples
    --------
    >>> output_path("/tmp/rep").name
    'rep'
    >>> output_path("/", "--out", "a checkpoint")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /: cannot write a checkpoint over the root directory
    """
    if isinstance(out, os.PathLike):
        out = os.fspath(out)
    if not isinstance(out, str) or not out or "\x00" in out:
        raise SymtransError(f"{option}: expected a directory path, got "
                            f"{type(out).__name__ if not isinstance(out, str) else repr(out)[:40]}")
    try:
        path = Path(os.path.abspath(out))
    except FileNotFoundError:  # a relative --out (the default too) in a working directory deleted under us
        raise SymtransError(f"{option} {terminal_safe(out)}: the working directory no longer exists; "
                            f"pass an absolute {option}") from None
    if not path.name:
        raise SymtransError(f"{terminal_safe(out)}: cannot write {what} over the root directory")
    return path


def check_output_dir(out: Any, files: Iterable[str]) -> Path:
    """Check that a report can be written to directory ``out`` (holding only ``files``); return its Path.

    Missing parent directories are created (as ``mkdir -p`` would), so that ``--out runs/today/report`` works
    on a fresh tree; a file anywhere on the way, or a parent that cannot be created, is refused in one line.

    Examples
    --------
    >>> check_output_dir("/etc/hostname", ["report.md"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /etc/hostname: a file is in the way (the report is a directory)
    >>> check_output_dir("/proc/no/such/report", ["report.md"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /proc/no/such: cannot create the directory to hold the report (...)
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> check_output_dir(root + "/new/deeper/report", ["report.md"]).parent.is_dir()
    True
    >>> check_output_dir("/tmp/" + "x" * 300, ["report.md"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --out: the name has 300 bytes; at most ... fit beside the temporary names
    """
    path = output_path(out)
    shown = terminal_safe(str(out))
    allowed = set(files)
    parent = path.parent
    limit = _name_max(parent) - len(".tmp-") - 10
    if len(os.fsencode(path.name)) > limit:
        raise SymtransError(f"--out: the name has {len(os.fsencode(path.name))} bytes; at most {limit} fit "
                            "beside the temporary names")
    if path.is_symlink():
        raise SymtransError(f"{shown}: is a symbolic link; pass the real directory")
    if path.exists():
        if not path.is_dir():
            raise SymtransError(f"{shown}: a file is in the way (the report is a directory)")
        try:
            entries = list(path.iterdir())
        except OSError as err:
            raise SymtransError(f"{shown}: cannot list the directory ({err.strerror})") from None
        foreign = sorted(terminal_safe(p.name) for p in entries
                         if p.name not in allowed or p.is_symlink() or not p.is_file())
        if foreign:
            more = ", ..." if len(foreign) > 3 else ""
            raise SymtransError(f"{shown}: exists and holds other files ({', '.join(foreign[:3])}{more}); choose "
                                "a new or empty directory, or one holding only an earlier report")
    for p in [parent, *parent.parents]:
        if p.exists() and not p.is_dir():
            raise SymtransError(f"{terminal_safe(str(p))}: a file is in the way (the report is a directory)")
    if not parent.is_dir():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise SymtransError(f"{terminal_safe(str(parent))}: cannot create the directory to hold the report "
                                f"({err.strerror or type(err).__name__})") from None
    try:  # a real probe: os.access says yes to root even on /proc
        probe = tempfile.mkdtemp(prefix=f".{path.name}.probe-", dir=parent)
    except OSError as err:
        raise SymtransError(f"{terminal_safe(str(parent))}: cannot create the report there "
                            f"({err.strerror or type(err).__name__})") from None
    try:  # and one byte written and synced: a full disk still makes directories
        fd = os.open(os.path.join(probe, "x"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        raise SymtransError(f"{terminal_safe(str(parent))}: cannot write the report there "
                            f"({err.strerror or type(err).__name__})") from None
    finally:
        try:
            os.unlink(os.path.join(probe, "x"))
        except OSError:
            pass
        try:
            os.rmdir(probe)
        except OSError:  # already removed by a writer's recover() (a probe left by a killed run looks the same)
            pass
    return path


def _refuse_non_file(path: Path, shown: str, what: str, unreadable: str) -> None:
    """Refuse ``path`` when something other than a file or a link stands there (``unreadable``: the text, with
    ``{}`` for the reason, when it cannot even be looked at); nothing there is fine.

    Examples
    --------
    >>> import tempfile
    >>> _refuse_non_file(Path(tempfile.mkdtemp()), "d", "report", "cannot write there ({})")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: d: a directory is in the way of the report
    """
    import stat as _stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise SymtransError(f"{shown}: " + unreadable.format(_in_words(err))) from None
    if not (_stat.S_ISREG(st.st_mode) or _stat.S_ISLNK(st.st_mode)):
        kind = "a directory" if _stat.S_ISDIR(st.st_mode) else "something that is not a file"
        raise SymtransError(f"{shown}: {kind} is in the way of the {what}")


def _synced_temp(directory: Path, prefix: str, data: bytes | Callable[[str], Any]) -> str:
    """A new temporary file in ``directory`` holding ``data``, written and synced (removed again if that fails).

    ``mkstemp`` creates it with O_EXCL, so a link planted under the name is never followed. ``data`` is the bytes,
    or a function that writes the file at the path it is given (a writer that streams, such as safetensors'
    ``save_file``, with no copy of the whole file in memory).

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> tmp = _synced_temp(d, ".x.tmp-", b"abc")
    >>> Path(tmp).read_bytes(), Path(tmp).parent == d
    (b'abc', True)
    >>> Path(_synced_temp(d, ".y.tmp-", lambda path: Path(path).write_text("def"))).read_text()
    'def'
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        if callable(data):
            os.close(fd)
            data(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:  # the writer's own error too: no temporary file is left behind
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(path: str) -> None:
    """Remove ``path`` if it can be removed; a file already gone (or not removable) is no error here."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _in_words(err: OSError) -> str:
    return err.strerror or type(err).__name__


def confined_dir(root: str | os.PathLike[str], *parts: str, create: bool = True) -> Path:
    """The directory ``root/parts...``, each part created if missing and none of them a symbolic link.

    The one home for "every path a run writes stays under its output folder":
    every directory a sweep writes into (``tasks/<task>``, a report's parent)
    is reached through this function, which walks from ``root`` one name at a
    time with ``O_NOFOLLOW`` (``mkdir`` and ``open`` relative to the parent's
    descriptor), so a link planted anywhere under ``root`` (or ``root`` itself)
    is refused in one line, never followed. ``create=False`` only checks what
    is there (a missing part ends the walk).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> confined_dir(root, "tasks", "t1").relative_to(root).as_posix()
    'tasks/t1'
    >>> outside = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "tasks" / "t2").symlink_to(outside)
    >>> confined_dir(root, "tasks", "t2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.outdir.OutputError: .../tasks/t2: a symbolic link under the output folder; symtrans never writes through one (remove it)
    >>> list(outside.iterdir())
    []
    """
    base = Path(os.path.abspath(os.fspath(root)))
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

    def refuse(where: Path, err: OSError) -> OutputError:
        shown = terminal_safe(str(where))
        if err.errno == errno.ELOOP or (err.errno == errno.ENOTDIR and where.is_symlink()):
            return OutputError(f"{shown}: a symbolic link under the output folder; symtrans never writes "
                               "through one (remove it)")
        if err.errno == errno.ENOTDIR:
            return OutputError(f"{shown}: a file is in the way of a directory under the output folder")
        return OutputError(f"{shown}: cannot create the directory ({_in_words(err)})")

    for part in parts:
        if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\x00" in part:
            raise SymtransError(f"{terminal_safe(str(base))}: {terminal_safe(repr(part)[:80])} is not one file name")
    if create:
        try:
            base.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass
        except OSError as err:
            raise refuse(base, err) from None
    try:
        fd = os.open(base, flags)
    except FileNotFoundError:
        return base.joinpath(*parts)
    except OSError as err:
        raise refuse(base, err) from None
    here = base
    try:
        for part in parts:
            here = here / part
            if create:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                except OSError as err:
                    raise refuse(here, err) from None
            try:
                nfd = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise refuse(here, FileNotFoundError(errno.ENOENT, "removed while being created")) from None
                return base.joinpath(*parts)
            except OSError as err:
                raise refuse(here, err) from None
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    return here


def check_output_file(target: Any, option: str, what: str = "file") -> Path:
    """Probe, before any work, that the file ``target`` can be written; return its absolute Path.

    Refused in one line: an empty or non-string name, a directory (or
    anything but a file or a link) in the way, a parent that is a file, and a
    place where nothing can be written (a read-only folder, ``/proc``, a full
    disk: one byte is written to a temporary file beside the target, synced,
    and removed). A missing parent is probed at its nearest existing ancestor
    (:func:`write_file`'s caller creates it).

    Examples
    --------
    >>> check_output_file("", "--certificate-out")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --certificate-out '': expected a file name
    >>> check_output_file("/tmp", "--certificate-out", "certificate")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --certificate-out /tmp: a directory is in the way of the certificate
    >>> check_output_file("/proc/cert.json", "--certificate-out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --certificate-out /proc/cert.json: cannot write there (...)
    """

    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target.strip() or "\x00" in target:
        raise SymtransError(f"{option} {terminal_safe(repr(target))[:60]}: expected a file name")
    shown = f"{option} {terminal_safe(target)}"
    try:
        path = Path(os.path.abspath(target))
    except FileNotFoundError:
        raise SymtransError(f"{shown}: the working directory no longer exists; pass an absolute path") from None
    if target.endswith(os.sep) or not path.name:
        raise SymtransError(f"{shown}: names a directory; give a file name")
    if len(os.fsencode(path.name)) > _name_max(path.parent) - len(".tmp-") - 10:
        raise SymtransError(f"{shown}: the name is too long for the file system")
    _refuse_non_file(path, shown, what, "cannot write there ({})")
    probe_dir = path.parent
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise SymtransError(f"{shown}: {terminal_safe(str(probe_dir))} is a file, not a directory")
    try:  # a real write: os.access says yes to root on /proc and on a full disk
        _unlink_quietly(_synced_temp(probe_dir, f".{path.name[:64]}.probe-", b"\n"))
    except OSError as err:
        raise SymtransError(f"{shown}: cannot write there ({_in_words(err)})") from None
    return path


class DirLock:
    """An exclusive, non-blocking lock on directory ``out`` (``flock`` on ``.NAME.lock`` beside it).

    Re-entrant within one process; a second process is refused with a
    :class:`SymtransError`. The lock file is removed on release.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "rep"
    >>> with DirLock(d) as lock:
    ...     lock.path.name
    '.rep.lock'
    >>> list(d.parent.iterdir())
    []
    """

    def __init__(self, out: Any):
        self.out = output_path(out)
        self.path = self.out.parent / f".{self.out.name}.lock"
        self.fd: int | None = None

    def __enter__(self) -> DirLock:
        import fcntl

        key = str(self.path)
        if key in _HELD:
            _HELD[key] += 1
            return self
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0), 0o600)
            except OSError as err:
                raise SymtransError(f"{terminal_safe(str(self.out))}: cannot create the report there "
                                    f"({err.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise SymtransError(f"{terminal_safe(str(self.out))}: another symtrans run is writing a report "
                                    "there; wait for it or choose another --out") from None
            try:  # the holder before us may have unlinked the file we locked: then lock the new one
                same = os.path.samestat(os.fstat(fd), os.stat(self.path, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                _HELD[key] = 1
                return self
            os.close(fd)
        raise SymtransError(f"{terminal_safe(str(self.out))}: the report lock keeps changing; try again")

    def __exit__(self, *exc: Any) -> None:
        key = str(self.path)
        if _HELD.get(key, 0) > 1:
            _HELD[key] -= 1
            return
        _HELD.pop(key, None)
        if self.fd is not None:
            try:
                os.unlink(self.path)  # while still locked: nobody else can hold this inode now
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


def _siblings(path: Path, kind: str) -> list[Path]:
    prefix = f".{path.name}.{kind}-"
    try:
        return sorted(p for p in path.parent.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def recover(path: str | os.PathLike[str]) -> list[str]:
    """Clean up after killed runs (call under :class:`DirLock`); return what was done, in words.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "rep"
    >>> (d.parent / ".rep.old-x1" / "report").mkdir(parents=True)
    >>> _ = (d.parent / ".rep.old-x1" / "report" / "report.md").write_text("old")
    >>> (d.parent / ".rep.tmp-x2").mkdir()
    >>> recover(d)
    ['restored the earlier report from .rep.old-x1', 'removed .rep.tmp-x2', 'removed .rep.old-x1']
    >>> (d / "report.md").read_text(), sorted(p.name for p in d.parent.iterdir())
    ('old', ['rep'])
    >>> (d.parent / ".rep.probe-k1").mkdir(); _ = (d.parent / ".rep.probe-k1" / "x").write_bytes(b"\\n")
    >>> (d.parent / ".rep.probe-k2").mkdir(); _ = (d.parent / ".rep.probe-k2" / "data").write_text("not ours")
    >>> recover(d), sorted(p.name for p in d.parent.iterdir())  # a killed probe goes; anything else stays
    (['removed .rep.probe-k1'], ['.rep.probe-k2', 'rep'])
    """
    path = output_path(path)
    done: list[str] = []
    if not path.exists() and not path.is_symlink():
        for old in reversed(_siblings(path, "old")):  # newest name last; any holds a complete report
            if (old / "report").is_dir():
                os.rename(old / "report", path)
                done.append(f"restored the earlier report from {old.name}")
                break
    for kind in ("tmp", "old"):
        for p in _siblings(path, kind):
            shutil.rmtree(p, ignore_errors=True)
            if not p.exists():
                done.append(f"removed {p.name}")
    for p in _siblings(path, "probe"):  # a probe is an empty directory, or one holding only its one-byte "x"
        try:
            if p.is_symlink() or not p.is_dir():
                continue  # not a probe of ours: left alone
            inside = [q.name for q in p.iterdir()]
            if inside == ["x"] and (p / "x").is_file() and not (p / "x").is_symlink() \
                    and (p / "x").stat().st_size <= 1:
                os.unlink(p / "x")  # a run killed between writing the probe byte and removing it
            os.rmdir(p)
            done.append(f"removed {p.name}")
        except OSError:
            pass
    return done


def _libc_renameat2() -> Any:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.renameat2
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        func.restype = ctypes.c_int
        return func
    except (OSError, AttributeError, ImportError):
        return None


_renameat2: Any = _libc_renameat2()
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories; False where the system cannot."""
    if _renameat2 is None:
        return False
    import ctypes

    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err))


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_dir(out: str | os.PathLike[str], texts: dict[str, str], files: Iterable[str]) -> list[Path]:
    """Replace directory ``out`` by one holding ``texts`` (name -> text), never losing the old one.

    Call under :class:`DirLock` (it is taken here too, re-entrantly).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "r"
    >>> [p.name for p in replace_dir(d, {"report.md": "x"}, ["report.md"])]
    ['report.md']
    """
    path = check_output_dir(out, files)
    shown = terminal_safe(str(out))
    with DirLock(path):
        recover(path)
        parent = path.parent
        tmp: Path | None = None
        old: Path | None = None
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=parent))
            for name, text in texts.items():
                with open(tmp / name, "w", encoding="utf-8") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o777 & ~umask)
            _fsync_dir(tmp)
            if path.exists():
                if _exchange(tmp, path):  # DIR is the new report; tmp now holds the old one
                    _fsync_dir(parent)
                    shutil.rmtree(tmp, ignore_errors=True)
                    tmp = None
                    return [path / name for name in texts]
                old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=parent))
                os.rename(path, old / "report")  # a kill from here to the next rename: recover() restores it
            try:
                os.rename(tmp, path)
            except OSError:
                if old is not None:
                    os.rename(old / "report", path)
                raise
            tmp = None
            _fsync_dir(parent)
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise OutputError(f"{shown}: cannot write the report ({reason})") from None
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    return [path / name for name in texts]


def write_file(directory: str | os.PathLike[str], name: str, data: bytes | Callable[[str], Any],
               what: str = "file") -> Path:
    """Write ``directory/name`` atomically without following a symbolic link at that name.

    The bytes (or what the function ``data`` writes at the path it is given) go to a fresh temporary file in
    ``directory`` (``O_EXCL``, ``O_NOFOLLOW``), then ``os.replace`` puts it at ``name``: a symbolic link
    there is replaced, its target never written; a directory (or anything not
    a regular file or link) in the way is refused in one line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "target").write_text("keep")
    4
    >>> (d / "c.json").symlink_to(d / "target")
    >>> write_file(d, "c.json", b"new").name, (d / "target").read_text(), (d / "c.json").is_symlink()
    ('c.json', 'keep', False)
    >>> (d / "x.json").mkdir()
    >>> write_file(d, "x.json", b"new", "certificate")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: .../x.json: a directory is in the way of the certificate
    """

    base = Path(directory)
    path = base / name
    shown = terminal_safe(str(path))
    _refuse_non_file(path, shown, what, f"cannot write the {what} ({{}})")
    try:
        tmp = _synced_temp(base, f".{name}.tmp-", data)
        try:
            os.replace(tmp, path)  # replaces a link itself, never its target
        except OSError:
            _unlink_quietly(tmp)
            raise
    except OSError as err:
        raise OutputError(f"{shown}: cannot write the {what} ({err.strerror})") from None
    return path
