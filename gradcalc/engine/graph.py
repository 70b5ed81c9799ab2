"""Graph nodes and primitives: each computed value remembers the operation that made it.

A Node is PyTorch's tensor-with-`grad_fn`: a value, the primitive that made it,
its input nodes and static parameters (an axis, a shape). Leaves have no
primitive. Nodes carry no gradients: autodiff.backward returns them. A
Primitive is the record each primitive is declared with (primitives.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

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


if TYPE_CHECKING:  # (types only: a Protocol class costs a millisecond of start-up)
    Rule = Callable[..., Any]  # rule(ns, g, ans, *inputs, *params): the gradient of one input (rules.py)
    GradFn = str | Callable[["Node"], str]  # PyTorch's name for the backward node, or a function of the node
    Check = Callable[..., object]  # check(prim, *input_shapes): raises a GradcalcError before any evaluation

    class Rules(Protocol):
        """A primitive's rules by input position: a tuple, or rules.EachInput for any number of inputs."""

        def __getitem__(self, i: int, /) -> Rule | None: ...


# How batching.py runs a primitive on a stack of seeds:
ELEMENTWISE_BATCH = "elementwise"  # align the batch axis and broadcast (any value-by-value function)
REDUCTION_BATCH = "reduction"  # shift the axes past the batch axis
OWN_BATCH = "own"  # batching.py has a function of its own for it
UNBATCHED = "unbatched"  # no rule applies it to a gradient, only to values: the numeric function serves


class Kind:
    """A family of primitives and what its members have in common unless their record says otherwise."""

    __slots__ = ("batching", "broadcasts", "builtin", "defaults", "elementwise", "inputs", "name", "params")

    def __init__(self, name: str, *, inputs: str = "", params: tuple[str, ...] = (), defaults: tuple = (),
                 elementwise: bool = False, broadcasts: bool = False, batching: str = "",
                 builtin: str | None = None) -> None:
        self.name = name
        self.inputs = inputs  # the inputs' names ("x"); "*xs": any number
        self.params = params  # static parameters after the inputs
        self.defaults = defaults  # of the last params, when left out
        self.elementwise = elementwise  # value by value: recorded by a fast path, batched by aligning the batch axis
        self.broadcasts = broadcasts  # with NumPy broadcasting: backward unbroadcasts each input's gradient
        self.batching = batching
        self.builtin = builtin  # the builtin's help line, for a kind whose members are builtins by default

    def __repr__(self) -> str:
        return f"<kind {self.name}>"


class Primitive:
    """One primitive, declared once (primitives.py): every table of the engine and the language is made from these.

    Evaluation: `forward(*inputs, *params)`, or the array library's function of that name, rebound when
    --device switches libraries. Derivatives: `vjps`, one rule per input (None: the input gets no gradient;
    no vjps at all: the primitive has no gradient, as PyTorch's comparisons). `reads` names the values
    those rules read beyond shapes (inputs by name, `ans` for the output), so the forward pass may free
    the rest. The others say how it batches, folds a number (symbolic), prints and is called in programs.
    """

    __slots__ = ("aliases", "also", "batching", "broadcasts", "builtin", "check", "defaults", "differentiable",
                 "dunder", "fold", "forward", "frees_inputs", "grad_fn", "inputs", "kind", "latex", "library",
                 "n_inputs", "name", "operator", "params", "reads_inputs", "reads_output", "text", "vjps")

    def __init__(
        self,
        name: str,
        kind: Kind,
        forward: Callable[..., Any] | str,
        vjps: Rules | None,
        *,
        reads: str | None = None,
        inputs: str = "",
        params: tuple[str, ...] | None = None,
        grad_fn: GradFn = "",
        check: Check | None = None,
        batching: str = "",
        fold: Callable[..., Any] | None = None,
        text: str = "",
        latex: str = "",
        builtin: str | None = "",
        also: tuple[str, ...] = (),
        aliases: tuple[str, ...] = (),
        operator: str = "",
        dunder: str = "",
    ) -> None:
        self.name = name
        self.kind = kind
        # A name: the array library's own function, called directly rather than through a wrapper
        # (whose call cost a fifth of a scalar op); primitives.py rebinds it when the library changes.
        self.library = forward if isinstance(forward, str) else ""
        self.forward: Callable[..., Any] = getattr(B.xp, forward) if isinstance(forward, str) else forward
        self.inputs = inputs or kind.inputs
        names = self.inputs.split()
        self.n_inputs: int | None = None if self.inputs.startswith("*") else len(names)  # None: any number
        self.params = kind.params if params is None else params  # static parameters after the inputs
        self.defaults = kind.defaults  # of the last params, when left out
        self.grad_fn = grad_fn or f"{name.capitalize()}Backward0"
        self.check = check  # shape precondition, checked as the node is recorded
        self.batching = batching or kind.batching
        self.broadcasts = kind.broadcasts  # backward sums each input's gradient back to its shape
        self.vjps: Rules = () if vjps is None else vjps
        self.differentiable = vjps is not None  # False: gradient zero everywhere it exists (<, ==)
        self.fold = fold  # the function on Python floats: symbolic folds f(2) to a number
        self.text = text  # gradcalc syntax where that is not a call by name: an operator (<) or a word (and)
        # LaTeX: a template with {} for the argument (elementwise), the relation (comparisons), the
        # connective (logic) or the operator (reductions); "" for \operatorname{name}.
        self.latex = latex
        self.builtin = kind.builtin if builtin == "" else builtin  # the builtin's help line; None: not a builtin
        self.also = also  # more names programs may call it by (ln, σ)
        self.aliases = aliases  # more names in the ops, numeric and batched namespaces (power, abs_)
        self.operator = operator  # how programs write it (+), as shape errors quote it
        self.dunder = dunder  # Node's Python operator (add: __add__ and __radd__)
        self.reads_inputs: frozenset[int] | None = None  # None: every input
        self.reads_output = True
        self.frees_inputs = False  # some input is never read by the rules: recording may free it
        if self.differentiable:
            if reads is None:
                raise ValueError(f"primitive {name}: say which values its rules read (reads='x ans', or '')")
            read = reads.split()
            unknown = set(read) - {*names, "ans", self.inputs.lstrip("*")}
            if unknown:
                raise ValueError(f"primitive {name} reads {sorted(unknown)}, which are not among its inputs "
                                 f"({self.inputs}) or ans")
            if isinstance(vjps, tuple) and len(vjps) != self.n_inputs:
                raise ValueError(f"primitive {name} has {len(vjps)} rules for {self.n_inputs} inputs")
            self.reads_output = "ans" in read
            if self.n_inputs is not None:
                self.reads_inputs = frozenset(i for i, n in enumerate(names) if n in read)
                self.frees_inputs = len(self.reads_inputs) < self.n_inputs
            elif self.inputs.lstrip("*") not in read:  # variadic, reading none of them
                self.reads_inputs = frozenset()
                self.frees_inputs = True

    @property
    def names(self) -> tuple[str, ...]:
        """Its names in the ops, numeric and batched namespaces."""
        return (self.name, *self.aliases)

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

    if TYPE_CHECKING:
        # The operators are ops.py's recording functions themselves, set on the class there (a method
        # here that called them would cost a call per operation, on a scalar op a fifth of its time).
        def __add__(self, other: Any) -> Node: ...
        def __radd__(self, other: Any) -> Node: ...
        def __sub__(self, other: Any) -> Node: ...
        def __rsub__(self, other: Any) -> Node: ...
        def __mul__(self, other: Any) -> Node: ...
        def __rmul__(self, other: Any) -> Node: ...
        def __truediv__(self, other: Any) -> Node: ...
        def __rtruediv__(self, other: Any) -> Node: ...
        def __pow__(self, other: Any) -> Node: ...
        def __rpow__(self, other: Any) -> Node: ...
        def __matmul__(self, other: Any) -> Node: ...
        def __rmatmul__(self, other: Any) -> Node: ...
        def __neg__(self) -> Node: ...
        def __getitem__(self, key: Any) -> Node: ...
        @property
        def T(self) -> Node: ...


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


def finite(value: Any) -> bool:
    """No NaN and no infinity in the value (a released one has nothing left to look at: finite)."""
    return value.__class__ is not Released and bool(B.xp.isfinite(value).all())


# On only while the interpreter runs a program: there an unnamed node is a temporary with
# exactly one user. Nodes made elsewhere (by a differentiable backward, or by hand
# through the API) may be shared, so their values are never freed.
release_temporaries = False

# While the interpreter runs a program: every node recorded that requires grad, in creation order.
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


class keeping_temporaries:  # (used as a function: `with graph.keeping_temporaries():`)
    """No value freed for a block inside a run: a backward recorded there (diff(u, x)) may read a gradient
    twice, and the run frees the temporaries it expects no rule to read."""

    __slots__ = ("saved",)

    def __enter__(self) -> None:
        global release_temporaries
        self.saved, release_temporaries = release_temporaries, False

    def __exit__(self, *exc: object) -> None:
        global release_temporaries
        release_temporaries = self.saved


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
    number: float


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
    if isinstance(exc, IndexError) and "number of dimensions" in text:  # x[None, None, ...]: NumPy's 64
        return ValueProblem(f"indexing {shapes} would make more dimensions than NumPy allows: {text}",
                            "use fewer None (new axes) in the index, or reshape")
    if isinstance(exc, IndexError):
        return ValueProblem(f"index out of range for shape {shapes}: {text}",
                            "indices run from 0 to size-1 (or -size to -1)")
    if isinstance(exc, MemoryError):
        return out_of_memory()
    return ShapeError(f"{prim.name} cannot combine shapes {shapes}", text)
