"""The computation graph as the tutorials draw it: variables, local derivatives, paths.

Nodes are the program's named values (leaves, assigned variables, function
locals) and the output; the unnamed operations between them are folded into
the edges, as in the seeds' pictures: d = w3*b + w4*c has edges d → b labelled
∂d/∂b = w3. An edge's local derivative is the graph's own backward pass from d,
stopped at d's named inputs (so it is a partial derivative), read back as an
expression. `explain` multiplies the edges along every path from the output to
a variable and adds the paths up: the chain rule, which must equal autograd.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import LimitExceeded, UsageError
from . import autodiff, symbolic
from . import backend as B
from .graph import Node, constant, leaf

PATH_LIMIT = 24  # more paths than this are grouped by the adjoints of the variable's users
PATHS_CEILING = 1_000  # explain lists at most this many paths, whatever --max-paths asks
STEPS_CEILING = 100_000  # ... and at most this many steps along them in all (a path's length counts)
VIEW_LIMIT = 10_000  # a graph with more nodes is drawn with long runs collapsed, then the rest summarised
SAME_RUN = 3  # a run of one variable longer than twice this is collapsed to its last SAME_RUN + 1 nodes
SUMMARIES = ("collapsed", "omitted")  # the kinds of a node that stands for many
EXACT_COUNTS = 2**53 - 1  # the largest path count JSON readers (JavaScript's numbers) hold exactly
VALUES = ("none", "shape", "summary", "full")  # how much of a tensor's value and gradient a node's box says
DIRECTIONS = ("TB", "LR")  # the picture's layout: output at the top, or at the left
OFF_PATH = ("detached", "constant")  # the kinds no gradient reaches, drawn only when asked


@dataclass(frozen=True)
class Options:
    """What the view keeps: every node with its values in full (the default), or less, to stay readable."""

    values: str = "full"  # one of VALUES: "summary" is scalars in full, tensors as shape, min, max and norm
    focus: tuple[str, ...] = ()  # only the nodes on paths from the output to these variables
    depth: int | None = None  # only the nodes within this many edges of the output, the rest one summary
    expand: tuple[str, ...] | None = None  # the functions whose calls are drawn node by node; None: every one
    everything: bool = True  # the constants and the values cut from the graph too
    direction: str = "TB"  # one of DIRECTIONS, for the formats Graphviz and Mermaid lay out


READABLE = Options(values="summary", expand=(), everything=False)  # `gradcalc graph`'s defaults


@dataclass
class ViewNode:
    id: int
    node: Node
    label: str
    kind: str  # "output", "leaf", "computed", "detached", "constant"; or a summary: "collapsed", "omitted"
    grad_fn: str | None
    shape: tuple[int, ...]
    value: Any
    grad: Any  # ∂output/∂node (host), or None where there is none
    origin: list[str]  # loop iterations and calls that made it, outermost first
    count: int = 0  # a summary: how many of the graph's nodes it stands for
    call: str | None = None  # the function call this node is the result of, drawn as one node (not expanded)
    note: str = ""  # a summary: why its nodes are not drawn ("" past VIEW_LIMIT, where total says why)
    line: int | None = None  # the line of the statement that made it, where the caller located it (the page)
    statement: str = ""  # that statement's text


@dataclass
class ViewEdge:
    source: int  # the user (nearer the output)
    target: int  # the input
    text: str  # ∂source/∂target as an expression ("detached" for a cut edge, "constant" into a constant)
    value: Any  # its number for scalars, else None
    detached: bool = False


@dataclass
class View:
    of: str
    nodes: list[ViewNode]
    edges: list[ViewEdge]
    children: dict[int, list[ViewEdge]] = field(default_factory=dict)
    total: int = 0  # the nodes of the whole graph
    complete: bool = True  # False past VIEW_LIMIT: summary nodes stand for the rest
    options: Options = field(default_factory=Options)  # what was kept (the view's nodes are what it kept)
    hidden: int = 0  # the constants and cut values not kept (Options.everything False)

    def node_of(self, node: Node) -> ViewNode | None:
        return next((v for v in self.nodes if v.node is node and v.kind not in SUMMARIES), None)


def _origin(node: Node) -> list[str]:
    labels: list[str] = []
    context = node.origin
    while context is not None:
        outer, kind, label, index = context
        labels.append(f"iteration {index} of the {label}" if kind == "loop" else f"in {label}")
        context = outer
    return list(reversed(labels))


class _Shown:
    """Which nodes the picture shows: the named values, less those inside a function call drawn as one node.

    A call not expanded is drawn as its result: the values named inside it are folded into the
    edges from its result to its inputs, as unnamed operations are. A node made inside such a
    call is shown where its user is outside the call (it is the call's result, named or not: an
    unnamed one is labelled `f(…)`), hidden where its user is inside (the output, made by a call,
    counts as inside: its call is drawn as it).
    """

    def __init__(self, expand: tuple[str, ...] | None) -> None:
        self.expand = expand
        self.names: dict[Node, str] = {}  # the unnamed results of calls drawn as one node: f(…)

    def call(self, node: Node) -> tuple[Any, ...] | None:
        """The outermost call not expanded that node was made in, or None."""
        if self.expand is None:
            return None
        found = None
        context = node.origin
        while context is not None:
            outer, kind, label, _ = context
            if kind == "call" and label.split("(", 1)[0] not in self.expand:
                found = context
            context = outer
        return found

    def __call__(self, node: Node, user: Node) -> bool:
        """Whether node, an input of user (its immediate user, not a shown node's), is drawn."""
        call = self.call(node)
        if call is None:
            return node.name is not None
        context = user.origin
        while context is not None and context is not call:
            context = context[0]
        if context is None and node.name is None:
            self.names[node] = call[2].split("(", 1)[0] + "(…)"
        return context is None


_EVERY_NAME = _Shown(None)


def _frontier(node: Node, shown: _Shown = _EVERY_NAME) -> list[Node]:
    """The shown nodes reached from node through unnamed operations (its inputs as the tutorial draws them)."""
    found: list[Node] = []
    seen: set[Node] = set()
    stack = [(child, node) for child in reversed(node.inputs)]  # (input, its user)
    while stack:
        current, user = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if shown(current, user):
            found.append(current)
        elif current.op is not None and current.requires_grad:
            stack.extend((child, current) for child in reversed(current.inputs))
    return found


def build(run: Any, of: str, limit: int = VIEW_LIMIT, options: Options | None = None) -> View:
    """The view of the graph that made `of`, with gradients when `of` is a scalar.

    Up to `limit` nodes, every node and edge. Past it (a loop of a million iterations), long
    runs of one variable are collapsed into a summary node, and if that is not enough the
    nodes past the first `limit` (breadth first) into one more: the work done for the
    picture (labels, local derivatives, values) is then bounded by `limit`, whatever the size
    of the graph; finding the runs and the gradients is linear in it.

    `options.expand` picks the function calls drawn node by node (None: every one); the rest of
    the options are applied by `shaped`, after.
    """
    options = options or Options()
    check_options(options)
    shown = _Shown(options.expand)
    output = run.node(of)
    order, index, inputs_of = _discover(output, shown)
    constants = frozenset(getattr(run, "constants", {}).values())  # `const N = 4`: data, not a cut value
    if len(order) > limit:
        view = _summarised(of, output, order, inputs_of, max(limit, 2),  # the output and a summary, at least
                           getattr(run, "tape", None), shown.names)
    else:
        grads = _gradients(output, order, getattr(run, "tape", None))
        nodes = [_view_node(i, node, of, node is output, grads, shown.names) for i, node in enumerate(order)]
        edges: list[ViewEdge] = []
        for node, children in inputs_of.items():
            edges.extend(_edges(node, index[node], children, index, of, output, shown.names))
        view = _view(of, nodes, edges, len(order), complete=True)
    for v in view.nodes:
        call = shown.call(v.node) if v.kind not in SUMMARIES else None
        v.call = call[2] if call is not None else None
    view = _constants_marked(view, constants)
    view.options = options
    return view


def _constants_marked(view: View, constants: frozenset[Node]) -> View:
    """The program's constants as kind "constant", and the edges into them (no gradient flows) so named."""
    if constants:
        marked = {v.id for v in view.nodes if v.node in constants and v.kind == "detached"}
        for v in view.nodes:
            if v.id in marked:
                v.kind = "constant"
        for edge in view.edges:
            if edge.target in marked:
                edge.text = "constant"
    return view


def check_options(options: Options) -> None:
    """The options' values, checked before the program runs (a UsageError names the flag)."""
    if options.values not in VALUES:
        raise UsageError(f"--detail {options.values!r} is not one of {', '.join(VALUES)}",
                         "none: names only; shape: tensors' shapes; summary: shape, min, max and norm; "
                         "full: the values themselves")
    if options.direction not in DIRECTIONS:
        raise UsageError(f"--direction {options.direction!r} is not one of {', '.join(DIRECTIONS)}",
                         "TB: the output at the top; LR: the output at the left")
    if options.depth is not None and options.depth < 1:
        raise UsageError(f"--depth must be 1 or more, got {options.depth}",
                         "--depth K keeps the nodes within K edges of the output (1: the output's inputs)")


def shaped(view: View, options: Options) -> View:
    """The view with what options leave out taken out: off-path nodes, nodes off the focus, nodes too deep."""
    view.options = options
    keep = [v.id for v in view.nodes]
    if not options.everything:
        keep = [i for i in keep if view.nodes[i].kind not in OFF_PATH]
        view.hidden = len(view.nodes) - len(keep)
    if options.focus:
        keep = _focused(view, set(keep), options.focus)
    if options.depth is None or len(keep) == 1:
        return _kept(view, keep) if len(keep) < len(view.nodes) else view
    distance = {0: 0}
    allowed = set(keep)
    frontier = [0]
    while frontier:  # breadth first from the output, along the edges between kept nodes
        following = []
        for at in frontier:
            for edge in view.children.get(at, []):
                if edge.target in allowed and edge.target not in distance:
                    distance[edge.target] = distance[at] + 1
                    following.append(edge.target)
        frontier = following
    near = [i for i in keep if distance.get(i, 0) <= options.depth]
    cut = len(keep) - len(near)
    return _kept(view, near, cut, allowed, f"deeper than --depth {options.depth}") if cut else _kept(view, near)


def _focused(view: View, allowed: set[int], focus: tuple[str, ...]) -> list[int]:
    """The nodes on some path from the output to a --focus variable, as explain's paths run (cut edges not)."""
    targets: set[int] = set()
    for name in focus:
        found = {v.id for v in view.nodes if v.label == name and v.kind not in SUMMARIES}
        if not found:
            raise UsageError(*_not_drawn(view, name, allowed))
        targets |= found & allowed
    leads = set(targets)  # the nodes with a path to a target: inputs first, so a node's targets are known
    for node in _topological(view):
        if node.id in allowed and node.id not in leads and any(
                not e.detached and e.target in leads for e in view.children.get(node.id, [])):
            leads.add(node.id)
    on_path = {0} if 0 in leads else set()
    for node in reversed(_topological(view)):  # users before their inputs: reached from the output
        if node.id in on_path:
            on_path.update(e.target for e in view.children.get(node.id, []) if not e.detached and e.target in leads)
    for name in focus:
        if not any(v.label == name and v.id in on_path for v in view.nodes):
            raise UsageError(f"--focus {name}: no gradient reaches {name} (a constant, or a value cut from the "
                             f"graph by detach or no_grad), so no path leads from {view.of} to it",
                             "focus on a variable the gradient reaches; --all draws the whole graph with it")
    return [v.id for v in view.nodes if v.id in on_path]


def _not_drawn(view: View, name: str, allowed: set[int]) -> tuple[str, str]:
    """Why --focus NAME finds no node, and what to do: a call's inside, or no such name."""
    names = sorted({v.label for v in view.nodes if v.id in allowed and v.kind not in SUMMARIES})
    calls = sorted({v.call.split("(", 1)[0] for v in view.nodes if v.call})
    hint = f"the graph of {view.of} draws {', '.join(names[:12])}" + (", ..." if len(names) > 12 else "")
    if calls:
        hint += f"; a variable inside a function is drawn with --expand {calls[0]}"
    return f"--focus {name}: no variable {name} in the graph of {view.of}", hint


def _kept(view: View, keep: list[int], cut: int = 0, allowed: set[int] | None = None, note: str = "") -> View:
    """A view of the nodes keep (in their order, numbered again); `cut` more stand behind one summary node."""
    number = {old: new for new, old in enumerate(keep)}
    nodes = []
    for new, old in enumerate(keep):
        v = view.nodes[old]
        nodes.append(ViewNode(new, v.node, v.label, v.kind, v.grad_fn, v.shape, v.value, v.grad, v.origin,
                              v.count, v.call, v.note))
    edges = [ViewEdge(number[e.source], number[e.target], e.text, e.value, e.detached)
             for e in view.edges if e.source in number and e.target in number]
    if cut and allowed is not None:
        first = next(v for v in view.nodes if v.id in allowed and v.id not in number)
        summary = len(nodes)
        nodes.append(ViewNode(summary, first.node, "…", "omitted", None, (), None, None, [], count=cut, note=note))
        into = sorted({number[e.source] for e in view.edges
                       if e.source in number and e.target in allowed and e.target not in number})
        edges.extend(ViewEdge(source, summary, "…", None) for source in into)
    shaped = _view(view.of, nodes, edges, view.total, view.complete)
    shaped.options, shaped.hidden = view.options, view.hidden
    return shaped


def _discover(output: Node, shown: _Shown) -> tuple[list[Node], dict[Node, int], dict[Node, list[Node]]]:
    """The shown nodes breadth first from the output (the picture's top-down order), and each one's inputs."""
    order: list[Node] = [output]
    index: dict[Node, int] = {output: 0}
    inputs_of: dict[Node, list[Node]] = {}
    position = 0
    while position < len(order):
        current = order[position]
        position += 1
        if current is not output and (current.op is None or not current.requires_grad):
            continue  # a leaf or a cut value: drawn, not expanded
        children = inputs_of[current] = _frontier(current, shown)
        for child in children:
            if child not in index:
                index[child] = len(order)
                order.append(child)
    return order, index, inputs_of


def _view_node(i: int, node: Node, of: str, is_output: bool, grads: dict[Node, Any],
               names: dict[Node, str]) -> ViewNode:
    return ViewNode(i, node, _label(node, of, is_output, names), _kind(node, is_output),
                    node.grad_fn or _leaf_fn(node), tuple(node.shape), B.to_host(node.value), grads.get(node),
                    _origin(node))


def _view(of: str, nodes: list[ViewNode], edges: list[ViewEdge], total: int, complete: bool) -> View:
    view = View(of, nodes, edges, total=total, complete=complete)
    for edge in edges:
        view.children.setdefault(edge.source, []).append(edge)
    return view


class _Run:
    """Consecutive nodes of one variable, drawn as one summary node; `into` is the node the run leads to."""

    def __init__(self, hidden: list[Node], into: Node) -> None:
        self.hidden, self.into = hidden, into


class _Rest:
    """The nodes past the first VIEW_LIMIT, drawn as one summary node."""

    def __init__(self, first: Node) -> None:
        self.first = first


def _summarised(of: str, output: Node, order: list[Node], inputs_of: dict[Node, list[Node]], limit: int,
                tape: list[Node] | None, names: dict[Node, str]) -> View:
    """The view of a graph of more than `limit` nodes: long runs collapsed, then the rest summarised."""
    def name(node: Node) -> str:
        return _label(node, of, node is output, names)

    # 1. Runs of one variable (loop iterations, y = f(y) lines), as the tree collapses them: a node
    # whose one differentiable input of its own name continues the run. The first nodes of a run are
    # hidden, its last SAME_RUN + 1 drawn.
    run_of: dict[Node, _Run] = {}
    walked: set[Node] = {output}
    for start in order:
        if start in walked:
            continue
        chain = [start]
        walked.add(start)
        while True:
            current = chain[-1]
            label = name(current)
            same = [c for c in inputs_of.get(current, ()) if c.requires_grad and name(c) == label]
            if len(same) != 1 or same[0] in walked:
                break
            chain.append(same[0])
            walked.add(same[0])
        steps = len(chain) - 1
        if steps >= 2 * SAME_RUN:
            found = _Run(chain[:steps - SAME_RUN], chain[steps - SAME_RUN])
            for node in found.hidden:
                run_of[node] = found
    # 2. What is left, breadth first from the output; a run leads only to where it ends.
    items: list[Any] = [output]
    seen: set[Any] = {output}
    targets_of: dict[Any, dict[Any, Node]] = {}  # item -> {its target item: the input standing for it}
    position = 0
    while position < len(items):
        item = items[position]
        position += 1
        targets: dict[Any, Node]
        if isinstance(item, _Run):
            targets = {item.into: item.into}
        else:
            children = inputs_of.get(item)
            if children is None:
                continue
            targets = {}
            for child in children:
                targets.setdefault(run_of.get(child, child), child)
        targets_of[item] = targets
        for target in targets:
            if target not in seen:
                seen.add(target)
                items.append(target)
    # 3. Still too many: the nodes past the first `limit` (less one for the summary) become one.
    rest: _Rest | None = None
    if len(items) > limit:
        first = items[limit - 1]
        rest = _Rest(first.hidden[0] if isinstance(first, _Run) else first)
        items = items[:limit - 1]
    index: dict[Any, int] = {item: i for i, item in enumerate(items)}
    real = [item for item in items if isinstance(item, Node)]
    grads = _gradients(output, real, tape)
    nodes: list[ViewNode] = []
    for i, item in enumerate(items):
        if isinstance(item, _Run):
            first = item.hidden[0]
            nodes.append(ViewNode(i, first, name(first), "collapsed", None, tuple(first.shape), None, None,
                                  _origin(first), count=len(item.hidden)))
        else:
            nodes.append(_view_node(i, item, of, item is output, grads, names))
    if rest is not None:
        shown = len(real) + sum(len(item.hidden) for item in items if isinstance(item, _Run))
        nodes.append(ViewNode(len(items), rest.first, "…", "omitted", None, (), None, None, [],
                              count=len(order) - shown))
    edges: list[ViewEdge] = []
    for item in items:
        targets = targets_of.get(item, {})
        if not targets:
            continue
        drawn = {child: index[target] for target, child in targets.items() if target in index}
        source = index[item]
        user = item.hidden[-1] if isinstance(item, _Run) else item  # out of a run: its last hidden node's edge
        edges.extend(_edges(user, source, inputs_of[user], drawn, of, output, names))
        if rest is not None and len(drawn) < len(targets):
            edges.append(ViewEdge(source, len(items), "…", None))
    return _view(of, nodes, edges, len(order), complete=False)


def _label(node: Node, of: str, is_output: bool, names: dict[Node, str]) -> str:
    return of if is_output else node.name or names.get(node, "?")


def _kind(node: Node, is_output: bool) -> str:
    if is_output:
        return "output"
    if not node.requires_grad:
        return "detached"
    return "leaf" if node.op is None else "computed"


def _leaf_fn(node: Node) -> str | None:
    return "AccumulateGrad" if node.op is None and node.requires_grad else None


def _gradients(output: Node, order: list[Node], tape: list[Node] | None) -> dict[Node, Any]:
    """∂output/∂node for the nodes drawn; the run's tape, when there is one, spares backward a search."""
    if output.shape != () or not output.requires_grad:
        return {}
    targets = [n for n in order if n.requires_grad]
    found = autodiff.backward(output, B.xp.ones((), dtype=B.dtype), targets, tape=tape)
    return {node: B.to_host(g) for node, g in found.items()}


def _edges(node: Node, source: int, children: list[Node], drawn: dict[Node, int], of: str,
           output: Node, names: dict[Node, str]) -> list[ViewEdge]:
    """∂node/∂child for each drawn input: the backward pass from node, stopped at all its inputs.

    `children` are node's inputs as the picture shows them; `drawn` maps those to draw to their ids.
    """
    differentiable = [c for c in children if c.requires_grad and c in drawn]
    edges = [ViewEdge(source, drawn[c], "detached", None, detached=True)
             for c in children if not c.requires_grad and c in drawn]
    if not differentiable or not node.requires_grad:
        return edges
    scalar = node.shape == ()
    seed = constant(B.scalar(1.0)) if scalar else leaf(B.xp.ones(node.shape, dtype=B.dtype), "g")
    partials = autodiff.backward(node, seed, differentiable, create_graph=True, stop=frozenset(children))
    symbols = {c: _label(c, of, c is output, names) for c in children}
    taken = set(symbols.values())
    symbols[node] = _label(node, of, node is output, names)
    if not scalar:
        symbols[seed] = "g"
    for child in differentiable:
        partial = partials.get(child)
        if partial is None:
            continue
        text = symbolic.text_of(partial, symbols, taken)
        value = B.to_host(partial.value) if scalar and child.shape == () else None
        edges.append(ViewEdge(source, drawn[child], text if scalar else f"g ↦ {text}", value))
    return sorted(edges, key=lambda e: e.target)


# --- explain: the chain rule as a sum over paths --------------------------------------------

@dataclass
class Path:
    edges: list[ViewEdge]
    value: Any


@dataclass
class Explanation:
    of: str
    wrt: str
    count: int  # number of paths from the output to the variable
    paths: list[Path]  # every path, when count <= the limit (and their steps <= STEPS_CEILING)
    groups: list[tuple[ViewEdge, Any, int]]  # else (edge user→variable, ∂output/∂user, paths through it)
    gradient: Any  # what autograd computed
    total: Any  # the sum over paths (or groups)
    steps: int = 0  # the length of all the paths together
    too_long: bool = False  # grouped although count <= the limit: the paths have more than STEPS_CEILING steps


def explain(view: View, target: Node, wrt: str, limit: int = PATH_LIMIT) -> Explanation:
    """Every path from the output to target, with the product of its local derivatives.

    Paths are counted (and their steps added up) by dynamic programming before any is listed:
    past `limit` paths, or past STEPS_CEILING steps in all, they are grouped by the users of the
    variable, which takes one line per user however many paths there are.
    """
    check_limit(limit)
    if not view.complete:
        raise LimitExceeded(f"the graph of {view.of} has {view.total:,} nodes: explain spells out the chain rule "
                            f"on graphs of up to {VIEW_LIMIT:,}",
                            "`gradcalc grad` gives the gradient, and `gradcalc graph` draws the graph with its long "
                            "runs collapsed; or explain a smaller version of the program (fewer loop iterations)")
    found = view.node_of(target)
    goal = found.id if found is not None else -1
    counts, steps = _path_counts(view, goal)
    count = counts.get(0, 0)
    total_steps = steps.get(0, 0)
    gradient = found.grad if found is not None else None
    if count <= limit and total_steps <= STEPS_CEILING:
        paths = [Path(edges, _product(edges)) for edges in _paths(view, goal, counts)] if count else []
        total = _sum([p.value for p in paths])  # no path: the empty sum, 0
        return Explanation(view.of, wrt, count, paths, [], gradient, total, total_steps)
    into = _paths_from_output(view)
    groups = []
    for edge in view.edges:
        if edge.target == goal and not edge.detached:
            user = view.nodes[edge.source]
            groups.append((edge, user.grad, into.get(edge.source, 0)))
    total = _sum([_times(g, e.value) for e, g, _ in groups])
    return Explanation(view.of, wrt, count, [], groups, gradient, total, total_steps, too_long=count <= limit)


@dataclass
class Step:
    """One step of the backward pass: a node's gradient, summed over the edges from its users."""

    node: int
    terms: list[tuple[ViewEdge, Any, Any]]  # (edge user→node, ∂output/∂user, their product or None)
    total: Any  # the sum of the products (1 for the output: the seed); None where an edge is a tensor map
    gradient: Any  # what autograd computed


def backward_steps(view: View) -> list[Step]:
    """The backward pass through the view, node by node: users before their inputs, as autograd runs it.

    Each node's gradient arrives along the edges from its users as ∂output/∂user · ∂user/∂node and the
    arrivals add up: the chain rule that `explain` spells out path by path, with the same edges and numbers.
    Empty where there are no gradients (a tensor output) or summary nodes stand for part of the graph.
    """
    if not view.complete or not view.nodes or view.nodes[0].grad is None:
        return []
    into: dict[int, list[ViewEdge]] = {}
    for edge in view.edges:
        if not edge.detached:
            into.setdefault(edge.target, []).append(edge)
    steps = []
    for node in reversed(_topological(view)):
        if node.grad is None:
            continue
        terms = [(e, view.nodes[e.source].grad, _times(view.nodes[e.source].grad, e.value))
                 for e in into.get(node.id, []) if view.nodes[e.source].grad is not None]
        total = 1.0 if node.id == 0 else _sum([product for _, _, product in terms])
        steps.append(Step(node.id, terms, total, node.grad))
    return steps


def check_limit(limit: int) -> None:
    """--max-paths: 1 to PATHS_CEILING (past it, paths are grouped; listing more would only be longer)."""
    if not 1 <= limit <= PATHS_CEILING:
        raise UsageError(f"--max-paths must be from 1 to {PATHS_CEILING:,}, got {limit:,}",
                         "past --max-paths the paths are grouped by the variables that use --wrt, one line each; "
                         f"more than {PATHS_CEILING:,} listed one by one would be too long to read")


def _topological(view: View) -> list[ViewNode]:
    """Inputs before their users: creation order is topological."""
    return sorted(view.nodes, key=lambda v: v.node.seq)


def _path_counts(view: View, goal: int) -> tuple[dict[int, int], dict[int, int]]:
    """How many paths lead from each node to the goal, and how many steps they take in all.

    Dynamic programming, inputs first: a node's paths are its edges' targets' paths, each one
    step longer. Nodes with no path to the goal are absent.
    """
    counts = {goal: 1} if goal >= 0 else {}
    steps = {goal: 0} if goal >= 0 else {}
    for node in _topological(view):
        if node.id == goal:
            continue
        count = length = 0
        for edge in view.children.get(node.id, []):
            below = 0 if edge.detached else counts.get(edge.target, 0)
            if below:
                count += below
                length += steps[edge.target] + below
        if count:
            counts[node.id] = count
            steps[node.id] = length
    return counts, steps


def _paths_from_output(view: View) -> dict[int, int]:
    into = {0: 1}
    for node in reversed(_topological(view)):  # users before their inputs
        for edge in view.children.get(node.id, []):
            if not edge.detached:
                into[edge.target] = into.get(edge.target, 0) + into.get(node.id, 0)
    return into


def _paths(view: View, goal: int, counts: dict[int, int]) -> Iterator[list[ViewEdge]]:
    """Each path from the output to the goal, depth first; only edges that lead to the goal are followed."""
    def leading(at: int) -> Iterator[ViewEdge]:
        return iter([e for e in view.children.get(at, []) if not e.detached and e.target in counts])

    if goal == 0:
        yield []  # the output is the variable: the empty path
        return
    path: list[ViewEdge] = []
    stack = [leading(0)]
    while stack:
        edge = next(stack[-1], None)
        if edge is None:
            stack.pop()
            if path:
                path.pop()
            continue
        if edge.target == goal:
            yield [*path, edge]
            continue
        path.append(edge)
        stack.append(leading(edge.target))


def _product(edges: list[ViewEdge]) -> Any:
    value: Any = 1.0
    for edge in edges:
        value = _times(value, edge.value)
    return value


def _times(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a * b


def _sum(values: list[Any]) -> Any:
    if any(v is None for v in values):
        return None
    return sum(values, 0.0)
