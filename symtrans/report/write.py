"""Render a report in the chosen formats and write the files atomically.

Everything is rendered in memory first; the files are then written into a
fresh temporary directory beside the output directory, which is renamed into
place. On any error the temporary directory is removed and an existing
output directory is left as it was. An existing output directory is replaced
only if it holds nothing but report files.

Examples
--------
>>> parse_formats("md,json")
['md', 'json']
>>> parse_formats("md,pdf")
Traceback (most recent call last):
...
symtrans.errors.SymtransError: --format: unknown format 'pdf'; choose from: 'dot', 'html', 'json', 'md'
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from symtrans.errors import SymtransError, suggest
from symtrans.report.build import Report

__all__ = ["FILES", "parse_formats", "render", "check_output_dir", "write_report"]

#: format -> file name
FILES: dict[str, str] = {"md": "report.md", "json": "report.json", "html": "report.html", "dot": "report.dot"}


def parse_formats(spec: str) -> list[str]:
    """Parse a comma-separated list of formats (``md,json,html,dot``), keeping its order.

    Examples
    --------
    >>> parse_formats(" html , md,html")
    ['html', 'md']
    """
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item not in FILES:
            raise SymtransError("--format: " + suggest(item, FILES, "format"))
        if item not in out:
            out.append(item)
    if not out:
        raise SymtransError("--format: name at least one of " + ", ".join(FILES))
    return out


def render(report: Report, formats: list[str]) -> dict[str, str]:
    """Render ``report`` in each format; return file name -> text.

    Examples
    --------
    >>> from symtrans.evidence import Context
    >>> from symtrans.report import build_report
    >>> texts = render(build_report(Context(model=None)), ["json"])
    >>> json.loads(texts["report.json"])["schema"]
    'symtrans-report/1'
    """
    import importlib

    makers = {"md": ("markdown", "render_markdown"), "html": ("html", "render_html"),
              "dot": ("dot", "render_dot")}
    out: dict[str, str] = {}
    for f in formats:
        if f == "json":
            out[FILES[f]] = json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"
        else:
            module, func = makers[f]
            out[FILES[f]] = getattr(importlib.import_module(f"symtrans.report.{module}"), func)(report)
    return out


def check_output_dir(out: str | Path) -> Path:
    """Check that the report can be written to ``out``; return it as a Path.

    ``out`` may be missing (its parent must exist and be writable), or a
    directory holding nothing but report files.

    Examples
    --------
    >>> check_output_dir("/etc/hostname")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /etc/hostname: a file is in the way (the report is a directory)
    >>> check_output_dir("/no/such/parent/report")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /no/such/parent: no such directory to hold the report
    """
    path = Path(out)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise SymtransError(f"{out}: a file is in the way (the report is a directory)")
        foreign = sorted(p.name for p in path.iterdir() if p.name not in FILES.values() or not p.is_file())
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise SymtransError(f"{out}: exists and holds other files ({shown}); choose a new or empty "
                                "directory, or one holding only an earlier report")
    parent = path.absolute().parent
    for p in [parent, *parent.parents]:
        if p.exists() and not p.is_dir():
            raise SymtransError(f"{p}: a file is in the way (the report is a directory)")
    if not parent.is_dir():
        raise SymtransError(f"{parent}: no such directory to hold the report")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SymtransError(f"{parent}: not writable")
    return path


def write_report(report: Report, out: str | Path, formats: list[str]) -> list[Path]:
    """Write the report files into directory ``out`` atomically; return the paths written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from symtrans.evidence import Context
    >>> from symtrans.report import build_report
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.name for p in write_report(build_report(Context(model=None)), d / "r", ["md", "dot"])]
    ['report.md', 'report.dot']
    """
    path = check_output_dir(out)
    texts = render(report, formats)  # everything in memory before anything touches the disk
    parent = path.absolute().parent
    tmp: Path | None = None
    old: Path | None = None
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=parent))
        for name, text in texts.items():
            (tmp / name).write_text(text, encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=parent))
            os.rename(path, old / "report")
        try:
            os.rename(tmp, path)
        except OSError:
            if old is not None:  # put the earlier report back
                os.rename(old / "report", path)
            raise
        tmp = None
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise SymtransError(f"{out}: cannot write the report ({reason})") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return [path / name for name in texts]
