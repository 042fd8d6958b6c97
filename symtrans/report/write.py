"""Render a report in the chosen formats and write the files atomically.

Everything is rendered in memory first; the files are then written into a
fresh temporary directory beside the output directory, which is swapped into
place in one step under a lock on the directory (:mod:`symtrans.outdir`).
On any error, or a kill, an existing report is left complete. An existing
output directory is replaced only if it holds nothing but report files.

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

from pathlib import Path
from typing import Any

from symtrans import outdir
from symtrans.report.build import Report
from symtrans.validate import check_formats, dumps_strict

__all__ = ["FILES", "parse_formats", "render", "check_output_dir", "report_lock", "write_report"]

#: format -> file name
FILES: dict[str, str] = {"md": "report.md", "json": "report.json", "html": "report.html", "dot": "report.dot"}


def parse_formats(spec: str) -> list[str]:
    """Parse a comma-separated list of formats (``md,json,html,dot``), keeping its order.

    Examples
    --------
    >>> parse_formats(" html , md,html")
    ['html', 'md']
    """
    return check_formats(spec, FILES)


def render(report: Report, formats: list[str]) -> dict[str, str]:
    """Render ``report`` in each format; return file name -> text.

    Examples
    --------
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> texts = render(build_report(Context(model=None)), ["json"])
    >>> import json
    >>> json.loads(texts["report.json"])["schema"]
    'symtrans-report/1'
    """
    aside = _render_aside(report, "html") if "html" in formats and len(formats) > 1 else None
    texts = {f: _render_one(report, f) for f in formats if not (f == "html" and aside is not None)}
    if aside is not None:  # collected after the others, whatever the order of ``formats``: they overlap with it
        texts["html"] = aside()
    from symtrans.validate import utf8_safe

    return {FILES[f]: utf8_safe(texts[f]) for f in formats}  # a lone surrogate in a name cannot stop the write


def _render_one(report: Report, f: str) -> str:
    import importlib

    if f == "json":
        # strict JSON: non-finite floats become "Infinity"/"-Infinity"/"NaN" (docs/json-schemas.md)
        return dumps_strict(report.to_json(), indent=2, ensure_ascii=False) + "\n"
    makers = {"md": ("markdown", "render_markdown"), "html": ("html", "render_html"), "dot": ("dot", "render_dot")}
    module, func = makers[f]
    return getattr(importlib.import_module(f"symtrans.report.{module}"), func)(report)


def _render_aside(report: Report, f: str) -> Any:
    """Render format ``f`` in a forked child while this process renders the others; None where forking is unsafe.

    Returns a function giving the text: the child's, or (if the child failed
    or died) the text rendered here. The text is the same either way.
    """
    import multiprocessing

    from symtrans.runner import cuda_initialised, parallel_default
    from symtrans.threads import start_forked

    if not parallel_default() or cuda_initialised():
        return None
    mp = multiprocessing.get_context("fork")
    conn, child = mp.Pipe(duplex=False)
    proc = mp.Process(target=_render_child, args=(report, f, child), daemon=True)
    start_forked(proc)
    child.close()

    def result() -> str:
        text = None
        try:
            text = conn.recv()
        except (EOFError, OSError):  # the child died: render here
            pass
        finally:
            conn.close()
            if text is None and proc.is_alive():  # a Ctrl-C here: the child holds the pipe's read end too and
                proc.kill()  # would block forever on a full pipe, and this join with it (seen: a hung report)
            proc.join()
        return text if isinstance(text, str) else _render_one(report, f)

    return result


def _render_child(report: Report, f: str, conn: Any) -> None:
    from symtrans.threads import as_child_process

    as_child_process()
    try:
        try:
            text: str | None = _render_one(report, f)
        except Exception:  # noqa: BLE001 - the parent renders it again and raises there
            text = None
        conn.send(text)
    finally:
        conn.close()


def check_output_dir(out: str | Path) -> Path:
    """Check that the report can be written to ``out``; return it as an absolute Path.

    ``out`` may be missing (missing parents are created, as ``mkdir -p`` would), or a
    directory holding nothing but report files; a symbolic link is refused.
    See :func:`symtrans.outdir.check_output_dir`.

    Examples
    --------
    >>> check_output_dir("/etc/hostname")
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /etc/hostname: a file is in the way (the report is a directory)
    >>> check_output_dir("/proc/no/such/report")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    symtrans.errors.SymtransError: /proc/no/such: cannot create the directory to hold the report (...)
    """
    return outdir.check_output_dir(out, FILES.values())


def report_lock(out: str | Path) -> outdir.DirLock:
    """The lock on report directory ``out``: hold it from the first check to the last write.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with report_lock(pathlib.Path(tempfile.mkdtemp()) / "r") as lock:
    ...     lock.path.name
    '.r.lock'
    """
    return outdir.DirLock(out)


def write_report(report: Report, out: str | Path, formats: list[str]) -> list[Path]:
    """Write the report files into directory ``out`` atomically; return the paths written.

    The old report in ``out`` (if any) stays complete until the new one
    replaces it in one step; a concurrent writer into ``out`` is refused.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from symtrans.context import Context
    >>> from symtrans.report import build_report
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> [p.name for p in write_report(build_report(Context(model=None)), d / "r", ["md", "dot"])]
    ['report.md', 'report.dot']
    """
    check_output_dir(out)
    texts = render(report, formats)  # everything in memory before anything touches the disk
    return outdir.replace_dir(out, texts, FILES.values())
