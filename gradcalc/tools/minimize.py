"""`gradcalc minimize`: gradient descent, momentum, Adam (PyTorch's formulas) and L-BFGS-B (SciPy) over a program.

Each step is one run of the program with the parameters' current values and one backward pass
(program.api: the Program keeps its checker per set of names, so a run with new values is cheap).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import backend as B
from ..engine.backend import numpy as np  # the optimizers' arithmetic is on the host: run.grad's arrays
from ..errors import UsageError
from ..program.api import Program, Run

METHODS = ("gd", "momentum", "adam", "lbfgs")
DEFAULT_LR = {"gd": 0.01, "momentum": 0.01, "adam": 0.001}  # adam: torch.optim.Adam's default
DEFAULT_STEPS = 1000
ADAM_EPS = 1e-8  # torch.optim.Adam's eps
OPT_HINT = "install SciPy for --method lbfgs: pip install 'gradcalc[opt]'"


@dataclass
class Settings:
    """How to minimise: the method and its hyperparameters, the data's batches, when to stop."""

    method: str = "gd"
    lr: float | None = None
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.999)
    steps: int | None = None
    tol: float | None = None
    max_time: float | None = None
    data: list[str] = field(default_factory=list)
    batch_size: int | None = None
    epochs: int | None = None
    shuffle: bool = False
    seed: int = 0
    every: int | None = None
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    explain: bool = False
    path: bool = False  # keep each step's values (the path --plot draws), apart from --every's


@dataclass
class Explained:
    """One parameter's step in full, for --explain: the rule, and each number it used."""

    name: str
    rule: str  # in symbols: w ← w − lr·∂L/∂w (lines)
    worked: str | None  # the same with the numbers, for a scalar: w = 3 − 0.01·(−4) = 3.04 (lines)
    terms: list[tuple[str, Any]]  # (label, value) in the order the rule uses them


@dataclass
class Minimized:
    """What `minimize` found: the values, their loss and gradient norm, why it stopped, and the trace."""

    of: str
    method: str
    wrt: list[str]
    values: dict[str, Any]
    loss: float
    grad_norm: float
    steps: int
    stopped: str
    trace: list[dict[str, Any]]
    explained: list[Explained] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


def parse_bounds(items: list[str]) -> dict[str, tuple[float, float]]:
    """--bounds w=0:1 (either side may be empty: w=0: is w ≥ 0)."""
    bounds: dict[str, tuple[float, float]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        low, colon, high = text.partition(":")
        try:
            if not sep or not colon or not name.strip():
                raise ValueError
            pair = (float(low) if low.strip() else -math.inf, float(high) if high.strip() else math.inf)
        except ValueError:
            raise UsageError(f"--bounds {item!r} is not NAME=LOW:HIGH",
                             "for example --bounds w=0:1, or w=0: for w ≥ 0") from None
        if math.isnan(pair[0]) or math.isnan(pair[1]) or pair[0] > pair[1]:
            raise UsageError(f"--bounds {item!r}: the lower bound must be at most the upper one",
                             "for example --bounds w=0:1")
        bounds[name.strip()] = pair
    return bounds


def check_settings(settings: Settings) -> None:
    """Refuse what cannot be meant, before anything runs."""
    if settings.method not in METHODS:
        raise UsageError(f"unknown method '{settings.method}'", "use --method " + ", ".join(METHODS))
    if settings.lr is not None and not (settings.lr > 0 and math.isfinite(settings.lr)):
        raise UsageError(f"--lr must be a finite number above 0, not {settings.lr:g}", "for example --lr 0.01")
    if settings.lr is not None and settings.method == "lbfgs":
        raise UsageError("--lr does not apply to --method lbfgs (it chooses its own step by line search)",
                         "drop --lr, or use --method gd, momentum or adam")
    if not 0 <= settings.momentum < 1:
        raise UsageError(f"--momentum must be in [0, 1), not {settings.momentum:g}", "for example --momentum 0.9")
    if not all(0 <= b < 1 for b in settings.betas):
        raise UsageError(f"--betas must be two numbers in [0, 1), not {settings.betas}",
                         "for example --betas 0.9,0.999")
    for flag, number in (("--steps", settings.steps), ("--batch-size", settings.batch_size),
                         ("--epochs", settings.epochs), ("--every", settings.every)):
        if number is not None and number < 1:
            raise UsageError(f"{flag} must be 1 or more, not {number}", f"for example {flag} 10")
    if settings.tol is not None and not (settings.tol >= 0 and math.isfinite(settings.tol)):
        raise UsageError(f"--tol must be a finite number, 0 or more, not {settings.tol:g}", "for example --tol 1e-8")
    if (settings.batch_size or settings.epochs or settings.shuffle) and not settings.data:
        raise UsageError("--batch-size, --epochs and --shuffle need data to batch",
                         "name the data with --data X,Y (leaves or constants with a leading axis of examples)")
    if settings.method == "lbfgs" and settings.batch_size:
        raise UsageError("--method lbfgs needs the whole data at each step (its line search compares losses)",
                         "drop --batch-size, or use --method gd, momentum or adam")
    if settings.batch_size and settings.tol is not None:
        raise UsageError("--tol compares whole-data losses and gradients: a minibatch's differ from batch to batch",
                         "drop --tol (stop with --steps, --epochs or --max-time), or drop --batch-size")
    if settings.explain and settings.method == "lbfgs":
        raise UsageError("--explain shows a step of gd, momentum or adam (L-BFGS-B's steps come from its line "
                         "search)", "use --method gd, momentum or adam with --explain")
    if settings.explain and settings.steps not in (None, 1):
        raise UsageError("--explain shows one step", "use --steps 1 --explain")


class _Objective:
    """The program as a function of its parameters: each call is a run and a backward pass."""

    def __init__(self, program: Program, inputs: dict[str, Any], options: dict[str, Any], of: str,
                 wrt: list[str]) -> None:
        self.program, self.inputs, self.options, self.of, self.wrt = program, inputs, options, of, wrt

    def __call__(self, values: Mapping[str, Any], batch: Mapping[str, Any] | None = None
                 ) -> tuple[float, dict[str, Any]]:
        run = self.program.run({**self.inputs, **values, **(batch or {})}, **self.options)
        result = run.grad(self.of, self.wrt, retain_graph=False)
        grads = result.grads  # host arrays; a float32 run's made float64, the dtype of the optimizers' arithmetic
        return float(result.value), {name: g if g.dtype == np.float64 else np.asarray(g, dtype=float)
                                     for name, g in grads.items()}


def _norm(grads: Mapping[str, Any]) -> float:
    total = 0.0
    for g in grads.values():
        if g.ndim:
            total += float(np.vdot(g, g))
        else:  # a scalar parameter: Python's arithmetic, 5x quicker than vdot's on a 0-d array
            number = float(g)
            total += number * number
    return math.sqrt(total)


def _select(run: Run, of: str | None, wrt: list[str] | None, data: list[str]) -> tuple[str, list[str]]:
    """The output and the parameters: --wrt, or every leaf the output depends on that is not data."""
    of = of or run.default_output
    shape = tuple(run.node(of).shape)  # an unknown name is an error here, with its hint
    if shape:
        stmt = run.state.final.get(of)
        raise UsageError(f"'{of}' has shape {shape}: minimize needs a scalar output",
                         "reduce it in the program (for example `L = sum(...)` or `L = mean(...)`), or name "
                         "a scalar with --of").at(stmt.pos if stmt else None).within(run.program.source)
    for name in data:
        if name not in run.leaves and name not in run.constants:
            raise UsageError(f"--data: '{name}' is not a leaf or a constant of the program",
                             "name the variables the program loads its data into, such as --data X,Y")
    if wrt:
        for name in wrt:
            if name in data:
                raise UsageError(f"'{name}' is both data (--data) and a parameter (--wrt)", "name it in one only")
            run.wrt_node(name)  # a constant's or an unknown name's error
            if name not in run.leaves:
                raise UsageError(f"--wrt: '{name}' is computed by the program, not given: minimize moves leaves",
                                 "name variables given a value directly, such as `w = 0.5` or `W = randn(3, 2)`")
        return of, list(wrt)
    names = [name for name in run.connected_leaves(of) if name not in data]
    if not names:
        raise UsageError(f"'{of}' depends on no leaf that minimize could move",
                         "name the parameters with --wrt (constants and --data are never parameters)")
    return of, names


def _pinned(run: Run, batched: list[str]) -> dict[str, Any]:
    """The leaves' and constants' values, given to every later run: a step does not load its files again nor
    draw its randn again (3x faster on a least-squares fit over an .npz). What is computed from the batched
    data (`const N = rows(X)`) is computed again for each batch."""
    from ..language.syntax import Name, walk

    unpinned = set(batched)
    pinned: dict[str, Any] = {}
    for name in [*run.constants, *run.leaves]:
        stmt = run.state.final.get(name)
        if name in unpinned or stmt is None:
            continue
        if any(isinstance(node, Name) and node.name in unpinned for node in walk(stmt.value)):
            unpinned.add(name)
        else:
            pinned[name] = run.value(name)
    return pinned


def _batches(data: dict[str, Any], settings: Settings) -> tuple[int, Callable[[int], dict[str, Any]]]:
    """The number of batches per epoch and the batch of each step (the order drawn again each epoch)."""
    sizes: dict[str, int] = {}
    for name, value in data.items():
        if not value.ndim:
            raise UsageError(f"--data: '{name}' is a scalar: there are no examples to batch",
                             "name arrays whose first axis is the examples")
        sizes[name] = int(value.shape[0])
    counts = set(sizes.values())
    if len(counts) > 1:
        listed = ", ".join(f"{name} has {size}" for name, size in sizes.items())
        raise UsageError(f"--data: the arrays have different numbers of examples ({listed})",
                         "give arrays with the same first axis")
    total = counts.pop() if counts else 0
    size = min(settings.batch_size or total, total)
    per_epoch = max(1, math.ceil(total / max(size, 1)))
    generator = np.random.default_rng(settings.seed)
    orders: dict[int, Any] = {}

    def batch(step: int) -> dict[str, Any]:
        epoch, index = divmod(step, per_epoch)
        if epoch not in orders:
            orders.clear()
            orders[epoch] = generator.permutation(total) if settings.shuffle else None
        order = orders[epoch]
        rows = slice(index * size, (index + 1) * size) if order is None else order[index * size:(index + 1) * size]
        return {name: value[rows] for name, value in data.items()}

    return per_epoch, batch


class _Rule:
    """A first-order update: gd, momentum (torch.optim.SGD's) or Adam (torch.optim.Adam's).

    Each method computes the new value and returns, for --explain alone, a function that describes the step:
    its rule in symbols, the same with the numbers (a scalar), and the terms it used. Formatting them on
    every step was a fifth of minimize's own cost on the toy network."""

    def __init__(self, settings: Settings, of: str) -> None:
        self.method, self.of = settings.method, of
        self.lr = settings.lr if settings.lr is not None else DEFAULT_LR[settings.method]
        self.mu, (self.beta1, self.beta2) = settings.momentum, settings.betas
        self.state: dict[str, dict[str, Any]] = {}
        self.t = 0
        self.update = getattr(self, "_" + self.method)

    def step(self, values: dict[str, Any], grads: dict[str, Any], explain: bool) -> list[Explained]:
        self.t += 1
        shown = []
        for name, g in grads.items():
            old = values[name]
            new, describe = self.update(name, old, g)
            values[name] = new
            if explain:
                rule, worked, terms = describe()
                scalar = all(np.ndim(v) == 0 for _, v in terms)
                shown.append(Explained(name, rule, worked(old, g, new) if scalar else None,
                                       [(f"{name} (old)", old), (f"∂{self.of}/∂{name}", g), *terms,
                                        (f"{name} (new)", new)]))
        return shown

    def _gd(self, name: str, old: Any, g: Any) -> tuple[Any, Callable[[], Described]]:
        new = old - self.lr * g
        return new, lambda: (f"{name} ← {name} − lr·∂{self.of}/∂{name}   (lr = {_n(self.lr)})",
                             lambda o, g_, n: f"{name} = {_n(o)} − {_n(self.lr)}·{_p(g_)} = {_n(n)}", [])

    def _momentum(self, name: str, old: Any, g: Any) -> tuple[Any, Callable[[], Described]]:
        # torch.optim.SGD: the buffer starts as the first gradient, then b ← μ·b + g; the step is lr·b.
        previous = self.state.get(name, {}).get("b")
        b = g.copy() if previous is None else self.mu * previous + g
        self.state[name] = {"b": b}
        new = old - self.lr * b

        def describe() -> Described:
            if previous is None:
                rule = f"b ← ∂{self.of}/∂{name} (the first step);  {name} ← {name} − lr·b   (lr = {_n(self.lr)})"
            else:
                rule = (f"b ← μ·b + ∂{self.of}/∂{name};  {name} ← {name} − lr·b   "
                        f"(μ = {_n(self.mu)}, lr = {_n(self.lr)})")
            return (rule, lambda o, g_, n: f"b = {_n(b)}\n{name} = {_n(o)} − {_n(self.lr)}·{_p(b)} = {_n(n)}",
                    [("b", b)])

        return new, describe

    def _adam(self, name: str, old: Any, g: Any) -> tuple[Any, Callable[[], Described]]:
        # torch.optim.Adam (amsgrad=False, weight_decay=0), in its order of operations: the
        # bias corrections divide the step size and the square root, eps is added after.
        state = self.state.setdefault(name, {"m": np.zeros_like(g), "v": np.zeros_like(g)})
        b1, b2, t = self.beta1, self.beta2, self.t
        m = state["m"] = b1 * state["m"] + (1 - b1) * g
        v = state["v"] = b2 * state["v"] + (1 - b2) * g * g
        correction1, correction2 = 1 - b1 ** t, 1 - b2 ** t
        denominator = np.sqrt(v) / math.sqrt(correction2) + ADAM_EPS
        new = old - (self.lr / correction1) * (m / denominator)

        def describe() -> Described:
            rule = (f"m ← β₁·m + (1 − β₁)·g;  v ← β₂·v + (1 − β₂)·g²\n{name} ← {name} − lr·m̂/(√v̂ + ε),  "
                    f"m̂ = m/(1 − β₁ᵗ),  v̂ = v/(1 − β₂ᵗ)\n(g = ∂{self.of}/∂{name}, lr = {_n(self.lr)}, "
                    f"β₁ = {_n(b1)}, β₂ = {_n(b2)}, ε = {_n(ADAM_EPS)}, t = {t})")
            m_hat, v_hat = m / correction1, v / correction2
            return rule, lambda o, g_, n: (
                f"m = {_n(m)}, v = {_n(v)}, m̂ = {_n(m_hat)}, v̂ = {_n(v_hat)}\n"
                f"{name} = {_n(o)} − {_n(self.lr)}·{_p(m_hat)}/(√{_n(v_hat)} + {_n(ADAM_EPS)}) = {_n(n)}"), \
                [("m", m), ("v", v), ("m̂", m_hat), ("v̂", v_hat)]

        return new, describe


# A step described for --explain: the rule, the rule with its numbers (given old, gradient, new), the terms.
Described = tuple[str, Callable[..., str], list[tuple[str, Any]]]


def _n(value: Any) -> str:
    return B.format_number(float(value))


def _p(value: Any) -> str:
    """A number as a factor: negative ones in brackets."""
    text = _n(value)
    return f"({text})" if text.startswith("-") else text


def minimize(program: Program, inputs: dict[str, Any], options: dict[str, Any], of: str | None,
             wrt: list[str] | None, settings: Settings,
             progress: Callable[[int, int, float], None] | None = None) -> Minimized:
    """Minimise `of` over the parameters from the program's values; Ctrl-C stops it with the best values so far."""
    check_settings(settings)
    first = program.run(inputs, **options)
    of, names = _select(first, of, wrt, settings.data)
    for name in settings.bounds:
        if name not in names:
            raise UsageError(f"--bounds: '{name}' is not a parameter", "parameters: " + ", ".join(names))
    values = {name: np.array(first.value(name), dtype=float) for name in names}
    inputs = {**_pinned(first, settings.data if settings.batch_size else []), **inputs}
    for name, (low, high) in settings.bounds.items():
        values[name] = np.clip(values[name], low, high)
    data = {name: np.asarray(first.value(name)) for name in settings.data}
    objective = _Objective(program, inputs, options, of, names)
    per_epoch, batch = _batches(data, settings) if data and settings.batch_size else (1, lambda step: {})
    steps = settings.steps
    stop_at_epochs = settings.epochs is not None and (steps is None or settings.epochs * per_epoch <= steps)
    if steps is None:
        steps = settings.epochs * per_epoch if settings.epochs is not None else DEFAULT_STEPS
    if settings.explain:
        steps = 1
    if stop_at_epochs:
        steps = min(steps, settings.epochs * per_epoch)  # type: ignore[operator]
    if settings.method == "lbfgs":
        return _lbfgs(objective, values, settings, steps, progress)
    return _first_order(objective, values, settings, steps, batch if data and settings.batch_size else None,
                        "epochs" if stop_at_epochs else "steps", progress)


def _first_order(objective: _Objective, values: dict[str, Any], settings: Settings, steps: int,
                 batch: Callable[[int], dict[str, Any]] | None, limit: str,
                 progress: Callable[[int, int, float], None] | None) -> Minimized:
    rule = _Rule(settings, objective.of)
    started = time.monotonic()
    trace: list[dict[str, Any]] = []
    explained: list[Explained] = []
    best: tuple[float, dict[str, Any]] | None = None
    previous: float | None = None
    stopped, done = limit, 0
    try:
        while True:
            loss, grads = objective(values, batch(done) if batch else None)
            norm = _norm(grads)
            if batch is None and math.isfinite(loss) and (best is None or loss < best[0]):
                best = (loss, dict(values))  # a step makes new arrays, never writes into these
            _record(trace, done, loss, norm, values, settings)
            if not (math.isfinite(loss) and math.isfinite(norm)):
                stopped = "not_finite"
                break
            if settings.tol is not None and done:
                if norm <= settings.tol:
                    stopped = "grad_norm"
                    break
                if previous is not None and abs(previous - loss) <= settings.tol:
                    stopped = "loss_change"
                    break
            if done >= steps:
                break
            if settings.max_time is not None and time.monotonic() - started >= settings.max_time:
                stopped = "max_time"
                break
            previous = loss
            explained = rule.step(values, grads, settings.explain)
            for name, (low, high) in settings.bounds.items():
                values[name] = np.clip(values[name], low, high)  # projected: the step stays within --bounds
            done += 1
            if progress is not None:
                progress(done, steps, loss)
    except KeyboardInterrupt:
        stopped = "interrupted"
    if batch is not None and stopped != "interrupted":
        best = None  # a minibatch's loss is not the whole data's: the final values are the result
    if stopped in ("interrupted", "not_finite") and best is not None:
        values = best[1]
    elif batch is None and stopped != "interrupted":
        # The loop's last run was at these values, on the whole data: its loss and gradient are the result's.
        return _result(objective, settings, values, loss, norm, done, stopped, trace, explained)
    loss, grads = objective(values)  # the whole data's loss and gradient at the values returned
    return _result(objective, settings, values, loss, _norm(grads), done, stopped, trace, explained)


def _record(trace: list[dict[str, Any]], step: int, loss: float, norm: float, values: dict[str, Any],
            settings: Settings) -> None:
    entry: dict[str, Any] = {"step": step, "loss": loss, "grad_norm": norm}
    if settings.every is not None and step % settings.every == 0:
        entry["values"] = dict(values)
    if settings.path:
        entry["point"] = dict(values)
    trace.append(entry)


def _result(objective: _Objective, settings: Settings, values: dict[str, Any], loss: float, norm: float,
            steps: int, stopped: str, trace: list[dict[str, Any]], explained: list[Explained]) -> Minimized:
    shown: dict[str, Any] = {"method": settings.method}
    if settings.method != "lbfgs":
        shown["lr"] = settings.lr if settings.lr is not None else DEFAULT_LR[settings.method]
    return Minimized(objective.of, settings.method, objective.wrt, values, loss, norm, steps, stopped, trace,
                     explained, shown)


def _lbfgs(objective: _Objective, values: dict[str, Any], settings: Settings, steps: int,
           progress: Callable[[int, int, float], None] | None) -> Minimized:
    """SciPy's L-BFGS-B over the parameters flattened into one vector."""
    try:
        from scipy.optimize import minimize as scipy_minimize
    except ImportError:
        raise UsageError("--method lbfgs needs SciPy, which is not installed", OPT_HINT) from None
    names = objective.wrt
    shapes = {name: values[name].shape for name in names}
    sizes = [max(1, int(np.prod(shapes[name]))) if shapes[name] else 1 for name in names]

    def unpack(x: Any) -> dict[str, Any]:
        parts = np.split(np.asarray(x, dtype=float), np.cumsum(sizes)[:-1])
        return {name: part.reshape(shapes[name]) for name, part in zip(names, parts)}

    x0 = np.concatenate([values[name].ravel() for name in names])
    bounds = [settings.bounds.get(name, (-math.inf, math.inf)) for name, size in zip(names, sizes)
              for _ in range(size)]
    started = time.monotonic()
    trace: list[dict[str, Any]] = []
    best: list[Any] = [math.inf, x0.copy()]
    seen: dict[bytes, tuple[float, float]] = {}  # the loss and gradient norm at the points tried lately

    def fun(x: Any) -> tuple[float, Any]:
        loss, grads = objective(unpack(x))
        if math.isfinite(loss) and loss < best[0]:
            best[0], best[1] = loss, np.array(x, dtype=float)
        if len(seen) > 50:
            seen.clear()
        seen[np.asarray(x, dtype=float).tobytes()] = (loss, _norm(grads))
        if not trace:  # step 0: the starting point, as the other methods' traces begin
            _record(trace, 0, loss, seen[np.asarray(x, dtype=float).tobytes()][1], unpack(x), settings)
        return loss, np.concatenate([grads[name].ravel() for name in names])

    def callback(intermediate_result: Any) -> None:
        x = np.asarray(intermediate_result.x, dtype=float)
        loss, norm = seen.get(x.tobytes(), (float(intermediate_result.fun), math.nan))
        _record(trace, len(trace), loss, norm, unpack(x), settings)
        if progress is not None:
            progress(len(trace) - 1, steps, loss)
        if settings.max_time is not None and time.monotonic() - started >= settings.max_time:
            raise StopIteration  # SciPy ≥ 1.11 stops on it and returns the current point

    tol = settings.tol
    stopped = "steps"
    try:
        found = scipy_minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, callback=callback,
                               options={"maxiter": steps, **({"gtol": tol, "ftol": tol} if tol is not None else {})})
        x = found.x
        if settings.max_time is not None and time.monotonic() - started >= settings.max_time and found.nit < steps:
            stopped = "max_time"
        elif found.nit >= steps:
            stopped = "steps"
        elif found.success:
            stopped = "converged"
        else:
            stopped = "not_finite" if not math.isfinite(found.fun) else "line_search"
    except KeyboardInterrupt:
        stopped, x = "interrupted", best[1]
    final = unpack(x)
    loss, grads = objective(final)
    return _result(objective, settings, final, loss, _norm(grads), max(0, len(trace) - 1), stopped, trace, [])
