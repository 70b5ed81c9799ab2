"""Graph nodes and primitives: each computed value remembers the operation that made it.

A Node is PyTorch's tensor-with-`grad_fn`: a value, the primitive that made it,
its input nodes and static parameters (an axis, a shape). Leaves have no
primitive. Nodes carry no gradients: autodiff.backward returns them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import GradcalcError
from . import backend as B

_next_seq = itertools.count().__next__

# False inside no_grad { } and while a first-order backward runs: results record no history.
recording = True

# False while a claim is judged: a node recorded without history (recording off) keeps no inputs,
# so a long sum in a claim frees each partial result as soon as the next one is made.
history = True

# Where new nodes come from: None at the top level, else (outer, kind, label, index) for a loop
# iteration (index: its count or loop variable) or a function call (index: the call depth), so the
# graph view can group and collapse them.
context: tuple | None = None


class Primitive:
    """A named operation: how to evaluate it, and (from rules.py) one VJP per input."""

    __slots__ = ("broadcasts", "differentiable", "forward", "frees_inputs", "grad_fn", "n_inputs", "name",
                 "reads_inputs", "reads_output", "vjps")

    def __init__(
        self,
        name: str,
        forward: Callable[..., Any],
        n_inputs: int | None,
        grad_fn: str | Callable[[Node], str],
        broadcasts: bool = False,
        differentiable: bool = True,
    ) -> None:
        self.name = name
        self.forward = forward
        self.n_inputs = n_inputs  # None: any number (stack)
        self.grad_fn = grad_fn  # PyTorch's name for the backward node, or a function of the node
        self.vjps: Sequence[Callable[..., Any]] = ()
        self.broadcasts = broadcasts  # elementwise with NumPy broadcasting: backward unbroadcasts
        self.differentiable = differentiable  # False: gradient zero everywhere it exists (sign, <)
        # Which values the VJPs read beyond shapes (rules.py says; by default all of them):
        self.reads_inputs: frozenset[int] | None = None  # None: every input
        self.reads_output = True
        self.frees_inputs = False  # some input is never read by the rules: recording may free it

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


class Node:
    """A value in the computation graph. Made by `new_node()`, not by calling the class."""

    __slots__ = ("inputs", "name", "op", "origin", "params", "requires_grad", "seq", "value")
    inputs: tuple[Node, ...]
    name: str | None
    op: Primitive | None
    origin: Any
    params: tuple
    requires_grad: bool
    seq: int
    value: Any
    __array_ufunc__ = None  # NumPy defers to Node's operators instead of making object arrays

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def ndim(self) -> int:
        return self.value.ndim

    @property
    def is_leaf(self) -> bool:
        return self.op is None

    @property
    def grad_fn(self) -> str | None:
        """PyTorch's name for this node's backward function (None for a leaf or a constant)."""
        if self.op is None or not self.requires_grad:
            return None
        name = self.op.grad_fn
        return name if isinstance(name, str) else name(self)

    def __repr__(self) -> str:
        label = self.name or (self.op.name if self.op else "leaf")
        return f"Node({label}, shape={self.value.shape})"


class Released:
    """What stays of a temporary's value once no derivative rule needs it: its shape and dtype.

    PyTorch saves only the tensors backward needs; this is the same economy, and
    any rule that reads a released value fails loudly instead of computing nonsense.
    """

    __slots__ = ("dtype", "shape")

    def __init__(self, value: Any) -> None:
        self.shape = value.shape
        self.dtype = value.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


# On only while the builder runs a program: there an unnamed node is a temporary with
# exactly one user. Nodes made elsewhere (by a differentiable backward, or by hand
# through the API) may be shared, so their values are never freed.
release_temporaries = False

# While the builder runs a program: every node recorded that requires grad, in creation order.
# Backward walks it instead of searching the graph and sorting what it finds.
tape: list[Node] | None = None


# --- the recording state, set for a block and put back after it ----------------------------------
# Classes rather than contextlib generators: a loop enters one per run and a function call one per
# call, and __enter__/__exit__ cost a third of a generator's. Never entered per operation.

class recording_as:  # (used as a function: `with graph.recording_as(False):`)
    """`recording` (and `history`) set for a block: off in no_grad { } and in a first-order backward,
    on in a differentiable one; off with history=False while a claim is judged."""

    __slots__ = ("history", "on", "saved")

    def __init__(self, on: bool, history: bool | None = None) -> None:
        self.on = on
        self.history = history  # None: as it is

    def __enter__(self) -> None:
        global recording, history
        self.saved = recording, history
        recording = self.on
        if self.history is not None:
            history = self.history

    def __exit__(self, *exc: object) -> None:
        global recording, history
        recording, history = self.saved


class no_grad:  # (used as a function: `with graph.no_grad():`)
    """Results made in the block record no history (no_grad { } in a program); recording_as(False),
    one call cheaper."""

    __slots__ = ("saved",)

    def __enter__(self) -> None:
        global recording
        self.saved, recording = recording, False

    def __exit__(self, *exc: object) -> None:
        global recording
        recording = self.saved


class scope:  # (used as a function: `with graph.scope("call", label, depth):`)
    """`context` for a block: the nodes made in it belong to a loop iteration or a function call.

    A loop enters its scope once and moves it on with `step(index)` each iteration; the outer context
    comes back when the block ends, however it ends (a return, an error).
    """

    __slots__ = ("index", "kind", "label", "outer")

    def __init__(self, kind: str, label: str, index: Any = None) -> None:
        self.kind = kind
        self.label = label
        self.index = index  # the first index, if known on entry (a call's depth)

    def __enter__(self) -> scope:
        global context
        self.outer = context
        if self.index is not None:
            context = (self.outer, self.kind, self.label, self.index)
        return self

    def step(self, index: Any) -> None:
        """Nodes made from here on belong to iteration `index`."""
        global context
        context = (self.outer, self.kind, self.label, index)

    def pause(self) -> None:
        """Nodes made from here on belong to the outer context (a while loop's condition), until step."""
        global context
        context = self.outer

    def __exit__(self, *exc: object) -> None:
        global context
        context = self.outer


class building:  # (used as a function: `with graph.building(release) as tape:`)
    """The state while a program runs: recording, top-level context, a fresh tape (what the block yields);
    with release, unnamed temporaries' values are freed as soon as no rule will read them."""

    __slots__ = ("release", "saved")

    def __init__(self, release: bool) -> None:
        self.release = release

    def __enter__(self) -> list[Node]:
        global recording, context, release_temporaries, tape
        self.saved = recording, context, release_temporaries, tape
        recording, context, release_temporaries, tape = True, None, self.release, []
        return tape

    def __exit__(self, *exc: object) -> None:
        global recording, context, release_temporaries, tape
        recording, context, release_temporaries, tape = self.saved


def state() -> tuple:
    """The recording state, for tests: equal before and after anything that sets it for a block."""
    return recording, history, context, release_temporaries, tape


def release_unneeded(node: Node) -> None:
    """Free the values of `node`'s inputs that are unnamed temporaries no rule will read."""
    reads = node.op.reads_inputs  # type: ignore[union-attr]
    for i, parent in enumerate(node.inputs):
        op = parent.op
        # Scalars cost less than a Released: only tensors are worth freeing.
        if (parent.name is None and op is not None and not op.reads_output and reads is not None
                and i not in reads and parent.value.ndim and parent.value.__class__ is not Released):
            parent.value = Released(parent.value)


_new = object.__new__


def new_node(value: Any, op: Primitive | None = None, inputs: tuple[Node, ...] = (), params: tuple = (),
             requires_grad: bool = False, name: str | None = None, kind: type[Node] = Node) -> Node:
    """A new node; a primitive's result that requires grad is recorded on the run's tape.

    The one way nodes are made. A function, not the class's __init__: calling a class goes through
    C and a second frame, 35 ns more a node, and a scalar chain makes five nodes a statement.
    """
    self = _new(kind)
    self.value = value
    self.op = op
    self.inputs = inputs
    self.params = params
    self.requires_grad = requires_grad
    self.seq = _next_seq()  # creation order is a topological order
    self.name = name
    self.origin = context
    if requires_grad and op is not None:  # a primitive's result, recorded
        if tape is not None:
            tape.append(self)
        # Its inputs' values, where no rule will read them; a number made elementwise has numbers for
        # inputs, and only tensors are worth freeing.
        if release_temporaries and op.frees_inputs and not (op.broadcasts and value.__class__ is B.dtype):
            release_unneeded(self)
    elif not history:
        self.inputs = ()
    return self


def leaf(value: Any, name: str | None = None, requires_grad: bool = True) -> Node:
    """A user-created tensor: an input or parameter (requires_grad) or a constant."""
    return new_node(value, None, (), (), requires_grad, name)


class Literal(Node):
    """A constant made from a Python number, which it keeps: reading it needs no trip from the device."""

    __slots__ = ("number",)


def constant(value: Any) -> Node:
    """A number written in the program, or made by a rule: never differentiated."""
    if isinstance(value, Node):
        return value
    if isinstance(value, (int, float)):
        literal = new_node(B.scalar(value), kind=Literal)
        literal.number = value  # type: ignore[attr-defined]
        return literal
    return new_node(B.asarray(value))


def host_value(node: Node) -> Any:
    """A node's value as a NumPy array, for the host's decisions (an axis, a size, a branch).

    On the GPU, copying a value to the host waits for every queued kernel; a number written in the
    program (`axis=1`) is read from the node instead, so the device's queue keeps running.
    """
    return B.to_host(node.number if isinstance(node, Literal) else node.value)


def apply(prim: Primitive, inputs: tuple[Node, ...], params: tuple = ()) -> Node:
    """Evaluate a primitive on nodes and record it."""
    try:
        value = prim.forward(*[node.value for node in inputs], *params)
    except GradcalcError:
        raise
    except Exception as exc:  # NumPy's ValueError, LinAlgError, TypeError, IndexError
        raise operation_error(prim, inputs, exc) from None
    requires_grad = recording and prim.differentiable and any(x.requires_grad for x in inputs)
    return new_node(value, prim, inputs, params, requires_grad)


def operation_error(prim: Primitive, inputs: Sequence[Node], exc: Exception) -> GradcalcError:
    """A NumPy failure as a message naming the operation and the shapes."""
    from ..errors import ShapeError, ValueProblem, out_of_memory

    shapes = " and ".join(str(tuple(node.value.shape)) for node in inputs)
    text = str(exc).split("\n")[0]
    if "singular" in text.lower():
        return ValueProblem(f"{prim.name}: the matrix is singular",
                            "a singular matrix has no inverse; check its values")
    if isinstance(exc, IndexError):
        return ValueProblem(f"index out of range for shape {shapes}: {text}",
                            "indices run from 0 to size-1 (or -size to -1)")
    if isinstance(exc, MemoryError):
        return out_of_memory()
    return ShapeError(f"{prim.name} cannot combine shapes {shapes}", text)
