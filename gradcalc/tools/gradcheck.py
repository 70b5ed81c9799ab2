"""gradcalc gradcheck: autograd against central finite differences, per variable and element.

As torch.autograd.gradcheck: each input element moves by ±eps and the program
runs again; (f(x+eps) - f(x-eps)) / 2eps must match autograd's derivative to
|autograd - numeric| <= atol + rtol*|numeric|. Order 2 does the same for the
Hessian, differencing the gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..engine import backend as B
from ..errors import GradcalcError, UsageError
from ..program.api import Run, tolerance

EPS, RTOL, ATOL = 1e-6, 1e-3, 1e-5  # torch.autograd.gradcheck's defaults
# In float32 central differences are good to about 1e-3 at best: the defaults there are coarser.
EPS32, RTOL32, ATOL32 = 1e-3, 1e-2, 1e-3


def defaults(dtype: str) -> tuple[float, float, float]:
    """eps, rtol and atol when none are given, for the dtype the program runs in."""
    return (EPS32, RTOL32, ATOL32) if dtype == "float32" else (EPS, RTOL, ATOL)


@dataclass
class Comparison:
    """One block: ∂of/∂wrt (order 1) or ∂²of/∂wrt[0]∂wrt[1] (order 2), both ways, and where they differ most."""

    wrt: tuple[str, ...]
    autograd: Any
    numeric: Any
    max_abs: float
    abs_at: tuple[int, ...]
    max_rel: float
    rel_at: tuple[int, ...]
    passed: bool
    worst_at: tuple[int, ...]  # the entry furthest past its tolerance (the one to show when it fails)

    @property
    def label(self) -> str:
        return ", ".join(self.wrt)


@dataclass
class GradCheck:
    of: str
    order: int
    eps: float
    rtol: float
    atol: float
    comparisons: list[Comparison]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)


def gradcheck(run: Run, of: str | None = None, wrt: list[str] | None = None, eps: float | None = None,
              rtol: float | None = None, atol: float | None = None, order: int = 1) -> GradCheck:
    """Compare autograd with central differences for each leaf in wrt (default: those the output depends on).

    eps, rtol and atol default to torch.autograd.gradcheck's (1e-6, 1e-3, 1e-5), or in float32 to 1e-3,
    1e-2, 1e-3."""
    default_eps, default_rtol, default_atol = defaults(run.dtype)  # the run's dtype, whatever the engine's state now
    eps = default_eps if eps is None else eps
    rtol = default_rtol if rtol is None else tolerance("--rtol", rtol)
    atol = default_atol if atol is None else tolerance("--atol", atol)
    of = of or run.default_output
    # By default every leaf the output depends on differentiably: not one used as a size or a count.
    names = [name for name in wrt or run.connected_leaves(of)
             if name not in run.leaves or run.leaves[name].value.size]
    if not names:
        raise UsageError("the program has no leaves to move", "gradcheck needs inputs such as `x = 2`")
    for name in names:
        if name not in run.leaves:
            run.wrt_node(name)  # an unknown name or a constant: its own error
            raise UsageError(f"gradcheck moves inputs, and '{name}' is computed from others",
                             "check the leaves it is computed from: " + ", ".join(run.leaves))
    if not eps > 0 or not math.isfinite(eps):
        raise UsageError(f"--eps must be a positive number, not {eps:g}", f"the default is {default_eps:g}")
    if order not in (1, 2):
        raise UsageError(f"--order {order} is not supported", "use --order 1 or --order 2")
    autograd: dict[tuple[str, ...], Any]  # (name,) for a gradient, (a, b) for a Hessian block
    numeric: dict[tuple[str, ...], Any]
    if order == 1:
        found = run.jacobian(of, names)
        autograd = {(name,): block for name, block in zip(names, found.blocks)}
        numeric = {(name,): _differences(run, name, eps, lambda r: [r.value(of)])[0] for name in names}
    else:
        hessian = run.hessian(of, names)
        autograd = {(a, b): hessian.blocks[i][j] for i, a in enumerate(names) for j, b in enumerate(names)}
        numeric = {}
        for b in names:  # one gradient per move of b gives the column block of every a
            columns = _differences(run, b, eps, lambda r: list(r.grad(of, names).grads.values()))
            for i, a in enumerate(names):
                numeric[(a, b)] = columns[i]
    comparisons = [_compare(key, autograd[key], numeric[key], rtol, atol) for key in autograd]
    return GradCheck(of, order, eps, rtol, atol, comparisons)


def _differences(run: Run, name: str, eps: float, measure: Any) -> list[Any]:
    """(m(x + eps e_j) - m(x - eps e_j)) / 2eps for each element j of leaf `name` and each value m in the list
    `measure` gives: one array each, of shape m.shape + name.shape."""
    base = B.to_host(run.leaves[name].value).astype(B.host.float64)
    columns: list[Any] = []
    for j in range(base.size):
        sides = []
        for sign in (1, -1):
            moved = base.copy().reshape(-1)
            moved[j] += sign * eps
            try:
                sides.append(measure(run.rerun({name: moved.reshape(base.shape)})))
            except GradcalcError as exc:
                raise UsageError(f"gradcheck moved '{name}' by {sign * eps:g} and the program failed: {exc.message}",
                                 f"'{name}' cannot move (is it a size or a count?): leave it out of --wrt") from None
        columns.append(sides)

    def assemble(k: int) -> Any:
        differences = [(B.host.asarray(plus[k], dtype=B.host.float64) - B.host.asarray(minus[k], dtype=B.host.float64))
                       / (2 * eps) for plus, minus in columns]
        stacked = B.host.stack(differences, axis=-1)
        return stacked.reshape(stacked.shape[:-1] + base.shape)

    return [assemble(k) for k in range(len(columns[0][0]))]


def _compare(wrt: tuple[str, ...], autograd: Any, numeric: Any, rtol: float, atol: float) -> Comparison:
    autograd = B.host.asarray(autograd, dtype=B.host.float64)
    error = B.host.abs(autograd - numeric)
    error = B.host.where(B.host.isnan(autograd) & B.host.isnan(numeric), 0.0, error)
    error = B.host.where(B.host.isnan(error), math.inf, error)
    scale = B.host.maximum(B.host.abs(autograd), B.host.abs(numeric))
    relative = B.host.where(error == 0, 0.0, error / B.host.where(scale == 0, 1.0, scale))
    allowed = atol + rtol * B.host.nan_to_num(B.host.abs(numeric), nan=0.0, posinf=math.inf)
    excess = error / B.host.where(allowed == 0, 1e-300, allowed)  # > 1 where the entry fails
    passed = bool((error <= allowed).all())
    if error.size == 0:
        return Comparison(wrt, autograd, numeric, 0.0, (), 0.0, (), True, ())

    def where(values: Any) -> tuple[int, ...]:
        return tuple(int(i) for i in B.host.unravel_index(int(B.host.argmax(values)), values.shape))

    abs_at, rel_at = where(error), where(relative)
    return Comparison(wrt, autograd, numeric, float(error[abs_at]), abs_at, float(relative[rel_at]), rel_at, passed,
                      where(excess))
