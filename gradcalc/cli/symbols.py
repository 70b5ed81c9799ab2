"""Encodings without the product's symbols: ASCII that says the same, from one table.

∂L/∂w1, a ✓, Wᵀ: UTF-8 has them all, but Windows' redirected output (cp1252), ASCII and the C locale do not.
There each symbol is written as the ASCII that says the same (dL/dw1, ok, W.T), from this one table, whoever
writes it: a Rich view (translated before it is laid out, so columns stay aligned), an error, a warning,
--help. A character that is not the product's (a variable named θ, from the user's file) is written as a
backslash escape (\\u03b8), as Python would. Only what the encoding lacks is replaced: cp1252 keeps its ², ·
and ×. JSON never goes through the table: it is written with \\u escapes instead (jsonout.write).
"""

import codecs
import sys
from collections.abc import Callable
from typing import Any

SYMBOLS = {
    "∂": "d", "✓": "ok", "✗": "x", "ᵀ": ".T", "·": "*", "⋅": "*", "∙": "*", "∗": "*", "\u2062": "*", "⊙": "*",
    "×": "x", "÷": "/", "−": "-", "–": "-", "—": "--", "…": "...", "⋮": "...", "⋱": "...", "→": "->", "←": "<-",
    "↦": "|->", "≈": "~=", "≠": "!=", "≤": "<=", "≥": ">=", "±": "+/-", "∓": "-/+", "√": "sqrt", "π": "pi",
    "‖": "||", "∇": "grad ", "\u0302": "_hat", "ᵗ": "^t",  # minimize's ‖∇L‖ and Adam's m̂ = m/(1 − β₁ᵗ)
    "β": "beta", "ε": "eps", "μ": "mu",  # the optimizers' own letters (a user's θ stays an escape, as Python's)
    "₀": "0", "₁": "1", "₂": "2", "₃": "3", "₄": "4", "₅": "5", "₆": "6", "₇": "7", "₈": "8", "₉": "9",
    # Lines of trees and boxes, where Rich's own ASCII boxes (ascii_only) did not already draw them.
    "─": "-", "━": "-", "│": "|", "┃": "|", "├": "+", "└": "`", "┌": "+", "┐": "+", "┘": "+", "┤": "+",
    "┬": "+", "┴": "+", "┼": "+", "╭": "+", "╮": "+", "╯": "+", "╰": "+", "═": "=", "║": "|",
}
# Powers: a run of them is one caret, x⁻¹ as x^-1 and ∂²L as d^2L (ᵀ is a transpose, in SYMBOLS).
_SUPERSCRIPTS = dict(zip("⁺⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "+-0123456789"))
_ERRORS = "gradcalc.symbols"  # the codec error handler that writes them


def _ascii(text: str) -> str:
    """A run of characters an encoding lacks, in ASCII: SYMBOLS, powers after a caret, else a backslash escape."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in _SUPERSCRIPTS:
            end = i
            while end < len(text) and text[end] in _SUPERSCRIPTS:
                end += 1
            out.append("^" + "".join(_SUPERSCRIPTS[c] for c in text[i:end]))
            i = end
            continue
        out.append(SYMBOLS.get(char) or char.encode("ascii", "backslashreplace").decode("ascii"))
        i += 1
    return "".join(out)


def _replace(error: UnicodeError) -> tuple[str, int]:
    """The codec error handler: what an encoding could not write, in ASCII."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text, end = error.object, error.end
    if text[end - 1] in _SUPERSCRIPTS:  # x⁻¹ in cp1252, which has ¹ but not ⁻: the power whole, x^-1
        while end < len(text) and text[end] in _SUPERSCRIPTS:
            end += 1
    return _ascii(text[error.start:end]), end


codecs.register_error(_ERRORS, _replace)


def _unicode(encoding: str | None) -> bool:
    """Whether an encoding has every character (None: a stream of text, such as StringIO)."""
    if encoding is None:
        return True
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def unicode_stream(stream: Any) -> bool:
    """Whether stream can be written any character: its encoding is UTF-8 (or another UTF), or it holds text."""
    return _unicode(getattr(stream, "encoding", None))


def plain_symbols(stream: Any) -> Callable[[str], str] | None:
    """None where stream can write every symbol; else the function that gives text as stream will write it."""
    encoding = getattr(stream, "encoding", None)
    if encoding is None or _unicode(encoding):
        return None
    try:
        codecs.lookup(encoding)
    except LookupError:  # an encoding Python does not know: write ASCII, which every one has
        encoding = "ascii"

    def translate(text: str) -> str:
        return text if text.isascii() else text.encode(encoding, _ERRORS).decode(encoding)

    return translate


def encodable_streams() -> None:
    """Standard output and error, where their encoding lacks some characters, write them as `_ascii` says,
    never failing with UnicodeEncodeError (an exit 3, and nothing written)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not unicode_stream(stream) and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=_ERRORS)
            except (ValueError, OSError, LookupError):  # not a text stream of the usual kind: leave it
                pass
