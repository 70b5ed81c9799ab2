"""The Python API: load a program, give it inputs, run it, take gradients.

    import gradcalc
    program = gradcalc.load("samples/neuron.eq")
    run = program.run({"a": 3})
    run.value("L")                 # a NumPy value
    result = run.grad(of="L")      # result.grads["w1"], ...
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..engine import autodiff, graph
from ..engine import backend as B
from ..engine.graph import Node, constant
from ..errors import GradcalcError, NameNotFound, Source, UsageError, did_you_mean
from ..files import DEFAULT_MAX_FILE_SIZE, read_text
from ..language.parser import DEFAULT_MAX_DEPTH, parse, parse_expression, raise_recursion_limit
from .checker import Checker, check
from .interpreter import Executed, Interpreter, Limits, State, execute, make_context
from .notation.juxtaposition import NOTATION

T = TypeVar("T")

if TYPE_CHECKING:  # types only: diff's module, batch mode and the other results load where they are used
    from ..engine.symbolic import Derivative
    from .batch import Point
    from .replay import Replayed
    from .results import Curvature, Hessians, Jacobians, Tangents, Taylor


class paused_gc:  # (used as a function: `with paused_gc():`; a class: a third of a generator's cost)
    """Building a graph allocates millions of objects and frees none: the cyclic collector would
    rescan them again and again (5x slower on a 50,000-op chain), and the graph has no cycles."""

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            # What the pause made (a syntax tree, a graph) goes straight to the oldest generation, as
            # long-lived objects do: else the first young collection after it scans every one of them.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


# Parsed programs by their text (and --max-depth): grading reads one key against many submissions, a
# sweep or a fit makes one program many times. A syntax tree is not changed after parsing, so programs of
# the same text share it. Only small texts are kept (a tree takes ~1 kB a statement), the newest few.
_PARSED: dict[tuple[str, int], Any] = {}
PARSED_COUNT = 16
PARSED_TEXT_LIMIT = 100_000
REPLAY_KEYS = 32  # a Program's recordings (by --set names, shapes and options) kept at most


class Program:
    """A parsed program: its source text, folder (for load) and syntax tree."""

    def __init__(self, text: str, filename: str = "<expr>", folder: str | None = None,
                 max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.source = Source(text, filename)
        self.folder = folder if folder is not None else os.getcwd()
        self.max_depth = max_depth
        self.checked: dict[frozenset[str], Checker] = {}  # by the --set names: what runs with them share
        self.replays: dict[tuple, Any] = {}  # by names, shapes and options: False, 1 (run once), or a Recording
        raise_recursion_limit(max_depth)
        key = (text, max_depth)
        module = _PARSED.pop(key, None)
        if module is None:
            try:
                with paused_gc():
                    module = parse(text, max_depth, NOTATION)
            except GradcalcError as exc:
                raise exc.within(self.source) from None
        if len(text) <= PARSED_TEXT_LIMIT:
            _PARSED[key] = module  # the newest last: the oldest is the first to go
            if len(_PARSED) > PARSED_COUNT:
                del _PARSED[next(iter(_PARSED))]
        self.module = module

    def _recorded(self, key: tuple, recorded: Any, executed: Executed, inputs: dict[str, Any]) -> None:
        """Note a run interpreted under `key`: the second such run is recorded for the next ones to replay,
        if nothing in the program depends on values (replay.replayable); a run made once is not."""
        if recorded is None:
            if len(self.replays) >= REPLAY_KEYS:  # runs of ever new shapes or options: the oldest goes
                del self.replays[next(iter(self.replays))]
            self.replays[key] = 1
        elif recorded == 1:
            from .replay import Recording, replayable

            checker = executed.interpreter.checker
            self.replays[key] = Recording(executed, inputs) if replayable(self.module, checker) else False

    @classmethod
    def from_file(cls, path: str, max_depth: int = DEFAULT_MAX_DEPTH, max_file_size: int = DEFAULT_MAX_FILE_SIZE
                  ) -> Program:
        return cls(read_text(path, max_file_size), path, os.path.dirname(os.path.abspath(path)), max_depth)

    def free_names(self) -> list[str]:
        """The names the program reads but never assigns: its inputs, given with --set."""
        from .checker import free_names

        return free_names(self.module)

    def run(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        seed: int = 0,
        dtype: str = "float64",
        device: str = "cpu",
        max_elements: int = B.DEFAULT_MAX_ELEMENTS,
        max_iterations: int = Limits.max_iterations,
        max_recursion: int = Limits.max_recursion,
        allow_read: Sequence[str] = (),
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        keep_values: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> Run:
        """Execute the program with some leaves replaced (`--set`); returns the executed run. `labels` name
        values in errors about them (run_batch: `point 3, key 'x'`; default `--set x`)."""
        options = dict(seed=seed, dtype=dtype, device=device, max_elements=max_elements,
                       max_iterations=max_iterations, max_recursion=max_recursion, allow_read=allow_read,
                       max_file_size=max_file_size, keep_values=keep_values)
        B.use(device, dtype, max_elements)
        values = dict(values or {})
        try:
            inputs = {name: to_array(labels[name] if labels and name in labels else f"--set {name}", value, seed)
                      for name, value in values.items()}
            names = frozenset(inputs)
            checker = self.checked.get(names)
            # A run with the names, shapes and options of earlier ones replays the second one's recording.
            key = (tuple([(name, value.shape) for name, value in inputs.items()]), seed, dtype, device,
                   max_elements, max_iterations, max_recursion, tuple(allow_read), max_file_size)
            recorded = None if keep_values else self.replays.get(key)
            if recorded and recorded != 1 and checker is not None:
                with paused_gc():  # (a long recording's replay makes its nodes)
                    replayed = recorded.replay(inputs, checker)  # (a method: replay.py is not imported a run)
                if replayed is not None:
                    return Run(self, None, inputs, options, replayed)
            context = make_context(self.folder, seed, tuple(allow_read), max_file_size)
            limits = Limits(max_iterations, max_recursion, self.max_depth)
            with paused_gc():
                executed = execute(self.module, inputs, context, limits, keep_values, checker)
                if not keep_values:
                    self._recorded(key, recorded, executed, inputs)
            self.checked[names] = executed.interpreter.checker
        except GradcalcError as exc:
            raise exc.within(self.source) from None
        except RecursionError:
            raise GradcalcError("the program nests too deeply to evaluate",
                                "split deep expressions into several statements").within(self.source) from None
        return Run(self, executed, inputs, options)

    def run_batch(self, points: Iterable[Mapping[str, Any]], method: str = "values",
                  arguments: Mapping[str, Any] | None = None, *, ignore_extra: bool = False,
                  chunk_size: int = 4096, **options: Any) -> Iterator[Point]:
        """Run at many points, as `jax.vmap` does: each point is {leaf: value} (the others keep the program's
        values); `method` is the Run method each computes ("values", "grad", "jacobian", "hessian", "jvp",
        "hvp", "diff"), called with `arguments`; `options` are run()'s. Yields a batch.Point per point, in order,
        a chunk at a time (a generator of points streams); a bad point has its error, the others run."""
        from .batch import run_batch

        return run_batch(self, points, method, arguments, ignore_extra=ignore_extra, chunk_size=chunk_size,
                         **options)

    def check_arguments(self, method: str, arguments: Mapping[str, Any]) -> None:
        """Raise the error a Run method's `arguments` give at every point, as one run gives it (run_batch,
        before any point runs): an --of, --wrt or --keep name the program assigns nowhere, a --wrt constant,
        a --vector or --tangent that is no value, an --order or --mode that is none. A name that only some
        paths assign is each point's to find."""
        checker = next(iter(self.checked.values()), None) or check(self.module, (), self.max_depth)
        variables = list(dict.fromkeys([*self.free_names(), *checker.assigned]))  # the order a run's frame has
        wrt = arguments.get("wrt") or []
        wrt = [wrt] if isinstance(wrt, str) else list(wrt)
        if method == "diff":
            _derivative_order(wrt, arguments.get("order", 1))
        of = arguments.get("of")
        if of and of not in variables:
            raise _no_variable(of, variables).within(self.source)
        for name in wrt:
            if name in checker.constants:
                raise _constant_wrt(name, checker.constants[name]).within(self.source)
            if name not in variables:
                raise _no_variable(name, variables).within(self.source)
        if method == "jacobian":
            _jacobian_mode(arguments.get("mode", "auto"))
        unknown = [name for name in arguments.get("keep") or () if name not in variables]
        if method == "diff" and unknown:
            raise _no_kept(unknown[0], variables)
        for flag, key in (("--vector", "vector"), ("--tangent", "tangent")):
            given = arguments.get(key)  # grad's is a value; hvp's and jvp's may name a variable
            if isinstance(given, str) and given != "ones" and (method == "grad" or given.strip() not in variables):
                to_array(flag, given)

    def run_stacked(self, stacks: Mapping[str, Any], method: str = "values",
                    arguments: Mapping[str, Any] | None = None, **options: Any) -> dict[str, Any] | Gradients:
        """Run at many points given as columns, as `jax.vmap(f)(x)` does: each value has a leading axis, one
        entry per point; so has the result (`values`: {name: array}; `grad`: a Gradients of stacked arrays;
        `diff`: a list, each point's derivatives).
        The batch goes through the program once; points that take different paths (a branch on a value)
        run in groups, and a program with an operation that has no batching rule point by point. An error
        at any point is raised (run_batch gives each point its own)."""
        from .batch import run_stacked

        return run_stacked(self, Run, stacks, method, arguments, options)


def tolerance(flag: str, value: float) -> float:
    """A tolerance option's value (--rtol, --atol): a finite number, 0 or more."""
    if not (value >= 0 and math.isfinite(value)):
        raise UsageError(f"{flag} must be a finite number, 0 or more, not {value:g}", "give one such as 1e-6")
    return value


def to_array(label: str, value: Any, seed: int = 0) -> Any:
    """An option's value (`--set x`, `--vector`): a number, nested lists, an array, or a constant expression."""
    if B.xp is B.numpy:
        if value.__class__ is float and B.dtype is B.numpy.float64:
            return B.dtype(value)  # a number, as asarray makes it (a third of a run of the toy network went there)
        if value.__class__ is B.numpy.ndarray and value.dtype.type is B.dtype and value.ndim:
            B.check_size(value.shape, "the value")  # all asarray would do to it: the same array back
            return value
    if isinstance(value, str):
        return _constant_expression(label, value, seed)
    try:
        return B.asarray(value)
    except (ValueError, TypeError):
        raise UsageError(f"{label}: not a number or a rectangular array of numbers",
                         "give a number, or a JSON array such as [[1, 2], [3, 4]]") from None


def _constant_expression(label: str, text: str, seed: int) -> Any:
    """Evaluate the text of a constant expression (`randn(3, 3)`, `[1, 2]`, `2*pi`)."""
    from ..language.syntax import Module, walk
    from ..language.syntax import Name as SyntaxName
    from .builtins import CONSTANTS
    from .interpreter import Interpreter, State

    source = Source(text.strip(), label)
    try:
        expr = parse_expression(text, dialect=NOTATION)
        variables = [n for n in walk(expr) if isinstance(n, SyntaxName) and n.name not in CONSTANTS]
        if variables:
            raise UsageError(f"{label}: the value uses the variable '{variables[0].name}'",
                             "give a number, a JSON array or an expression of constants such as randn(3, 3)",
                             variables[0].pos)
        # Its own random stream: a --set value never shifts the program's draws.
        interpreter = Interpreter(Module(), {}, make_context(os.getcwd(), seed + 1, ()), Limits(), State())
        with B.errstate():
            return interpreter.evaluate(expr, {}).value
    except GradcalcError as exc:
        raise exc.within(source) from None


class Gradients:
    """The result of `Run.grad`: the output's value and one gradient per --wrt name."""

    # A plain class: `grad` imports no dataclass (making one costs start-up, #21); the other commands'
    # results are dataclasses in results.py, loaded by the methods that make them.
    __slots__ = ("grads", "no_path", "of", "value", "vector")

    def __init__(self, of: str, value: Any, grads: dict[str, Any], no_path: set[str] | None = None,
                 vector: Any = None) -> None:
        self.of = of
        self.value = value
        self.grads = grads
        self.no_path = set() if no_path is None else no_path
        self.vector = vector


def _in_own_state(method: Callable[..., T]) -> Callable[..., T]:
    """A Run method that computes: it runs on the run's device, dtype and limit, whatever the engine's
    state when it is called, and leaves that state as it found it (runs of both dtypes can interleave)."""

    @functools.wraps(method)
    def entered(self: Run, *args: Any, **kwargs: Any) -> T:
        previous = B.state()
        if previous != (self.device, self.dtype, self.max_elements):
            with B.using(self.device, self.dtype, self.max_elements):
                return method(self, *args, **kwargs)
        # Already there (the usual case): B.using's work, less its generator (a tenth of a replayed grad).
        try:
            return method(self, *args, **kwargs)
        finally:
            if B.state() != previous:  # switched by the method (a nested Program.run)
                B.use(*previous)

    return entered


class Run:
    """An executed program: every variable's final value, the leaves, and the graph."""

    def __init__(self, program: Program, executed: Executed | None, inputs: dict[str, Any],
                 options: dict[str, Any], replayed: Replayed | None = None) -> None:
        """`executed`: the interpreted run; or None and `replayed`, a replay's values (its nodes made on first need)."""
        self.program = program
        self.inputs = inputs  # the --set values, as arrays
        self.options = options  # Program.run's keywords, for rerun
        # The engine state it was made in, entered again by every method that computes.
        self.device, self.dtype, self.max_elements = options["device"], options["dtype"], options["max_elements"]
        self.values_kept = bool(options.get("keep_values"))
        self.replayed = replayed
        self._executed = executed
        self.spent = False  # differentiated with retain_graph=False: intermediate values are freed

    @property
    def executed(self) -> Executed:
        """The run's nodes and state: a replayed run's are made the first time they are asked for."""
        executed = self._executed
        if executed is None:
            assert self.replayed is not None  # (one of the two is given)
            options, program = self.options, self.program
            context = make_context(program.folder, options["seed"], tuple(options["allow_read"]),
                                   options["max_file_size"])
            limits = Limits(options["max_iterations"], options["max_recursion"], program.max_depth)
            with paused_gc():
                executed = self._executed = self.replayed.made(program.module, self.inputs, context, limits)
        return executed

    @property
    def frame(self) -> dict[str, Node]:
        return self.executed.frame

    @property
    def state(self) -> State:
        return self.executed.state

    @property
    def interpreter(self) -> Interpreter:
        return self.executed.interpreter

    @property
    def tape(self) -> list[Node]:
        return self.executed.tape

    @_in_own_state
    def rerun(self, changes: Mapping[str, Any]) -> Run:
        """The same program, inputs and options with some leaves given other values (nearby points)."""
        return self.program.run({**self.inputs, **changes}, **self.options)

    @_in_own_state
    def evaluate(self, expr: Any, source: Source) -> Any:
        """The value of a claim's expression (syntax.Expr) over this run's final variables, on the host.

        A claim reads no file (a submission's reach is its own), and its randn/rand draw from a
        generator of its own, seeded by its text: the same numbers whatever the grading order.
        """
        from .notation.reading import claim_context  # claims' reader: not loaded by runs that judge none

        interpreter = self.interpreter
        program_context, interpreter.context = interpreter.context, claim_context(self.options["seed"], source.text)
        try:
            # Nothing of a claim is differentiated: no history, so a long sum frees each partial result.
            with graph.recording_as(False, history=False), B.errstate():
                return B.to_host(interpreter.evaluate(expr, self.frame).value)
        except GradcalcError as exc:
            raise exc.within(source) from None
        except RecursionError:
            raise GradcalcError("the expression nests too deeply to evaluate",
                                "split it into smaller parts").at(expr.pos).within(source) from None
        finally:
            interpreter.context = program_context

    @property
    def names(self) -> list[str]:
        """Variables in order of first assignment."""
        return list(self.frame)

    @property
    def leaves(self) -> dict[str, Node]:
        """The leaves that require grad: the default --wrt, what check moves nearby (constants are not among them)."""
        return self.state.leaves

    @property
    def constants(self) -> dict[str, Node]:
        """The `const` declarations' values: leaves that do not require grad."""
        return self.state.constants

    def wrt_node(self, name: str) -> Node:
        """The node a --wrt name differentiates by: the leaf it started as, or its final value; a constant has
        no gradient (PyTorch's torch.autograd.grad refuses a tensor that does not require grad)."""
        if name in self.state.constants:
            raise _constant_wrt(name, self.state.final[name]).within(self.program.source)
        return self.node(name, prefer_leaf=True)

    @property
    def loops(self) -> list[Any]:
        return [loop for _, loop in sorted(self.state.loops.items())]

    @property
    def default_output(self) -> str:
        if self.state.last_assigned is None:
            raise UsageError("the program assigns no variable", "add a statement such as `y = x^2`")
        return self.state.last_assigned

    def node(self, name: str, prefer_leaf: bool = False) -> Node:
        """A variable's node: its final value, or (prefer_leaf) the leaf it started as."""
        if prefer_leaf and name in self.state.leaves:
            return self.state.leaves[name]
        if name in self.frame:
            return self.frame[name]
        raise _no_variable(name, self.frame).within(self.program.source)

    @_in_own_state
    def value(self, name: str) -> Any:
        if self._executed is None and self.replayed is not None:  # a replay's nodes not made: read by place
            value = self.replayed.value(name)
            if value is not None:
                return B.to_host(value)
        return B.to_host(self.node(name).value)

    def connected_leaves(self, of: str) -> list[str]:
        """The leaves `of` depends on through differentiable operations (not a size or a count)."""
        output = self.node(of)
        reached = differentiable_inputs(output) | {output}
        return [name for name, node in self.state.leaves.items() if node in reached]

    @_in_own_state
    def values(self) -> dict[str, Any]:
        return {name: B.to_host(node.value) for name, node in self.frame.items()}

    @_in_own_state
    def grad(self, of: str | None = None, wrt: Sequence[str] | None = None, vector: Any = None,
             create_graph: bool = False, retain_graph: bool = True, host: bool = True) -> Gradients:
        """∂of/∂name for each name in wrt (default: every leaf); with a vector, vᵀ·J.

        retain_graph=False frees intermediate values as backward uses them (less memory,
        as in PyTorch); the run cannot be differentiated again afterwards. The value and the
        gradients are NumPy arrays; on the GPU, host=False leaves them on the device (CuPy
        arrays, no copy) for a caller that goes on computing there.
        """
        replayed = self.replayed
        if replayed is not None and vector is None and not create_graph and retain_graph and not self.spent:
            # A replay's pass compiled from its recording, on its values: no node is made, nothing is looked up.
            compiled = replayed.gradients(of, wrt, lambda: self.executed)
            if compiled is not None:
                name, wrt_names, value, gradients, missing = compiled
                return Gradients(name, B.to_host(value) if host else value,
                                 {n: B.to_host(g) if host else g for n, g in zip(wrt_names, gradients)}, missing)
        of, output, names, targets = self._select(of, wrt)
        if not retain_graph and replayed is not None:
            replayed.values = None  # its nodes' values only: what backward frees is freed
        with self._located(of):
            if isinstance(vector, str) and vector != "ones":
                vector = to_array("--vector", vector)
            with paused_gc():
                found = autodiff.grad(output, targets, vector, f"'{of}'", create_graph, retain_graph, self.tape,
                                      self.state.made)
            self.spent = not retain_graph
        grads: dict[str, Any] = {}
        no_path: set[str] = set()
        for name, target, gradient in zip(names, targets, found):
            if gradient is None:
                no_path.add(name)
                gradient = autodiff.zeros_like(target)  # noqa: PLW2901  (no path: zero of the right shape)
            grads[name] = gradient if create_graph or not host else B.to_host(gradient)
        return Gradients(of, B.to_host(output.value) if host else output.value, grads, no_path, vector)


    @_in_own_state
    def jacobian(self, of: str | None = None, wrt: Sequence[str] | None = None, mode: str = "auto") -> Jacobians:
        """∂of/∂name (shape of.shape + name.shape) for each name in wrt, in reverse or forward mode.

        auto picks the mode with fewer passes' worth of work: reverse makes one VJP per
        output entry, forward one JVP per input entry (each batched into one pass).
        """
        of, output, names, targets = self._select(of, wrt)
        _jacobian_mode(mode)
        if mode == "auto":
            inputs = sum(max(1, math.prod(t.shape)) for t in targets)
            mode = "fwd" if inputs < max(1, math.prod(output.shape)) else "rev"
        with self._located(of), paused_gc(), B.errstate():
            for name, target in zip(names, targets):  # --max-elements holds for the result too, before it is made
                B.check_size(tuple(output.shape) + tuple(target.shape), f"the Jacobian ∂{of}/∂{name}")
            blocks = (autodiff.jacobian_fwd if mode == "fwd" else autodiff.jacobian_rev)(output, targets)
        from .results import Jacobians

        return Jacobians(of, B.to_host(output.value), names, [B.to_host(b) for b in blocks], mode)

    @_in_own_state
    def hessian(self, of: str | None = None, wrt: Sequence[str] | None = None) -> Hessians:
        """The blocks ∂²of/∂a∂b for a, b in wrt (of must be a scalar): reverse over reverse."""
        of, output, names, targets = self._select(of, wrt)
        with self._located(of):
            if output.shape != ():
                raise UsageError(
                    f"'{of}' has shape {tuple(output.shape)}: a Hessian needs a scalar output",
                    f"reduce it in the program (for example `L = sum(...)`), or take `gradcalc jacobian` of '{of}'")
            for name, target in zip(names, targets):
                B.check_size(tuple(target.shape) * 2, f"the Hessian block ∂²{of}/∂{name}²")
            with paused_gc(), B.errstate():
                rows = autodiff.hessian(output, targets)
        from .results import Hessians

        return Hessians(of, B.to_host(output.value), names, [[B.to_host(b) for b in row] for row in rows])

    @_in_own_state
    def jvp(self, of: str | None, wrt: str, tangent: Any) -> Tangents:
        """J·v: the change of `of` along the direction `tangent` of `wrt` (forward mode)."""
        of, output, _, targets = self._select(of, [wrt])
        with self._located(of):
            target = targets[0]
            direction = self._direction("--tangent", tangent, wrt, target)
            with paused_gc(), B.errstate():
                result = autodiff.jvp(output, target, direction)
        from .results import Tangents

        return Tangents(of, B.to_host(output.value), wrt, B.to_host(direction), B.to_host(result))

    def _direction(self, flag: str, given: Any, wrt: str, target: Node) -> Any:
        """A direction of `wrt` (--tangent, --vector): 'ones', a value as --set takes it, or a variable's name."""
        if isinstance(given, str) and given == "ones":
            return B.xp.ones(target.shape, dtype=B.dtype)
        if isinstance(given, str) and given.strip() in self.frame:
            direction = self.frame[given.strip()].value
        else:
            direction = to_array(flag, given)
        if direction.shape == () and target.shape != ():  # a number: the same in every entry (--tangent 2)
            direction = B.xp.full(target.shape, direction, dtype=B.dtype)
        if tuple(direction.shape) != tuple(target.shape):
            raise UsageError(f"{flag} has shape {tuple(direction.shape)} but '{wrt}' has shape "
                             f"{tuple(target.shape)}", f"give a JSON array of shape {list(target.shape)}")
        return direction

    @_in_own_state
    def hvp(self, of: str | None, wrt: str, vector: Any) -> Curvature:
        """H·v, the Hessian of a scalar `of` by `wrt` times a direction v, without forming H (autodiff.hvp)."""
        of, output, _, targets = self._select(of, [wrt])
        with self._located(of):
            if output.shape != ():
                raise UsageError(f"'{of}' has shape {tuple(output.shape)}: a Hessian-vector product needs a scalar "
                                 "output", "reduce it in the program (for example `L = sum(...)`)")
            direction = self._direction("--vector", vector, wrt, targets[0])
            with paused_gc(), B.errstate():
                result = autodiff.hvp(output, targets[0], direction)
        from .results import Curvature

        return Curvature(of, B.to_host(output.value), wrt, B.to_host(direction), B.to_host(result))

    @_in_own_state
    def taylor(self, of: str | None, wrt: Sequence[str] | None, order: int) -> Taylor:
        """The Taylor polynomial of a scalar `of` to `order`, about the run's values of the scalar variables wrt:
        each coefficient ∂ᵏof/∂x^i∂y^j… / (i! j! …), one per monomial of degree order or less."""
        if order < 0:
            raise UsageError(f"--order {order} is not supported", "give an order of 0 or more")
        of, output, names, targets = self._select(of, list(dict.fromkeys(wrt or [])) or None)
        with self._located(of):
            if output.shape != ():
                raise UsageError(f"'{of}' has shape {tuple(output.shape)}: a Taylor polynomial needs a scalar output",
                                 "reduce it in the program (for example `L = sum(...)`)")
            for name, target in zip(names, targets):
                if target.shape != ():
                    raise UsageError(f"a Taylor polynomial needs scalar variables; '{name}' has shape "
                                     f"{tuple(target.shape)}", "pick scalar variables with --wrt, or index one")
            memo: dict[tuple[int, ...], dict[Node, Any]] = {}
            terms: list[tuple[tuple[int, ...], float]] = []
            with paused_gc(), B.errstate():
                for degree in range(order + 1):
                    for partial in itertools.combinations_with_replacement(range(len(names)), degree):
                        powers = tuple(partial.count(i) for i in range(len(names)))
                        found = _partial(output, targets, partial, memo, names)
                        terms.append((powers, float(B.to_host(found.value)) / math.prod(map(math.factorial, powers))))
        center = [float(B.to_host(target.value)) for target in targets]
        from .results import Taylor

        return Taylor(of, names, center, order, terms)

    @_in_own_state
    def diff(self, of: str | None = None, wrt: Sequence[str] | None = None, order: int = 1,
             keep: Sequence[str] = (), intermediates: bool = False, budget: int | None = None,
             shortest: bool = False, decimal: bool = False) -> list[Derivative]:
        """Each derivative as an expression: in the leaves, keeping named intermediates, or (shortest)
        in whichever of the two reads shorter.

        The expression is the differentiable backward pass (the same rules as `grad`)
        read back as algebra, along the path this run executed. With a budget, a derivative
        recorded with more operations than that is not read: symbolic.TooLong says how many.
        """
        from ..engine import symbolic

        repeated = list(wrt or [])
        sequence = len(set(repeated)) < len(repeated)  # --wrt x,y,x: one mixed partial, taken in that order
        order = _derivative_order(repeated, order)
        of, output, names, targets = self._select(of, list(dict.fromkeys(repeated)) or None)
        unknown = [name for name in keep if name not in self.frame]
        if unknown:
            raise _no_kept(unknown[0], self.frame)
        # Leaves and constants print by name: (p - Y)/N, not (p - Y)/4.
        symbols = {node: name for name, node in [*self.state.leaves.items(), *self.state.constants.items()]}
        for name, node in self.frame.items():
            if node.op is not None and (intermediates or shortest or name in keep) and name != of:
                symbols[node] = name
        taken = set(self.frame) | set(self.state.leaves)
        describe = functools.partial(symbolic.shortest, budget=budget, decimal=decimal) if shortest else \
            functools.partial(symbolic.describe, decimal=decimal)  # decimal: 0.5, not 1/2
        with self._located(of):
            if output.shape != ():
                raise UsageError(f"'{of}' has shape {tuple(output.shape)}: diff differentiates a scalar output",
                                 f"reduce it (for example `L = sum(...)`), or use `gradcalc jacobian --of {of}`")
            kept = [node for node in symbols if node.op is not None]
            with paused_gc(), B.errstate():
                first = autodiff.backward(output, constant(B.scalar(1.0)), [*targets, *kept], create_graph=True)
                # The gradient reaching a kept intermediate gets a name of its own: dL_dd for ∂L/∂d.
                adjoints: dict[Node, str] = {}
                for node in kept:
                    if node in first and node not in targets and isinstance(first[node], Node):
                        adjoints.setdefault(first[node], _adjoint_name(of, symbols[node], taken))
                results = []
                if order == 1:
                    for name, target in zip(names, targets):
                        gradient = first.get(target, constant(B.xp.zeros(target.shape, dtype=B.dtype)))
                        symbolic.within(gradient, symbols, budget)
                        results.append(describe(of, (name,), gradient, symbols, taken, adjoints))
                    return results
                # Order 2 lists every ordered pair, as a Hessian's entries; past it, mixed partials do not depend
                # on the order they are taken in (Schwarz), so each is listed once: x,x,y but not x,y,x.
                indices = range(len(names))
                if sequence:
                    partials = [tuple(names.index(name) for name in repeated)]
                elif order == 2:
                    partials = list(itertools.product(indices, repeat=2))
                else:
                    partials = list(itertools.combinations_with_replacement(indices, order))
                memo: dict[tuple[int, ...], dict[Node, Any]] = {(): first}
                for partial in partials:
                    found = _partial(output, targets, partial, memo, names)
                    symbolic.within(found, symbols, budget)
                    results.append(describe(of, tuple(names[i] for i in partial), found, symbols, taken))
        return results

    @_in_own_state
    def steps(self, of: str | None = None, wrt: str | None = None, decimal: bool = False) -> tuple[Any, Derivative]:
        """d(of)/d(wrt) one named rule a line (engine/steps.py), ending on diff's answer (also returned)."""
        from ..engine import steps

        found = self.diff(of, [wrt] if wrt else None, decimal=decimal)
        if len(found) != 1:
            raise UsageError(f"--steps follows one derivative, and '{found[0].of}' has {len(found)} variables",
                             f"name one with --wrt (one of: {', '.join(d.wrt[0] for d in found)})")
        answer = found[0]
        of, output, _, (target,) = self._select(of, [answer.wrt[0]])
        symbols = {node: name for name, node in [*self.state.leaves.items(), *self.state.constants.items()]}
        for name, node in self.frame.items():  # a leaf reassigned (x = x^2 + 1) is read through: one name, one node
            if node.op is not None and node not in symbols and name not in self.state.leaves \
                    and name not in self.state.constants:
                symbols[node] = name
        with self._located(of), paused_gc(), B.errstate():
            return steps.derive(of, answer.wrt[0], output, target, symbols, answer, decimal), answer

    @_in_own_state
    def graph(self, of: str | None = None, options: Any = None) -> Any:
        """The computation graph as the tutorials draw it (graphview.View): needs run(keep_values=True).

        `options` (graphview.Options) picks what is drawn; None: every node, values in full.
        """
        from ..engine import graphview

        of = self._check_graph(of)
        options = options or graphview.Options()
        with self._located(of), paused_gc(), B.errstate():
            view = graphview.build(self, of, options=options)
        return graphview.shaped(view, options)  # its errors are the options', not the output's line

    @_in_own_state
    def explain(self, of: str | None, wrt: str, limit: int | None = None) -> tuple[Any, Any]:
        """The chain rule for ∂of/∂wrt as a sum over paths (graphview.Explanation, and the view)."""
        from ..engine import graphview

        limit = limit or graphview.PATH_LIMIT
        graphview.check_limit(limit)  # before the graph is built
        of = self._check_graph(of)
        target = self.wrt_node(wrt)
        with self._located(of), paused_gc(), B.errstate():
            view = graphview.build(self, of)
            return graphview.explain(view, target, wrt, limit), view

    def _check_graph(self, of: str | None) -> str:
        if not self.values_kept:
            raise UsageError("the graph view needs every intermediate value",
                             "run the program with keep_values=True")
        return of or self.default_output

    def _select(self, of: str | None, wrt: Sequence[str] | None) -> tuple[str, Node, list[str], list[Node]]:
        """The output's name and node, and the --wrt names and nodes (default: every leaf)."""
        if self.spent:
            raise UsageError("this run was already differentiated with retain_graph=False",
                             "run the program again, or pass retain_graph=True the first time")
        of = of or self.default_output
        output = self.node(of)
        names = list(wrt) if wrt else list(self.state.leaves)
        if not names:
            raise UsageError("the program has no leaves to differentiate with respect to",
                             "name a variable with --wrt" + (" (its constants have no gradient)"
                                                             if self.state.constants else ""))
        return of, output, names, [self.wrt_node(name) for name in names]

    @contextlib.contextmanager
    def _located(self, of: str) -> Iterator[None]:
        """Errors about the output point at the line that gave it its value."""
        try:
            yield
        except GradcalcError as exc:
            final = self.state.final.get(of)
            raise exc.at(final.pos if final is not None else None).within(self.program.source) from None


def _no_variable(name: str, variables: Iterable[str]) -> NameNotFound:
    """An --of or --wrt name that is none of the program's variables."""
    variables = list(variables)
    return NameNotFound(f"the program has no variable '{name}'",
                        did_you_mean(name, variables) or f"its variables are: {', '.join(variables)}")


def _constant_wrt(name: str, declared: Any) -> UsageError:
    """A --wrt constant: PyTorch's torch.autograd.grad refuses a tensor that does not require grad."""
    return UsageError(f"'{name}' is a constant (declared with `const` at line {declared.pos.line}): it has no "
                      "gradient", f"leave it out of --wrt, or remove `const` to differentiate with respect "
                      f"to '{name}'", declared.pos)


def _no_kept(name: str, variables: Iterable[str]) -> UsageError:
    return UsageError(f"--keep: the program has no variable '{name}'",
                      did_you_mean(name, variables) or "name variables the program assigns")


def _jacobian_mode(mode: str) -> None:
    if mode not in ("auto", "rev", "fwd"):
        raise UsageError(f"unknown mode '{mode}'", "use --mode auto, rev or fwd")


def _derivative_order(wrt: Sequence[str], order: int) -> int:
    """diff's order: --wrt x,y,x names one mixed partial, of the order of its length."""
    if len(set(wrt)) < len(wrt):
        if order not in (1, len(wrt)):
            raise UsageError(f"--wrt {','.join(wrt)} names one derivative of order {len(wrt)}, not {order}",
                             f"drop --order, or give --order {len(wrt)}")
        order = len(wrt)
    if order < 1:
        raise UsageError(f"--order {order} is not supported", "give an order of 1 or more")
    return order


def differentiable_inputs(node: Node) -> set[Node]:
    """Every node a gradient flows to from node: its differentiable inputs, transitively."""
    seen: set[Node] = set()
    stack = list(node.inputs)
    while stack:
        current = stack.pop()
        if current in seen or not current.requires_grad:
            continue
        seen.add(current)
        stack.extend(current.inputs)
    return seen


def _partial(output: Node, targets: Sequence[Node], partial: tuple[int, ...], memo: dict[tuple[int, ...], dict],
             names: Sequence[str]) -> Node:
    """∂ⁿoutput/∂targets[partial[0]]…∂targets[partial[-1]] as a graph node, by differentiating the derivatives again
    (create_graph); `memo` holds each differentiated prefix's first derivatives, so shared prefixes are taken once."""
    node = output
    for depth, index in enumerate(partial):
        prefix = partial[:depth]
        found = memo.get(prefix)
        if found is None:
            if node.shape != ():  # a derivative by a tensor variable, differentiated again
                name = names[partial[depth - 1]]
                raise UsageError(f"--order {len(partial)} needs scalar variables; '{name}' has shape "
                                 f"{tuple(node.shape)}", f"use `gradcalc hessian --wrt {name}`")
            found = autodiff.backward(node, constant(B.scalar(1.0)), targets, create_graph=True) \
                if node.requires_grad else {}
            memo[prefix] = found
        target = targets[index]
        derivative = found.get(target)
        node = constant(B.xp.zeros(target.shape, dtype=B.dtype)) if derivative is None else derivative
    return node


def _adjoint_name(of: str, name: str, taken: set[str]) -> str:
    """d{of}_d{name}, a valid name the program does not use."""
    candidate = f"d{of}_d{name}"
    while candidate in taken:
        candidate += "_"
    taken.add(candidate)
    return candidate


def load(path: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Program:
    """Read and parse a program file."""
    return Program.from_file(path, max_depth)


def parse_program(text: str, filename: str = "<expr>") -> Program:
    """Parse program text given directly."""
    return Program(text, filename)
