"""One validation layer for command-line and API arguments, and bounded readers of user-named files.

Everything here is cheap: this module imports neither SymPy, torch nor
networkx, so the command line can refuse a bad argument before any heavy
import or computation. Every refusal is a :class:`~symtrans.errors.SymtransError`
(one line on stderr, exit status 2 at the command line).

What is checked:

* integers (type, range): sequence lengths, seeds, depths, layer indices;
* devices (``cpu``, ``cuda``, ``cuda:N``, ``mps``), claim ids (against cheap
  lists of ids, see :data:`symtrans.args.CHECKED_CLAIMS`), model directories (exist, hold
  ``config.json`` and weights) before anything is loaded;
* files the user names are read through :func:`read_json_file`: only
  regular files, at most a size cap, at most :data:`MAX_JSON_DEPTH` levels of
  nesting (counted before ``json.loads``), and no ``NaN``/``Infinity``;
* shard paths named by an index must stay inside the model directory
  (:func:`confined_file`);
* sizes whose exact value would be astronomically long are refused before
  SymPy computes them (:func:`check_exact_digits`);
* text from files (model names, paths) is made safe for a terminal
  (:func:`terminal_safe`); JSON is written strictly (:func:`dumps_strict`).

Examples
--------
>>> check_int(8, "--n", 1, 512)
8
>>> check_int(True, "n", 1, 512)
Traceback (most recent call last):
...
symtrans.errors.SymtransError: n: expected an integer, got True
>>> check_device("cuda:1"), check_device(None)
('cuda:1', None)
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from symtrans.errors import SymtransError, suggest

__all__ = [
    "MAX_SEED", "MAX_SIZE", "MAX_N", "MAX_DEPTH", "MAX_EXACT_DIGITS", "MAX_JSON_DEPTH", "CONFIG_MAX_BYTES",
    "INDEX_MAX_BYTES", "REPORT_MAX_BYTES", "MAX_NAME_CHARS", "MAX_INDEX_VALUES",
    "check_int", "check_seed", "check_device", "check_dtype", "RUN_DTYPES", "check_claim_ids", "check_model_dir",
    "read_json_file", "json_depth", "confined_file", "check_exact_digits", "terminal_safe",
    "finite_json", "dumps_strict", "utf8_safe", "check_text", "check_formats", "shard_names", "shard_file",
]

#: seeds go to ``random.Random``, ``torch.Generator.manual_seed`` (unsigned 64-bit) and ``seed + 1``
MAX_SEED = 2**63 - 1
#: no size of an architecture (and no --set value) may exceed this
MAX_SIZE = 10**15
#: an upper bound on a sequence length when no model bounds it (no model has more positions)
MAX_N = 1 << 20
#: depth of a measured variant stack: every state is kept (n x d_model floats each)
MAX_DEPTH = 1024
#: an exact value (e.g. an order d_ff!) with more decimal digits is refused before it is computed
MAX_EXACT_DIGITS = 200_000
#: nesting depth of any JSON file read (configs, shard indices, report.json)
MAX_JSON_DEPTH = 64
#: shard files one model.safetensors.index.json may name (the largest public checkpoints have a few hundred)
MAX_SHARDS = 4096
#: values (about commas + colons + 1) in one JSON file: a bound on what parsing allocates (a 1 MB report.json
#: has about 30,000); a 220 MB file of ``[[],[],...]`` would build 70 million lists
MAX_JSON_VALUES = 1 << 22
#: Characters of a model's name (a config's ``_name_or_path``: a path or a hub id, so PATH_MAX bounds it).
MAX_NAME_CHARS = 4096
#: Values a shard index may hold (two per tensor it names): the largest public checkpoints name about 10^5 tensors.
MAX_INDEX_VALUES = 1 << 20
#: at most this many items in a list of layers (``--layers``, ``layers=``): a longer list is a mistake, not a request
MAX_LAYER_ITEMS = 4096
CONFIG_MAX_BYTES = 16 << 20
INDEX_MAX_BYTES = 64 << 20
REPORT_MAX_BYTES = 256 << 20
#: float64 hidden states a measured stack may keep (depth x n x d_model x 8 bytes per variant)
MAX_STATE_BYTES = 4 << 30
#: longest --text accepted (characters); the model's positions bound the tokens later
MAX_TEXT_CHARS = 1 << 20


# ----------------------------------------------------------------- scalars
def check_int(value: Any, name: str, lo: int | None = None, hi: int | None = None, why: str = "") -> int:
    """Return ``value`` if it is an int (not a bool) in ``[lo, hi]``; else refuse in one line.

    Examples
    --------
    >>> check_int(0, "--n", 1)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --n 0: must be at least 1
    >>> check_int(10**9, "--n", 1, 512, "the model's positions")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --n 1000000000: must be at most 512 (the model's positions)
    >>> check_int("8", "n")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: n: expected an integer, got '8'
    """
    if isinstance(value, bool) or not isinstance(value, int):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise SymtransError(f"{name}: expected an integer, got {shown}")
    shown = str(value) if value.bit_length() <= 200 else f"({value.bit_length()}-bit integer)"
    if lo is not None and value < lo:
        raise SymtransError(f"{name} {shown}: must be at least {lo}")
    if hi is not None and value > hi:
        raise SymtransError(f"{name} {shown}: must be at most {hi}" + (f" ({why})" if why else ""))
    return value


def check_seed(seed: Any, name: str = "--seed") -> int:
    """A seed in ``[0, 2**63 - 1]`` (torch takes unsigned 64-bit seeds; ``seed + 1`` is used too).

    Examples
    --------
    >>> check_seed(2**70)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --seed 1180591620717411303424: must be at most 9223372036854775807 (seeds are 63-bit)
    """
    return check_int(seed, name, 0, MAX_SEED, "seeds are 63-bit")


_DEVICE = re.compile(r"^(cpu|mps|cuda(:[0-9]{1,3})?)$")


def check_device(device: Any, name: str = "--device") -> str | None:
    """``None`` (automatic), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

    Examples
    --------
    >>> check_device("<script>")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --device '<script>': expected cpu, cuda, cuda:N or mps
    """
    if device is None:
        return None
    if not isinstance(device, str) or not _DEVICE.match(device):
        shown = repr(device) if len(repr(device)) <= 40 else repr(device)[:37] + "..."
        raise SymtransError(f"{name} {terminal_safe(shown)}: expected cpu, cuda, cuda:N or mps")
    return device


#: the dtypes a run computes in (weights and forward pass); ``--dtype``/``dtype=`` take one of them
RUN_DTYPES: tuple[str, ...] = ("float64", "float32")


def check_dtype(dtype: Any, name: str = "dtype") -> str:
    """``float64`` or ``float32`` (:data:`RUN_DTYPES`).

    Examples
    --------
    >>> check_dtype("float16")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: dtype 'float16': expected float64 or float32
    """
    if not isinstance(dtype, str) or dtype not in RUN_DTYPES:
        raise SymtransError(f"{name} {terminal_safe(repr(dtype))[:40]}: expected {' or '.join(RUN_DTYPES)}")
    return dtype


def check_text(text: Any, name: str = "--text") -> str | None:
    """A string of at most :data:`MAX_TEXT_CHARS` characters, or ``None`` (its tokens are checked later).

    Examples
    --------
    >>> check_text(b"hi")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --text: expected a string, got bytes
    """
    if text is None:
        return None
    if not isinstance(text, str):
        raise SymtransError(f"{name}: expected a string, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise SymtransError(f"{name}: {len(text)} characters; at most {MAX_TEXT_CHARS} are accepted")
    return text


def check_formats(formats: Any, allowed: Iterable[str]) -> list[str]:
    """Formats as a list: a comma-separated string (``"md,json"``) or a sequence of names.

    Examples
    --------
    >>> check_formats("md", ["md", "json"]), check_formats(("json", "md"), ["md", "json"])
    (['md'], ['json', 'md'])
    >>> check_formats(None, ["md"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: formats: expected a string such as 'md,json' or a list of names, got NoneType
    """
    if isinstance(formats, str):
        items = formats.split(",")
    elif isinstance(formats, (list, tuple)) and all(isinstance(f, str) for f in formats):
        items = [s for f in formats for s in f.split(",")]
    else:
        raise SymtransError("formats: expected a string such as 'md,json' or a list of names, "
                            f"got {type(formats).__name__}")
    allowed = list(allowed)
    out: list[str] = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        if item not in allowed:
            raise SymtransError("--format: " + suggest(terminal_safe(item)[:40], allowed, "format"))
        if item not in out:
            out.append(item)
    if not out:
        raise SymtransError("--format: name at least one of " + ", ".join(allowed))
    return out


def check_claim_ids(ids: Any, known: Sequence[str], what: str = "claim") -> list[str]:
    """Every id must be in ``known`` (a cheap list); return them as a list.

    Examples
    --------
    >>> checked = ("prop-5.1", "thm-4.2", "thm-5.3", "thm-7.3")
    >>> check_claim_ids(["thm-4.2"], checked)
    ['thm-4.2']
    >>> check_claim_ids(["thm-42"], checked)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: unknown claim 'thm-42'; did you mean 'thm-4.2' or 'thm-7.3' or 'thm-5.3'?
    """
    if ids is None:
        return []
    if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
        raise SymtransError(f"{what} ids: expected a list of strings")
    for i in ids:
        if i not in known:
            raise SymtransError(suggest(terminal_safe(i)[:60], list(known), what))
    return list(ids)


# ----------------------------------------------------------------- files
def _regular_file(path: Path, what: str, max_bytes: int) -> os.stat_result:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SymtransError(f"{path}: no such {what}") from None
    except OSError as err:
        raise SymtransError(f"{path}: cannot read the {what} ({err.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise SymtransError(f"{path}: the {what} is not a regular file")
    if st.st_size > max_bytes:
        raise SymtransError(f"{path}: the {what} has {st.st_size} bytes; at most {max_bytes} are read")
    return st


def read_bytes_bounded(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (no devices, FIFOs or directories).

    Examples
    --------
    >>> read_bytes_bounded("/dev/zero", "config", 100)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /dev/zero: the config is not a regular file
    """
    p = Path(path)
    _regular_file(p, what, max_bytes)
    try:  # O_NONBLOCK: a FIFO swapped in after the check cannot block the open
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise SymtransError(f"{p}: cannot read the {what} ({err.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SymtransError(f"{p}: the {what} is not a regular file")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise SymtransError(f"{p}: the {what} has more than {max_bytes} bytes")
        return b"".join(chunks)
    except OSError as err:
        raise SymtransError(f"{p}: cannot read the {what} ({err.strerror})") from None
    finally:
        os.close(fd)


_SHAPE_WINDOW = 1 << 22  # bytes of JSON stripped of its strings at a time (bounds the regex's transient pieces)
_JSON_STRING = re.compile(rb'"[^"]*"')  # after escaped backslashes and quotes are gone: no backtracking state
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def _json_shape(data: bytes, limit: int, max_values: int = MAX_JSON_VALUES) -> tuple[int, int]:
    """``(depth, values)`` of JSON bytes, strings skipped, in C-speed passes of bounded memory (no regex per character).

    Escaped backslashes, then escaped quotes, are removed (a run of backslashes
    in a JSON string pairs up from the left, as ``bytes.replace`` does), so every
    remaining ``"`` delimits a string and one regex without alternation strips
    them. ``values`` bounds the number of parsed values (commas, colons and
    containers; past ``max_values`` the depth is not computed and reads 0); the
    depth is the number of rounds that remove the innermost ``[]`` pairs,
    stopping past ``limit``.
    """
    bare = data.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in data else data
    values, parts, start, end = 1, [], 0, len(bare)
    while start < end:  # a window at a time, so the regex's list of pieces stays small (not one per string)
        stop = min(end, start + _SHAPE_WINDOW)
        if bare.count(b'"', start, stop) % 2:  # the window ends inside a string: extend it past its closing quote
            close = bare.find(b'"', stop)
            stop = end if close < 0 else close + 1
        piece = _JSON_STRING.sub(b"0", bare[start:stop])
        values += piece.count(b",") + piece.count(b":")
        parts.append(piece.translate(_BRACKETS, _NOT_BRACKETS))
        del piece
        start = stop
    del bare
    brackets = b"".join(parts)
    values += brackets.count(b"[")
    if values > max_values:
        return 0, values
    depth = 0
    while brackets and depth <= limit:
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):  # unbalanced: what is left never closes
            return min(limit + 1, depth + shorter.count(b"[")), values
        brackets, depth = shorter, depth + 1
    return depth, values


def json_depth(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of JSON ``text`` (strings skipped), stopping once it exceeds ``limit``.

    Examples
    --------
    >>> json_depth('{"a": [1, {"b": "[[[\\\\\\"]"}]}')
    3
    >>> json_depth("[" * 10**6, limit=64), json_depth("[]" * 10**6), json_depth('["' + "\\\\n" * 10**6 + '"]')
    (65, 1, 1)
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return _json_shape(data, limit)[0]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name} (strict JSON has no NaN or Infinity)")


def read_json_file(path: str | os.PathLike[str], what: str, max_bytes: int = CONFIG_MAX_BYTES,
                   max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES) -> Any:
    """Parse a strict-JSON regular file of bounded size and nesting; refuse anything else in one line.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "c.json")
    >>> _ = open(p, "w").write('{"a": [1, 2]}')
    >>> read_json_file(p, "config")
    {'a': [1, 2]}
    >>> _ = open(p, "w").write("[" * 100000)
    >>> read_json_file(p, "config")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ...: the config nests deeper than 64 levels
    >>> _ = open(p, "w").write('{"margin": NaN}')
    >>> read_json_file(p, "report")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ...: malformed report: non-standard JSON constant NaN (strict JSON has no NaN or Infinity)
    """
    raw = read_bytes_bounded(path, what, max_bytes)
    depth, values = _json_shape(raw, max_depth, max_values)  # bytes: UTF-8 never puts '"' or '\\' in a multibyte char
    if values > max_values:
        raise SymtransError(f"{path}: the {what} holds more than {max_values} values (at most that many "
                            "are parsed)")
    if depth > max_depth:
        raise SymtransError(f"{path}: the {what} nests deeper than {max_depth} levels")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SymtransError(f"{path}: the {what} is not UTF-8 (byte {err.start})") from None
    del raw
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise SymtransError(f"{path}: malformed JSON in the {what} at line {err.lineno}: {err.msg}") from None
    except (ValueError, RecursionError) as err:
        raise SymtransError(f"{path}: malformed {what}: {str(err).splitlines()[0][:120]}") from None


def confined_file(directory: str | os.PathLike[str], name: Any, what: str) -> Path:
    """``directory / name`` if ``name`` is a relative path that stays inside ``directory``.

    Refused: non-strings, empty names, absolute paths, ``..`` components, NUL
    bytes, and symbolic links that resolve outside the directory (except, in a
    Hugging Face cache snapshot, into that repository's ``blobs/``).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> confined_file(d, "model-1.safetensors", "shard").name
    'model-1.safetensors'
    >>> confined_file(d, "../other/model.safetensors", "shard")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: shard '../other/model.safetensors': must name a file inside the model directory
    """
    if not isinstance(name, str):
        raise SymtransError(f"{what}: expected a file name, got {type(name).__name__}")
    parts = Path(name).parts
    if (not name or "\x00" in name or os.path.isabs(name) or "\\" in name or ".." in parts
            or len(name) > 4096):
        raise SymtransError(f"{what} {terminal_safe(repr(name))[:120]}: must name a file inside the model "
                            "directory")
    base = Path(directory)
    path = base / name
    real, root = os.path.realpath(path), os.path.realpath(base)
    roots = [root]
    if Path(root).parent.name == "snapshots":  # Hugging Face cache: snapshot files link into the repo's blobs/
        roots.append(str(Path(root).parent.parent / "blobs"))
    if not any(os.path.commonpath([real, r]) == r for r in roots):
        raise SymtransError(f"{what} {terminal_safe(repr(name))[:120]}: resolves outside the model directory "
                            "(a symbolic link?)")
    return path


#: model specs that name a bundled real model: all-MiniLM-L6-v2 ("default") and Gemma 3 270M (the ``gemma`` extra)
BUNDLED_MODELS = ("default", "gemma3-270m")


def check_model_dir(spec: Any, *, allow_pickle: bool = False, name: str = "--model") -> str:
    """Check a model spec before anything heavy is imported; return it as a string.

    ``"default"`` is the bundled model (``"gemma3-270m"`` the second one); a hub-like id (``org/name``) that is
    not a local path is left to the loader. A local path must be a directory
    (or its ``config.json``) with a regular ``config.json`` and weights.

    Examples
    --------
    >>> check_model_dir("default")
    'default'
    >>> check_model_dir("/no/such/model")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/model: no such model directory (pass a local directory with config.json and model.safetensors, or "default")
    >>> check_model_dir(None)
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: --model: expected "default", a model directory or a hub id, got NoneType
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec:
        raise SymtransError(f'{name}: expected "default", a model directory or a hub id, '
                            f"got {type(spec).__name__ if not isinstance(spec, str) else 'an empty string'}")
    if spec in BUNDLED_MODELS:
        return spec
    shown = terminal_safe(spec)
    if "\x00" in spec or len(spec) > 4096:
        raise SymtransError(f"{name}: not a usable path")
    p = Path(spec)
    if p.name == "config.json" and p.is_file():
        p = p.parent
    if not p.exists():
        parts = spec.split("/")
        hub_like = (1 <= len(parts) <= 2 and all(x and not x.startswith(".") for x in parts)
                    and not spec.startswith("/") and re.fullmatch(r"[A-Za-z0-9._/-]+", spec) is not None)
        if hub_like:
            return spec
        raise SymtransError(f"{shown}: no such model directory (pass a local directory with "
                            'config.json and model.safetensors, or "default")')
    if p.is_file():
        if p.suffix in (".bin", ".pt", ".pth", ".ckpt") and not allow_pickle:
            raise SymtransError(f"{shown}: pickled checkpoint refused (it can run code); "
                                "convert it to safetensors or pass --allow-pickle")
        raise SymtransError(f"{shown}: pass the model directory (with config.json), not a file")
    if not p.is_dir():
        raise SymtransError(f"{shown}: not a directory")
    cfg = p / "config.json"
    if not cfg.exists():
        raise SymtransError(f"{shown}: no config.json in the model directory")
    _regular_file(cfg, "config", CONFIG_MAX_BYTES)
    confined_file(p, cfg.name, "config")  # a config.json linked out of the directory is another model's
    names = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "model.pt", "model.bin")
    if not any((p / n).exists() or (p / n).is_symlink() for n in names):
        raise SymtransError(f"{shown}: no model.safetensors (or shard index) found")
    single, index = p / names[0], p / names[1]
    if single.exists() or single.is_symlink():
        confined_file(p, single.name, "shard")
    elif index.exists() or index.is_symlink():  # the shard list: read now, so a bad one is refused at once
        for shard in shard_names(p, index):
            shard_file(p, shard)
    return spec


def shard_file(directory: str | os.PathLike[str], name: Any) -> Path:
    """A weight file the model directory names: confined to it (:func:`confined_file`), present, a regular file.

    Examples
    --------
    >>> import tempfile
    >>> shard_file(tempfile.mkdtemp(), "model-1.safetensors")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: .../model-1.safetensors: shard listed in the model directory is missing
    """
    f = confined_file(directory, name, "shard")
    if not f.exists():
        raise SymtransError(f"{terminal_safe(str(f))}: shard listed in the model directory is missing")
    if not f.is_file():
        raise SymtransError(f"{terminal_safe(str(f))}: the weight file is not a regular file")
    return f


def shard_names(directory: Path, index: Path) -> list[str]:
    """The shard file names a ``model.safetensors.index.json`` lists (sorted, unique), its weight_map checked.

    The index itself must lie inside ``directory`` and be a bounded, strict JSON
    file; each name still has to pass :func:`confined_file` before it is opened.

    Examples
    --------
    >>> import json, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "i.json").write_text(json.dumps({"weight_map": {"a": "s2", "b": "s1", "c": "s2"}}))
    >>> shard_names(d, d / "i.json")
    ['s1', 's2']
    >>> _ = (d / "i.json").write_text(json.dumps({"weight_map": ["s1"]}))
    >>> shard_names(d, d / "i.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: .../i.json: malformed shard index (weight_map must be a non-empty object mapping tensor names to file names)
    """
    confined_file(directory, index.name, "shard index")
    try:
        st = os.stat(index)
    except OSError:
        st = None
    key = (os.path.realpath(index), st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else None
    if key is not None and _SHARD_NAMES.get(key) is not None:  # the check and the loader read one index once
        return list(_SHARD_NAMES[key])
    names = _read_shard_names(index)
    if key is not None:
        _SHARD_NAMES.clear()
        _SHARD_NAMES[key] = tuple(names)
    return names


_SHARD_NAMES: dict[tuple[Any, ...], tuple[str, ...]] = {}


def safetensors_files(directory: str | os.PathLike[str]) -> list[Path] | None:
    """The safetensors files of a model directory: ``model.safetensors``, else the shards its index lists.

    One rule for the loader (:mod:`symtrans.numeric.weights`) and the certificate checker
    (:mod:`symtrans.checker.reader`): each file confined to the directory, present and regular
    (:func:`shard_file`), the index bounded and well formed (:func:`shard_names`). ``None`` when the directory
    holds neither.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "model.safetensors").write_bytes(b"")
    >>> [f.name for f in safetensors_files(d)], safetensors_files(tempfile.mkdtemp())
    (['model.safetensors'], None)
    """
    directory = Path(directory)
    single, index = directory / "model.safetensors", directory / "model.safetensors.index.json"
    if single.exists() or single.is_symlink():
        return [shard_file(directory, single.name)]
    if index.exists() or index.is_symlink():
        return [shard_file(directory, name) for name in shard_names(directory, index)]
    return None


def tensor_shards(listing: Iterable[tuple[Path, Iterable[str]]]) -> dict[str, Path]:
    """Which file holds each tensor, given each file's tensor names: a tensor stored in two files is refused.

    Which copy an index means is not for a reader to guess; the loader and the checker both read through
    this rule, so neither can read a model the other refuses.

    Examples
    --------
    >>> tensor_shards([(Path("a"), ["x"]), (Path("b"), ["y"])])
    {'x': PosixPath('a'), 'y': PosixPath('b')}
    >>> tensor_shards([(Path("a"), ["x"]), (Path("b"), ["x"])])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: x: tensor stored in two shards (a and b); refused (each tensor must be in one shard)
    """
    first: dict[str, Path] = {}
    for f, keys in listing:
        for k in keys:
            if k in first:
                raise SymtransError(f"{terminal_safe(k)[:120]}: tensor stored in two shards "
                                    f"({terminal_safe(first[k].name)} and {terminal_safe(Path(f).name)}); "
                                    "refused (each tensor must be in one shard)")
            first[k] = f
    return first


def _read_shard_names(index: Path) -> list[str]:
    doc = read_json_file(index, "shard index", INDEX_MAX_BYTES, max_values=MAX_INDEX_VALUES)
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not wmap or not all(isinstance(v, str) for v in wmap.values()):
        raise SymtransError(f"{terminal_safe(str(index))}: malformed shard index (weight_map must be a "
                            "non-empty object mapping tensor names to file names)")
    names = sorted(set(wmap.values()))
    if len(names) > MAX_SHARDS:
        raise SymtransError(f"{terminal_safe(str(index))}: the shard index names {len(names)} shard files "
                            f"(at most {MAX_SHARDS} are opened)")
    return names


# ----------------------------------------------------------------- exact sizes
def _log10_bound(expr: Any, values: dict[Any, float]) -> float:
    """An upper bound on log10 |expr| with the symbols at ``values`` (SymPy expression, no evaluation)."""
    import sympy as sp

    if expr.is_Number:
        v = abs(float(expr)) if not expr.is_Integer else abs(int(expr))
        return math.log10(v) if v >= 1 else 0.0
    if expr.is_Symbol:
        v = values.get(expr)
        return math.log10(max(float(v), 1.0)) if v is not None else 0.0
    args = [_log10_bound(a, values) for a in expr.args]
    if isinstance(expr, sp.factorial):
        x = 10 ** min(args[0], 300)
        return math.lgamma(x + 1) / math.log(10) if x > 1 else 0.0
    if expr.is_Mul:
        return sum(args)
    if expr.is_Add:
        return max(args, default=0.0) + math.log10(max(len(args), 1))
    if expr.is_Pow:
        base, exp = expr.args
        e = _value_bound(exp, values)
        return max(args[0], 0.0) * max(e, 0.0) if e > 0 else 0.0
    return max(args, default=0.0)  # Min, Max, floor, ceiling, binomial-free piecewise: bounded by an argument


def _value_bound(expr: Any, values: dict[Any, float]) -> float:
    b = _log10_bound(expr, values)
    return 10 ** b if b < 300 else float("inf")


def check_exact_digits(expr: Any, values: dict[Any, Any], what: str) -> None:
    """Refuse an exact evaluation whose value would have more than :data:`MAX_EXACT_DIGITS` digits.

    The bound is computed from the expression tree (factorials by log-gamma)
    before SymPy evaluates anything.

    Examples
    --------
    >>> import sympy as sp
    >>> d = sp.Symbol("d_ff", positive=True, integer=True)
    >>> check_exact_digits(sp.factorial(d), {d: 4096}, "ffn-permutations")
    >>> check_exact_digits(sp.factorial(d), {d: 10**6}, "ffn-permutations")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: ffn-permutations: the exact value would have about 5565709 digits (at most 200000 are computed); choose smaller sizes
    """
    vals = {k: float(v) for k, v in values.items()
            if (isinstance(v, int) and not isinstance(v, bool)) or getattr(v, "is_Integer", False)}
    digits = _log10_bound(expr, vals)
    if digits > MAX_EXACT_DIGITS:
        shown = f"{digits:.0f}" if digits < 1e15 else "more than 10^15"
        raise SymtransError(f"{what}: the exact value would have about {shown} digits (at most "
                            f"{MAX_EXACT_DIGITS} are computed); choose smaller sizes")


# ----------------------------------------------------------------- output text
#: C0/C1 controls, line and paragraph separators, bidirectional overrides and lone surrogates (which no UTF-8
#: stream can write)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(text: str, keep_newlines: bool = True) -> str:
    """Escape control characters (ANSI escapes, C1 controls, bidirectional overrides, lone surrogates) as ``\\xNN``.

    Examples
    --------
    >>> terminal_safe("bert\\x1b[31mred")
    'bert\\\\x1b[31mred'
    >>> terminal_safe("a\\ud800b")
    'a\\\\ud800b'
    >>> terminal_safe("a\\nb"), terminal_safe("a\\nb", keep_newlines=False)
    ('a\\nb', 'a\\\\x0ab')
    """
    out = _CONTROL.sub(_escape_char, text)
    return out if keep_newlines else out.replace("\n", "\\x0a")


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """Lone surrogates (from a JSON ``\\ud800`` or a non-UTF-8 file name) as ``\\udXXX``, so UTF-8 can hold the text.

    Inside a JSON string the escape reads back as the same character.

    Examples
    --------
    >>> utf8_safe('{"name": "a\\ud800b"}')
    '{"name": "a\\\\ud800b"}'
    """
    return _SURROGATE.sub(_escape_char, text)


def finite_json(obj: Any) -> Any:
    """Map non-finite floats to the strings ``"inf"``, ``"-inf"`` and ``"nan"`` (recursively).

    The spelling of :func:`symtrans.evidence.strict_float`, so every output uses one.

    Examples
    --------
    >>> finite_json({"m": float("inf"), "l": [float("nan"), 1.5, -float("inf")]})
    {'m': 'inf', 'l': ['nan', 1.5, '-inf']}
    """
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity``: non-finite floats become strings first.

    Examples
    --------
    >>> dumps_strict({"margin": float("inf")})
    '{"margin": "inf"}'
    """
    default = kwargs.pop("default", None)
    if default is not None:  # resolve non-JSON values first, so their floats are mapped too
        obj = json.loads(json.dumps(obj, default=default, allow_nan=True), parse_constant=float)
    return json.dumps(finite_json(obj), allow_nan=False, **kwargs)
