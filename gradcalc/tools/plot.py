"""`gradcalc plot`'s data: a scalar output and its derivatives over one leaf, or over a grid of two.

The points are a batch axis (Program.run_stacked: the whole range through the program at once, as
`grad --at` runs its points); the second derivative is the Hessian each point's run gives (Run.hessian,
through Program.run_batch). A point where the program fails is a gap (NaN), as a NaN value is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..engine import backend as B
from ..engine.backend import numpy as np  # the samples and the grid are on the host: what is drawn
from ..errors import GradcalcError, UsageError
from ..program.api import Program, Run, to_array

DEFAULT_POINTS = {1: 201, 2: 41}  # a curve's samples; a grid's per axis (41 × 41 runs, arrows every few)
DEFAULT_HALF_WIDTH = 3.0  # no --range: the leaf's value ± 3
MAX_POINTS = 100_000  # a curve's samples, or a grid's in all


@dataclass
class Tangent:
    """The tangent line at a point: y(at) + slope·(x − at)."""

    at: float
    value: float
    slope: float


@dataclass
class Curve:
    """A scalar output sampled over one leaf: its values and derivatives at each of the points x."""

    of: str
    wrt: str
    x: Any
    y: Any
    dy: Any
    d2y: Any | None  # --order 2
    tangent: Tangent | None


@dataclass
class Surface:
    """A scalar output over a grid of two leaves: z[i, j] at (x[j], y[i]), and its gradient there."""

    of: str
    wrt: tuple[str, str]
    x: Any
    y: Any
    z: Any
    grad: dict[str, Any]  # by leaf name, each shaped as z


def parse_range(text: str) -> tuple[float, float]:
    """--range LOW:HIGH, two finite numbers with LOW < HIGH."""
    low, colon, high = text.partition(":")
    try:
        if not colon:
            raise ValueError
        pair = (float(low), float(high))
    except ValueError:
        raise UsageError(f"--range {text!r} is not LOW:HIGH", "give two numbers, such as --range -3:3") from None
    if not all(math.isfinite(v) for v in pair):
        raise UsageError(f"--range {text!r}: both ends must be finite numbers", "for example --range -3:3")
    if pair[0] >= pair[1]:
        raise UsageError(f"--range {text!r}: LOW must be below HIGH", f"for example --range {pair[1]:g}:{pair[0]:g}")
    if not math.isfinite(pair[1] - pair[0]):  # the samples are LOW + k·(HIGH − LOW)/(N − 1): an infinite step
        raise UsageError(f"--range {text!r}: HIGH − LOW is beyond the largest float",
                         "narrow the range, such as --range -1e300:1e300")
    return pair


def check_request(wrt: list[str], ranges: list[str], points: int | None, order: int, tangent: float | None
                  ) -> tuple[list[tuple[float, float] | None], int]:
    """Refuse what cannot be drawn, before anything runs; the ranges (None: around the leaf's value), the points."""
    if len(wrt) not in (1, 2):
        raise UsageError(f"--wrt names {len(wrt)} variables: plot draws one (a curve) or two (a contour)",
                         "give one leaf, --wrt x, or two, --wrt w1,w2")
    if len(set(wrt)) != len(wrt):
        raise UsageError(f"--wrt names '{wrt[0]}' twice", "give two different leaves for a contour")
    if len(ranges) > len(wrt):
        raise UsageError(f"{len(ranges)} --range options for {len(wrt)} variable{'s' if len(wrt) > 1 else ''}",
                         "give one --range for all, or one for each --wrt variable, in its order")
    parsed: list[tuple[float, float] | None] = [parse_range(text) for text in ranges]
    if len(parsed) == 1 and len(wrt) == 2:
        parsed *= 2
    parsed += [None] * (len(wrt) - len(parsed))
    if len(wrt) == 2 and (order != 1 or tangent is not None):
        raise UsageError("--order and --tangent draw a curve: they need one --wrt variable",
                         "drop them, or plot one variable")
    if tangent is not None and not math.isfinite(tangent):
        raise UsageError(f"--tangent must be a finite number, not {tangent:g}", "for example --tangent 1.5")
    count = points if points is not None else DEFAULT_POINTS[len(wrt)]
    if count < 2 or count ** len(wrt) > MAX_POINTS:
        most = MAX_POINTS if len(wrt) == 1 else math.isqrt(MAX_POINTS)
        raise UsageError(f"--points {count}: give 2 to {most:,} points{' per axis' if len(wrt) == 2 else ''}",
                         f"for example --points {DEFAULT_POINTS[len(wrt)]}")
    return parsed, count


def _first(program: Program, inputs: dict[str, Any], options: dict[str, Any], of: str | None, wrt: list[str],
           ranges: list[tuple[float, float] | None]) -> tuple[Run, str, list[tuple[float, float]]]:
    """The run at the ranges' middles (a leaf the program only reads needs a value): the output, which must be
    a scalar, and the ranges, each leaf's value ± 3 where none was given."""
    given = {name: (low + high) / 2 for name, span in zip(wrt, ranges) if span is not None
             for low, high in [span]}
    free = set(program.free_names())
    run = program.run({**inputs, **{name: 0.0 for name in wrt if name in free}, **given}, **options)
    of = of or run.default_output
    if tuple(run.node(of).shape):
        stmt = run.state.final.get(of)
        raise UsageError(f"'{of}' has shape {tuple(run.node(of).shape)}: plot draws a scalar output",
                         "reduce it in the program (for example `L = sum(...)`), or name a scalar with --of"
                         ).at(stmt.pos if stmt else None).within(program.source)
    spans = []
    for name, span in zip(wrt, ranges):
        node = run.wrt_node(name)  # a constant's or an unknown name's error
        if name not in run.leaves and name not in free:
            raise UsageError(f"--wrt: '{name}' is computed by the program, not given: plot moves leaves",
                             "name a variable given a value directly, such as `x = 0.5`")
        if tuple(node.shape):
            raise UsageError(f"--wrt: '{name}' has shape {tuple(node.shape)}: plot moves a scalar leaf",
                             "plot a scalar leaf, or make one: `s = 0.5; W = s * ones(3)`")
        centre = float(run.value(name))
        if span is None and not (math.isfinite(centre) and math.ulp(centre) < DEFAULT_HALF_WIDTH / 100):
            # ± 3 would be a few floats apart (or none): the samples would repeat one point
            raise UsageError(f"--wrt: '{name}' is {centre:g}, too large to plot its value ± {DEFAULT_HALF_WIDTH:g}",
                             "say where it goes with --range, such as --range {:g}:{:g}".format(
                                 *sorted((centre * 0.9, centre * 1.1))) if math.isfinite(centre)
                             else "say where it goes with --range")
        spans.append(span or (centre - DEFAULT_HALF_WIDTH, centre + DEFAULT_HALF_WIDTH))
    return run, of, spans


def _gradients(program: Program, stacks: dict[str, Any], inputs: dict[str, Any], options: dict[str, Any], of: str,
               wrt: list[str]) -> tuple[Any, dict[str, Any]]:
    """The output and its gradient at every point, the points as a batch axis; a point that fails is NaN."""
    count = len(next(iter(stacks.values())))
    arguments = {"of": of, "wrt": wrt}
    try:
        given = {name: B.to_host(to_array(f"--set {name}", value, options.get("seed", 0)))
                 for name, value in inputs.items() if name not in stacks}  # the same at every point
        found: Any = program.run_stacked({**{name: np.broadcast_to(value, (count, *value.shape))
                                        for name, value in given.items()}, **stacks}, "grad", arguments, **options)
        return np.asarray(found.value, dtype=float), {name: np.asarray(found.grads[name], dtype=float)
                                                      for name in wrt}
    except GradcalcError:  # some point fails: each point on its own, the failures gaps
        pass
    values = np.full(count, np.nan)
    grads = {name: np.full(count, np.nan) for name in wrt}
    error: GradcalcError | None = None
    for point in program.run_batch(_points(stacks, inputs), "grad", arguments, **options):
        if point.error is not None:
            error = error or point.error
            continue
        values[point.index] = float(point.result.value)
        for name in wrt:
            grads[name][point.index] = float(point.result.grads[name])
    if error is not None and np.isnan(values).all():
        raise error  # no point runs: the program's own mistake, not a gap
    return values, grads


def _second(program: Program, x: Any, inputs: dict[str, Any], options: dict[str, Any], of: str, wrt: str) -> Any:
    """∂²of/∂wrt² at every x, the points as a batch axis (as _gradients); a point that fails is NaN."""
    arguments = {"of": of, "wrt": [wrt]}
    try:
        given = {name: B.to_host(to_array(f"--set {name}", value, options.get("seed", 0)))
                 for name, value in inputs.items() if name != wrt}
        found: Any = program.run_stacked({**{name: np.broadcast_to(value, (len(x), *value.shape))
                                             for name, value in given.items()}, wrt: x}, "hessian", arguments,
                                         **options)
        return np.asarray(found.blocks[0][0], dtype=float)
    except GradcalcError:  # some point fails: each point on its own, the failures gaps
        pass
    second = np.full(len(x), np.nan)
    for point in program.run_batch(_points({wrt: x}, inputs), "hessian", arguments, **options):
        if point.error is None:
            second[point.index] = float(point.result.blocks[0][0])
    return second


def _points(stacks: dict[str, Any], inputs: dict[str, Any]) -> Any:
    count = len(next(iter(stacks.values())))
    return ({**inputs, **{name: float(column[i]) for name, column in stacks.items()}} for i in range(count))


def curve(program: Program, inputs: dict[str, Any], options: dict[str, Any], of: str | None, wrt: str,
          span: tuple[float, float] | None, points: int, order: int = 1, tangent: float | None = None) -> Curve:
    """`of` and its derivatives (to `order`, 1 or 2) at `points` evenly spaced values of the leaf `wrt`."""
    _, of, (span,) = _first(program, inputs, options, of, [wrt], [span])
    x = np.linspace(span[0], span[1], points)
    y, grads = _gradients(program, {wrt: x}, inputs, options, of, [wrt])
    d2y = None
    if order >= 2:
        d2y = _second(program, x, inputs, options, of, wrt)
    gaps = ~np.isfinite(y)  # where the output is not a number, neither are its derivatives: a gap in each
    dy = np.where(gaps, np.nan, grads[wrt])
    if d2y is not None:
        d2y[gaps] = np.nan
    line = None
    if tangent is not None:
        value, slope = _gradients(program, {wrt: np.array([tangent])}, inputs, options, of, [wrt])
        line = Tangent(tangent, float(value[0]), float(slope[wrt][0]))
    return Curve(of, wrt, x, y, dy, d2y, line)


def surface(program: Program, inputs: dict[str, Any], options: dict[str, Any], of: str | None,
            wrt: tuple[str, str], spans: list[tuple[float, float] | None], points: int) -> Surface:
    """`of` and its gradient over a points × points grid of the leaves `wrt`."""
    _, of, found = _first(program, inputs, options, of, list(wrt), spans)
    x, y = (np.linspace(low, high, points) for low, high in found)
    grid_x, grid_y = np.meshgrid(x, y)  # rows along y, columns along x, as contour() takes them
    z, grads = _gradients(program, {wrt[0]: grid_x.ravel(), wrt[1]: grid_y.ravel()}, inputs, options, of,
                          list(wrt))
    shape = grid_x.shape
    return Surface(of, wrt, x, y, z.reshape(shape), {name: g.reshape(shape) for name, g in grads.items()})


def around(values: list[float]) -> tuple[float, float]:
    """A range that holds the values with a margin (a path's, under which its contours are drawn)."""
    finite = [v for v in values if math.isfinite(v)] or [0.0]
    low, high = min(finite), max(finite)
    margin = max((high - low) * 0.15, 0.5 if low == high else 0.0)
    return low - margin, high + margin
