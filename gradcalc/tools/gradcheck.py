"""gradcalc gradcheck: autograd against central finite differences, per variable and element.

As torch.autograd.gradcheck: each input element moves by ±eps and the program
runs again; (f(x+eps) - f(x-eps)) / 2eps must match autograd's derivative to
|autograd - numeric| <= atol + rtol*|numeric|. Order 2 does the same for the
Hessian, differencing the gradient.

The moves are batched where that is exact: a program whose path does not depend
on the moved leaf's values is replayed through its recorded graph with the
moves of a chunk of elements as one leading batch axis (perturb.py); one whose
branches, counts or sizes read the leaf runs again per move. `fast` checks one
random direction per leaf (PyTorch's fast_mode), `sample` a random subset of
the elements.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine import backend as B
from ..errors import GradcalcError, UsageError
from ..program.api import Run, tolerance

EPS, RTOL, ATOL = 1e-6, 1e-3, 1e-5  # torch.autograd.gradcheck's defaults
# In float32 central differences are good to about 1e-3 at best: the defaults there are coarser.
EPS32, RTOL32, ATOL32 = 1e-3, 1e-2, 1e-3

Progress = Callable[[int, int], None]  # progress(done, total): elements moved so far, of how many


def defaults(dtype: str) -> tuple[float, float, float]:
    """eps, rtol and atol when none are given, for the dtype the program runs in."""
    return (EPS32, RTOL32, ATOL32) if dtype == "float32" else (EPS, RTOL, ATOL)


@dataclass
class Comparison:
    """One block: ∂of/∂wrt (order 1) or ∂²of/∂wrt[0]∂wrt[1] (order 2), both ways, and where they differ most.

    With sampling the arrays hold the sampled columns only (last axis: `sampled`'s elements), and the
    places (abs_at, rel_at, worst_at) are the full block's; in fast mode both are the number vᵀ·J·u."""

    wrt: tuple[str, ...]
    autograd: Any
    numeric: Any
    max_abs: float
    abs_at: tuple[int, ...]
    max_rel: float
    rel_at: tuple[int, ...]
    passed: bool
    worst_at: tuple[int, ...]  # the entry furthest past its tolerance (the one to show when it fails)
    worst: tuple[float, float] = (0.0, 0.0)  # autograd's and the differences' values there
    elements: int = 0  # of the variable moved (the last of wrt)
    checked: int = 0  # how many of them were moved one at a time (fast mode: all of them at once)
    sampled: list[tuple[int, ...]] | None = None  # with sampling, the elements checked

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
    mode: str = "full"  # "full", "sample" or "fast"
    batched: bool = False  # whether any leaf's moves were replayed as a batch

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)


def gradcheck(run: Run, of: str | None = None, wrt: list[str] | None = None, eps: float | None = None,
              rtol: float | None = None, atol: float | None = None, order: int = 1, *, fast: bool = False,
              sample: int | None = None, seed: int = 0, batch: bool = True,
              progress: Progress | None = None) -> GradCheck:
    """Compare autograd with central differences for each leaf in wrt (default: those the output depends on).

    eps, rtol and atol default to torch.autograd.gradcheck's (1e-6, 1e-3, 1e-5), or in float32 to 1e-3,
    1e-2, 1e-3. fast compares vᵀ·J·u for random unit u (and v, for a tensor output) with the central
    difference along u; sample moves `sample` random elements of each leaf (seeded by seed); batch=False
    reruns the program for every move."""
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
    if fast and sample is not None:
        raise UsageError("--fast and --sample are two ways to check less: choose one",
                         "--fast checks one random direction per variable, --sample K elements of each")
    if fast and order != 1:
        raise UsageError("--fast checks gradients (--order 1)", "leave out --fast to check the Hessian")
    if sample is not None and sample < 1:
        raise UsageError(f"--sample must be 1 or more, not {sample}", "--sample 100 checks 100 elements of each")
    if fast:
        return GradCheck(of, order, eps, rtol, atol, _fast(run, of, names, eps, rtol, atol, seed), "fast")
    rng = B.host.random.default_rng(seed)
    columns = {name: _columns(run.leaves[name].value.size, sample, rng) for name in names}
    shaped = sample is None  # the differences in the leaf's shape; with sampling, one column per element checked
    ticker = _Ticker(progress, len(names) * sum(len(c) for c in columns.values()) if order == 2
                     else sum(len(c) for c in columns.values()))
    autograd: dict[tuple[str, ...], Any]  # (name,) for a gradient, (a, b) for a Hessian block
    numeric: dict[tuple[str, ...], Any]
    batched = False
    if order == 1:
        found = run.jacobian(of, names)
        autograd = {(name,): block for name, block in zip(names, found.blocks)}
        numeric = {}
        replay = _Replayer(run, of) if batch else None
        for name in names:
            block = replay.differences(name, columns[name], eps, ticker, shaped) if replay else None
            if block is None:
                block = _differences(run, name, eps, lambda r: [r.value(of)], columns[name], ticker, shaped)[0]
            else:
                batched = True
            numeric[(name,)] = block
    else:
        hessian = run.hessian(of, names)
        autograd = {(a, b): hessian.blocks[i][j] for i, a in enumerate(names) for j, b in enumerate(names)}
        numeric = {}
        for b in names:  # one gradient per move of b gives the column block of every a
            found_columns = _differences(run, b, eps, lambda r: list(r.grad(of, names).grads.values()), columns[b],
                                         ticker, shaped)
            for i, a in enumerate(names):
                numeric[(a, b)] = found_columns[i]
    comparisons = []
    for key in autograd:
        shape = tuple(run.leaves[key[-1]].value.shape)
        comparisons.append(_compare(key, autograd[key], numeric[key], rtol, atol, shape,
                                    columns[key[-1]] if sample is not None else None))
    return GradCheck(of, order, eps, rtol, atol, comparisons, "full" if sample is None else "sample", batched)


def _columns(size: int, sample: int | None, rng: Any) -> Any:
    """The flat indices of the elements to move: all of them, or `sample` of them at random, in order."""
    if sample is None or sample >= size:
        return B.host.arange(size)
    return B.host.sort(rng.choice(size, sample, replace=False))


class _Ticker:
    """Elements moved so far, told to a progress callback (at most once per chunk or element)."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(self.done, self.total)


class _Replayer:
    """The batched moves: the run again with its host decisions watched, and a replay per leaf where exact."""

    def __init__(self, run: Run, of: str) -> None:
        from . import perturb

        self.perturb = perturb
        self.run, self.decisions = perturb.traced(run)
        self.output = self.run.node(of)

    def differences(self, name: str, columns: Any, eps: float, tick: _Ticker, shaped: bool) -> Any | None:
        """The numeric block (of.shape + the leaf's shape if shaped, else + (len(columns),)); None where a
        replay is not exact (a decision reads the leaf) or fails."""
        leaf = self.run.leaves[name]
        if not self.perturb.replayable(self.decisions, leaf):
            return None
        with B.using(self.run.device, self.run.dtype, self.run.max_elements), B.errstate():
            try:
                replay = self.perturb.Replay(self.output, leaf)
                parts = []
                step = replay.chunk()
                start = 0
                while start < len(columns):
                    chunk = columns[start:start + step]
                    parts.append(B.to_host(replay.differences(chunk, eps)))
                    start += len(chunk)
                    tick(len(chunk))
                    if not replay.densified:  # nothing grew with the batch: the rest in one go
                        step = len(columns)
            except Exception:
                # A limit, or a replay the batched functions cannot carry: the reruns, which are the
                # reference (and say what is wrong in the program's words), decide instead.
                return None
        found = B.host.concatenate(parts) if parts else B.host.zeros((0, *self.output.value.shape))
        found = B.host.moveaxis(found, 0, -1)  # of.shape + (columns,)
        if shaped:
            return found.reshape(found.shape[:-1] + tuple(leaf.value.shape))
        return found


def _differences(run: Run, name: str, eps: float, measure: Any, columns: Any, tick: _Ticker,
                 shaped: bool) -> list[Any]:
    """(m(x + eps e_j) - m(x - eps e_j)) / 2eps for each element j of leaf `name` in columns and each value m
    in the list `measure` gives: one array each, of shape m.shape + name.shape if shaped, else m.shape +
    (len(columns),), from two reruns of the program per element."""
    base = B.to_host(run.leaves[name].value).astype(B.host.float64)
    found: list[Any] = []
    for j in columns:
        sides = []
        for sign in (1, -1):
            moved = base.copy().reshape(-1)
            moved[j] += sign * eps
            try:
                sides.append(measure(run.rerun({name: moved.reshape(base.shape)})))
            except GradcalcError as exc:
                raise UsageError(f"gradcheck moved '{name}' by {sign * eps:g} and the program failed: {exc.message}",
                                 f"'{name}' cannot move (is it a size or a count?): leave it out of --wrt") from None
        found.append(sides)
        tick(1)

    def assemble(k: int) -> Any:
        differences = [(B.host.asarray(plus[k], dtype=B.host.float64) - B.host.asarray(minus[k], dtype=B.host.float64))
                       / (2 * eps) for plus, minus in found]
        stacked = B.host.stack(differences, axis=-1)
        return stacked.reshape(stacked.shape[:-1] + base.shape) if shaped else stacked

    return [assemble(k) for k in range(len(found[0][0]))]


def _fast(run: Run, of: str, names: list[str], eps: float, rtol: float, atol: float, seed: int) -> list[Comparison]:
    """PyTorch's fast_mode: per leaf, vᵀ·J·u by autograd against (vᵀf(x + eps u) - vᵀf(x - eps u)) / 2eps,
    for random unit vectors u (the leaf's shape) and v (the output's; 1 for a scalar)."""
    rng = B.host.random.default_rng(seed)
    shape = tuple(B.host.shape(run.value(of)))
    v = None
    if shape:
        v = rng.standard_normal(shape)
        v /= B.host.linalg.norm(v)
    found = run.grad(of, names, vector=v)
    comparisons = []
    for name in names:
        base = B.to_host(run.leaves[name].value).astype(B.host.float64)
        u = rng.standard_normal(base.shape)
        u /= B.host.linalg.norm(u)
        autograd = B.host.asarray(B.host.sum(B.host.asarray(found.grads[name], dtype=B.host.float64) * u))
        sides = []
        for sign in (1, -1):
            try:
                value = B.host.asarray(run.rerun({name: base + sign * eps * u}).value(of), dtype=B.host.float64)
            except GradcalcError as exc:
                raise UsageError(f"gradcheck moved '{name}' along a random direction by {eps:g} and the program "
                                 f"failed: {exc.message}",
                                 f"'{name}' cannot move (is it a size or a count?): leave it out of --wrt") from None
            sides.append(B.host.sum(value * v) if v is not None else value)
        numeric = B.host.asarray((sides[0] - sides[1]) / (2 * eps))
        comparison = _compare((name,), autograd, numeric, rtol, atol, ())
        comparison.elements = comparison.checked = int(base.size)
        comparisons.append(comparison)
    return comparisons


def _compare(wrt: tuple[str, ...], autograd: Any, numeric: Any, rtol: float, atol: float,
             shape: tuple[int, ...], columns: Any = None) -> Comparison:
    """The comparison of one block; with columns (sampling), the arrays' last axis holds those flat elements of
    a variable of `shape`, and the places found are told in the variable's own indices."""
    autograd = B.host.asarray(autograd, dtype=B.host.float64)
    elements = math.prod(shape)
    if columns is not None:
        autograd = autograd.reshape(autograd.shape[:autograd.ndim - len(shape)] + (elements,))[..., columns]
    error = B.host.abs(autograd - numeric)
    error = B.host.where(B.host.isnan(autograd) & B.host.isnan(numeric), 0.0, error)
    error = B.host.where(B.host.isnan(error), math.inf, error)
    scale = B.host.maximum(B.host.abs(autograd), B.host.abs(numeric))
    relative = B.host.where(error == 0, 0.0, error / B.host.where(scale == 0, 1.0, scale))
    allowed = atol + rtol * B.host.nan_to_num(B.host.abs(numeric), nan=0.0, posinf=math.inf)
    excess = error / B.host.where(allowed == 0, 1e-300, allowed)  # > 1 where the entry fails
    passed = bool((error <= allowed).all())
    checked = elements if columns is None else len(columns)
    sampled = None if columns is None else [tuple(int(i) for i in B.host.unravel_index(int(c), shape))
                                            for c in columns]
    if error.size == 0:
        return Comparison(wrt, autograd, numeric, 0.0, (), 0.0, (), True, (), (0.0, 0.0), elements, checked, sampled)

    def where(values: Any) -> tuple[int, ...]:
        return tuple(int(i) for i in B.host.unravel_index(int(B.host.argmax(values)), values.shape))

    def told(at: tuple[int, ...]) -> tuple[int, ...]:
        """A place in the arrays as a place in the full block (a sampled column is an element of the variable)."""
        return at if sampled is None else at[:-1] + sampled[at[-1]]

    abs_at, rel_at, worst_at = where(error), where(relative), where(excess)
    return Comparison(wrt, autograd, numeric, float(error[abs_at]), told(abs_at), float(relative[rel_at]),
                      told(rel_at), passed, told(worst_at), (float(autograd[worst_at]), float(numeric[worst_at])),
                      elements, checked, sampled)
