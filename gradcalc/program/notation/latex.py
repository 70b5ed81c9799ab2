"""LaTeX in claims: answers typed in a notebook, and what `diff --latex` prints, read as claims.

`\\frac{\\partial L}{\\partial w_{1}} = -a \\cdot w_{3}` is read as `∂L/∂w1 = -a * w3`: the
LaTeX becomes gradcalc text (side by side multiplies in a claim), and each character made
remembers the character it came from, so that errors point into what was written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from ...errors import GradcalcSyntaxError, Pos, line_starts, pos_at
from .juxtaposition import is_function

# Commands that are a word or a sign of gradcalc's own.
_WORDS = {
    "cdot": "*", "times": "*", "ast": "*", "odot": "*", "div": "/", "partial": "∂", "approx": "≈", "pi": "π",
    "sin": "sin", "cos": "cos", "tan": "tan", "sec": "sec", "csc": "csc", "cot": "cot", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "exp": "exp",
    "log": "log", "ln": "ln", "max": "max", "min": "min", "det": "det", "coth": "coth", "sech": "sech",
    "csch": "csch", "top": "T", "intercal": "T", "sum": "sum", "circ": "∘", "otimes": "⊗", "prime": "'",
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "eta": "η",
    "theta": "θ", "lambda": "λ", "mu": "μ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "omega": "ω",
    ",": " ", ";": " ", ":": " ", " ": " ", "!": "", "quad": " ", "qquad": " ", "left": "", "right": "",
    "nonumber": "", "notag": "", "bmod": "%", "lfloor": "floor(", "rfloor": ")",  # what diff --latex writes
}
# Functions, whose powers (\tanh^{2}{x}) are the powers of their values.
_FUNCTIONS = {"sin", "cos", "tan", "sec", "csc", "cot", "sinh", "cosh", "tanh", "coth", "sech", "csch", "arcsin",
              "arccos", "arctan", "exp", "log", "ln", "sigma"}
# Commands whose argument is text to keep as it is: \mathrm{d}, \operatorname{softplus}.
_FONTS = {"mathrm", "mathit", "mathbf", "mathsf", "mathcal", "mathscr", "boldsymbol", "bm", "operatorname", "text",
          "textrm"}
_FRACTIONS = {"frac", "dfrac", "tfrac"}
_DERIVATIVE = re.compile(r"^(∂|d)\s*([^\W\d]\w*)$")  # ∂L, dw1: a claim's left side
_SECOND_TOP = re.compile(r"^(∂|d)\s*\^\(?\s*2\s*\)?\s*([^\W\d]\w*)$")  # ∂^2 L
_SECOND_BOTTOM = re.compile(r"^(∂|d)\s*([^\W\d]\w*?)\s*(?:\^\(?\s*2\s*\)?|(∂|d)\s*([^\W\d]\w*))$")  # ∂x^2, ∂a ∂b


class Latex(NamedTuple):
    """gradcalc text made from LaTeX, and for each of its characters the index it came from."""

    text: str
    origin: list[int]

    def place(self, pos: Pos, written: str) -> Pos:
        """A place in the text made, as a place in the LaTeX written."""
        starts = line_starts(self.text)
        at = min(starts[min(pos.line, len(starts)) - 1] + pos.column - 1, len(self.origin) - 1)
        source = self.origin[at]
        end = self.origin[min(at + max(pos.width, 1) - 1, len(self.origin) - 1)]
        return pos_at(written, source, max(1, end - source + 1))


# Fractions as one character, pasted from word processors: ½x is x/2.
_VULGAR = {"½": "(1/2)", "⅓": "(1/3)", "⅔": "(2/3)", "¼": "(1/4)", "¾": "(3/4)", "⅕": "(1/5)", "⅙": "(1/6)",
           "⅛": "(1/8)"}


def looks_like_latex(text: str) -> bool:
    """Whether claims need this module's reading: LaTeX, or fractions written as one character."""
    return "\\" in text or "{" in text or "$" in text or any(c in text for c in _VULGAR)


def from_latex(written: str) -> Latex:
    """The gradcalc text of claims written in LaTeX; GradcalcSyntaxError for what it cannot read."""
    chars, origin, _ = _convert(_math_only(written), 0, opener=None)
    origin.append(len(written))  # the end
    return Latex("".join(chars), origin)


# Math in a line of prose: $$...$$, $...$, \\(...\\), \\[...\\] (one not closed runs to the line's end).
MATH = re.compile(r"\$\$(.*?)(?:\$\$|$)|\$(.*?)(?:\$|$)|\\\((.*?)(?:\\\)|$)|\\\[(.*?)(?:\\\]|$)")
_RELATION = re.compile(r"=|≈|\\approx(?![A-Za-z])")


def _math_only(written: str) -> str:
    """Each line of prose with claims in its math ("The gradient is $\\frac{...}{...} = 2w$.") as those claims
    alone: the $...$ with a = or ≈ kept, the rest blanked, and a ';' between two. The text keeps its length
    and lines, so every place stays where it was written."""
    lines = written.split("\n")
    for number, line in enumerate(lines):
        found = list(MATH.finditer(line))
        if not found or not any(c.isalpha() for c in MATH.sub("", line)):  # $...$ = $...$: marks, read past
            continue
        spans = [next((m.start(g), m.end(g)) for g in range(1, 5) if m.group(g) is not None) for m in found]
        claims = [(a, b) for a, b in spans if _RELATION.search(line, a, b)]
        if not claims:  # dL/dw = $2w$: the claim is outside the math too, and the marks are read past
            continue
        kept = [" "] * len(line)
        for index, (a, b) in enumerate(claims):
            kept[a:b] = line[a:b]
            if index:
                kept[a - 1] = ";"  # the mark before it: a claim of its own
        lines[number] = "".join(kept)
    return "\n".join(lines)


def _emitter(chars: list[str], origin: list[int]) -> Callable[[str, int], None]:
    """A function that writes text made from the LaTeX character at index `at`."""
    def emit(text: str, at: int) -> None:
        chars.extend(text)
        origin.extend([at] * len(text))

    return emit


def _convert(src: str, i: int, opener: int | None) -> tuple[list[str], list[int], int]:
    """Convert from src[i] to the end, or past the `}` that closes the `{` at src[opener]."""
    chars: list[str] = []
    origin: list[int] = []
    emit = _emitter(chars, origin)
    while i < len(src):
        c = src[i]
        if c in _VULGAR:
            emit(_VULGAR[c], i)
            i += 1
            continue
        if c == "$" or src.startswith(("\\(", "\\)", "\\[", "\\]"), i):  # $...$, \(...\): math mode's marks
            emit(" ", i)
            i += 1 if c == "$" else 2
            continue
        if c == "}":
            if opener is not None:
                return chars, origin, i + 1
            raise GradcalcSyntaxError("unmatched '}'", "remove it, or add the '{' it closes", _at(src, i))
        if c == "{":
            start = i
            inner, places, i = _convert(src, i + 1, opener=i)
            emit("(", start)
            chars.extend(inner)
            origin.extend(places)
            emit(")", i - 1)  # the closing brace: a claim's text as written runs to it
            continue
        if c == "^":
            start = i
            inner, places, i = _argument(src, i + 1)
            exponent = "".join(inner).strip()
            if exponent in ("'", "''"):  # f^{\\prime}(x): Lagrange's prime, as f'(x)
                emit(exponent, start)
            elif exponent == "T":
                emit(".", start)  # x^{T}: the transpose
                emit("T", i - 1)  # through the closing brace: a claim's text as written runs to it
            elif exponent.isdigit():  # x^2, x^{2}: as plain text writes them (sin^2 x, d^2f/dx^2)
                emit("^", start)
                emit(exponent[:-1], places[0])
                emit(exponent[-1], i - 1)
            else:
                emit("^(", start)
                chars.extend(inner)
                origin.extend(places)
                emit(")", i - 1)
            continue
        if c == "_":
            inner, places, i = _argument(src, i + 1)
            suffix = "".join(inner).strip()
            if not re.fullmatch(r"\w+", suffix):
                raise GradcalcSyntaxError(f"subscript '{suffix}' cannot be part of a name",
                                          "a subscript is digits or letters: w_{1}, x_{max}", _at(src, i - 1))
            written = suffix if suffix.isdigit() else "_" + suffix  # w_{1} is w1, x_{max} is x_max
            emit(written[:-1], places[0])
            emit(written[-1], i - 1)  # through the closing brace: a claim's text as written runs to it
            continue
        if c == "\\":
            i = _command(src, i, emit, chars, origin)
            continue
        emit(c, i)
        i += 1
    if opener is not None:
        raise GradcalcSyntaxError("'{' is never closed", "add the matching '}'", _at(src, opener))
    return chars, origin, i


def _argument(src: str, i: int) -> tuple[list[str], list[int], int]:
    """The argument of ^, _ or a command: a {group}, a command, or one character."""
    while i < len(src) and src[i] == " ":
        i += 1
    if i >= len(src):
        raise GradcalcSyntaxError("the LaTeX ends before an argument", "add it in braces: x^{2}", _at(src, i - 1))
    if src[i] == "{":
        return _convert(src, i + 1, opener=i)
    if src[i] == "\\":
        chars: list[str] = []
        origin: list[int] = []
        return chars, origin, _command(src, i, _emitter(chars, origin), chars, origin)
    return [src[i]], [i], i + 1


def _command(src: str, i: int, emit: Callable[[str, int], None], chars: list[str], origin: list[int]) -> int:
    """Convert the command at src[i] (a backslash); return the index after it."""
    found = re.match(r"\\([A-Za-z]+|.)", src[i:])
    if found is None:
        raise GradcalcSyntaxError("a lone backslash", "remove it", _at(src, i))
    name, end = found.group(1), i + found.end()
    if name == "sum" and src[end:end + 1] == "_":
        raise GradcalcSyntaxError("a sum with limits or an axis (\\sum_{...}) is not read",
                                  "write \\sum x for the sum of all entries, or sum(x, axis=0)", _at(src, i, 4))
    if name == "nabla":
        return _gradient(src, i, end, emit)
    if name in _WORDS:
        if name == "left" and src[end:end + 1] == "|":
            emit("abs(", i)
            return end + 1
        if name == "right" and src[end:end + 1] == "|":
            emit(")", end)
            return end + 1
        if name in ("left", "right") and src[end:end + 1] == ".":
            return end + 1
        word = _WORDS[name]
        if word.isalpha() and chars and (chars[-1].isalnum() or chars[-1] == "_"):
            emit(" ", i)  # x\sin x is x sin x, not the name xsin
        power = end + len(src[end:]) - len(src[end:].lstrip(" "))
        if name in _FUNCTIONS and src[power:power + 1] == "^":  # \tanh^{2}{\left(x\right)}, as SymPy prints
            return _power_of_call(src, i, word, power, emit, chars, origin)
        emit(word, i)
        if word.isalpha() and (src[end:end + 1].isalnum() or src[end:end + 1] == "\\"):
            emit(" ", end - 1)  # \alpha\beta is α β, not the name αβ
        return end
    if name in _FONTS:
        inner, places, after = _argument(src, end)
        word = "".join(inner).strip()
        power = after + len(src[after:]) - len(src[after:].lstrip(" "))
        if src[power:power + 1] == "^" and is_function(word):  # \operatorname{sech}^{2}{\left(x\right)}: SymPy
            return _power_of_call(src, i, word, power, emit, chars, origin)
        if word.isalpha() and chars and (chars[-1].isalnum() or chars[-1] == "_"):
            emit(" ", i)  # x\operatorname{sech}(x) is x sech(x), not the name xsech
        chars.extend(inner)
        origin.extend(places)
        return after
    if name == "sqrt":
        index = None
        if src[end:end + 1] == "[":
            close = src.find("]", end)
            if close < 0:
                raise GradcalcSyntaxError("'[' of \\sqrt is never closed", "write \\sqrt[3]{x}", _at(src, end))
            index, end = src[end + 1:close], close + 1
        inner, places, after = _argument(src, end)
        if index is None:
            emit("sqrt(", i)
            chars.extend(inner)
            origin.extend(places)
            emit(")", after - 1)
        else:
            emit("(", i)
            chars.extend(inner)
            origin.extend(places)
            emit(f")^(1/({index}))", after - 1)
        return after
    if name in _FRACTIONS:
        top, top_places, after = _argument(src, end)
        bottom, bottom_places, after = _argument(src, after)
        over, under = "".join(top).strip(), "".join(bottom).strip()
        head_top, head_bottom = _DERIVATIVE.match(over), _DERIVATIVE.match(under)
        if head_top and head_bottom:  # \frac{\partial L}{\partial w}: a claim's ∂L/∂w
            emit(f"{head_top.group(1)}{head_top.group(2)}/{head_bottom.group(1)}{head_bottom.group(2)}", i)
            origin[-1] = after - 1
            return after
        second_top, second_bottom = _SECOND_TOP.match(over), _SECOND_BOTTOM.match(under)
        if second_top and second_bottom:  # \frac{\partial^{2} L}{\partial a \partial b}: ∂^2L/∂a ∂b
            d, name = second_top.groups()
            d2, first, d3, other = second_bottom.groups()
            tail = f"{d2}{first}^2" if other is None else f"{d2}{first} {d3}{other}"
            emit(f"{d}^2{name}/{tail}", i)
            origin[-1] = after - 1
            return after
        emit("((", i)
        chars.extend(top)
        origin.extend(top_places)
        emit(")/(", i)
        chars.extend(bottom)
        origin.extend(bottom_places)
        emit("))", after - 1)
        return after
    if name == "begin":
        return _matrix(src, i, end, emit, chars, origin)
    raise GradcalcSyntaxError(f"unknown LaTeX command '\\{name}'",
                              "claims read \\frac, \\sqrt, \\cdot, \\left( \\right), ^{...}, _{...}, Greek letters "
                              "and the functions (\\sin, \\exp, \\sigma, ...)", _at(src, i, len(name) + 1))


def _gradient(src: str, i: int, end: int, emit: Callable[[str, int], None]) -> int:
    """\\nabla_{w} L, a claim's left side: the gradient ∂L/∂w."""
    if src[end:end + 1] != "_":
        raise GradcalcSyntaxError("a gradient \\nabla needs what it is taken by, as a subscript",
                                  "write \\nabla_{w} L for ∂L/∂w", _at(src, i, end - i))
    by, _, after = _argument(src, end + 1)
    start = after + len(src[after:]) - len(src[after:].lstrip(" "))
    if src[start:start + 1] == "\\":
        of, _, after = _argument(src, start)
    else:
        found = re.match(r"[^\W\d]\w*", src[start:])
        of, after = (list(found.group()), start + found.end()) if found else ([], start)
    wrt, output = "".join(by).strip(), "".join(of).strip()
    if not re.fullmatch(r"[^\W\d]\w*", wrt) or not re.fullmatch(r"[^\W\d]\w*", output):
        raise GradcalcSyntaxError("a gradient is read as \\nabla_{w} L: one name as the subscript, one after it",
                                  "write \\nabla_{w} L for ∂L/∂w", _at(src, i, max(1, after - i)))
    emit(f"∂{output}/∂{wrt}", i)
    emit(" ", after - 1)  # through the name: a claim's text as written runs to it
    return after


_MATRICES = {"matrix", "bmatrix", "pmatrix", "Bmatrix"}
_DERIVATIONS = {"aligned", "align", "align*", "alignat", "split", "gathered", "eqnarray", "eqnarray*"}


def _matrix(src: str, i: int, end: int, emit: Callable[[str, int], None], chars: list[str],
            origin: list[int]) -> int:
    """\\begin{bmatrix} 1 & 2 \\\\ 3 & 4 \\end{bmatrix} as [[1, 2], [3, 4]]; one row or one column is a vector."""
    found = re.match(r"\{(\w+\*?)\}", src[end:])
    if found is not None and found.group(1) in _DERIVATIONS:
        return _derivation(src, i, end + found.end(), found.group(1), emit, chars, origin)
    if found is None or found.group(1) not in _MATRICES:
        raise GradcalcSyntaxError("a LaTeX environment claims do not read", "write a matrix with \\begin{bmatrix} "
                                  "... \\end{bmatrix}, or as [[1, 2], [3, 4]]", _at(src, i))
    body_start = end + found.end()
    closing = f"\\end{{{found.group(1)}}}"
    body_end = src.find(closing, body_start)
    if body_end < 0 or "\\begin" in src[body_start:body_end]:
        raise GradcalcSyntaxError(f"\\begin{{{found.group(1)}}} is never ended (or holds another)",
                                  f"end it with {closing}", _at(src, i))
    rows: list[list[tuple[int, int]]] = []
    start = body_start
    for row in re.split(r"(\\\\)", src[body_start:body_end]) + ["\\\\"]:
        if row == "\\\\":
            continue
        cells, cell = [], start
        for part in row.split("&"):
            cells.append((cell, cell + len(part)))
            cell += len(part) + 1
        start += len(row) + 2
        if any(src[a:b].strip() for a, b in cells):
            rows.append(cells)
    vector = len(rows) == 1 or all(len(r) == 1 for r in rows)
    emit("([", i)  # in brackets: W [...] would index W; W ([...]) multiplies (see check.py)
    for r, cells in enumerate(rows):
        if not vector:
            emit("[" if r == 0 else ", [", cells[0][0])
        for c, (a, b) in enumerate(cells):
            if c or (vector and r):
                emit(", ", a)
            inner, places, _ = _convert(src[:b], a, opener=None)
            chars.extend(inner)
            origin.extend(places)
        if not vector:
            emit("]", cells[-1][1] - 1)
    after = body_end + len(closing)
    emit("])", after - 1)
    return after


def _derivation(src: str, i: int, body_start: int, name: str, emit: Callable[[str, int], None],
                chars: list[str], origin: list[int]) -> int:
    """\\begin{aligned} ∂L/∂w &= ... \\\\ &= ... \\end{aligned}: a derivation, read as a claim with its working.

    A line with a left side starts a claim; a line that starts with its = (or ≈) is the derivation's next
    line (read as `∂L/∂w = A = B`: the last is what is claimed, and each is checked against the one before);
    a line without one goes on with the line before it. Two claims are read as two, as on one line
    separated by ';'.
    """
    closing = f"\\end{{{name}}}"
    body_end = src.find(closing, body_start)
    if body_end < 0:
        raise GradcalcSyntaxError(f"\\begin{{{name}}} is never ended", f"end it with {closing}", _at(src, i))
    plain = src[:body_end].replace("&", " ")  # alignment marks: the same length, so places stay
    claims: list[tuple[int, int, list[tuple[int, int]]]] = []  # each: its relation's span, its right side's parts
    start = body_start
    for row in re.split(r"(\\\\(?:\[[^\]]*\])?)", src[body_start:body_end]):
        a, b, start = start, start + len(row), start + len(row)
        if row.startswith("\\\\") or not plain[a:b].strip():
            continue
        relation = _RELATION.search(plain, a, b)
        if relation is None:  # the line goes on with the one before
            if not claims:
                raise GradcalcSyntaxError("a derivation's first line has no '='", "write ∂L/∂w &= ... \\\\ &= ...",
                                          _at(src, a))
            claims[-1][2].append((a, b))
        elif plain[a:relation.start()].strip() or not claims:
            claims.append((a, relation.start(), [(relation.start(), b)]))
        else:  # the derivation's next line, with its =
            claims[-1][2].append((relation.start(), b))
    if not claims:
        raise GradcalcSyntaxError(f"\\begin{{{name}}} holds no claim", "write ∂L/∂w &= ... \\\\ &= ... in it",
                                  _at(src, i))
    for index, (left, sign, right) in enumerate(claims):
        if index:
            emit(";", left)
        for a, b in [(left, sign), *right]:
            inner, places, _ = _convert(plain[:b], a, opener=None)
            chars.extend(inner)
            origin.extend(places)
            emit(" ", b - 1)
    return body_end + len(closing)


def _power_of_call(src: str, i: int, word: str, power: int, emit: Callable[[str, int], None], chars: list[str],
                   origin: list[int]) -> int:
    """\\sin^{2}{x} or \\sin^{2}(x), the power of a function's value, as (sin(x))^(2)."""
    exponent, exponent_places, after = _argument(src, power + 1)
    if "".join(exponent).strip() in ("'", "''"):  # \\sigma^{\\prime}(z): the derivative's prime, as σ'(z)
        emit(word + "".join(exponent).strip(), i)
        return after
    start = after + len(src[after:]) - len(src[after:].lstrip(" "))
    if src.startswith("{", start):
        argument, places, after = _convert(src, start + 1, opener=start)
    elif src.startswith("(", start) or src.startswith("\\left(", start):
        depth, close = 0, start
        for close in range(start, len(src)):
            depth += {"(": 1, ")": -1}.get(src[close], 0)
            if depth == 0 and src[close] == ")":
                break
        if depth:
            raise GradcalcSyntaxError("'(' is never closed", "add the matching ')'", _at(src, start))
        argument, places, after = _convert(src[:close + 1], start, opener=None)
    elif "".join(exponent).strip().isdigit():  # \tanh^2 x: as tanh^2 x is read, the product that follows
        emit(f"{word}^{''.join(exponent).strip()} ", i)
        return start
    else:
        command = src[i:power].strip()
        raise GradcalcSyntaxError(f"the power of {command} needs its argument in brackets",
                                  f"write {command}^{{2}}(x) for the square of its value", _at(src, start))
    emit(f"({word}(", i)
    chars.extend(argument)
    origin.extend(places)
    emit("))^(", after - 1)
    chars.extend(exponent)
    origin.extend(exponent_places)
    emit(")", after - 1)
    return after


def _at(src: str, index: int, width: int = 1) -> Pos:
    """The place of src[index], an index past the end taken as the last character."""
    return pos_at(src, max(0, min(index, len(src) - 1)) if src else 0, width)
