"""Reverse mode: the backward pass as a function returning {node: gradient}.

Gradients live in a local dict, never on the nodes, so backward can run any
number of times. Nodes are visited in reverse creation order (creation order is
topological), which needs no recursion: a chain of a million nodes is fine. A run
keeps that order as it records (its tape); other graphs are searched and sorted.
Only the rules of nodes on a path from a target to the output run.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import GradcalcError, UsageError, ValueProblem
from . import backend as B
from . import batching, graph, ops
from .graph import Node, Primitive, Released, constant, operation_error


def _plan(output: Node, targets: set[Node], stop: frozenset[Node], tape: list[Node] | None,
          leaves: Sequence[Node] | None) -> tuple[list[Node], set[Node] | None]:
    """The nodes whose rules must run, newest first, and every node a gradient flows into.

    A node's rule runs when some target leads to it (pruning, as tinygrad does); nodes in
    `stop` take a gradient but run no rule. The candidates, oldest first, are the run's
    tape up to `output` when output was recorded there, else a search from output.
    When the targets hold every leaf the tape came from, every node on it is reached from
    a target: the tape is the plan, and the set returned is None ("all that require grad").
    """
    order: list[Node] | None = None
    if tape is not None and not stop:
        end = bisect.bisect_right(tape, output.seq, key=_SEQUENCE)
        if end and tape[end - 1] is output:
            order = tape[:end]
            if leaves is not None and all(leaf in targets for leaf in leaves):
                order.reverse()
                return order, None
    if order is None:
        seen = {output}
        stack = [output]
        add, push, pop = seen.add, stack.append, stack.pop
        while stack:  # the nodes that require grad and lead to output: iterative, no recursion limit
            current = pop()
            if current in stop:
                continue
            for parent in current.inputs:
                if parent.requires_grad and parent not in seen:
                    add(parent)
                    push(parent)
        order = sorted(seen, key=_SEQUENCE)  # creation order is a topological order
    relevant = {target for target in targets if target.requires_grad}  # the rest take no gradient
    mark = relevant.add
    steps: list[Node] = []
    step = steps.append
    for node in order:  # oldest first: inputs are decided before their users
        for parent in node.inputs:
            if parent in relevant:
                mark(node)
                if node not in stop:
                    step(node)
                break
    steps.reverse()
    return steps, relevant


_SEQUENCE = operator.attrgetter("seq")  # creation order; attrgetter sorts without a Python call per node


def backward(output: Node, seed: Any, targets: Sequence[Node], create_graph: bool = False,
             retain_graph: bool = True, batched: bool = False, stop: frozenset[Node] = frozenset(),
             tape: list[Node] | None = None, leaves: Sequence[Node] | None = None) -> dict[Node, Any]:
    """The vector-Jacobian product seedᵀ·∂output/∂target for each target reachable from output.

    With create_graph the gradients are graph nodes (differentiable again: Hessians,
    symbolic derivatives); otherwise raw arrays. Unreachable targets are absent.
    Without retain_graph, each unnamed intermediate's value is freed once its rule has
    run (PyTorch frees its buffers so): the graph cannot be differentiated again.
    With batched the seed is a `batching.Batched` stack of seeds, all carried in one pass.
    Nodes in `stop` are treated as leaves: their rules do not run (local partial derivatives).
    `tape` is the run's record of nodes in creation order (graph.tape), if output comes from one,
    and `leaves` every leaf that requires grad the run made (state.made).
    """
    if not output.requires_grad:
        return {output: seed} if output in targets else {}
    target_set = set(targets)
    steps, relevant = _plan(output, target_set, stop, tape, leaves)
    ns: Any = ops if create_graph else batching.namespace if batched else ops.numeric
    grads: dict[Node, Any] = {output: seed}
    get, pop = grads.get, grads.pop
    owned: set[Node] = set()  # nodes whose gradient is a sum this pass allocated: safe to add into in place
    free = not retain_graph
    scalar = None if create_graph or batched else B.dtype  # the NumPy scalar type of results (not on CuPy)
    # A first-order pass records nothing; a differentiable one (create_graph) records its own graph.
    with graph.recording_as(create_graph), B.errstate():
        for node in steps:
            # Free each gradient once used, as PyTorch frees buffers; keep the targets'.
            g = get(node) if node in target_set else pop(node, None)
            if g is None:
                continue
            op: Primitive = node.op  # type: ignore[assignment]  # a plan holds no leaves: every node has an op
            inputs = node.inputs
            if create_graph:
                args: Any = inputs
                ans = node
            else:
                ans = node.value
                # One or two inputs, nearly every node: a tuple made directly costs a third of a list
                # comprehension.
                if len(inputs) == 2:
                    x, y = inputs
                    args = (x.value, y.value)
                elif len(inputs) == 1:
                    args = (inputs[0].value,)
                else:
                    args = [parent.value for parent in inputs]
            if node.params:
                args = [*args, *node.params]
            n = len(args)
            vjps = op.vjps
            i = -1
            for parent in inputs:
                i += 1
                # None: no gradient (where's condition); relevant None: all that require grad are
                rule = vjps[i]
                if rule is not None and (parent.requires_grad if relevant is None else parent in relevant):
                    try:
                        # Two or one arguments passed as such: a call with *args costs three times as much,
                        # and on a scalar chain backward is mostly these calls (benchmark (b)).
                        if n == 2:
                            contribution = rule(ns, g, ans, args[0], args[1])
                        elif n == 1:
                            contribution = rule(ns, g, ans, args[0])
                        else:
                            contribution = rule(ns, g, ans, *args)
                        # A number (a NumPy scalar) is its input's shape, (), and immutable: it needs no
                        # unbroadcasting and no ownership, and its input is no tensor worth freeing.
                        # Scalar chains are where backward's per-node overhead shows (benchmark (b)).
                        if contribution.__class__ is scalar:
                            total = get(parent)
                            grads[parent] = contribution if total is None else total + contribution
                            continue
                        if op.broadcasts and contribution.shape != parent.value.shape:
                            contribution = ns.sum_to(contribution, parent.value.shape)
                    except (GradcalcError, ValueError, ArithmeticError, MemoryError) as exc:  # singular, memory
                        error = exc if isinstance(exc, GradcalcError) else operation_error(op, inputs, exc)
                        if "singular" in error.message:  # the rule's inverse, not one the program wrote
                            error = ValueProblem(
                                f"the derivative of {op.name} needs the inverse of a singular matrix",
                                f"{op.name}'s rule goes through the inverse (det: det(A)·A⁻ᵀ), which a singular "
                                "matrix does not have; move its values off the singular point")
                        raise error from None
                    # Anything else (a TypeError, an AttributeError) is a bug in a rule: exit 3, not "bad input".
                    total = get(parent)
                    if total is None:
                        grads[parent] = contribution
                        # An array the rule has just made (not g passed through, nor a view of it, nor a
                        # scalar) is the sum's own: later uses add into it.
                        if not create_graph and contribution is not g and getattr(contribution, "ndim", None):
                            flags = getattr(contribution, "flags", None)
                            if flags is not None and flags.owndata and getattr(flags, "writeable", True):
                                owned.add(parent)
                    elif parent in owned and contribution.__class__ is not batching.Batched:
                        total += contribution  # a node used many times: no new array per use (a batch: a new one)
                    else:
                        grads[parent] = total = total + contribution
                        if not create_graph and getattr(total, "ndim", None):  # an array, not a NumPy scalar
                            owned.add(parent)
                # Only intermediates are freed (not leaves, nor the constants each rule skips), and only
                # tensors: scalars cost nothing to keep, less than a Released in their place.
                if free and parent.op is not None and parent.name is None and parent.value.ndim:
                    _free_spent_input(parent)
            if ans.__class__ is not scalar and free and node.name is None and ans.ndim:  # a number: 1 test
                _free_spent(node)
    return {target: grads[target] for target in targets if target in grads}


def compiled_backward(output: Node, targets: Sequence[Node], tape: list[Node] | None, leaves: Sequence[Node] | None,
                      index: Mapping[Node, int]) -> Callable[[Sequence[Any]], list[Any]]:
    """`grad(output, targets)` of a scalar output, written out as one straight-line function of the graph's
    values (by `index`, each node's place among them) for a graph run again with new values (program/replay.py).

    The same plan, rules, order and sums as `backward` (retain_graph, no create_graph), without the work the
    graph's shape decides once: which node has a gradient, which rules apply, which results need unbroadcasting,
    where each sum goes. It returns each target's gradient, None where no path leads there.
    """
    # seed_for's seed, a new array each pass (a copy: a tenth of np.ones's time)
    namespace: dict[str, Any] = {"ns": ops.numeric, "one": B.xp.ones((), dtype=B.dtype), "scalar": B.dtype}
    lines = ["def backward(v):", "    g0 = one.copy()"]
    grads: dict[Node, str] = {output: "g0"}  # the local holding each gradient made so far
    if output.requires_grad:
        steps, relevant = _plan(output, set(targets), frozenset(), tape, leaves)
        loaded: set[int] = set()

        def value(node: Node) -> str:
            i = index[node]
            if i not in loaded:
                loaded.add(i)
                lines.append(f"    v{i} = v[{i}]")
            return f"v{i}"

        count = 0
        for node in steps:
            g = grads.get(node)
            if g is None:
                continue
            op: Primitive = node.op  # type: ignore[assignment]  # a plan holds no leaves
            args = [value(parent) for parent in node.inputs]
            ans = value(node)
            for j, param in enumerate(node.params):
                namespace[f"p{index[node]}_{j}"] = param
                args.append(f"p{index[node]}_{j}")
            for i, parent in enumerate(node.inputs):
                rule = op.vjps[i]
                if rule is None or not (parent.requires_grad if relevant is None else parent in relevant):
                    continue
                count += 1
                namespace[f"r{count}"] = rule
                lines.append(f"    c = r{count}(ns, {g}, {ans}, {', '.join(args)})")
                shape = parent.value.shape
                if op.broadcasts and shape != node.value.shape:
                    namespace[f"s{count}"] = shape
                    lines.append(f"    if c.__class__ is not scalar and c.shape != s{count}:")
                    lines.append(f"        c = ns.sum_to(c, s{count})")
                total = grads.get(parent)
                if total is None:
                    grads[parent] = f"g{count}"
                    lines.append(f"    g{count} = c")
                else:  # backward adds in place into a sum it made: the same numbers
                    lines.append(f"    {total} = {total} + c")
        found = [grads.get(target, "None") for target in targets]
    else:
        found = ["g0" if target is output else "None" for target in targets]
    lines.append(f"    return [{', '.join(found)}]")
    exec("\n".join(lines), namespace)  # written from the graph's structure, not from input
    # Under B.errstate as backward runs, set by NumPy's decorator: less than half a `with` block's cost a call.
    function: Callable[[Sequence[Any]], list[Any]] = B.errstate()(namespace["backward"])
    return function


def _free_spent(node: Node) -> None:
    """Free an unnamed intermediate's value once its rule has run (PyTorch frees its buffers so).

    A node's users run their rules before the node does, and an unnamed intermediate has
    one user: once its own rule has run, its value is spent.
    """
    if node.value.__class__ is not Released:
        node.value = Released(node.value)


def _free_spent_input(parent: Node) -> None:
    """Free an unnamed input's value once its one user's rule has run, if its own rule will not read it."""
    op, value = parent.op, parent.value
    if op is not None and not op.reads_output and value.__class__ is not Released:
        parent.value = Released(value)


def seed_for(output: Node, vector: Any | None, name: str = "the output", create_graph: bool = False) -> Any:
    """The starting gradient: 1 for a scalar output, else the --vector (PyTorch's `gradient=`)."""
    if vector is None:
        if output.value.shape != ():
            raise UsageError(
                f"{name} has shape {tuple(output.value.shape)}, not a scalar: a gradient needs a scalar output "
                "(PyTorch: 'grad can be implicitly created only for scalar outputs')",
                f"reduce it to a scalar in the program (for example `L = sum(...)`), or pass --vector ones "
                f"(or a JSON array of shape {list(output.value.shape)}) for the vector-Jacobian product vᵀ·J",
            )
        value = B.xp.ones((), dtype=B.dtype)
    elif isinstance(vector, str) and vector == "ones":
        value = B.xp.ones(output.value.shape, dtype=B.dtype)
    else:
        value = B.asarray(vector)
        if value.shape != output.value.shape:
            raise UsageError(
                f"--vector has shape {tuple(value.shape)} but {name} has shape {tuple(output.value.shape)}",
                f"give a JSON array of shape {list(output.value.shape)}, or --vector ones",
            )
    return constant(value) if create_graph else value


def grad(output: Node, targets: Sequence[Node], vector: Any | None = None, name: str = "the output",
         create_graph: bool = False, retain_graph: bool = True, tape: list[Node] | None = None,
         leaves: Sequence[Node] | None = None) -> list[Any | None]:
    """∂output/∂target for each target (vᵀ·J with a vector); None where no path leads there."""
    found = backward(output, seed_for(output, vector, name, create_graph), targets, create_graph, retain_graph,
                     tape=tape, leaves=leaves)
    return [found.get(target) for target in targets]


def zeros_like(node: Node) -> Any:
    return B.xp.zeros(node.value.shape, dtype=B.dtype)


# --- Jacobians, forward mode, Hessians: all from the same rules ----------------------------

def jacobian_rev(output: Node, targets: Sequence[Node]) -> list[Any]:
    """Each ∂output/∂target (shape output.shape + target.shape): one batched VJP per output entry."""
    found = backward(output, batching.basis(output.shape), targets, batched=True)
    return [_block(found.get(t), output.shape, t.shape) for t in targets]


def _linear_vjp(output: Node, targets: Sequence[Node]) -> tuple[Node, dict[Node, Any]]:
    """The VJP u ↦ uᵀ·J recorded as a graph with the cotangent u as a variable.

    It is linear in u, so its VJP with respect to u is J·v: forward mode from the
    reverse rules alone (the "double-VJP" or transpose trick), with no second table.
    """
    cotangent = graph.leaf(B.xp.ones(output.shape, dtype=B.dtype), "u")
    return cotangent, backward(output, cotangent, targets, create_graph=True)


def jacobian_fwd(output: Node, targets: Sequence[Node]) -> list[Any]:
    """Each ∂output/∂target by forward mode: one batched JVP per input entry."""
    cotangent, linear = _linear_vjp(output, targets)
    blocks = []
    for target in targets:
        transposed = linear.get(target)
        if transposed is None or not transposed.requires_grad:
            blocks.append(_block(None, output.shape, target.shape))
            continue
        columns = backward(transposed, batching.basis(target.shape), [cotangent], batched=True).get(cotangent)
        if columns is None:
            blocks.append(_block(None, output.shape, target.shape))
            continue
        stack = B.xp.moveaxis(B.xp.reshape(columns.stack, (math.prod(target.shape), *output.shape)), 0, -1)
        blocks.append(B.xp.reshape(stack, output.shape + target.shape))
    return blocks


def jvp(output: Node, target: Node, tangent: Any) -> Any:
    """J·v: how output moves when target moves along v."""
    cotangent, linear = _linear_vjp(output, [target])
    transposed = linear.get(target)
    if transposed is None or not transposed.requires_grad:
        return B.xp.zeros(output.shape, dtype=B.dtype)
    result = backward(transposed, tangent, [cotangent]).get(cotangent)
    return B.xp.zeros(output.shape, dtype=B.dtype) if result is None else result


def hessian(output: Node, targets: Sequence[Node]) -> list[list[Any]]:
    """The blocks ∂²output/∂target_i∂target_j of a scalar output: reverse over reverse."""
    first = backward(output, constant(B.xp.ones((), dtype=B.dtype)), targets, create_graph=True)
    rows = []
    for target in targets:
        gradient = first.get(target)
        if gradient is None or not gradient.requires_grad:
            rows.append([_block(None, target.shape, other.shape) for other in targets])
            continue
        second = backward(gradient, batching.basis(target.shape), targets, batched=True)
        rows.append([_block(second.get(other), target.shape, other.shape) for other in targets])
    return rows


def _block(found: Any, out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> Any:
    if found is None:
        return B.xp.zeros(out_shape + in_shape, dtype=B.dtype)
    return B.xp.reshape(found.stack, out_shape + in_shape)



def hvp(output: Node, target: Node, vector: Any) -> Any:
    """H·v of a scalar output, never forming H: the gradient recorded as a graph (create_graph), then one
    reverse pass through it seeded with v, ∇(vᵀ∇output) = Hᵀv = Hv.

    Linear in the size of target, like jax.jvp(jax.grad(f)). Forward over reverse (`jvp` of the gradient)
    gives the same numbers, but this engine's forward mode is itself two reverse passes (the transpose
    trick), so it costs a third pass: 1.6x this at n = 10^6 (bench/bench_hvp.py).
    """
    first = backward(output, constant(B.xp.ones((), dtype=B.dtype)), [target], create_graph=True).get(target)
    if first is None or not first.requires_grad:
        return B.xp.zeros(target.shape, dtype=B.dtype)
    found = backward(first, vector, [target]).get(target)
    return B.xp.zeros(target.shape, dtype=B.dtype) if found is None else found


def _finite(value: Any) -> bool:
    return bool(B.xp.isfinite(value).all())


def nonfinite_origins(output: Node, seed: Any, targets: Sequence[Node], limit: int = 5
                      ) -> list[tuple[Node, int, Any, Any]]:
    """Where a backward pass first makes a NaN or an infinity out of finite numbers: for each such rule,
    (node, index of the input it differentiates by, the gradient g reaching node, what the rule made).

    A slow twin of `backward` for diagnosis only (every contribution is checked): it runs after a pass
    whose gradients were not finite, on a graph that kept every value.
    """
    steps, relevant = _plan(output, set(targets), frozenset(), None, None)
    grads: dict[Node, Any] = {output: seed}
    found: list[tuple[Node, int, Any, Any]] = []
    ns: Any = ops.numeric
    with graph.recording_as(False), B.errstate():
        for node in steps:
            g = grads.get(node)
            if g is None:
                continue
            op: Primitive = node.op  # type: ignore[assignment]  # a plan holds no leaves
            args = [*(parent.value for parent in node.inputs), *node.params]
            clean = _finite(g) and _finite(node.value) and all(_finite(parent.value) for parent in node.inputs)
            for i, parent in enumerate(node.inputs):
                rule = op.vjps[i]
                if rule is None or not (parent.requires_grad if relevant is None else parent in relevant):
                    continue
                contribution = rule(ns, g, node.value, *args)
                if op.broadcasts and B.xp.shape(contribution) != parent.value.shape:
                    contribution = ns.sum_to(contribution, parent.value.shape)
                if clean and not _finite(contribution) and len(found) < limit:
                    found.append((node, i, g, contribution))
                total = grads.get(parent)
                grads[parent] = contribution if total is None else total + contribution
    return found
