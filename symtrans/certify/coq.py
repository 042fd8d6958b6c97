"""The proof kernel: compile the Coq proofs, check them with ``coqchk``, compare them with the pinned statements.

:func:`kernel_check` is the comparator for the all-sizes results of
:data:`proofs.kernel.COQ_LINKS`. It fails closed: any of the following is a
refusal, one line, and no theorem counts.

1. The files are those ``_CoqProject`` lists (plain ``NAME.v`` in one
   directory, the statements file first), each present; a file that would subvert
   the tools (``Declare ML Module``, ``Unset Guard Checking`` and the like,
   ``Load``, ``Redirect``) is refused before anything runs.
2. The statements file's SHA-256 is the registry's pin
   (:data:`proofs.kernel.COQ_STATEMENTS_SHA256`).
3. The files are copied into a fresh temporary directory and compiled there
   with ``coqc`` (``-Q . Symtrans``, no ``COQ*`` environment variable), in order.
4. A generated check file (not one of the user's) requires the modules without
   importing them and, for each link, type-checks
   ``(Symtrans.M.name : Symtrans.Statements.name)``: a theorem that is missing,
   renamed, swapped or proves anything else is refused; and its
   ``Print Assumptions`` must list nothing beyond
   :data:`proofs.kernel.ALLOWED_ASSUMPTIONS` (empty). Once that passes, a second
   generated file lists each link's ``Print All Dependencies`` (the ``uses``).
5. ``coqchk -o -norec`` re-checks every compiled module of the project with
   Coq's independent checker (MathComp and the standard library are admitted:
   Debian's compiled libraries); its context summary must name no axiom of the
   project (``Symtrans.*``), no type-in-type, no unsafe fixpoint and no assumed
   positivity. The admitted libraries' sealed-module parameters
   (``mathcomp.*``, ``Coq.*``) appear there as axioms because they are not
   re-checked; they are the only ones allowed.

A success is cached (memory, and a file under the user's cache directory) under
the SHA-256 of every file, the pin, the links, the Coq version and this
module's source, so the producers of one report check the kernel once.

Examples
--------
>>> r = KernelResult(False, "coqc not found")
>>> r.ok, r.line()
(False, 'coq: refused: coqc not found')
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proofs.kernel import (ALLOWED_ASSUMPTIONS, COQ_DIR, COQ_LINKS, COQ_ROOT, COQ_STATEMENTS, COQ_STATEMENTS_SHA256,
                           INSTALL_HINT, CoqLink)

__all__ = ["KernelResult", "kernel_check", "coq_tools", "project_files", "CACHE_SCHEMA", "WARNINGS", "TIMEOUT_S"]

#: the cache entries' schema
CACHE_SCHEMA = "symtrans-coq-kernel/2"
#: warnings MathComp 1.15 raises on every import (notation overrides, coercion paths): silenced, never errors
WARNINGS = "-notation-overridden,-ambiguous-paths,-notation-incompatible-format"
#: the most seconds one coqc or coqchk call may take
TIMEOUT_S = 300
#: commands that would let a file subvert the compiler or the checker (matched outside nothing: fail closed)
_FORBIDDEN = re.compile(r"\b(Declare\s+ML\s+Module|Unset\s+(Guard|Positivity|Universe)\s+Checking|"
                        r"Local\s+Unset\s+(Guard|Positivity|Universe)|Load|Redirect|Cd|Drop|Extraction|"
                        r"Add\s+(LoadPath|Rec\s+LoadPath|ML\s+Path)|Typing\s+Flags|Bypass\s+Check)\b")
_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*\.v$")
_MEMO: dict[str, KernelResult] = {}


@dataclass(frozen=True)
class KernelResult:
    """The outcome of one kernel check: ``ok``, the refusal (one line) or the checked theorems.

    ``how`` says what ran: ``"coqc + coqchk"`` or ``"cache"`` (a success with the same file hashes and Coq version);
    ``theorems`` maps each linked theorem to its statement; ``files`` maps each file to its SHA-256.

    Examples
    --------
    >>> KernelResult(True, "", how="cache", coq="8.16.1").line()
    'coq: valid (cache, Coq 8.16.1): 0 theorems prove their pinned statements'
    """

    ok: bool
    reason: str = ""
    how: str = ""
    coq: str = ""
    theorems: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    unavailable: bool = False  # coqc or coqchk is not installed: nothing was checked
    uses: dict[str, list[str]] = field(default_factory=dict)  # theorem -> the other linked theorems its proof uses

    def line(self) -> str:
        """The one line ``symtrans verify --coq`` prints."""
        if not self.ok:
            return f"coq: {'not checked' if self.unavailable else 'refused'}: {self.reason}"
        return (f"coq: valid ({self.how}, Coq {self.coq}): {len(self.theorems)} theorems prove their pinned "
                "statements")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (what a record's ``details["kernel"]`` holds).

        Examples
        --------
        >>> KernelResult(False, "x", unavailable=True).to_dict()["unavailable"]
        True
        """
        return {"ok": self.ok, "reason": self.reason, "how": self.how, "coq": self.coq, "theorems": dict(self.theorems),
                "files": dict(self.files), "seconds": round(self.seconds, 2), "unavailable": self.unavailable,
                "uses": {k: list(v) for k, v in self.uses.items()},
                "statements_sha256": COQ_STATEMENTS_SHA256}


def coq_tools() -> tuple[str, str, str] | None:
    """``(coqc, coqchk, version)`` when both are installed, else None.

    Examples
    --------
    >>> tools = coq_tools()
    >>> tools is None or tools[2][0].isdigit()
    True
    """
    coqc, coqchk = shutil.which("coqc"), shutil.which("coqchk")
    if not coqc or not coqchk:
        return None
    try:
        out = subprocess.run([coqc, "--print-version"], capture_output=True, text=True, timeout=60, env=_env()).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return coqc, coqchk, (out.split() or ["unknown"])[0]


def project_files(directory: Path) -> list[str]:
    """The ``.v`` files ``_CoqProject`` lists in ``directory``, in build order; a bad listing raises ValueError.

    Examples
    --------
    >>> project_files(COQ_DIR)[0]
    'Statements.v'
    """
    listing = directory / "_CoqProject"
    if not listing.is_file():
        raise ValueError(f"{listing}: missing (it lists the files in build order)")
    names = [tok for line in listing.read_text(encoding="utf-8").splitlines() for tok in line.split()
             if tok.endswith(".v")]
    for name in names:
        if not _NAME.match(name):
            raise ValueError(f"_CoqProject lists {name!r}: only plain NAME.v files in the same directory")
    if not names or names[0] != COQ_STATEMENTS:
        raise ValueError(f"_CoqProject must list {COQ_STATEMENTS} first")
    if len(set(names)) != len(names):
        raise ValueError("_CoqProject lists a file twice")
    return names


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("COQ")}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "symtrans" / "coq"


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Error"):
            rest = " ".join(lines[i:i + 4])
            return rest[:300]
    return (" ".join(lines[-3:]) or "no output")[:300]


def kernel_check(directory: str | Path | None = None, *, use_cache: bool = True,
                 links: tuple[CoqLink, ...] = COQ_LINKS, compiled: dict[str, bytes] | None = None) -> KernelResult:
    """Compile and check the Coq proofs in ``directory`` (default: the project's) against the pinned statements.

    Returns a :class:`KernelResult`; never raises for a bad development (a
    refusal is ``ok=False`` with one line). Without ``coqc`` and ``coqchk`` the
    result is ``unavailable`` with the install hint.

    ``compiled`` (opt-in; a caller's own dict) keeps each ``.vo`` that ``coqc``
    wrote, under the SHA-256 of the Coq version and flags, the file's name and
    bytes and the keys of the project files it names (:func:`_build_keys`): a
    later check with the same dict copies an unchanged file's ``.vo`` instead
    of compiling it again, as ``make`` would. Everything after compiling is
    unchanged: the statement check, ``Print Assumptions`` and ``coqchk`` of
    every module, reused ones included (``coqchk`` re-checks each ``.vo``
    independently of the ``coqc`` that wrote it).

    Examples
    --------
    >>> r = kernel_check("/no/such/dir")
    >>> r.ok, r.reason.startswith("/no/such/dir")
    (False, True)
    """
    import time

    t0 = time.perf_counter()
    src = Path(directory) if directory is not None else COQ_DIR
    if not src.is_dir():
        return KernelResult(False, f"{src}: not a directory")
    try:
        names = project_files(src)
        data: dict[str, bytes] = {}
        for name in names:
            path = src / name
            if path.is_symlink() or not path.is_file():
                raise ValueError(f"{name}: listed in _CoqProject but missing (or not a regular file)")
            data[name] = path.read_bytes()
    except (OSError, ValueError) as err:
        return KernelResult(False, str(err))
    files = {name: _sha(b) for name, b in data.items()}
    if files[COQ_STATEMENTS] != COQ_STATEMENTS_SHA256:
        return KernelResult(False, f"{COQ_STATEMENTS} differs from the pinned statements (sha256 "
                                   f"{files[COQ_STATEMENTS][:16]}..., pinned {COQ_STATEMENTS_SHA256[:16]}...)",
                            files=files)
    for link in links:
        if f"{link.module}.v" not in data:
            return KernelResult(False, f"{link.module}.v (the proof of {link.theorem}) is not in the development",
                                files=files)
    for name, b in data.items():
        m = _FORBIDDEN.search(b.decode("utf-8", "replace"))
        if m:
            return KernelResult(False, f"{name}: '{m.group(0)}' is not allowed in a proof file", files=files)
    tools = coq_tools()
    if tools is None:
        return KernelResult(False, f"coqc and coqchk are not installed (install: {INSTALL_HINT})", files=files,
                            unavailable=True)
    coqc, coqchk, version = tools
    theorems = {link.theorem: link.statement for link in links}
    key = _sha(json.dumps({"schema": CACHE_SCHEMA, "files": files, "pin": COQ_STATEMENTS_SHA256,
                           "links": sorted(theorems.items()), "allowed": list(ALLOWED_ASSUMPTIONS),
                           "coq": version, "coqc": coqc, "coqchk": coqchk, "warnings": WARNINGS,
                           "checker": _sha(Path(__file__).read_bytes())}, sort_keys=True).encode())
    if use_cache:
        memo = _MEMO.get(key)
        hit = {"uses": memo.uses} if memo is not None else _read_cache(key)
        if hit is not None:
            return KernelResult(True, "", "cache", version, theorems, files, time.perf_counter() - t0,
                                uses=dict(hit["uses"]))
    with tempfile.TemporaryDirectory(prefix="symtrans-coq-") as tmp:
        work = Path(tmp)
        for name, b in data.items():
            (work / name).write_bytes(b)
        uses: dict[str, list[str]] = {}
        keys = _build_keys(data, names, version, coqc) if compiled is not None else None
        problem = _compile_and_check(work, names, links, coqc, coqchk, uses, compiled, keys)
    if problem:
        return KernelResult(False, problem, coq=version, files=files)
    result = KernelResult(True, "", "coqc + coqchk", version, theorems, files, time.perf_counter() - t0, uses=uses)
    _MEMO[key] = result
    _write_cache(key, result)
    return result


def _run(cmd: list[str], cwd: Path) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, env=_env())
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {TIMEOUT_S} s"
    except OSError as err:
        return 127, str(err)
    return p.returncode, p.stdout + p.stderr


def _build_keys(data: dict[str, bytes], names: list[str], version: str, coqc: str) -> dict[str, str]:
    """Each file's build key: the SHA-256 of the Coq version and flags, its name and bytes, and the keys of the
    earlier project files whose module name it mentions as a word (the files it may ``Require``; mentioning more
    only compiles more).

    Examples
    --------
    >>> data = {"Statements.v": b"Definition s := 0.", "A.v": b"From Symtrans Require Statements.", "B.v": b""}
    >>> k = _build_keys(data, ["Statements.v", "A.v", "B.v"], "8.16.1", "coqc")
    >>> k2 = _build_keys({**data, "Statements.v": b"Definition s := 1."}, ["Statements.v", "A.v", "B.v"],
    ...                  "8.16.1", "coqc")
    >>> [k[n] == k2[n] for n in ("Statements.v", "A.v", "B.v")]  # A requires the edited file, B does not
    [False, False, True]
    """
    keys: dict[str, str] = {}
    for name in names:
        words = set(re.findall(rb"[A-Za-z_][A-Za-z0-9_']*", data[name]))
        deps = [keys[other] for other in keys if other[:-2].encode() in words]
        keys[name] = _sha(json.dumps({"schema": CACHE_SCHEMA, "coq": version, "coqc": coqc, "warnings": WARNINGS,
                                      "root": COQ_ROOT, "name": name, "sha256": _sha(data[name]),
                                      "deps": deps}).encode())
    return keys


def _compile_and_check(work: Path, names: list[str], links: tuple[CoqLink, ...], coqc: str, coqchk: str,
                       uses: dict[str, list[str]], compiled: dict[str, bytes] | None = None,
                       keys: dict[str, str] | None = None) -> str:
    """Steps 3-5 in ``work`` (a fresh copy); the refusal line, or "" when everything checks.

    Fills ``uses``: for each linked theorem, the other linked theorems its proof uses (``Print All Dependencies``).
    With ``compiled`` and ``keys`` (see :func:`kernel_check`), a file whose key is there is not compiled again.
    """
    flags = ["-q", "-Q", ".", COQ_ROOT, "-w", WARNINGS]
    for name in names:
        vo = work / f"{name[:-2]}.vo"
        if compiled is not None and keys is not None and keys[name] in compiled:
            vo.write_bytes(compiled[keys[name]])
            continue
        rc, out = _run([coqc, *flags, name], work)
        if rc != 0:
            return f"coqc refused {name}: {_first_error(out)}"
        if compiled is not None and keys is not None and vo.is_file():
            compiled[keys[name]] = vo.read_bytes()
    modules = [f"{COQ_ROOT}.{name[:-2]}" for name in names]
    check = work / "SymtransKernelCheck.v"
    lines = [f"Require {' '.join(modules)}."]
    for i, link in enumerate(links):
        lines.append(f"Check ({link.theorem} : {link.statement}).")
        lines.append(f'Redirect "assumptions{i}" Print Assumptions {link.theorem}.')
    check.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, out = _run([coqc, *flags, check.name], work)
    if rc != 0:
        m = re.search(r'File "[^"]*SymtransKernelCheck\.v", line (\d+)', out)
        i = (int(m.group(1)) - 2) // 2 if m else -1  # line 1 requires; link i checks on line 2 + 2 i
        if not 0 <= i < len(links):
            return f"the statement check failed: {_first_error(out)}"
        link = links[i]
        if re.search(r"was not found|not a defined object|not found in the current", out):
            return f"{link.theorem} is missing (it must prove {link.statement})"
        return f"{link.theorem} does not prove its pinned statement {link.statement}: {_first_error(out)}"
    for i, link in enumerate(links):
        path = work / f"assumptions{i}.out"
        text = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
        if text == "Closed under the global context":
            continue
        used = _assumption_names(text)
        extra = [a for a in used if a not in ALLOWED_ASSUMPTIONS]
        if not text or extra or not used:
            return (f"{link.theorem} rests on assumptions beyond the allow-list: "
                    f"{', '.join(extra) if extra else text[:200] or 'no Print Assumptions output'}")
    # the dependencies only once the assumptions passed (a second file: about a second a theorem, spent on a refusal
    # for nothing); a statement or assumption problem is refused above without them
    deps = work / "SymtransKernelDeps.v"
    deps.write_text("\n".join([lines[0], *(f'Redirect "dependencies{i}" Print All Dependencies {link.theorem}.'
                                           for i, link in enumerate(links))]) + "\n", encoding="utf-8")
    rc, out = _run([coqc, *flags, deps.name], work)
    if rc != 0:
        return f"the dependency listing failed: {_first_error(out)}"
    for i, link in enumerate(links):
        path = work / f"dependencies{i}.out"
        words = set(re.findall(r"[\w.']+", path.read_text(encoding="utf-8"))) if path.is_file() else set()
        uses[link.theorem] = [o.theorem for o in links if o is not link
                                and (o.theorem in words or f"{o.module}.{o.short}" in words)]
    rc, out = _run([coqchk, "-o", "-silent", "-Q", ".", COQ_ROOT, *sum((["-norec", m] for m in modules), [])], work)
    if rc != 0:
        return f"coqchk refused the compiled proofs: {_first_error(out)}"
    return _summary_problem(out)


def _assumption_names(text: str) -> list[str]:
    """The assumption names a ``Print Assumptions`` output lists (the first word of each ``name : type`` entry)."""
    names = []
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_][\w.']*)\s*:", line)
        if m:
            names.append(m.group(1))
        elif line.strip() and not line.startswith(" ") and ":" not in line:
            names.append(line.strip())  # "Axioms:" headers and flags such as "... (guard checking disabled)"
    return [n for n in names if n not in ("Axioms", "Axioms:")]


def _summary_problem(out: str) -> str:
    """What coqchk's context summary shows beyond the admitted libraries' parameters, or ""."""
    if "CONTEXT SUMMARY" not in out:
        return "coqchk printed no context summary"
    summary = out.split("CONTEXT SUMMARY", 1)[1]
    sections: dict[str, list[str]] = {}
    current = None
    for line in summary.splitlines():
        m = re.match(r"^\* ([^:]+):\s*(.*)$", line)
        if m:
            current = m.group(1).strip()
            sections[current] = [] if m.group(2).strip() in ("", "<none>") else [m.group(2).strip()]
        elif current and line.strip():
            sections[current].append(line.strip())
    if "Axioms" not in sections:
        return "coqchk's summary has no axioms section"
    own = [a for a in sections["Axioms"] if not (a.startswith("mathcomp.") or a.startswith("Coq."))]
    if own:
        return f"coqchk: the proofs declare axioms: {', '.join(own[:5])}"
    for name, items in sections.items():
        if name not in ("Axioms", "Theory") and items:
            return f"coqchk: {name}: {', '.join(items[:5])}"
    return ""


def _read_cache(key: str) -> dict[str, Any] | None:
    try:
        data = json.loads((_cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == CACHE_SCHEMA and data.get("key") == key \
        and data.get("ok") is True and isinstance(data.get("uses"), dict) else None


def _write_cache(key: str, result: KernelResult) -> None:
    try:
        d = _cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "key": key, "ok": True, "coq": result.coq,
                                   "theorems": result.theorems, "files": result.files, "uses": result.uses}),
                       encoding="utf-8")
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass  # no cache: the next report checks again
