"""Charts: `plot`'s curves and contours and `minimize --plot`'s loss and path, to a file through Matplotlib
or as text through plotext (both the `[plot]` extra). The only module that imports either, and only in the
function that draws: no other command pays for them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..engine import backend as B
from ..engine.backend import numpy as np
from ..errors import UsageError

if TYPE_CHECKING:
    from ..tools.minimize import Minimized
    from ..tools.plot import Curve, Surface

PLOT_HINT = "install Matplotlib to draw to a file: pip install 'gradcalc[plot]'"
TEXT_HINT = "install plotext for the text plot: pip install 'gradcalc[plot]'; or print the data with --json"
FILE_FORMATS = (".svg", ".png", ".pdf")
ARROWS = "→↗↑↖←↙↓↘"  # by the angle of the gradient, in eighths of a turn from the x axis
LEVELS = (0.1, 0.3, 0.5, 0.7, 0.9)  # a text contour's levels: these quantiles of the values drawn


def check_file(path: str, flag: str) -> None:
    """A picture's format, from its suffix, and Matplotlib's presence: said before anything runs."""
    import importlib.util

    if not path.lower().endswith(FILE_FORMATS):
        raise UsageError(f"{flag} {path}: which format?", "end the file's name in .svg, .png or .pdf")
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(f"{flag} needs Matplotlib, which is not installed", PLOT_HINT)


def check_text() -> None:
    """The text plot's library, plotext (the `[plot]` extra): said before anything runs."""
    import importlib.util

    if importlib.util.find_spec("plotext") is None:
        raise UsageError("the text plot needs plotext, which is not installed", TEXT_HINT)


def _pyplot(flag: str) -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no window: a file
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(f"{flag} needs Matplotlib, which is not installed", PLOT_HINT) from None
    return plt


def _save(plt: Any, figure: Any, path: str) -> None:
    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}", "check the folder exists and is writable") from None
    finally:
        plt.close(figure)


def derivative_label(of: str, wrt: str, order: int) -> str:
    """∂y/∂x, or (order 2) ∂²y/∂x²."""
    return f"∂{of}/∂{wrt}" if order == 1 else f"∂²{of}/∂{wrt}²"


def _series(curve: Curve) -> list[tuple[str, Any]]:
    """What a curve's chart draws, labelled for its legend: y, ∂y/∂x, (∂²y/∂x²), (the tangent)."""
    shown = [(curve.of, curve.y), (derivative_label(curve.of, curve.wrt, 1), curve.dy)]
    if curve.d2y is not None:
        shown.append((derivative_label(curve.of, curve.wrt, 2), curve.d2y))
    if curve.tangent is not None:
        line = curve.tangent
        shown.append((f"tangent at {curve.wrt} = {B.format_number(line.at)}",
                      line.value + line.slope * (curve.x - line.at)))
    return shown


def _title(curve: Curve) -> str:
    return f"{curve.of} and its derivative{'s' if curve.d2y is not None else ''} over {curve.wrt}"


def _surface_title(surface: Surface) -> str:
    return f"{surface.of} over ({surface.wrt[0]}, {surface.wrt[1]}); arrows: the direction of ∇{surface.of}"


# --- To a file: Matplotlib ---------------------------------------------------------------------------------

def curve_file(curve: Curve, path: str) -> None:
    """The curve and its derivatives on one axes, 640 × 480 at 100 dpi; a NaN is a gap in its line."""
    plt = _pyplot("-o")
    figure, axes = plt.subplots(figsize=(6.4, 4.8))
    for (label, values), style in zip(_series(curve), ("-", "--", "-.", ":")):
        axes.plot(curve.x, np.where(np.isfinite(values), values, np.nan), style, label=label)
    if curve.tangent is not None:
        axes.plot([curve.tangent.at], [curve.tangent.value], "o", color="black")
    axes.axhline(0, color="grey", linewidth=0.5)
    axes.set_xlabel(curve.wrt)
    axes.set_ylabel(", ".join(label for label, _ in _series(curve)[:3]))
    axes.set_title(_title(curve))
    axes.legend()
    _save(plt, figure, path)


def _contour(axes: Any, surface: Surface, arrows: int = 15) -> Any:
    """Filled contours of the surface, its gradient's direction as arrows on a coarser grid; the colour mapping."""
    z = np.ma.masked_invalid(surface.z)
    levels: Any = 20
    options: dict[str, Any] = {}
    finite = surface.z[np.isfinite(surface.z)]
    if finite.size and finite.min() >= 0 and finite.max() > 1e3 * max(finite.min(), 1e-300):
        # A loss over decades (Rosenbrock's): evenly spaced levels would leave its valley one colour.
        from matplotlib.colors import LogNorm

        positive = finite[finite > 0]
        low = max(float(positive.min()) if positive.size else 0.0, float(finite.max()) * 1e-6)
        high = float(finite.max())
        levels = np.array([k * 10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
                           for k in (1, 2, 5) if low <= k * 10.0 ** e <= high])  # 1, 2, 5 a decade: round labels
        if len(levels) < 2:
            levels = np.geomspace(low, high, 20)
        options = {"norm": LogNorm(levels[0], levels[-1]), "extend": "both"}
        z = np.ma.masked_invalid(np.maximum(surface.z, levels[0] / 2))  # the minimum, 0, in the lowest colour
    filled = axes.contourf(surface.x, surface.y, z, levels=levels, cmap="viridis", **options)
    axes.contour(surface.x, surface.y, z, levels=levels[::2] if not isinstance(levels, int) else 10,
                 colors="white", linewidths=0.5, alpha=0.6, **({"norm": options["norm"]} if options else {}))
    step = max(1, len(surface.x) // arrows)
    gx, gy = (surface.grad[name][::step, ::step] for name in surface.wrt)
    size = np.hypot(gx, gy)
    size = np.where(size > 0, size, np.nan)  # a stationary point has no direction: no arrow
    axes.quiver(surface.x[::step], surface.y[::step], gx / size, gy / size, color="white", alpha=0.9,
                label=f"∇{surface.of} (direction)")
    axes.set_xlabel(surface.wrt[0])
    axes.set_ylabel(surface.wrt[1])
    return filled


def surface_file(surface: Surface, path: str) -> None:
    """Filled contours with a colour bar named after the output, the gradient's direction as arrows."""
    plt = _pyplot("-o")
    figure, axes = plt.subplots(figsize=(6.4, 4.8))
    filled = _contour(axes, surface)
    figure.colorbar(filled, ax=axes, label=surface.of)
    axes.set_title(_surface_title(surface), fontsize=10)
    axes.legend(loc="upper right")
    _save(plt, figure, path)


def minimized_file(result: Minimized, path: str, surface: Surface | None) -> None:
    """--plot FILE: the loss at each step (a log scale where it stays above 0), and for two scalar parameters
    their path in the plane over the loss's contours (`surface`)."""
    plt = _pyplot("--plot")
    steps = [entry["step"] for entry in result.trace]
    losses = [entry["loss"] for entry in result.trace]
    plane = plane_of(result)
    figure, axes = plt.subplots(1, 2 if plane else 1, figsize=(11 if plane else 6.4, 4.8), squeeze=False)
    curve = axes[0][0]
    curve.plot(steps, losses, label=f"{result.of} ({result.method})")
    if losses and all(math.isfinite(loss) and loss > 0 for loss in losses):
        curve.set_yscale("log")
    curve.set_xlabel("step")
    curve.set_ylabel(result.of)
    curve.set_title(f"{result.of} at each step")
    curve.legend()
    if plane:
        first, second = plane
        xs, ys = path_of(result)
        ax = axes[0][1]
        if surface is not None:
            figure.colorbar(_contour(ax, surface), ax=ax, label=result.of)
        ax.plot(xs, ys, marker=".", markersize=3, color="red", label="path")
        if xs:
            ax.plot(xs[:1], ys[:1], "o", color="orange", label="start")
            ax.plot(xs[-1:], ys[-1:], "*", markersize=12, color="red", label="end")
        ax.set_xlabel(first)
        ax.set_ylabel(second)
        ax.set_title(f"the path of ({first}, {second})")
        ax.legend()
    _save(plt, figure, path)


def plane_of(result: Minimized) -> list[str] | None:
    """The two scalar parameters whose path in the plane --plot draws beside the loss, or None."""
    names = [name for name in result.wrt if np.ndim(result.values[name]) == 0]
    return names if len(result.wrt) == 2 and len(names) == 2 else None


def path_of(result: Minimized) -> tuple[list[float], list[float]]:
    """The two parameters' values at each step (the trace's points)."""
    plane = plane_of(result) or []
    points = [entry["point"] for entry in result.trace if "point" in entry]
    return [float(p[plane[0]]) for p in points], [float(p[plane[1]]) for p in points]


# --- On a terminal: plotext -----------------------------------------------------------------------------------

MARKERS = ("hd", "•", "+", "·")  # y, ∂y/∂x, ∂²y/∂x², the tangent: told apart without colour
ASCII_MARKERS = ("*", "o", "+", ".")  # the same where the output cannot write the others (cp1252, ASCII)
ASCII_ARROWS = ">/^\\</v\\"


def _figure(width: int, height: int) -> Any:
    try:
        import plotext
    except ImportError:
        raise UsageError("the text plot needs plotext, which is not installed", TEXT_HINT) from None

    figure = plotext.figure
    figure.clear()
    figure.theme("colorless")  # no colour: a pipe and a terminal see the same, told apart by the markers
    figure.plot_size(width, height)
    return figure


def _finite_runs(x: Any, values: Any) -> list[tuple[list[float], list[float]]]:
    """The runs of finite points: each drawn as its own line, so that a NaN is a gap, not a jump."""
    runs: list[tuple[list[float], list[float]]] = []
    current: tuple[list[float], list[float]] = ([], [])
    for a, b in zip(x.tolist(), values.tolist()):
        if math.isfinite(b):
            current[0].append(a)
            current[1].append(b)
        elif current[0]:
            runs.append(current)
            current = ([], [])
    if current[0]:
        runs.append(current)
    return runs


def curve_text(curve: Curve, width: int, height: int, ascii_only: bool = False) -> str:
    """The curve and its derivatives as text, width × height cells, a legend naming each by its marker
    (ASCII ones where the output has no others)."""
    figure = _figure(width, height)
    legend = []
    drawn = np.concatenate([values for _, values in _series(curve)])
    _ticks(figure, "x", curve.x)
    _ticks(figure, "y", drawn[np.isfinite(drawn)])
    for (label, values), marker in zip(_series(curve), ASCII_MARKERS if ascii_only else MARKERS):
        for xs, ys in _finite_runs(curve.x, values):
            signal = figure.signal(xs, ys, marker=marker)
            signal.lines()
            figure.draw(signal)
        legend.append(f"{'▚' if marker == 'hd' else marker} {label}")
    figure.label(curve.wrt, "x")
    figure.title(_title(curve))
    return _text(figure, legend, width)


def surface_text(surface: Surface, width: int, height: int, ascii_only: bool = False) -> str:
    """Contour lines as digits (1 lowest), one per level in the legend, and the gradient's direction as arrows."""
    figure = _figure(width, height)
    arrows = ASCII_ARROWS if ascii_only else ARROWS
    legend = [f"{arrows[0]} ∇{surface.of}"]
    z = surface.z
    finite = z[np.isfinite(z)]
    if finite.size:
        levels = sorted(set(np.quantile(finite, LEVELS).tolist()))
        corners = np.stack([z[:-1, :-1], z[1:, :-1], z[:-1, 1:], z[1:, 1:]])
        low, high = np.min(corners, axis=0), np.max(corners, axis=0)  # NaN where a corner is: no line there
        cx, cy = (surface.x[:-1] + surface.x[1:]) / 2, (surface.y[:-1] + surface.y[1:]) / 2
        for k, level in enumerate(levels, 1):
            rows, columns = np.nonzero((low <= level) & (level < high))
            if rows.size:
                figure.draw(figure.signal(cx[columns].tolist(), cy[rows].tolist(), marker=str(k)))
                legend.append(f"{k} {surface.of} = {B.format_number(level)}")
    gx, gy = (surface.grad[name] for name in surface.wrt)
    every_x, every_y = max(1, len(surface.x) // 8), max(1, len(surface.y) // 5)
    # The arrow's angle on the screen: a cell is about twice as tall as it is wide, and the axes' units differ.
    across = width / float(surface.x[-1] - surface.x[0])
    up = 2 * height / float(surface.y[-1] - surface.y[0])
    for i in range(every_y // 2, len(surface.y), every_y):
        for j in range(every_x // 2, len(surface.x), every_x):
            if math.isfinite(gx[i, j]) and math.isfinite(gy[i, j]) and (gx[i, j] or gy[i, j]):
                # 0·∞ is NaN: a zero component stays zero however narrow the range (a scale of ∞)
                turn = round(math.atan2(gy[i, j] * up if gy[i, j] else 0.0,
                                        gx[i, j] * across if gx[i, j] else 0.0) / (math.pi / 4)) % 8
                figure.draw(figure.text(float(surface.x[j]), float(surface.y[i]), arrows[turn]))
    _ticks(figure, "x", surface.x)
    _ticks(figure, "y", surface.y)
    figure.label(surface.wrt[0], "x")
    figure.label(surface.wrt[1], "y")
    figure.title(_surface_title(surface))
    return _text(figure, legend, width)


def _ticks(figure: Any, axis: str, values: Any) -> None:
    """Ticks at round numbers (1, 2 or 5 times a power of 10), written as people write them (plotext: 1e1);
    about 6 across, 4 up."""
    if not values.size or not np.ptp(values):
        return
    low, high = float(np.min(values)), float(np.max(values))
    rough = (high - low) / (6 if axis == "x" else 4)
    power = 10 ** math.floor(math.log10(rough))
    step = next(k * power for k in (1, 2, 5, 10) if k * power >= rough)
    positions = [k * step for k in range(math.ceil(low / step), math.floor(high / step) + 1)]
    figure.ruler(axis).ticks(positions, [B.format_number(round(p / step) * step) for p in positions])


def _text(figure: Any, legend: list[str], width: int) -> str:
    """The figure as lines without trailing spaces, its legend below it (in the plot it would hide the data)."""
    lines = [line.rstrip() for line in str(figure.build().string(colorless=True)).rstrip().split("\n")]
    row = ""
    for entry in legend:
        if row and len(row) + 3 + len(entry) > width:
            lines.append(row)
            row = ""
        row = f"{row}   {entry}" if row else f"    {entry}"
    return "\n".join([*lines, row]) + "\n"
