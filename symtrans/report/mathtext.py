"""Mathematics for the reports, made offline: MathML for report.html and notebooks, plain text for report.md.

LaTeX (a claim's ``latex`` field, a formula's expression through SymPy's
LaTeX printer) is converted with the small pure-Python ``latex2mathml``
package; nothing is fetched and no script runs in the page, since browsers
render MathML natively. :func:`latex_to_text` walks the same MathML tree
to give readable plain text (``rank(LN(X)) = rank(XP)``) where MathML cannot
go. Without ``latex2mathml`` installed, both fall back to the LaTeX source.

Examples
--------
>>> latex_to_text(r"\\operatorname{rank}(\\mathrm{LN}(X)) \\le \\operatorname{rank}(X) + 1")
'rank(LN(X)) ≤ rank(X) + 1'
>>> latex_to_mathml(r"x_i^2").startswith('<math xmlns="http://www.w3.org/1998/Math/MathML"')
True
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from functools import lru_cache
from typing import Any

__all__ = ["latex_to_mathml", "latex_to_text", "expression_mathml"]

_NS = "{http://www.w3.org/1998/Math/MathML}"
_SPACED = set("=<>≤≥≠≈∈∉⊂⊆⊃⊇→↦⇒⇔≅∼∝∀∃+−±×·∘⊕∩∪") | {"\u2212"}


@lru_cache(maxsize=4096)
def latex_to_mathml(latex: str, display: bool = False) -> str | None:
    """Return MathML for ``latex`` (``display`` for a block), or ``None`` if it cannot be converted here.

    Examples
    --------
    >>> "<mfrac>" in latex_to_mathml(r"\\frac{a}{b}")
    True
    >>> 'display="block"' in latex_to_mathml("x", display=True)
    True
    """
    try:
        from latex2mathml.converter import convert
    except ModuleNotFoundError:
        return None
    try:
        return convert(latex, display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - an unconvertible string falls back to its source
        return None


def expression_mathml(expr: Any, display: bool = False) -> str | None:
    """MathML of a SymPy expression, with the registry's symbol names (``d_model`` as d with subscript model).

    Examples
    --------
    >>> from symtrans.formulas import get_formula
    >>> "<msub>" in expression_mathml(get_formula("recovery-ambiguity").expression())
    True
    """
    import sympy as sp

    from symtrans.symbols import LATEX_NAMES, SYMBOLS

    names = {SYMBOLS[k]: v for k, v in LATEX_NAMES.items()}
    return latex_to_mathml(sp.latex(expr, symbol_names=names), display)


def _text(el: ET.Element) -> str:
    tag = el.tag.replace(_NS, "")
    kids = list(el)
    if tag in ("mi", "mn", "mtext", "ms"):
        return (el.text or "").strip() if tag != "mtext" else (el.text or "")
    if tag == "mo":
        op = (el.text or "").strip()
        return f" {op} " if op in _SPACED else ("" if op in ("\u2061", "\u2062") else op)
    if tag == "mspace":
        return " "
    parts = [_text(k) for k in kids]
    if tag in ("mrow", "math", "mstyle", "mpadded") and len(parts) > 1:  # keep juxtaposed factors apart
        joined = parts[0]
        for prev, kid, part in zip(kids, kids[1:], parts[1:]):
            ptag = prev.tag.replace(_NS, "")
            word = ptag in ("mo", "mi") and len((prev.text or "").strip()) > 1 and (prev.text or "").strip().isalpha()
            if part[:1].isalnum() and joined[-1:] not in (" ", "(") and (
                    ptag in ("msub", "msup", "msubsup", "munderover", "mfrac", "msqrt") or word):
                joined += " "
            joined += part
        return joined
    if tag in ("msub", "munder") and len(parts) == 2:
        return parts[0] + "_" + _group(parts[1])
    if tag in ("msup", "mover") and len(parts) == 2:
        if tag == "mover" and parts[1] in ("\u00af", "\u02c9", "\u0302", "^", "\u007e", "~", "\u02dc", "\u2192"):
            return parts[0] + {"\u2192": "\u20d7"}.get(parts[1], "\u0305" if parts[1] in ("\u00af", "\u02c9") else
                                                       "\u0302" if parts[1] in ("\u0302", "^") else "\u0303")
        return parts[0] + "^" + _group(parts[1])
    if tag in ("msubsup", "munderover") and len(parts) == 3:
        return parts[0] + "_" + _group(parts[1]) + "^" + _group(parts[2])
    if tag == "mfrac" and len(parts) == 2:
        return _group(parts[0], strict=True) + "/" + _group(parts[1], strict=True)
    if tag == "msqrt":
        return "sqrt(" + "".join(parts) + ")"
    if tag == "mroot" and len(parts) == 2:
        return f"root_{_group(parts[1])}({parts[0]})"
    if tag == "mtable":
        return "; ".join(parts)
    if tag == "mtr":
        return ", ".join(parts)
    return "".join(parts)


def _group(s: str, strict: bool = False) -> str:
    s = s.strip()
    if len(s) <= 1 or (s.isidentifier() or s.isdigit() if strict else s.replace("_", "").isalnum()):
        return s
    if s.startswith("(") and s.endswith(")") and s[1:-1].count("(") == s[1:-1].count(")"):
        return s
    return f"({s})"


def latex_to_text(latex: str) -> str:
    """Readable plain text for ``latex`` (subscripts as ``_``, powers as ``^``, fractions as ``a/b``).

    Examples
    --------
    >>> latex_to_text(r"\\frac{4 d_{\\mathrm{ff}}}{n + 1}")
    '(4d_ff)/(n + 1)'
    >>> latex_to_text(r"\\mathbf 1_d\\notin\\operatorname{rowspace}(X)")
    '1_d ∉ rowspace(X)'
    >>> latex_to_text(r"\\unknowncommand{")  # not convertible: the source, unchanged
    '\\\\unknowncommand{'
    """
    ml = latex_to_mathml(latex)
    if ml is None:
        return latex
    try:
        root = ET.fromstring(ml)
    except ET.ParseError:
        return latex
    text = " ".join(_text(root).split())
    for a, b in (("( ", "("), (" )", ")"), (" ,", ",")):
        text = text.replace(a, b)
    return text
