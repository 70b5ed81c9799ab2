"""Where a NaN or an infinity comes from: the operation that made one out of finite numbers.

Checking every value as a program runs would slow every run, so nothing is checked until a run's
variables (or a gradient) hold a NaN or an infinity. Then the program runs again with every value
kept and each expression's node noted (`Locating`), and the first operations that turned finite
inputs into a non-finite result are named: their line and column, the operation, its inputs, the
pass (forward, or backward for a gradient) and, for the known traps, the known remedy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine import autodiff, graph
from ..engine import backend as B
from ..engine.graph import Node
from ..errors import GradcalcError, Source
from ..language import syntax as S
from .interpreter import _BINARY, Frame, Interpreter, Limits, execute, make_context
from .notation.juxtaposition import juxtaposed

if TYPE_CHECKING:
    from .api import Run

LIMIT = 5  # origins reported at most, per pass: the first few say where to look


@dataclass
class Anomaly:
    """One place where a NaN or an infinity started."""

    stage: str  # "forward" or "backward"
    kind: str  # "NaN" or "inf"
    line: int
    column: int
    statement: str  # the source line
    operation: str  # as written: sqrt(…), '/'
    inputs: list[str]  # "a = 0", or the value
    gradient: str | None  # backward: the gradient that reached the operation
    hint: str
    wrt: str | None = None  # backward: the input whose gradient the rule made

    def text(self, filename: str) -> str:
        """The warning as one paragraph."""
        where = f"{filename}:{self.line}:{self.column}"
        reached = f", with the gradient {self.gradient} reaching it" if self.gradient is not None else ""
        made = f"its gradient with respect to {self.wrt}" if self.stage == "backward" else "its value"
        inputs = f"input{'s' if len(self.inputs) > 1 else ''} {', '.join(self.inputs)}"
        return (f"{where}: {self.kind} first made in the {self.stage} pass by {self.operation} in "
                f"`{self.statement.strip()}`: from the finite {inputs}{reached}, {made} is {self.kind}. "
                f"{self.hint}")

    def doc(self, filename: str) -> dict[str, Any]:
        return {"kind": "anomaly", "pass": self.stage, "value": self.kind, "line": self.line, "column": self.column,
                "statement": self.statement.strip(), "operation": self.operation, "inputs": self.inputs,
                "gradient": self.gradient, "wrt": self.wrt, "hint": self.hint, "message": self.text(filename)}


def _kind(value: Any) -> str:
    if bool(B.xp.isnan(value).any()):
        return "NaN"
    return "inf" if bool((value > 0).any()) else "-inf"


class Locating(Interpreter):
    """The interpreter, noting which expression made each node and which expressions made a NaN or an
    infinity from finite inputs. Slower than the interpreter (a call per expression): it runs only after
    a run whose results were not finite."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.made_by: dict[Node, S.Expr] = {}
        self.found: list[tuple[S.Expr, Node, list[tuple[S.Expr, Node]]]] = []
        self.operands: list[list[tuple[S.Expr, Node]]] = []

    def value(self, expr: S.Expr, frame: Frame) -> Node:
        kind = type(expr)
        if kind is S.Name or kind is S.Number:
            node = super().value(expr, frame)
            if self.operands:
                self.operands[-1].append((expr, node))
            return node
        tape = graph.tape
        start = len(tape) if tape is not None else 0
        self.operands.append([])
        try:
            if isinstance(expr, S.Binary) and expr.op != "^":  # one operator at a time (the interpreter loops)
                x, y = self.value(expr.left, frame), self.value(expr.right, frame)
                try:
                    node = (_BINARY.get(expr.op) or juxtaposed(expr.left, expr.right))(x, y)
                except GradcalcError as exc:
                    raise exc.at(expr.pos) from None
            else:
                node = super().value(expr, frame)
        finally:
            operands = self.operands.pop()
        if self.operands:
            self.operands[-1].append((expr, node))
        if tape is not None:
            for made in tape[start:]:
                self.made_by.setdefault(made, expr)
        if (operands and kind is not S.Tensor and len(self.found) < LIMIT and not graph.finite(node.value)
                and all(graph.finite(operand.value) for _, operand in operands)
                and all(seen is not expr for seen, _, _ in self.found)):
            self.found.append((expr, node, operands))
        return node


def _rerun(run: Run) -> Locating:
    """The run again, every value kept and every node's expression noted."""
    options, program = run.options, run.program
    context = make_context(program.folder, options["seed"], tuple(options["allow_read"]), options["max_file_size"])
    limits = Limits(options["max_iterations"], options["max_recursion"], program.max_depth)
    executed = execute(program.module, run.inputs, context, limits, True, program.checked.get(frozenset(run.inputs)),
                       interpreter_class=Locating)
    interpreter = executed.interpreter
    assert isinstance(interpreter, Locating)
    return interpreter


def forward(run: Run) -> list[Anomaly]:
    """Where the run's NaNs and infinities started, if any of its variables holds one."""
    if all(graph.finite(node.value) for node in run.frame.values()):
        return []
    source = run.program.source
    try:
        with B.using(run.device, run.dtype, run.max_elements):
            located = _rerun(run)
            return [_forward(source, expr, node, operands) for expr, node, operands in located.found]
    except (GradcalcError, RecursionError, MemoryError):  # a diagnosis never stops the command
        return []


def backward(run: Run, of: str, wrt: Sequence[str], grads: Mapping[str, Any], vector: Any = None) -> list[Anomaly]:
    """Where a gradient's NaNs and infinities started, if any gradient holds one (vector: as grad's --vector)."""
    if all(graph.finite(B.asarray(gradient)) for gradient in grads.values()):
        return []
    source = run.program.source
    try:
        with B.using(run.device, run.dtype, run.max_elements):
            located = _rerun(run)
            frame, state = located.globals, located.state
            output = frame[of]
            targets = [state.leaves[name] if name in state.leaves else frame[name] for name in wrt]
            seed = autodiff.seed_for(output, vector)
            origins = autodiff.nonfinite_origins(output, seed, targets, LIMIT)
            return [_backward(source, located.made_by, node, index, g, made) for node, index, g, made in origins]
    except (GradcalcError, RecursionError, MemoryError, KeyError):
        return []


def _shown(value: Any) -> str:
    return B.format_value(value)


def _label(expr: S.Expr | None, node: Node) -> str:
    name = expr.name if isinstance(expr, S.Name) else node.name
    return f"{name} = {_shown(node.value)}" if name else _shown(node.value)


def _operation(expr: S.Expr) -> str:
    if isinstance(expr, S.Call):
        return f"{expr.name}(…)"
    if isinstance(expr, (S.Binary, S.Unary)):
        return f"'{expr.op}'"
    return type(expr).__name__.lower()


def _forward(source: Source, expr: S.Expr, node: Node, operands: list[tuple[S.Expr, Node]]) -> Anomaly:
    op = node.op.name if node.op is not None else ""
    values = [B.to_host(operand.value) for _, operand in operands]
    return Anomaly("forward", _kind(node.value), expr.pos.line, expr.pos.column, source.line(expr.pos.line),
                   _operation(expr), [_label(e, n) for e, n in operands], None, _forward_hint(op, values))


def _backward(source: Source, made_by: dict[Node, S.Expr], node: Node, index: int, g: Any, made: Any) -> Anomaly:
    expr = made_by.get(node)
    op = node.op.name if node.op is not None else "?"
    operation = _operation(expr) if expr is not None else op
    if expr is not None and isinstance(expr, S.Call) and expr.name != op:
        operation += f" (its {op})"  # norm(x)'s sqrt
    parent = node.inputs[index]
    line, column = (expr.pos.line, expr.pos.column) if expr is not None else (0, 0)
    inputs = [_label(None, p) for p in node.inputs]
    try:  # the where trap: a 0 gradient where the rule made NaN or inf (0·inf), entry by entry
        zero = bool(B.xp.any((g == 0) & ~B.xp.isfinite(made)))
    except ValueError:  # shapes that do not line up (a reduction's rule): all of g 0
        zero = not bool(B.xp.any(g != 0))
    wrt = parent.name or (f"its input {index + 1}" if len(node.inputs) > 1 else "its input")
    return Anomaly("backward", _kind(made), line, column, source.line(line) if line else "", operation, inputs,
                   _shown(g), _backward_hint(op, [B.to_host(p.value) for p in node.inputs], zero, expr), wrt)


def _any(condition: Any) -> bool:
    return bool(B.host.any(condition))


def _forward_hint(op: str, values: list[Any]) -> str:
    if op == "sqrt" and values and _any(values[0] < 0):
        return "sqrt of a negative number is NaN: check the sign of its argument, or use sqrt(abs(…))."
    if op == "log" and values and _any(values[0] == 0):
        return "log(0) is -inf: keep the argument above 0, for example log(x + 1e-12)."
    if op == "log" and values and _any(values[0] < 0):
        return "log of a negative number is NaN: check the sign of its argument."
    if op == "div" and len(values) == 2 and _any((values[0] == 0) & (values[1] == 0)):
        return "0/0 is NaN (a mean over nothing, a vector divided by its zero norm): add a small eps to the " \
               "denominator."
    if op == "div" and len(values) == 2 and _any(values[1] == 0):
        return "division by 0 is infinite: keep the denominator away from 0."
    if op == "exp":
        return "exp overflows past about 709 (float64) or 88 (float32): rewrite it in a stable form " \
               "(logsumexp, softplus, sigmoid)."
    return "a NaN or an infinity made here spreads to everything computed from it."


def _backward_hint(op: str, values: list[Any], zero: bool, expr: S.Expr | None) -> str:
    trap = (" The gradient reaching it is 0 (a where() branch not taken, or a mask), and 0·inf is NaN: the double-"
            "where trick keeps the branch not taken finite: where(a > 0, sqrt(where(a > 0, a, 1)), 0).") if zero else ""
    if op == "sqrt" and isinstance(expr, S.Call) and expr.args and isinstance(expr.args[0], S.Call) \
            and expr.args[0].name == "sum":
        return ("a norm written sqrt(sum(x^2)) has no derivative at x = 0 (x/sqrt(sum(x^2)) is 0/0 there): use "
                "norm(x), whose gradient at 0 is 0, or sqrt(sum(x^2) + 1e-12)." + trap)
    if op == "sqrt":
        return "sqrt's derivative 1/(2·sqrt(a)) is infinite at 0." + trap
    if op == "log":
        return "log's derivative 1/a is infinite at 0." + trap
    if op == "div":
        return "the derivative of a/b is infinite where b is 0." + trap
    if op in ("pow", "power"):
        return "a power's derivative p·a^(p-1) is infinite at a = 0 when p < 1." + trap
    return "its derivative is not finite at these values." + trap
