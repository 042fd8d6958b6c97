"""One generator for every generated block of README.md and docs/*.md (one marker style, one check).

A generated block is the text between two markers, the opening one naming its generator and,
for some, an argument::

    <!-- gen:formula-table -->
    ...generated: do not edit by hand...
    <!-- /gen:formula-table -->

    <!-- gen:console formula wo-fibre --arch gpt2 -->
    ...the real output of `symtrans formula wo-fibre --arch gpt2`...
    <!-- /gen:console -->

Usage::

    python docs/gen.py --list                        # every block of every file, with its generator
    python docs/gen.py --check [--report R.json]     # exit 1 naming each stale block
    python docs/gen.py --write [--report R.json]     # rewrite every block in place
    python docs/gen.py --check --no-report           # skip the blocks that need the report

Values printed in prose outside any block (the README's, which is edited by hand) are listed in
:data:`FACTS` with the code that computes them; ``--check`` names a stale one.

The blocks ``claims-table``, ``check-table``, ``disagreements``, ``formalisations`` and ``report-excerpt`` come from
the proof-status
report of the bundled model (``symtrans report --model default``: n = 128, seed 0, float64): from
``--report`` (a report.json, with report.md beside it) or built now (minutes). Everything else is
derived from the code at once: the formula registry, the producer registrations, the
``symtrans.numeric`` docstring's tensor table, the group's pairing table, and commands run in-process.
``tests/test_docs_gen.py`` runs the check with the test suite (the report from the session fixture).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import re
import shlex
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: One opening marker, its body, and the closing marker of the same name.
BLOCK = re.compile(r"<!-- gen:(?P<name>[a-z0-9-]+)(?: (?P<args>[^\n]*?))? -->\n(?P<body>.*?)<!-- /gen:(?P=name) -->",
                   re.S)
OPENING = re.compile(r"<!-- gen:([a-z0-9-]+)")
PRESETS = ("bert-base", "minilm-l6-h384")


def documents(root: Path = ROOT) -> list[Path]:
    """The files that may hold generated blocks: README.md and every docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


# ---------------------------------------------------------------------------------------- the context
@dataclass
class Context:
    """What the generators read: the report of the bundled model, built or loaded on first use."""

    report: Path | None = None  # a report.json; report.md is read beside it
    allow_report: bool = True
    _doc: dict[str, Any] | None = field(default=None, repr=False)
    _tmp: Any = field(default=None, repr=False)

    def report_json(self) -> dict[str, Any]:
        if self._doc is None:
            self._doc = json.loads(self.report_path().read_text(encoding="utf-8"))
        return self._doc

    def report_md(self) -> str:
        return (self.report_path().parent / "report.md").read_text(encoding="utf-8")

    def report_path(self) -> Path:
        if self.report is None:
            if not self.allow_report:
                raise LookupError("this block needs the report (drop --no-report, or pass --report R.json)")
            import symtrans

            self._tmp = tempfile.TemporaryDirectory(prefix="symtrans-gen-")
            out = Path(self._tmp.name) / "report"
            symtrans.proof_report("default", out=str(out), formats=("md", "json"))
            self.report = out / "report.json"
        return self.report


@dataclass(frozen=True)
class Generator:
    """One kind of generated block: its text from the context and the marker's argument."""

    name: str
    make: Callable[[Context, str], str]
    needs_report: bool = False
    volatile: re.Pattern[str] | None = None  # parts that change from run to run: not compared, not rewritten
    measured: bool = False  # decimals are measurements: compared by :func:`same_measured`, not digit by digit
    stable: Callable[[str], str] | None = None  # the part of the text that is compared (default: all of it)

    def same(self, old: str, new: str) -> bool:
        """Whether a block's text is current: equal, up to its :attr:`volatile` parts and measured digits.

        Examples
        --------
        >>> GENERATORS["console-timed"].same("x (0.30 s)", "x (0.41 s)"), GENERATORS["console"].same("1", "2")
        (True, False)
        >>> GENERATORS["console-timed"].same("margin 1.9", "margin 1.7"), GENERATORS["console"].same("1.9", "1.7")
        (True, False)
        """
        if self.volatile is not None:
            old, new = self.volatile.sub("(s)", old), self.volatile.sub("(s)", new)
        if self.stable is not None:
            old, new = self.stable(old), self.stable(new)
        return same_measured(old, new) if self.measured else old == new


#: a number as printed: an integer, or a decimal (a point or an exponent)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
#: how far two printings of one measured decimal may part. Observed between two machines and between two
#: runs on one (BLAS kernels and thread counts): 3.73e-27 / 3.71e-27 and 6.89e-16 / 6.59e-16 (singular
#: values below the rank cut, rounding noise by definition), margins 2.1 / 1.9 and 1.9 / 1.7 (decades to
#: such a value). A real change (a rank, a count, a verdict, a sign, a factor of 2) is far outside it.
MEASURED_RTOL = 0.25


def same_measured(old: str, new: str) -> bool:
    """Whether two outputs agree in what is stable: words, integers and signs exactly, decimals within
    :data:`MEASURED_RTOL` (or one unit of their last printed place).

    Examples
    --------
    >>> same_measured("rank 15  margin 1.9  3.73e-27", "rank 15  margin 1.7  3.71e-27")
    True
    >>> same_measured("rank 15", "rank 14"), same_measured("0.4 yes", "0.4 NO"), same_measured("2.0", "4.0")
    (False, False, False)
    >>> same_measured("-2.3", "2.3"), same_measured("0.0", "0.1"), same_measured("1.2", "1.20")
    (False, True, True)
    """
    if " ".join(NUMBER.split(old)).split() != " ".join(NUMBER.split(new)).split():
        return False
    a, b = NUMBER.findall(old), NUMBER.findall(new)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if not any(c in x + y for c in ".eE"):
            if x != y:  # integers: ranks, counts, sizes
                return False
            continue
        fx, fy = float(x), float(y)
        if (fx < 0) != (fy < 0):
            return False
        places = max(len(m.split("e")[0].split("E")[0].partition(".")[2]) for m in (x, y))
        if abs(fx - fy) > max(MEASURED_RTOL * max(abs(fx), abs(fy)), 1.0001 * 10.0 ** -places):
            return False
    return True


GENERATORS: dict[str, Generator] = {}


def generator(name: str, needs_report: bool = False, volatile: re.Pattern[str] | None = None,
              measured: bool = False, stable: Callable[[str], str] | None = None) -> Callable[[Callable[[Context, str], str]], Any]:
    def register(fn: Callable[[Context, str], str]) -> Callable[[Context, str], str]:
        GENERATORS[name] = Generator(name, fn, needs_report, volatile, measured, stable)
        return fn
    return register


#: what varies from run to run in a command's output: a duration as printed, "(0.30 s)", and measure's
#: machine lines (where the model lies, the memory and the seconds it took)
DURATION = re.compile(r"\(\d+\.\d+ s\)|^(?:model|memory|time) {2,}\S.*$", re.M)


# ---------------------------------------------------------------------------------------- formulas
def show(value: Any) -> str:
    """An exact value as a table cell: grouped digits, p/q with a decimal, or a digit count.

    Examples
    --------
    >>> from symtrans.formulas import formula
    >>> show(formula("recovery-ambiguity", arch="bert-base")), show(formula("ffn-permutations", arch="bert-base"))
    ('360,448', '9,382-digit integer')
    """
    exact = value.json_value()
    if exact is None:
        return "symbolic"
    if isinstance(exact, int):
        if exact >= 10**15:  # orders such as d_ff! have thousands of digits
            return f"{big_integer_digits(exact):,}-digit integer"
        return f"{exact:,}"
    return f"{exact} (≈ {value.approx():.4f})"


def big_integer_digits(n: int) -> int:
    """Digits of a possibly huge non-negative integer without str() (which is capped).

    Examples
    --------
    >>> big_integer_digits(10**5000), big_integer_digits(999)
    (5001, 3)
    """
    import math

    if n < 10**15:
        return len(str(n))
    estimate = int(n.bit_length() * math.log10(2))
    return estimate + 1 if n >= 10**estimate else estimate


def _provenance(name: str) -> str:
    from symtrans.formulas import FORMULAS

    p = FORMULAS[name].provenance
    if p.origin == "paper":
        return f"paper: {p.claim}" + (f" ({p.section})" if p.section else "")
    return f"toolkit: {p.claim}" if p.claim else "toolkit"


@generator("formula-table")
def formula_table(ctx: Context | None = None, args: str = "") -> str:
    """Every registered formula with its value for each preset (``args``: presets, default bert-base, MiniLM).

    Examples
    --------
    >>> formula_table().splitlines()[0].startswith("| formula | what it counts |")
    True
    """
    from symtrans.formulas import FORMULAS, formula

    presets = tuple(args.split()) or PRESETS
    rows = ["| formula | what it counts | provenance | " + " | ".join(presets) + " |",
            "|---|---|---|" + "---:|" * len(presets)]
    for name, f in FORMULAS.items():
        cells = [show(formula(name, arch=p)) for p in presets]
        rows.append(f"| `{name}` | {f.summary} | {_provenance(name)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def command_output(args: str) -> str:
    """stdout of ``symtrans ARGS`` run in-process (the same code as the console script).

    Examples
    --------
    >>> command_output("formula wo-fibre --arch gpt2 --format json").startswith("{")
    True
    """
    from symtrans.cli import main as cli_main

    buffer, err = io.StringIO(), io.StringIO()  # an in-memory stderr: no progress lines (symtrans.progress)
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(err):
        status = cli_main(shlex.split(args))
    if status != 0:
        raise RuntimeError(f"`symtrans {args}` exited {status}: {err.getvalue().strip()[-300:]}")
    return buffer.getvalue()


@generator("console")
def console(ctx: Context | None, args: str) -> str:
    """A console example: ``$ symtrans ARGS`` and its real output (run in-process).

    Examples
    --------
    >>> print(console(None, "claims thm-4.2 --impact"))
    ```console
    $ symtrans claims thm-4.2 --impact
    framework-9  (framework, §9, Symmetry-Breaking Framework)
    ```
    """
    if not args.strip():
        raise ValueError("gen:console needs the command's arguments: <!-- gen:console formula NAME ... -->")
    return _console_block(args, command_output(args).rstrip())


def _console_block(args: str, output: str) -> str:
    """The fenced console block of ``$ symtrans ARGS`` and its output: the one format of every console example."""
    return f"```console\n$ symtrans {args.strip()}\n{output}\n```"


@generator("console-head")
def console_head(ctx: Context | None, args: str) -> str:
    """The first lines of a console example (``args``: the line count, then the command's arguments), then ``...``.

    Examples
    --------
    >>> print(console_head(None, "2 claims"))
    ```console
    $ symtrans claims
    def-notation              definition   definition       paper    §2, Notation
    def-alpha                 definition   definition       paper    §2, directional asymmetry index
    ...
    ```
    """
    count, _, rest = args.strip().partition(" ")
    if not count.isdigit() or not rest.strip():
        raise ValueError("gen:console-head needs a line count and the command: <!-- gen:console-head 12 claims -->")
    lines = command_output(rest).rstrip().splitlines()
    shown = lines[:int(count)] + (["..."] if len(lines) > int(count) else [])
    return _console_block(rest, "\n".join(shown))


@generator("console-timed", volatile=DURATION, measured=True)
def console_timed(ctx: Context | None, args: str) -> str:
    """A console example that prints durations or machine lines (:data:`DURATION`): checked up to them."""
    return console(ctx, args)


def below_rounding(text: str) -> str:
    """``text`` with each non-zero decimal below :data:`symtrans.precision.ROUNDING_FLOOR` written ``(noise)``.

    Such a value is at float64 rounding level relative to the unit-scale quantities the console examples
    print, so its digits are noise that BLAS kernels and thread counts move by factors of 2 (a breaking
    table's |J t| / (|J| |t|) = 1.9e-16 on one thread, 1.4e-16 on two); a value above the floor stays.

    Examples
    --------
    >>> below_rounding("invariant: 1.9e-16 < 1e-09; changes by 0.0e+00, rank 0")
    'invariant: (noise) < 1e-09; changes by 0.0e+00, rank 0'
    """
    from symtrans.precision import ROUNDING_FLOOR

    def mask(m: re.Match[str]) -> str:
        x = m.group(0)
        decimal = any(c in x for c in ".eE")
        return "(noise)" if decimal and 0 < abs(float(x)) < ROUNDING_FLOOR else x

    return NUMBER.sub(mask, text)


@generator("console-measured", measured=True, stable=below_rounding)
def console_measured(ctx: Context | None, args: str) -> str:
    """A console example whose decimals are measurements: checked up to rounding-level noise (:func:`below_rounding`).

    Examples
    --------
    >>> g = GENERATORS["console-measured"]
    >>> g.same("invariant: 1.9e-16 < 1e-09", "invariant: 1.4e-16 < 1e-09"), g.same("1.9e-16", "1.9e-03")
    (True, False)
    >>> g.same("measured 27", "measured 28")
    False
    """
    return console(ctx, args)


_CHECKPOINTS: dict[str, Path] = {}


def checkpoint(family: str) -> Path:
    """A random-init checkpoint of ``family`` (``symtrans.numeric.fixtures.random_checkpoint``, seed 0), made once."""
    if family not in _CHECKPOINTS:
        from symtrans.numeric.fixtures import random_checkpoint

        tmp = tempfile.mkdtemp(prefix=f"symtrans-gen-{family}-")
        _CHECKPOINTS[family] = random_checkpoint(Path(tmp) / family, family)[0]
    return _CHECKPOINTS[family]


@generator("checkpoint-section", measured=True)
def checkpoint_section(ctx: Context | None, args: str) -> str:
    """One section of a command's output on a random-init checkpoint (``args``: family, the section's first
    words in quotes, then the command with ``DIR`` for the checkpoint): from that line to the next blank one.

    Examples
    --------
    >>> print(checkpoint_section(None, 'bert "rank profile:" measure --model DIR --n 4 --depth 1 --variant full'))
    ... # doctest: +ELLIPSIS
    ```text
    rank profile: variant full, LayerNorm on  (state 0 = first layer's input)
    ...
    ```
    """
    family, start, *command = shlex.split(args)
    out = command_output(shlex.join(str(checkpoint(family)) if a == "DIR" else a for a in command)).splitlines()
    first = next((i for i, line in enumerate(out) if line.startswith(start)), None)
    if first is None:
        raise RuntimeError(f"gen:checkpoint-section: no line starts with {start!r}")
    end = next((i for i in range(first, len(out)) if not out[i].strip()), len(out))
    return "```text\n" + "\n".join(out[first:end]) + "\n```"


# ---------------------------------------------------------------------------------------- the report
def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _counts(evidence: list[dict[str, Any]]) -> str:
    """Counts of the records by what they count as (their own verdict where that is absent), stale ones left out."""
    counts = Counter(e.get("counted_as") or e["verdict"] for e in evidence if not e.get("stale"))
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "-"


def claims_table(doc: dict[str, Any]) -> str:
    """The Markdown claim table of a ``report.json`` document (run-dependent numbers left out).

    Examples
    --------
    >>> doc = {"model": None, "context": {"n": 64, "seed": 0, "dtype": "float64"},
    ...        "claims": [{"id": "x", "paper_ref": "Thm 1", "kind": "theorem", "paper_status": "proved",
    ...                    "verdict": "fails", "standing": "fails", "formalisation": "paper",
    ...                    "disagreement": "r", "evidence": [{"verdict": "fails", "stale": False}]}]}
    >>> claims_table(doc).splitlines()[4]
    '| `x` | Thm 1 | theorem | proved | **fails** | fails | paper | 1 fails |'
    """
    model = doc["model"]["arch"] if doc.get("model") else "no model"
    ctx = doc["context"]
    lines = [f"Model: {model}, n = {ctx['n']}, seed {ctx['seed']}, {ctx['dtype']}. "
             "Bold: the toolkit disagrees with the paper.", "",
             "| id | paper | kind | paper status | toolkit verdict | standing | formalisation | evidence |",
             "|---|---|---|---|---|---|---|---|"]
    for c in doc["claims"]:
        verdict = f"**{c['verdict']}**" if c.get("disagreement") else c["verdict"]
        lines.append(f"| `{c['id']}` | {_cell(c['paper_ref'])} | {c['kind']} | {c['paper_status']} | {verdict} | "
                     f"{c['standing']} | {c['formalisation']} | {_counts(c['evidence'])} |")
        for r in c.get("readings") or ():
            lines.append(f"| &nbsp;&nbsp;↳ `{r['id']}` | reading ({r['quantifier']}) | reading | | {r['verdict']} | "
                         f"{r['standing']} | toolkit | {_counts(r['evidence'])} |")
    return "\n".join(lines)


def formalisations(doc: dict[str, Any]) -> str:
    """Every claim stated in the toolkit's own formalisation, with its note (docs/formalisations.md).

    Examples
    --------
    >>> doc = {"claims": [{"id": "x", "title": "t", "paper_ref": "r", "section": "§1", "source": "text",
    ...                    "formalisation": "toolkit", "formalisation_note": "why", "statement": "s"}]}
    >>> print(formalisations(doc).splitlines()[2])
    r (§1), read in the paper's text.
    """
    parts: list[str] = []
    for c in doc["claims"]:
        if c["formalisation"] != "toolkit":
            continue
        source = "known only from the abstract" if c["source"] == "abstract" else "read in the paper's text"
        parts += [f"### `{c['id']}`: {c['title']}", "",
                  f"{c['paper_ref']}{'' if c['section'] in c['paper_ref'] else ' (' + c['section'] + ')'}, {source}.",
                  "", f"> {c['statement']}", "", c["formalisation_note"] or "(no note)", ""]
    return "\n".join(parts).rstrip()


@generator("claims-table", needs_report=True)
def _claims_table(ctx: Context, args: str) -> str:
    return claims_table(ctx.report_json())


def disagreements(doc: dict[str, Any]) -> str:
    """The report's disagreements with the paper as a Markdown table, with the count of each verdict.

    Examples
    --------
    >>> doc = {"model": None, "context": {"n": 8, "seed": 0, "dtype": "float64"},
    ...        "summary": {"shown": {"fails": 1}, "disagreements": [{"id": "x", "verdict": "fails"}]},
    ...        "claims": [{"id": "x", "paper_ref": "Thm 1", "paper_status": "proved", "standing": "fails"}]}
    >>> print(disagreements(doc).splitlines()[-1])
    | `x` | Thm 1 | proved | fails | fails |
    """
    claims = {c["id"]: c for c in doc["claims"]}
    counts = ", ".join(f"{n} {w}" for w, n in doc["summary"]["shown"].items())
    model = doc["model"]["arch"] if doc.get("model") else "no model"
    ctx = doc["context"]
    lines = [f"{len(claims)} items on {model} (n = {ctx['n']}, seed {ctx['seed']}, {ctx['dtype']}): {counts}. "
             f"The {len(doc['summary']['disagreements'])} disagreements with the paper:", "",
             "| item | paper | paper status | toolkit verdict | standing |", "|---|---|---|---|---|"]
    for d in doc["summary"]["disagreements"]:
        c = claims[d["id"]]
        lines.append(f"| `{d['id']}` | {_cell(c['paper_ref'])} | {c['paper_status']} | {d['verdict']} | {c['standing']} |")
    return "\n".join(lines)


def check_table(doc: dict[str, Any]) -> str:
    """The numeric records of a ``report.json`` as ``symtrans check`` tabulates them (without its seconds column).

    Examples
    --------
    >>> doc = {"model": {"spec": "default", "arch": "m", "weights_hash": "ab" * 32},
    ...        "context": {"n": 8, "seed": 0, "dtype": "float64"},
    ...        "claims": [{"id": "x", "evidence": [{"claim": "x", "producer": "p", "kind": "numeric",
    ...                    "verdict": "supported", "margin": 1.5, "summary": "s"}]}]}
    >>> print(check_table(doc))
    symtrans check: model default (m, weights abababababab), n = 8, seed 0, float64
    claim  check  verdict    margin  summary
    ----------------------------------------
    x      p      supported  1.5     s
    """
    from symtrans.cli.check import _table
    from symtrans.evidence import Evidence

    m, ctx = doc["model"], doc["context"]
    records = [Evidence.from_dict(e) for c in doc["claims"] for e in c["evidence"]
               if e.get("kind") == "numeric" and not e.get("stale")]
    return (f"symtrans check: model {m['spec']} ({m['arch']}, weights {m['weights_hash'][:12]}), n = {ctx['n']}, "
            f"seed {ctx['seed']}, {ctx['dtype']}\n" + _table(records, seconds=False))


def before_summary(text: str) -> str:
    r"""A check table without its summary column: the summaries quote counts of borderline decisions (inputs
    inside the decisive band of one build and outside it on another: "60 of 170" / "62 of 171"); the claim,
    check, verdict and margin columns are what the block shows to be stable.

    Examples
    --------
    >>> before_summary("claim    verdict  margin  summary\nthm-4.2  fails    1.04    60 of 170 inputs")
    'claim    verdict  margin\nthm-4.2  fails    1.04'
    """
    lines = text.splitlines()
    head = next((line for line in lines if line.rstrip().endswith("summary")), None)
    if head is None:
        return text
    cut = head.rindex("summary")
    return "\n".join(line[:cut].rstrip() for line in lines)


@generator("check-table", needs_report=True, measured=True, stable=before_summary)
def _check_table(ctx: Context, args: str) -> str:
    return "```text\n" + check_table(ctx.report_json()) + "\n```"


@generator("disagreements", needs_report=True)
def _disagreements(ctx: Context, args: str) -> str:
    return disagreements(ctx.report_json())


@generator("formalisations", needs_report=True)
def _formalisations(ctx: Context, args: str) -> str:
    return formalisations(ctx.report_json())


def markdown_section(text: str, heading: str) -> str:
    """The section of Markdown ``text`` under ``heading`` (its line included), up to the next heading of its level.

    Examples
    --------
    >>> markdown_section("# A\\n## B\\nx\\n### C\\ny\\n## D\\nz\\n", "## B")
    '## B\\nx\\n### C\\ny\\n'
    """
    level = heading.split(" ", 1)[0]
    start = text.index(f"{heading}\n") if text.startswith(f"{heading}\n") else text.index(f"\n{heading}\n") + 1
    follow = re.compile(rf"^#{{1,{len(level)}}} ", re.M).search(text, start + len(heading))
    return text[start:follow.start() if follow else len(text)]


@generator("report-excerpt", needs_report=True, measured=True)
def report_excerpt(ctx: Context, args: str) -> str:
    """A section of the report's report.md (``args``: its heading), fenced as Markdown source."""
    section = markdown_section(ctx.report_md(), args or "## Where the toolkit and the paper disagree")
    return f"````markdown\n{section.rstrip()}\n````"


# ---------------------------------------------------------------------------------------- registrations and tables
@generator("name-map")
def name_map(ctx: Context | None, args: str) -> str:
    """symtrans's names beside TransformerLens's (:mod:`symtrans.names`): sizes, activations, weights.

    Examples
    --------
    >>> "| `Y` | Y^h = A^h X W_V^h | `blocks.{l}.attn.hook_z` |" in name_map(None, "")
    True
    """
    from symtrans.names import ACTIVATIONS, SIZES, WEIGHTS

    lines = ["| symtrans | TransformerLens |", "|---|---|"]
    lines += [f"| `{k}` | `{v.split(' (')[0]}`{' (' + v.split(' (', 1)[1] if ' (' in v else ''} |"
              for k, v in SIZES.items()]
    lines += ["", "| symtrans (`LayerTrace`) | paper | TransformerLens hook | symtrans axes | TransformerLens axes "
              "| where | meaning |", "|---|---|---|---|---|---|---|"]
    lines += [f"| `{r.symtrans}` | {r.paper} | `{r.tl}` | {r.symtrans_axes} | {r.tl_axes} | "
              f"{'every layer form' if r.forms == 'both' else r.forms + ' layers'} | {r.meaning} |"
              for r in ACTIVATIONS]
    lines += ["", "| symtrans weight | TransformerLens parameter |", "|---|---|"]
    lines += [f"| `{k}` | `{v}` |" for k, v in WEIGHTS.items()]
    return "\n".join(lines)


@generator("preset-list")
def preset_list(ctx: Context | None, args: str) -> str:
    """The architecture presets, from :data:`symtrans.arch.PRESETS` (so the list in the docs is every preset).

    Examples
    --------
    >>> text = preset_list(None, "")
    >>> text.startswith("Presets: `bert-base`") and "`llama2-7b`" in text and "`symbolic`" in text
    True
    """
    from symtrans.arch import PRESETS

    names = sorted(p for p in PRESETS if p != "symbolic") + ["symbolic"]
    return "Presets: " + ", ".join(f"`{p}`" + (" (the bundled model)" if p == "minilm-l6-h384" else "")
                                   for p in names) + "."


@generator("family-table")
def family_table(ctx: Context | None = None, args: str = "") -> str:
    """Each model-based producer and the families it runs on (``symtrans.producers.common.family_table``)."""
    from symtrans.producers.common import family_table as rows

    return "\n".join(rows())


def rst_table(text: str) -> list[list[str]]:
    """Rows of the first simple reStructuredText table in ``text`` (header first), cells split by the rule's columns.

    Examples
    --------
    >>> rst_table("x\\n\\n===  ====\\na    b\\n===  ====\\n1    two\\n3\\n===  ====\\n")
    [['a', 'b'], ['1', 'two'], ['3', '']]
    """
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"\s*=+(\s+=+)+\s*", line)]
    if len(rules) < 3:
        raise ValueError("no simple reStructuredText table (three rule lines) found")
    rule = lines[rules[0]]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", rule)]
    rows = []
    for line in lines[rules[0] + 1:rules[2]]:
        if line.strip() and not re.fullmatch(r"\s*=+(\s+=+)+\s*", line):
            cells = [line[a:(spans[k + 1][0] if k + 1 < len(spans) else None)].strip() for k, (a, _) in enumerate(spans)]
            rows.append(cells)
    return rows


@generator("tensor-table")
def tensor_table(ctx: Context | None = None, args: str = "") -> str:
    """The per-head tensor table of the ``symtrans.numeric`` docstring, as Markdown (read without importing torch).

    Examples
    --------
    >>> tensor_table().splitlines()[2].startswith("| `W_Q, W_K` |")
    True
    """
    source = (ROOT / "symtrans" / "numeric" / "__init__.py").read_text(encoding="utf-8")
    rows = rst_table(ast.get_docstring(ast.parse(source)) or "")
    head, body = rows[0], rows[1:]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(f"`{c}`" if k == 0 else c for k, c in enumerate(r)) + " |" for r in body]
    return "\n".join(out)


@generator("pairing-table")
def pairing_table(ctx: Context | None = None, args: str = "") -> str:
    """The collapse phenomena as objects of G (``symtrans.group.orbits.pairing_table``)."""
    from symtrans.group.orbits import pairing_table as rows

    out = ["| phenomenon | object | precise object | symmetry to break |", "|---|---|---|---|"]
    out += [f"| {r['phenomenon']} | {r['object']} | {_cell(r['precise_object'])} | {_cell(r['symmetry_to_break'])} |"
            for r in rows()]
    return "\n".join(out)


@generator("gauge-hooks-table")
def gauge_hooks_table(ctx: Context | None = None, args: str = "") -> str:
    """The gauge-invariance table of TransformerLens hooks for an architecture (``symtrans.group.hooks``).

    ``args``: a preset name (default ``minilm-l6-h384``, the bundled model's architecture).
    """
    from symtrans.group.hooks import markdown_table

    return markdown_table(args.strip() or "minilm-l6-h384")


# ---------------------------------------------------------------------------------------- the LayerNorm counterexample
_LN_CASE: dict[str, Any] = {}


def ln_counterexample() -> dict[str, Any]:
    """The counterexample of thm-4.2's ``ln-affine-search`` record (the exact search, run once: a few seconds)."""
    if not _LN_CASE:
        from symtrans.context import Context as Run
        from symtrans.runner import producers_for, run_producer

        (producer,) = [p for p in producers_for("thm-4.2") if p.name == "ln-affine-search"]
        (record,) = run_producer(producer, Run(model=None))
        _LN_CASE.update(record.counterexample)
    return _LN_CASE


def matrix_text(rows: list[list[str]], sep: str = ", ") -> str:
    """A matrix of exact entries as nested brackets.

    Examples
    --------
    >>> matrix_text([["-1", "0"], ["1", "1"]]), matrix_text([["-1", "0"]], ",")
    ('[[-1, 0], [1, 1]]', '[[-1,0]]')
    """
    return "[" + sep.join("[" + sep.join(r) + "]" for r in rows) + "]"


@generator("ln-counterexample")
def _ln_counterexample(ctx: Context | None, args: str) -> str:
    case = ln_counterexample()
    held = [h for h, ok in case["hypotheses"].items() if h != "all" and not ok]
    hyp = "H1-H4 hold exactly" if case["hypotheses"]["all"] else "violated: " + ", ".join(held)
    return (f"```text\nX = {matrix_text(case['X'])}    {hyp};  arank(X) = {case['arank_X']},  "
            f"arank(LN X) = {case['arank_LN_X_reduction']}\nsigma = {case['sigma']}\n```")


# ---------------------------------------------------------------------------------------- facts in prose
@dataclass(frozen=True)
class Fact:
    """A value printed in a document's prose, outside any block: the text around it and how to compute it.

    The check computes the value and looks for ``template`` filled with it (whitespace and line breaks
    counted as one space); ``--write`` cannot rewrite prose, so a stale fact is named for a hand edit.

    Examples
    --------
    >>> f = Fact("README.md", "{:,} for BertBase at n = 512", lambda: (360448,))
    >>> f.text(), f.found("... 360,448 for\\nBertBase at  n = 512 ..."), f.found("360,449 for BertBase at n = 512")
    ('360,448 for BertBase at n = 512', True, False)
    """

    path: str  # relative to the repository root
    template: str
    values: Callable[[], tuple[Any, ...]]

    def text(self) -> str:
        return self.template.format(*self.values())

    def found(self, document: str) -> bool:
        return " ".join(self.text().split()) in " ".join(document.split())

    @property
    def label(self) -> str:
        return f"{self.path}: fact {self.template!r} (edit by hand: {self.text()!r})"


def _recovery_bert_512() -> tuple[Any, ...]:
    from symtrans.formulas import formula

    return (int(formula("recovery-ambiguity", arch="bert-base", n=512).value),)


def _share_facts() -> tuple[Any, ...]:
    from symtrans.producers.sec6 import paper_share_range
    from symtrans.formulas import formula

    r = paper_share_range()
    assert r == list(range(r[0], r[-1] + 1)), "the n where 64.8% holds is no longer one run"
    return (r[0], r[-1], float(formula("ffn-flop-share", arch="bert-base", n=512).value))


#: every value the README's prose prints (README.md is edited by hand; its blocks by --write)
FACTS: tuple[Fact, ...] = (
    Fact("README.md", 'symtrans.formula("recovery-ambiguity", arch="bert-base", n=512).value   # {}',
         _recovery_bert_512),
    Fact("README.md", "{:,} for BertBase at n = 512", _recovery_bert_512),
    Fact("README.md", "the 64.8% FFN FLOP share holds only for n in {}..{} ({:.1%} at n = 512", _share_facts),
    Fact("README.md", "X = {} has affine rank {}, LN(X) has affine rank {}",
         lambda: (matrix_text(ln_counterexample()["X"], ","), ln_counterexample()["arank_X"],
                  ln_counterexample()["arank_LN_X_reduction"])),
)


# ---------------------------------------------------------------------------------------- blocks
@dataclass(frozen=True)
class Block:
    """One generated block of a file: its generator, the marker's argument and the text now between the markers."""

    path: Path
    name: str
    args: str
    body: str
    start: int
    end: int

    @property
    def label(self) -> str:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{where}: gen:{self.name}" + (f" {self.args}" if self.args else "")


def blocks(text: str, path: Path = ROOT / "README.md") -> list[Block]:
    """Every generated block of ``text``; an unknown generator or an opening marker without its close is an error.

    Examples
    --------
    >>> [b.name for b in blocks("a\\n<!-- gen:formula-table -->\\nold\\n<!-- /gen:formula-table -->\\nb\\n")]
    ['formula-table']
    >>> blocks("<!-- gen:formula-table -->\\nno end\\n")
    Traceback (most recent call last):
    ...
    ValueError: README.md: <!-- gen:formula-table --> at offset 0 has no matching <!-- /gen:formula-table -->
    """
    found, covered = [], []
    for m in BLOCK.finditer(text):
        if m["name"] not in GENERATORS:
            raise ValueError(f"{path.name}: unknown generator gen:{m['name']} (known: {', '.join(GENERATORS)})")
        found.append(Block(path, m["name"], (m["args"] or "").strip(), m["body"], m.start(), m.end()))
        covered.append((m.start(), m.end()))
    for m in OPENING.finditer(text):
        if not any(a <= m.start() < b for a, b in covered):
            raise ValueError(f"{path.name}: <!-- gen:{m[1]} --> at offset {m.start()} has no matching "
                             f"<!-- /gen:{m[1]} -->")
    return found


def render(block: Block, ctx: Context) -> str:
    """The block as the generator writes it, markers included."""
    text = GENERATORS[block.name].make(ctx, block.args).rstrip("\n")
    opening = f"<!-- gen:{block.name}" + (f" {block.args}" if block.args else "") + " -->"
    return f"{opening}\n{text}\n<!-- /gen:{block.name} -->"


def regenerate(text: str, path: Path, ctx: Context, names: set[str] | None = None) -> tuple[str, list[Block]]:
    """``text`` with its blocks rewritten (those of ``names`` only, if given), and the blocks that changed."""
    out, stale, last = [], [], 0
    for b in blocks(text, path):
        if names is not None and b.name not in names:
            continue
        if GENERATORS[b.name].needs_report and not ctx.allow_report and ctx.report is None:
            continue
        new = render(b, ctx)
        if GENERATORS[b.name].same(text[b.start:b.end], new):
            new = text[b.start:b.end]  # current: keep the committed durations (no churn on --write)
        else:
            stale.append(b)
        out += [text[last:b.start], new]
        last = b.end
    out.append(text[last:])
    return "".join(out), stale


def check(ctx: Context, paths: list[Path] | None = None, names: set[str] | None = None,
          texts: dict[Path, str] | None = None) -> list[str]:
    """Labels of the stale blocks of ``paths`` (default: README.md and docs/*.md); ``texts`` overrides a file's text."""
    stale = []
    for path in paths or documents():
        text = (texts or {}).get(path) or path.read_text(encoding="utf-8")
        stale += [b.label for b in regenerate(text, path, ctx, names)[1]]
        if names is None:
            stale += [f.label for f in FACTS if ROOT / f.path == path and not f.found(text)]
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 naming every stale block")
    mode.add_argument("--write", action="store_true", help="rewrite every block in place")
    mode.add_argument("--list", action="store_true", help="list every block")
    ap.add_argument("--report", help="an existing report.json of the bundled model (report.md beside it)")
    ap.add_argument("--no-report", action="store_true", help="leave out the blocks that need the report")
    args = ap.parse_args(argv)
    ctx = Context(report=Path(args.report) if args.report else None, allow_report=not args.no_report)
    try:
        if args.list:
            for path in documents():
                for b in blocks(path.read_text(encoding="utf-8"), path):
                    print(b.label + ("  (needs the report)" if GENERATORS[b.name].needs_report else ""))
            return 0
        if args.check:
            stale = check(ctx)
            for label in stale:
                print(f"stale: {label}")
            print(f"{len(stale)} stale block(s): run python docs/gen.py --write" if stale else "every block is current")
            return 1 if stale else 0
        for path in documents():
            text = path.read_text(encoding="utf-8")
            new, changed = regenerate(text, path, ctx)
            if changed:
                path.write_text(new, encoding="utf-8")
                print("\n".join(f"wrote {b.label}" for b in changed))
            for f in FACTS:
                if ROOT / f.path == path and not f.found(new):
                    print(f"stale (prose, not rewritten): {f.label}")
        return 0
    except (ValueError, LookupError, RuntimeError) as e:
        print(f"gen.py: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
