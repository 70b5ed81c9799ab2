"""How far (b)'s per-op target is from Python's floor: the chain on gradcalc and on two lean sketches.

    python bench/bench_floor.py [N]        # N statements `y = sin(y)*0.999 + 0.01*y*y` (default 10,000)

Measured in one process, minimum of 7 repeats (garbage collector off while timing, as the API does):

- gradcalc: build (`Program.run`: the checks, the syntax tree walked, the graph recorded), backward
  (`Run.grad`);
- lean tape: the same syntax tree walked directly into minimal nodes (value, primitive, inputs),
  then a minimal backward over the recorded order calling gradcalc's own derivative rules. No
  error positions, no shape checks, no limits, no freeing: a floor, not a design;
- fused statements: each statement compiled to a flat list of primitives, run on raw values into
  one node, and differentiated by running the rules backward through the list: compile included;
- Python code on floats: the chain written as a Python loop over float scalars (micrograd-style), the
  issue's "lean tape": Python runs the program itself, so nothing interprets a program's text;
- PyTorch eager (if installed): the same loop on a 0-d float64 tensor.

Per op = time ÷ 5N. The point: (b)'s 0.25× of PyTorch per op is about 2 µs an op for compile, run
and backward together; Python spends most of that on calls, whatever the representation.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import benchkit
import numpy as np

from gradcalc.engine import ops
from gradcalc.language import syntax as S
from gradcalc.language.parser import parse
from gradcalc.program.api import Program

LINE = "y = sin(y)*0.999 + 0.01*y*y"
OPS = 5
BINARY = {"+": ops.ADD, "-": ops.SUB, "*": ops.MUL, "/": ops.DIV, "^": ops.POW}
UNARY = {"sin": ops.SIN, "cos": ops.COS, "exp": ops.EXP, "tanh": ops.TANH}


def best(fn: Callable[[], Any], repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times)


def gradcalc_parts(text: str) -> tuple[float, float]:
    """gradcalc's build (checks, the tree walked, the graph recorded: `Program.run`) and backward."""
    program = Program(text)
    build_time = best(program.run)
    runs = [program.run() for _ in range(7)]
    backward_time = min(best(lambda r=r: r.grad(of="y", wrt=["y"], retain_graph=False), 1) for r in runs)
    return build_time, backward_time


class Lean:
    __slots__ = ("inputs", "op", "value")

    def __init__(self, value: Any, op: Any, inputs: tuple) -> None:
        self.value, self.op, self.inputs = value, op, inputs


def lean_tape(module: S.Module) -> tuple[float, float, float]:
    def evaluate(expr: S.Expr, frame: dict, tape: list[Lean]) -> Lean:
        kind = type(expr)
        if kind is S.Name:
            return frame[expr.name]
        if kind is S.Number:
            return Lean(np.float64(expr.value), False, ())  # a constant: op False, no gradient
        if kind is S.Binary:
            x, y = evaluate(expr.left, frame, tape), evaluate(expr.right, frame, tape)
            prim = BINARY[expr.op]
            node = Lean(prim.forward(x.value, y.value), prim, (x, y))
        else:
            x = evaluate(expr.args[0], frame, tape)
            prim = UNARY[expr.name]
            node = Lean(prim.forward(x.value), prim, (x,))
        tape.append(node)
        return node

    def run() -> tuple[dict, list[Lean]]:
        tape: list[Lean] = []
        frame: dict = {}
        for stmt in module.body:
            if not frame:  # the leaf: op None
                frame[stmt.name] = frame["_leaf"] = Lean(np.float64(stmt.value.value), None, ())
                continue
            frame[stmt.name] = evaluate(stmt.value, frame, tape)
        return frame, tape

    def backward(output: Lean, tape: list[Lean]) -> dict:
        grads = {output: np.float64(1.0)}
        for node in reversed(tape):
            g = grads.pop(node, None)
            if g is None:
                continue
            inputs = node.inputs
            for i, parent in enumerate(inputs):
                if parent.op is not False:  # one or two arguments, passed directly (a *args call costs 3x)
                    rule = node.op.vjps[i]
                    contribution = rule(ops.numeric, g, node.value, inputs[0].value, inputs[1].value) \
                        if len(inputs) == 2 else rule(ops.numeric, g, node.value, inputs[0].value)
                    total = grads.get(parent)
                    grads[parent] = contribution if total is None else total + contribution
        return grads

    run_time = best(run)
    recorded = [run() for _ in range(7)]
    backward_time = min(best(lambda r=r: backward(r[0]["y"], r[1]), 1) for r in recorded)
    frame, tape = recorded[0]
    return run_time, backward_time, float(backward(frame["y"], tape)[frame["_leaf"]])


def fused(module: S.Module) -> tuple[float, float, float]:
    def compile_statement(expr: S.Expr) -> tuple[list, list[str], list]:
        code: list = []
        names: list[str] = []
        constants: list = []

        def walk(e: S.Expr) -> tuple[str, int]:
            if type(e) is S.Name:
                if e.name not in names:
                    names.append(e.name)
                return "n", names.index(e.name)
            if type(e) is S.Number:
                constants.append(np.float64(e.value))
                return "c", len(constants) - 1
            if type(e) is S.Binary:
                operands = (walk(e.left), walk(e.right))
                code.append((BINARY[e.op], operands))
            else:
                operands = (walk(e.args[0]),)
                code.append((UNARY[e.name], operands))
            return "r", len(code) - 1

        walk(expr)
        base = {"n": 0, "c": len(names), "r": len(names) + len(constants)}
        return [(p, p.forward, p.vjps, tuple(base[k] + i for k, i in operands)) for p, operands in code], \
            names, constants

    def run() -> dict:
        frame: dict = {}
        for stmt in module.body:
            if not frame:  # the leaf
                frame[stmt.name] = frame["_leaf"] = Lean(np.float64(stmt.value.value), None, ())
                continue
            code, names, constants = compile_statement(stmt.value)
            inputs = tuple(frame[name] for name in names)
            registers = [x.value for x in inputs] + constants
            for _, forward, _, where in code:
                registers.append(forward(*[registers[i] for i in where]))
            frame[stmt.name] = Lean(registers[-1], (code, registers, len(names)), inputs)
        return frame

    def backward(output: Lean) -> dict:
        grads = {output: np.float64(1.0)}
        node = output
        while node.inputs:
            g = grads.pop(node)
            code, registers, n_inputs = node.op
            base = len(registers) - len(code)
            adjoint: list = [None] * len(registers)
            adjoint[-1] = g
            for k in range(len(code) - 1, -1, -1):
                _, _, vjps, where = code[k]
                gk = adjoint[base + k]
                if gk is None:
                    continue
                args = [registers[i] for i in where]
                for j, i in enumerate(where):
                    if i < n_inputs or i >= base:
                        contribution = vjps[j](ops.numeric, gk, registers[base + k], *args)
                        adjoint[i] = contribution if adjoint[i] is None else adjoint[i] + contribution
            for j, parent in enumerate(node.inputs):
                if adjoint[j] is not None:
                    total = grads.get(parent)
                    grads[parent] = adjoint[j] if total is None else total + adjoint[j]
            node = node.inputs[0]
        return grads

    run_time = best(run)
    outputs = [run() for _ in range(7)]
    backward_time = min(best(lambda o=o: backward(o["y"]), 1) for o in outputs)
    return run_time, backward_time, float(backward(outputs[0]["y"])[outputs[0]["_leaf"]])


def python_code_tape(n: int) -> tuple[float, float, float]:
    """The chain written as Python code over float scalars, micrograd-style: no program text to interpret.

    This is what "a lean tape in Python does ~0.5 µs an op" measures: Python itself runs the program,
    so nothing dispatches on a syntax tree. gradcalc's programs are text; this is a bound, not an option.
    """
    import math

    class Scalar:
        __slots__ = ("inputs", "partials", "value")

        def __init__(self, value: float, inputs: tuple = (), partials: tuple = ()) -> None:
            self.value, self.inputs, self.partials = value, inputs, partials

    def run() -> tuple[Scalar, Scalar, list[Scalar]]:
        tape: list[Scalar] = []
        record = tape.append
        first = y = Scalar(0.5)
        for _ in range(n):  # y = sin(y)*0.999 + 0.01*y*y, one Scalar an op
            s = Scalar(math.sin(y.value), (y,), (math.cos(y.value),))
            a = Scalar(s.value * 0.999, (s,), (0.999,))
            b = Scalar(0.01 * y.value, (y,), (0.01,))
            c = Scalar(b.value * y.value, (b, y), (y.value, b.value))
            y = Scalar(a.value + c.value, (a, c), (1.0, 1.0))
            record(s), record(a), record(b), record(c), record(y)
        return first, y, tape

    def backward(output: Scalar, tape: list[Scalar]) -> dict[Scalar, float]:
        grads = {output: 1.0}
        for node in reversed(tape):
            g = grads.pop(node, None)
            if g is not None:
                for parent, partial in zip(node.inputs, node.partials):
                    grads[parent] = grads.get(parent, 0.0) + g * partial
        return grads

    run_time = best(run)
    recorded = [run() for _ in range(7)]
    backward_time = min(best(lambda r=r: backward(r[1], r[2]), 1) for r in recorded)
    first, output, tape = recorded[0]
    return run_time, backward_time, backward(output, tape)[first]


def torch_per_op(n: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None

    return best(lambda: benchkit.torch_chain(torch, n), 5) / (OPS * n)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    text = "y = 0.5\n" + (LINE + "\n") * n
    module = parse(text)
    per_op = 1e6 / (OPS * n)
    build_time, backward_time = gradcalc_parts(text)
    lean_run, lean_backward, lean_gradient = lean_tape(module)
    fused_run, fused_backward, fused_gradient = fused(module)
    code_run, code_backward, code_gradient = python_code_tape(n)
    gradient = float(Program(text).run().grad(of="y", wrt=["y"]).grads["y"])
    agree = all(abs(g - gradient) <= 1e-9 * max(1.0, abs(gradient))
                for g in (lean_gradient, fused_gradient, code_gradient))
    reference = torch_per_op(n)
    parts = f"build {build_time * per_op:.2f}, backward {backward_time * per_op:.2f}"
    rows = [("gradcalc: build + backward", build_time + backward_time, parts),
            ("lean tape (no compile; a floor)", lean_run + lean_backward,
             f"run {lean_run * per_op:.2f}, backward {lean_backward * per_op:.2f}"),
            ("fused statements (compile included)", fused_run + fused_backward,
             f"compile+run {fused_run * per_op:.2f}, backward {fused_backward * per_op:.2f}"),
            ("Python code on floats (no program to interpret)", code_run + code_backward,
             f"run {code_run * per_op:.2f}, backward {code_backward * per_op:.2f}")]
    print(f"chain N={n:,}, µs an op (min of 7)" + (f"; PyTorch eager {reference * 1e6:.2f} µs an op" if reference
                                                   else "; PyTorch not installed")
          + f"; ∂y/∂y₀ of the sketches {'agrees' if agree else 'DIFFERS'} with gradcalc's ({gradient:.6g})")
    print("| implementation | µs an op | ÷ PyTorch | parts (µs an op) |\n|---|---|---|---|")
    for name, seconds, parts in rows:
        ratio = f"{seconds / (OPS * n) / reference:.2f}×" if reference else "n/a"
        print(f"| {name} | {seconds * per_op:.2f} | {ratio} | {parts} |")


if __name__ == "__main__":
    main()
