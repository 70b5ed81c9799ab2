"""What Run.jacobian, hessian, jvp, hvp and taylor give: plain records of host arrays.

Apart from api.py so that a command that makes none of them (grad, eval) does not pay to make their
classes at start-up (#21); program/batch.py maps a batch's results over their fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Jacobians:
    """The result of `Run.jacobian`: one block of shape of.shape + name.shape per --wrt name."""

    of: str
    value: Any
    wrt: list[str]
    blocks: list[Any]
    mode: str


@dataclass
class Hessians:
    """The result of `Run.hessian`: blocks[i][j] = ∂²of/∂wrt[i]∂wrt[j]."""

    of: str
    value: Any
    wrt: list[str]
    blocks: list[list[Any]]


@dataclass
class Tangents:
    """The result of `Run.jvp`: J·v for the direction v of one variable."""

    of: str
    value: Any
    wrt: str
    tangent: Any
    jvp: Any


@dataclass
class Curvature:
    """The result of `Run.hvp`: H·v, the Hessian of `of` by `wrt` times the direction v."""

    of: str
    value: Any
    wrt: str
    vector: Any
    hvp: Any


_FACTORIALS = [math.factorial(k) for k in range(2, 12)]


@dataclass
class Taylor:
    """The result of `Run.taylor`: one coefficient per monomial, its powers in the order of `wrt`."""

    of: str
    wrt: list[str]
    center: list[float]
    order: int
    terms: list[tuple[tuple[int, ...], float]]

    @staticmethod
    def coefficient(value: float, decimal: bool = False) -> str:
        """A coefficient as a fraction where a small one is exactly the double (1/120, not 0.008333333333333333),
        else, or with decimal, its shortest digits. Small: a denominator up to 10^6, or a factorial up to 11!
        (k! divides the k-th derivative); a larger one would fit irrational numbers too (cos(1) = p/q)."""
        import fractions  # with decimal, 3 ms of a start-up that never shows a coefficient

        from ..engine.symbolic import number

        if not decimal and math.isfinite(value) and value != int(value):
            exact = fractions.Fraction(value).limit_denominator(10**6)
            for denominator in [exact.denominator, *_FACTORIALS]:
                numerator = round(value * denominator)
                if numerator / denominator == value:
                    exact = fractions.Fraction(numerator, denominator)
                    return f"{exact.numerator}/{exact.denominator}"
        return number(value)

    def polynomial(self, decimal: bool = False) -> str:
        """The polynomial in gradcalc syntax, lowest degree first: 1 + x + 1/2*x^2 (about 0), (x - 1) about 1."""
        from ..engine.symbolic import number

        shown = []
        for powers, value in self.terms:
            if value == 0:
                continue
            factors = []
            for name, center, power in zip(self.wrt, self.center, powers):
                if power:
                    base = name if center == 0 else f"({name} {'-' if center > 0 else '+'} {number(abs(center))})"
                    factors.append(base if power == 1 else f"{base}^{power}")
            size = self.coefficient(abs(value), decimal)
            term = "*".join(factors) if factors and size == "1" else "*".join([size, *factors])
            shown.append(("- " if value < 0 else "+ ") + term)
        if not shown:
            return "0"
        text = " ".join(shown)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]
