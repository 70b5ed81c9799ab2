"""Hypothesis strategies shared by the test files: random differentiable programs over scalars."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

NAMES = ("x", "y", "z")


@st.composite
def expressions(draw: Callable[..., Any], names: Sequence[str], depth: int = 3, powers: bool = False) -> str:
    """A random differentiable expression over `names`: + - * / ^ and smooth functions, domains respected;
    with `powers`, also a positive base to an expression's power."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        if draw(st.integers(0, 5)) == 0:
            return draw(st.sampled_from(["2", "3", "0.5", "1.5"]))
        return draw(st.sampled_from(list(names)))
    inner = lambda: draw(expressions(names, depth - 1, powers))
    kind = draw(st.sampled_from(["+", "-", "*", "/", "^", "neg", "exp", "log", "sqrt", "sin", "cos", "tanh",
                                 "sigmoid", "inv", *(["pow"] if powers else [])]))
    positive = lambda: draw(st.sampled_from(
        ["(1 + ({})^2)", "(2 + tanh({}))", "exp(sin({}))", "(1.5 + cos({}))"])).format(inner())
    if kind in "+-*":
        return f"({inner()} {kind} {inner()})"
    if kind == "/":
        return f"({inner()} / {positive()})"
    if kind == "^":
        return f"({inner()})^{draw(st.sampled_from([2, 3]))}"
    if kind == "pow":
        return f"{positive()}^({inner()})"
    if kind == "inv":
        return f"{positive()}^{draw(st.sampled_from([-1, -2]))}"
    if kind == "neg":
        return f"-({inner()})"
    if kind in ("log", "sqrt"):
        return f"{kind}({positive()})"
    if kind == "exp":
        return f"exp(tanh({inner()}))" if draw(st.booleans()) else f"exp({inner()})"
    return f"{kind}({inner()})"


@st.composite
def scalar_cases(draw: Callable[..., Any], powers: bool = False) -> tuple[str, list[str], list[dict[str, float]]]:
    """A program `f = ...` over 1-3 names (each one used), and two random points."""
    count = draw(st.integers(1, 3))
    names = list(NAMES[:count])
    body = draw(expressions(names, powers=powers))
    for name in names:
        if not re.search(rf"\b{name}\b", body):
            body = f"({body}) * {name}"
    coordinate = st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 3))
    points = [{name: draw(coordinate) for name in names} for _ in range(2)]
    return f"f = {body}", names, points


# Token soups: the language's tokens, keywords, junk and gaps in random order (mostly not a program).
SOUP_NAMES = ["x", "y", "a", "w1", "L", "θ", "_t", "sin", "sum", "ones", "randn", "load", "range", "f", "maximum", "T"]
KEYWORDS = ["if", "else", "while", "for", "in", "no_grad", "return", "and", "or", "not", "check", "const", "elif",
            "break", "continue", "None"]
NUMBERS = ["0", "1", "2", "2.5", ".5", "1e-3", "3", "1e3", "7."]
OPERATORS = ["+", "-", "*", "/", "@", "^", "**", "<", "<=", ">", ">=", "==", "!=", "=", "+=", "-=", "*=", "/=",
             "−", "·", "×", "÷", "%", "//", "**=", "//=", "%=", "..."]
PUNCTUATION = ["(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "\n", "\n\n", "#", "\\\n", "\t"]
STRINGS = ['"x.npy"', "'d.npz'", '"', "'"]
JUNK = ["$", "!", "&", "|", "`", "~", "?", "\\", "\r", "\x00", "é", "∂", "½", "٣"]
TOKENS = SOUP_NAMES + KEYWORDS + NUMBERS + OPERATORS + PUNCTUATION + STRINGS + JUNK

token_soup = st.lists(
    st.tuples(st.sampled_from(TOKENS), st.sampled_from(["", " ", " ", "\n"])), max_size=40,
).map(lambda pairs: "".join(token + gap for token, gap in pairs))
