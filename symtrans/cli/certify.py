"""Sub-commands ``certify`` (run the exact certificates) and ``verify`` (re-check certificate files).

``symtrans certify [ID ...] [--model default|none|DIR] [--n N] [--seed S] [--format text|json] [--out DIR]``.
The JSON has the shape of ``report.json``: ``{"claims": [{"id", "verdict", "evidence": [...]}]}``.
``--out DIR`` writes one JSON certificate file per certificate a record carries.

``symtrans verify DIR|FILE ... [--model default|DIR] [--n N] [--seed S]`` re-checks each certificate with
:mod:`symtrans.checker.check` against the trusted statement registry, on the model the command line names
(never one a certificate names) at the n and seed given (the defaults are ``certify``'s); a directory must
match its ``MANIFEST.json``. Exit 0 when all are valid, 1 (one line per invalid certificate) otherwise, 2 on
bad input. See docs/certificates.md.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from symtrans.errors import SymtransError
from symtrans.validate import dumps_strict
from symtrans.config import DEFAULT_N, DEFAULT_SEED

__all__ = ["register", "record_certificates", "write_certificates", "verify_paths", "verify_coq", "coverage"]


def register(sub: argparse._SubParsersAction, name: str, help_text: str) -> None:
    """Add the ``certify`` sub-command.

    Examples
    --------
    >>> from symtrans.cli import build_parser
    >>> build_parser("certify").parse_args(["certify", "prop-5.1", "--model", "none"]).ids
    ['prop-5.1']
    """
    from symtrans.cli import add_model_option, add_run_option

    if name == "verify":
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("paths", nargs="*", metavar="DIR|FILE", help="certificate files, or directories of *.json")
        p.add_argument("--coq", nargs="?", const="", default=None, metavar="DIR",
                       help="compile the Coq proofs (the project's, or a copy at DIR) in a fresh directory, check "
                            "them with coqchk and against the pinned statements; exit 1 with one line on a refusal")
        p.add_argument("--model", default="default",
                       help="the model the certificates are about: 'default' (bundled MiniLM) or a local directory")
        add_run_option(p, "n", "the n they were certified at")
        add_run_option(p, "seed", "the seed they were certified at")
        p.set_defaults(func=_cmd_verify)
        return
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.add_argument("ids", nargs="*", metavar="ID", help="claim ids (default: every claim with a certificate)")
    p.add_argument("--claims", nargs="+", metavar="ID", help="claim ids, as in `symtrans check --claims` (the same as "
                   "the positional IDs)")
    add_model_option(p, none=True)  # none: skip the certificates on real weights
    add_run_option(p, "n", "sequence length for real-weight certificates")
    add_run_option(p, "seed", "seed of the random witnesses")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--out", metavar="DIR", help="write one JSON certificate file per certificate into DIR")
    p.set_defaults(func=_cmd_certify)


def record_certificates(ev: dict[str, Any]) -> list[dict[str, Any]]:
    """The certificate dicts an evidence record (as a dict) carries: ``details["certificate(s)"]``.

    Examples
    --------
    >>> record_certificates({"details": {"certificate": {"schema": "s"}}})
    [{'schema': 's'}]
    >>> record_certificates({"details": {}})
    []
    """
    from symtrans.evidence import record_certificates as certificates

    return certificates(ev)


def write_certificates(out: dict[str, Any], directory: str, *, n: int = DEFAULT_N,
                       seed: int = DEFAULT_SEED) -> tuple[list[str], list[str]]:
    """Write each record's certificates to ``directory`` as ``<producer>[-k].json``; return (files, uncovered).

    ``MANIFEST.json`` (sealed by a digest) lists the files with their SHA-256
    and statement id, the claims they cover and the ``n`` and ``seed`` they
    were certified at: ``verify`` refuses a file it does not list, a listed
    file that is missing or changed, and a covered claim missing a statement
    the registry requires for it.

    ``uncovered`` names the certified or refuting records that carry no
    re-checkable certificate (proofs and searches stated in their details).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     files, rest = write_certificates({"claims": [{"id": "c", "evidence": [
    ...         {"producer": "p", "verdict": "fails", "details": {"certificate": {
    ...             "statement_id": "prop-6.2/identity-counterexample"}}},
    ...         {"producer": "q", "verdict": "fails", "details": {}}]}]}, d)
    ...     [f.split("/")[-1] for f in files], rest, sorted(p.name for p in Path(d).iterdir())
    (['p.json'], ['c: q (fails)'], ['MANIFEST.json', 'p.json'])
    """
    from pathlib import Path

    from symtrans.outdir import write_file

    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SymtransError(f"--out {directory}: cannot create the directory ({err.strerror})") from None
    from symtrans.checker.check import MANIFEST, file_hash, manifest

    files, uncovered, listed = [], [], {}
    for claim in out["claims"]:
        for ev in claim["evidence"]:
            certs = record_certificates(ev)
            if not certs and ev["verdict"] in ("certified", "fails"):
                uncovered.append(f"{claim['id']}: {ev['producer']} ({_tag(ev)})")
            for k, cert in enumerate(certs):
                name = ev["producer"] + (f"-{k + 1}" if len(certs) > 1 else "") + ".json"
                path = write_file(target, name, (json.dumps(cert, indent=1) + "\n").encode(), "certificate")
                files.append(str(path))
                listed[path.name] = (file_hash(path), cert["statement_id"])
    sealed = manifest(listed, n=n, seed=seed)
    write_file(target, MANIFEST, (json.dumps(sealed, indent=1) + "\n").encode(), "certificate manifest")
    return files, uncovered


def verify_paths(paths: list[str], model: str = "default", *, n: int = DEFAULT_N,
                 seed: int = DEFAULT_SEED) -> list[tuple[str, bool, str]]:
    """Re-check every certificate file under ``paths`` on ``model`` at ``n``, ``seed``; (file, valid, reason) each.

    A directory must match its manifest (each difference is one invalid entry).

    Examples
    --------
    >>> verify_paths(["/no/such/certificate.json"])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/certificate.json: no such file or directory
    >>> verify_paths([""])
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: verify: expected a certificate file or directory, got ''
    """
    from pathlib import Path

    from symtrans.checker.check import MANIFEST, manifest_problems
    from symtrans.validate import REPORT_MAX_BYTES, read_json_file

    if model != "default" and not Path(model).is_dir():
        raise SymtransError(f"--model {model}: not a local model directory (pass 'default' or a directory; "
                            "verify never fetches a model)")
    files: list[Path] = []
    problems: list[tuple[str, bool, str]] = []
    for spec in paths:
        if not isinstance(spec, str) or not spec.strip():  # Path("") is ".": the working directory, not a name
            raise SymtransError(f"verify: expected a certificate file or directory, got {spec!r}")
        p = Path(spec)
        if p.is_dir():
            found = sorted(f for f in p.glob("*.json") if f.name != MANIFEST)
            if not found:
                raise SymtransError(f"{spec}: no *.json certificate files in the directory")
            if not (p / MANIFEST).is_file():
                problems.append((str(p / MANIFEST), False, "missing: a certificate directory lists its files"))
                continue
            # bounded, strict reads: regular files only, size and nesting capped, no NaN/Infinity
            parsed = {f.name: _read_or_none(f, read_json_file, REPORT_MAX_BYTES) for f in found}
            bad = manifest_problems(p, read_json_file(p / MANIFEST, "manifest", REPORT_MAX_BYTES),
                                    parsed, n=n, seed=seed)
            problems += [(str(p / name), False, why) for name, why in bad]
            refused = {name for name, _ in bad}
            files += [f for f in found if f.name not in refused]
        elif p.is_file():
            files.append(p)
        else:
            raise SymtransError(f"{spec}: no such file or directory")
    loaded = [(f, read_json_file(f, "certificate", REPORT_MAX_BYTES)) for f in files]
    from symtrans.progress import track

    return problems + [(str(f), *_verify_one(f, data, model, n, seed))
                       for f, data in track(loaded, "verify", unit="certificate", label=lambda item: item[0].name)]


def _read_or_none(path: Any, read: Any, limit: int) -> Any:
    """A certificate file parsed (bounded, strict), or None where it cannot be: the manifest check says why."""
    try:
        return read(path, "certificate", limit)
    except SymtransError:
        return None


def coverage(directory: str) -> str | None:
    """What a certificate directory's manifest says it covers, in one line (None: no readable manifest).

    A directory is valid only for the claims it names, each in full; this line names them and the
    registered statements it does not hold, so a directory with a claim left out shows it.

    Examples
    --------
    >>> coverage("/no/such/dir") is None
    True
    """
    from pathlib import Path

    from symtrans.checker.check import MANIFEST
    from symtrans.checker.statements import STATEMENTS
    from symtrans.validate import REPORT_MAX_BYTES, read_json_file, terminal_safe

    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        m = read_json_file(path, "manifest", REPORT_MAX_BYTES)
    except SymtransError:
        return None
    claims = m.get("claims") if isinstance(m, dict) else None
    files = m.get("files") if isinstance(m, dict) else None
    if not isinstance(claims, list) or not isinstance(files, dict):
        return None
    held = {v.get("statement_id") for v in files.values() if isinstance(v, dict)}
    absent = sorted(sid for sid in STATEMENTS if sid not in held)
    shown = ", ".join(terminal_safe(str(c))[:40] for c in claims[:20]) or "no claim"
    return (f"{terminal_safe(str(directory))}: covers {shown}; registered statements not in it: "
            f"{', '.join(absent) if absent else 'none'}")


def _verify_one(path: Any, data: Any, model: str, n: int, seed: int) -> tuple[bool, str]:
    """One file: a relation file (``symtrans relate``) goes to its own checker, anything else to the certificates'."""
    from symtrans.group.relate import RELATION_SCHEMA

    if isinstance(data, dict) and data.get("schema") == RELATION_SCHEMA:
        from symtrans.group.relate import check_relation

        return check_relation(data, path)
    from symtrans.checker.check import verify_certificate

    return verify_certificate(data, model, n=n, seed=seed)


def verify_coq(directory: str | None = None) -> tuple[bool, list[str]]:
    """Kernel-check the Coq proofs at ``directory`` (default: the project's), never from the cache; (ok, lines).

    Examples
    --------
    >>> verify_coq("/no/such/dir")
    (False, ['coq: refused: /no/such/dir: not a directory'])
    """
    from symtrans.certify.coq import kernel_check

    res = kernel_check(directory or None, use_cache=False)
    if not res.ok:
        return False, [res.line()]
    return True, [f"{thm}: valid: proves {stmt}" for thm, stmt in res.theorems.items()] + [res.line()]


def _cmd_verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    if not args.paths and args.coq is None:
        raise SymtransError("verify needs certificate files (DIR|FILE ...) or --coq [DIR]")
    rc = 0
    if args.coq is not None:
        ok, lines = verify_coq(args.coq)
        print("\n".join(lines))
        rc = 0 if ok else 1
        if not args.paths:
            return rc
    results = verify_paths(args.paths, args.model, n=args.n, seed=args.seed)
    for f, ok, why in results:
        print(f"{f}: {'valid' if ok else 'INVALID'}: {why}")
    for spec in args.paths:
        line = coverage(spec) if Path(spec).is_dir() else None
        if line:
            print(line)
    bad = sum(not ok for _, ok, _ in results)
    print(f"{len(results) - bad} of {len(results)} certificates valid")
    return 1 if bad or rc else 0


def _cmd_certify(args: argparse.Namespace) -> int:
    from symtrans.report.certificates import certify_claims

    model = None if args.model.lower() == "none" else args.model
    ids = [*args.ids, *(getattr(args, "claims", None) or [])]
    out = certify_claims(ids, model=model, n=args.n, seed=args.seed, progress=True)
    if args.out:
        files, uncovered = write_certificates(out, args.out, n=args.n, seed=args.seed)
    if args.format == "json":
        print(dumps_strict(out, indent=2, default=str))
        return 0
    for claim in out["claims"]:
        readings = "".join(f"; {r}: {v}" for r, v in claim.get("readings", {}).items())
        print(f"{claim['id']}: {claim['verdict']}{readings}")
        for why in claim.get("missing_readings") or ():
            print(f"  missing: {why}")
        for ev in claim["evidence"]:
            secs = f" ({ev['seconds']:.2f} s)" if ev.get("seconds") is not None else ""
            print(f"  [{_tag(ev)}] {ev['producer']}{secs}{_counted(ev)}: {ev['summary']}")
            ce = ev.get("counterexample")
            if ce and "X" in ce:
                print(f"      counterexample X = {ce['X']}")
            scope = ev.get("scope") or (ev.get("details") or {}).get("scope")
            if scope:
                print(f"      scope: {scope['kind']}: {scope['description']}")
            for hc in ev.get("hypothesis_checks") or ():
                print(f"      hypothesis {hc['name']}: {hc['holds']}" +
                      (f" (margin {_margin(hc['margin'])})" if hc.get("margin") is not None else ""))
    if args.out:
        print(f"wrote {len(files)} certificate files to {args.out}")
        for line in uncovered:
            print(f"  no certificate file (proof or search record, no re-checkable witness): {line}")
    return 0


def _tag(ev: dict[str, Any]) -> str:
    """The verdict a record is shown with: ``certified`` only with a certificate file that ``verify`` re-checks.

    A record its producer calls certified but that carries no certificate file (a written proof checked at
    small sizes, an instance search) is shown with the verdict it counts as.

    Examples
    --------
    >>> _tag({"verdict": "certified", "counted_as": "supported", "details": {}})
    'supported'
    >>> _tag({"verdict": "certified", "details": {"certificate": {"statement_id": "s"}}})
    'certified'
    """
    from symtrans.evidence import shown_verdict

    return shown_verdict(ev, ev.get("counted_as"))


def _counted(ev: dict[str, Any]) -> str:
    """The note beside a record whose shown verdict is not its producer's, or that counts as another one."""
    tag = _tag(ev)
    if tag != ev.get("verdict"):
        return f" (no certificate file: {ev.get('counted_note') or 'it counts as ' + tag})"
    if ev.get("counted_as") and ev["counted_as"] != ev["verdict"]:
        return f" (counts as {ev['counted_as']}: {ev['counted_note']})"
    return ""


def _margin(value: object) -> str:
    """A margin as printed: one decimal for a number, the strict-JSON spelling ("inf") as it is.

    Examples
    --------
    >>> _margin(2.345), _margin("inf")
    ('2.3', 'inf')
    """
    return f"{value:.1f}" if isinstance(value, (int, float)) else str(value)
