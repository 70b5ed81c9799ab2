"""Views for people: small pure functions that return Rich renderables (or error text)."""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.protocol import rich_cast
from rich.segment import Segment
from rich.table import Table
from rich.text import Span, Text
from rich.tree import Tree

from ..engine import backend as B
from ..engine.graph import Node
from ..inert import inert, inert_lines
from ..program.api import Gradients, Run


class Inert:
    """A view whose text cannot drive the terminal: the last guard before output.

    Text quoted from files (names, claims) is escaped where a view takes it in, so that tables keep
    their widths; this catches whatever was missed, escaping it as it is written.
    """

    def __init__(self, view: RenderableType) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.view, options):
            text = segment.text
            yield segment if segment.control or inert_lines(text) is text else \
                Segment(inert_lines(text), segment.style)


def translated(view: Any, translate: Callable[[str], str]) -> Any:
    """The view with its text as translate gives it (symbols.plain_symbols: ASCII for the symbols an encoding
    lacks), before Rich lays it out, so that each column is as wide as what will be written in it."""
    if isinstance(view, str):
        return translate(view)
    if isinstance(view, Text):
        return _translated_text(view, translate)
    if isinstance(view, Group):
        return Group(*(translated(part, translate) for part in view.renderables), fit=view.fit)
    if isinstance(view, Table):
        table = copy.copy(view)
        table.columns = []
        for each in view.columns:
            column = copy.copy(each)
            column.header = translated(each.header, translate)
            column._cells = [translated(cell, translate) for cell in each._cells]
            table.columns.append(column)
        return table
    if isinstance(view, Tree):
        tree = copy.copy(view)
        tree.label = translated(view.label, translate)
        tree.children = [translated(child, translate) for child in view.children]
        return tree
    if isinstance(view, (FittedTable, FoldedMatrix, Shown, StepLines)):
        return view.translated(translate)
    return _Translating(view, translate)


def _translated_text(text: Text, translate: Callable[[str], str]) -> Text:
    """A Text translated piece by piece between its styles' ends, each style kept on what it covered."""
    plain = text.plain
    if translate(plain) == plain:
        return text
    cuts = sorted({0, len(plain), *(span.start for span in text.spans), *(span.end for span in text.spans)})
    where, pieces, length = {0: 0}, [], 0
    for start, end in itertools.pairwise(cuts):
        piece = translate(plain[start:end])
        pieces.append(piece)
        length += len(piece)
        where[end] = length
    result = text.blank_copy("".join(pieces))
    result.spans = [Span(where[span.start], where[span.end], span.style) for span in text.spans]
    return result


class _Translating:
    """Any other renderable, translated as it renders: whatever it yields goes through translated()."""

    def __init__(self, view: Any, translate: Callable[[str], str]) -> None:
        self.view, self.translate = view, translate

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        view = rich_cast(self.view)
        if not hasattr(view, "__rich_console__"):  # a string or Text made by __rich__
            yield translated(view, self.translate)
            return
        for part in view.__rich_console__(console, options):
            yield Segment(self.translate(part.text), part.style, part.control) \
                if isinstance(part, Segment) and not part.control else translated(part, self.translate)


def shape_text(shape: tuple[int, ...]) -> str:
    return "scalar" if shape == () else "×".join(str(n) for n in shape)


def _kind(run: Run, name: str, node: Node) -> str:
    """leaf, constant, or the grad_fn that made the value (PyTorch's names)."""
    if run.leaves.get(name) is node:
        return "leaf"
    return node.grad_fn or ("constant" if not node.requires_grad else "leaf")


def _table(*columns: tuple[str, str], wrap_last: bool = False, words: bool = False) -> Table:
    """A table for people. wrap_last: its last column is words (a note, a result) that wrap to fit a
    terminal, so that a narrow one still shows every claim, verdict and number of the others whole.
    words: every column may wrap between words (an index [2, 3], a title), never inside one (a number)."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for i, (title, justify) in enumerate(columns):
        wraps = words or (wrap_last and i == len(columns) - 1)
        table.add_column(title, justify=justify, no_wrap=not wraps)  # type: ignore[arg-type]
    return table


def _loop_notes(run: Run) -> list[Text]:
    """How often each loop ran (the graph holds every iteration's operations)."""
    lines = [loop.line for loop in run.loops]
    notes = []
    for loop in run.loops:
        where = f"line {loop.line}" + (f", column {loop.column}" if lines.count(loop.line) > 1 else "")
        notes.append(Text(f"the {loop.kind} loop at {where} ran {loop.iterations:,} time"
                          f"{'s' if loop.iterations != 1 else ''}", style="dim"))
    return notes


def values_view(run: Run, full: bool = False) -> RenderableType:
    """`eval`: every variable's value, shape and how it was made."""
    rows = [[name, shape_text(node.value.shape), Shown(node.value, full), _kind(run, name, node)]
            for name, node in run.frame.items()]
    table = FittedTable((("variable", "left"), ("shape", "left"), ("value", "right"), ("made by", "left")), rows)
    return Group(table, *_loop_notes(run))


def grad_view(run: Run, result: Gradients, full: bool = False) -> RenderableType:
    """`grad`: the output's value, then each variable's value and gradient."""
    of = result.of
    indent = "\n" + " " * (len(of) + 3)  # continuation lines of a tensor line up after "L = "
    heading = Text.assemble((of, "bold"), " = ", B.format_value(result.value, full).replace("\n", indent))
    if result.value.shape:
        heading.append(f"   (shape {shape_text(result.value.shape)})", style="dim")
    column = f"vᵀ·∂{of}/∂variable" if result.vector is not None else f"∂{of}/∂variable"
    rows = []
    for name, g in result.grads.items():
        node = run.node(name, prefer_leaf=True)
        note = f"(no path from {of})" if name in result.no_path else ""
        rows.append([name, shape_text(node.value.shape), Shown(node.value, full), Shown(g, full, note)])
    table = FittedTable((("variable", "left"), ("shape", "left"), ("value", "right"), (column, "right")), rows)
    return Group(heading, Text(""), table, *_loop_notes(run))


class Shown:
    """A value in a table cell: its text as format_value writes it, and a note after it."""

    def __init__(self, value: Any, full: bool, note: str = "", translate: Callable[[str], str] | None = None) -> None:
        self.value, self.full, self.note, self.translate = value, full, note, translate

    def translated(self, translate: Callable[[str], str]) -> Shown:
        return Shown(self.value, self.full, self.note, translate)

    @cached_property
    def whole(self) -> str:
        """The text at its own width (formatted once: a table may be laid out more than once)."""
        text = B.format_value(self.value, self.full)
        if self.note:  # below a tensor's rows, not after its last: the rows stay aligned
            text += ("\n" if "\n" in text else "  ") + self.note
        return text if self.translate is None else self.translate(text)

    def text(self, width: int | None = None) -> str:
        """The text, its lines re-wrapped to width where they are longer (NumPy's wrapping, narrower)."""
        text = self.whole
        if width is None or _widest(text) <= width:
            return text
        return "\n".join(line for row in _rows(text.split("\n")) for line in _wrapped(row, width))


def _rows(lines: list[str]) -> list[str]:
    """NumPy's lines joined back into rows: a row it wrapped goes on after a comma, indented past its brackets."""
    rows: list[str] = []
    lead = 0
    for line in lines:
        previous = rows[-1].rstrip() if rows else ""
        starts = not previous.endswith(",") or previous.endswith("],") or previous.strip() == "...," or \
            line.lstrip().startswith("[") or not line.strip()
        if starts:
            rows.append(line)
            lead = _lead(line)
        else:
            rows[-1] += " " + line[lead:]
    return rows


def _lead(line: str) -> int:
    """How far a row's numbers are indented: its spaces and opening brackets (a number's padding is its own)."""
    return len(line) - len(line.lstrip(" ").lstrip("["))


def _wrapped(line: str, width: int) -> list[str]:
    """A row of numbers as lines of at most width characters, broken after a comma as NumPy breaks it: the
    continuation indented past the brackets, each number whole (padded as format_value padded it)."""
    if len(line) <= width:
        return [line]
    lead = " " * _lead(line)
    pieces = line.split(", ")
    lines, current = [], pieces[0]
    for piece in pieces[1:]:
        if len(current) + 2 + len(piece) + 1 <= width:  # room for ", piece" and the comma after it
            current += ", " + piece
        else:
            lines.append(current + ",")
            current = lead + piece
    return [*lines, current]


class FittedTable:
    """A table of values that fits the width it is drawn at. Where it would not, the rows with the widest
    tensors show "(below)" and their values follow the table, one under another, wrapped to the width as
    NumPy wraps rows; where numbers alone are still too wide (many scalar columns), the columns fold into
    groups drawn one under another, each with the first column (a point's #, a variable's name), as pandas
    and R print a wide frame: a number is never cut. Piped output has no width to fit and is drawn whole."""

    def __init__(self, columns: tuple[tuple[str, str], ...], rows: list[list[Any]], wrap_last: bool = False) -> None:
        self.columns, self.rows = columns, rows
        self.wrap_last = wrap_last  # its last column is words (a point's error) that wrap: see _table

    def translated(self, translate: Callable[[str], str]) -> FittedTable:
        return FittedTable(tuple((translate(title), justify) for title, justify in self.columns),
                           [[translated(cell, translate) for cell in row] for row in self.rows], self.wrap_last)

    def _cells(self, moved: set[int]) -> list[list[Any]]:
        return [[(Text("(below)", style="dim") if i in moved else cell.whole) if isinstance(cell, Shown) else cell
                 for cell in row] for i, row in enumerate(self.rows)]

    def _width(self, cells: list[list[Any]], notes: str = "whole") -> int:
        """The table's width unwrapped: its columns' widths (_widths), and two spaces between columns."""
        widest = self._widths(cells, notes)
        return sum(widest) + 2 * (len(widest) - 1)

    def _widths(self, cells: list[list[Any]], notes: str) -> list[int]:
        """Each column's width unwrapped: its widest cell (what Rich lays out for _table's tables; measured
        here, as Rich's measuring took longer than drawing). With wrap_last, `notes` says how its last column
        counts: "whole", "wrapped" (its longest word, or NOTE_WIDTH: it wraps between words) or "below" (not
        in the table)."""
        columns = self.columns[:-1] if self.wrap_last and notes == "below" else self.columns
        widest = [max([_widest(title), *(_widest(row[j]) for row in cells)]) for j, (title, _) in enumerate(columns)]
        if self.wrap_last and notes == "wrapped":
            last = len(columns) - 1
            words = max((cell_len(word) for row in cells for word in str(row[last]).split()), default=0)
            widest[last] = min(widest[last], max(_widest(columns[last][0]), words, NOTE_WIDTH))
        return widest

    @staticmethod
    def _groups(widths: list[int], width: int) -> list[list[int]]:
        """The columns (of these widths) in groups that each fit the width beside the first column, which every
        group repeats; one group where the table fits. A group takes at least one column, fitting or not."""
        groups: list[list[int]] = []
        for j in range(1, len(widths)):
            if groups and sum(widths[i] + 2 for i in groups[-1]) + widths[j] <= width:
                groups[-1].append(j)
            else:
                groups.append([0, j])
        return groups or [[0]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        moved: set[int] = set()
        # the notes (a point's error) wrap in their column while it can have NOTE_WIDTH beside the numbers;
        # else each follows the table on its own lines, under its row's first cell
        every = set(range(len(self.rows)))
        notes = "wrapped" if not self.wrap_last or self._width(self._cells(every), "wrapped") <= width else "below"
        cells = self._cells(moved)
        while self._width(cells, notes) > width:
            widths = {i: max(_widest(cell.whole) for cell in row if isinstance(cell, Shown))
                      for i, row in enumerate(self.rows) if i not in moved and _tensors(row)}
            if not widths:  # only numbers left: nothing more can move
                break
            moved.add(max(widths, key=widths.__getitem__))
            cells = self._cells(moved)
        below = notes == "below" and any(row[-1] for row in cells)
        columns = self.columns[:-1] if notes == "below" else self.columns
        measured = self._widths(cells, notes)
        groups = self._groups(measured, width)
        for group in groups:
            if group is not groups[0]:
                yield Text("")
            # a column wider than the terminal on its own (diff's expressions) wraps between words
            table = _table(*(columns[j] for j in group),
                           wrap_last=self.wrap_last and not below and group[-1] == len(columns) - 1,
                           words=sum(measured[j] + 2 for j in group) - 2 > width)
            for row in cells:
                table.add_row(*(row[j] for j in group))
            yield table
        if below:  # a row's label, then its note, whose lines wrap under its first
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column()
            for row in cells:
                if row[-1]:
                    grid.add_row(row[0], row[-1])
            yield Text("")
            yield grid
        if moved:
            yield Text("")
        for i in sorted(moved):
            name = self.rows[i][0]
            for (title, _), cell in zip(self.columns, self.rows[i]):
                if isinstance(cell, Shown):
                    label = name if title == "value" else title.replace("variable", name)
                    if self.columns[0][0] == "#":  # a row per point (--at): which point's value this is
                        label = f"{label}  (#{name})"
                    yield Text(label, style="bold")
                    yield Text(_indented("  " + cell.text(width - 2), 2), no_wrap=True, overflow="ignore")


NOTE_WIDTH = 30  # the narrowest a column of notes is wrapped to beside the numbers


def _tensors(row: list[Any]) -> bool:
    return any(isinstance(cell, Shown) and getattr(cell.value, "ndim", 0) > 0 for cell in row)


def _widest(text: str | Text) -> int:
    """The width of a cell's widest line, in terminal columns."""
    return max(map(cell_len, (text.plain if isinstance(text, Text) else text).split("\n")))


ROWS_SHOWN, COLUMNS_SHOWN, EDGE = 24, 10, 3


def _labels(name: str, shape: tuple[int, ...]) -> list[str]:
    """y, or y[0], y[1], ... (y[0,1] for matrices): one label per entry."""
    if shape == ():
        return [name]
    return [f"{name}[{','.join(map(str, index))}]" for index in itertools.product(*(range(n) for n in shape))]


def _kept(count: int, limit: int, full: bool) -> list[int | None]:
    """Indices to show; None marks the elided middle."""
    if full or count <= limit:
        return list(range(count))
    return [*range(EDGE), None, *range(count - EDGE, count)]


def matrix_table(rows: list[str], columns: list[str], block: Any, full: bool) -> RenderableType:
    """A labelled matrix (rows: output entries, columns: input entries), large ones summarised."""
    matrix = B.to_host(block).reshape(len(rows), len(columns))
    shown_rows, shown_columns = _kept(len(rows), ROWS_SHOWN, full), _kept(len(columns), COLUMNS_SHOWN, full)
    cells = [[("⋮" if j is not None else "⋱") if i is None else
              "…" if j is None else B.format_number(float(matrix[i, j])) for j in shown_columns] for i in shown_rows]
    return FoldedMatrix(["…" if i is None else rows[i] for i in shown_rows],
                        ["…" if j is None else columns[j] for j in shown_columns], cells)


class FoldedMatrix:
    """A labelled matrix that fits the width it is drawn at: where its columns would not, they are folded into
    blocks of columns one under another (NumPy's linewidth, with labels), so that no number is cut."""

    def __init__(self, rows: list[str], columns: list[str], cells: list[list[str]]) -> None:
        self.rows, self.columns, self.cells = rows, columns, cells

    def translated(self, translate: Callable[[str], str]) -> FoldedMatrix:
        return FoldedMatrix(list(map(translate, self.rows)), list(map(translate, self.columns)),
                            [list(map(translate, row)) for row in self.cells])

    def table(self, first: int, end: int) -> Table:
        """Columns first to end (exclusive), with the row labels."""
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        table.add_column("", style="bold", no_wrap=True)
        for title in self.columns[first:end]:
            table.add_column(title, justify="right", no_wrap=True)
        for label, row in zip(self.rows, self.cells):
            table.add_row(label, *row[first:end])
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # Each column's width (its widest cell), measured once; a block takes columns while they fit.
        label = max(map(_widest, ["", *self.rows]))
        # A list, not max(title, *cells): an empty output (y = x[2:]) has no rows, and max() of one int fails.
        widths = [max([_widest(title), *(_widest(row[j]) for row in self.cells)])
                  for j, title in enumerate(self.columns)]
        first = 0
        while first < len(self.columns):
            end, used = first + 1, label + 2 + widths[first]  # at least one column a block, fitting or not
            while end < len(self.columns) and used + 2 + widths[end] <= options.max_width:
                used += 2 + widths[end]
                end += 1
            if first:
                yield Text("")
            yield self.table(first, end)
            first = end


def _size_note(rows: int, columns: int, full: bool) -> list[Text]:
    if full or (rows <= ROWS_SHOWN and columns <= COLUMNS_SHOWN):
        return []
    return [Text(f"{rows}×{columns} entries, summarised: --full shows them all", style="dim")]


def jacobian_view(run: Run, result: Any, full: bool = False) -> RenderableType:
    """`jacobian`: a labelled matrix per --wrt variable."""
    parts: list[RenderableType] = []
    out_shape = tuple(result.value.shape)
    for name, block in zip(result.wrt, result.blocks):
        in_shape = tuple(run.node(name, prefer_leaf=True).value.shape)
        rows, columns = _labels(result.of, out_shape), _labels(name, in_shape)
        parts.append(Text.assemble((f"∂{result.of}/∂{name}", "bold"),
                                   f"   shape {shape_text(out_shape + in_shape)}, "
                                   f"{'reverse' if result.mode == 'rev' else 'forward'} mode"))
        parts += [matrix_table(rows, columns, block, full), *_size_note(len(rows), len(columns), full), Text("")]
    return Group(*parts[:-1], *_loop_notes(run))


def hessian_view(run: Run, result: Any, full: bool = False) -> RenderableType:
    """`hessian`: a labelled matrix per pair of --wrt variables; symmetric blocks are marked."""
    heading = Text.assemble((result.of, "bold"), " = ", B.format_value(result.value, full))
    parts: list[RenderableType] = [heading, Text("")]
    shapes = {name: tuple(run.node(name, prefer_leaf=True).value.shape) for name in result.wrt}
    for i, first in enumerate(result.wrt):
        for j, second in enumerate(result.wrt):
            block = result.blocks[i][j]
            rows, columns = _labels(first, shapes[first]), _labels(second, shapes[second])
            title = f"∂²{result.of}/∂{first}²" if i == j else f"∂²{result.of}/∂{first}∂{second}"
            square = B.to_host(block).reshape(len(rows), len(columns))
            note = "   symmetric" if i == j and B.is_symmetric(square) else ""
            parts.append(Text.assemble((title, "bold"), f"   shape {shape_text(shapes[first] + shapes[second])}",
                                       (note, "green")))
            parts += [matrix_table(rows, columns, block, full), *_size_note(len(rows), len(columns), full), Text("")]
    return Group(*parts[:-1], *_loop_notes(run))


def jvp_view(run: Run, result: Any, full: bool = False) -> RenderableType:
    """`jvp`: J·v, the output's change along the tangent."""
    return _product_view(run, result, [(f"{result.wrt} (tangent v)", result.tangent),
                                       (f"J·v = ∂{result.of}/∂{result.wrt}·v", result.jvp)], full)


def _product_view(run: Run, result: Any, rows: list[tuple[str, Any]], full: bool) -> RenderableType:
    """A product with a vector (jvp's J·v, hvp's H·v): the output's value, then the vector and the product."""
    table = FittedTable((("", "left"), ("shape", "left"), ("value", "right")),
                        [[label, shape_text(tuple(value.shape)), Shown(value, full)] for label, value in rows])
    heading = Text.assemble((result.of, "bold"), " = ", B.format_value(result.value, full))
    return Group(heading, Text(""), table, *_loop_notes(run))


def _superscript(power: int) -> str:
    """A power as superscript digits (∂³), nothing for 1."""
    return "" if power == 1 else str(power).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def diff_view(run: Run, results: list[Any], latex: bool, placeholders: list[str], full: bool = False) -> RenderableType:
    """`diff`: each derivative as an expression, its shared parts, and its value here."""
    from ..engine.symbolic import latex_name

    parts: list[RenderableType] = []
    for result in results:
        of, wrt = result.of, result.wrt
        runs = [(name, len(list(group))) for name, group in itertools.groupby(wrt)]  # x,x,y: ∂x²∂y
        n = len(wrt)
        if latex:
            bottom = " ".join(rf"\partial {latex_name(w)}" + (f"^{{{k}}}" if k > 1 else "") for w, k in runs)
            top = rf"\partial^{{{n}}} {latex_name(of)}" if n > 1 else rf"\partial {latex_name(of)}"
            parts.append(Text(rf"\frac{{{top}}}{{{bottom}}} = {result.latex}"))
            parts += [Text(f"  {latex_name(name)} = {text}") for name, _, text in result.where]
        else:
            label = f"∂{_superscript(n)}{of}/" + "".join(f"∂{w}{_superscript(k)}" for w, k in runs)
            parts.append(Text.assemble((label, "bold"), f" = {result.text}"))
            for i, (name, text, _) in enumerate(result.where):
                parts.append(Text(f"{'  where ' if i == 0 else '        '}{name} = {text}"))
        parts += [Text(f"  given {given}, as at the program's values", style="dim") for given in result.given]
        if placeholders:
            shown = ", ".join(placeholders)
            parts.append(Text(f"  ({shown} ha{'s' if len(placeholders) == 1 else 've'} no value: "
                              f"give --set {placeholders[0]}=... to see the derivative's value)", style="dim"))
        else:
            shown = _indented(B.format_value(result.value, full), 4)
            parts.append(Text(f"  = {shown} at the program's values", style="dim"))
        if not result.evaluable:
            parts.append(Text("  (scatter(g, index, shape) places g at index in zeros of that shape; "
                              "gradcalc cannot evaluate it as written)", style="dim"))
    if run.loops or _branched(run):
        parts.append(Text("differentiated along the path this run executed (loops and branches as they ran)",
                          style="dim"))
    return Group(*parts)


def _branched(run: Run) -> bool:
    """Whether the program has an if (or an `a if c else b`) anywhere, function bodies included."""
    from ..language import syntax as S

    body = run.program.module.body
    return any(isinstance(stmt, S.If) for stmt in S.statements(body, functions=True)) or \
        any(isinstance(node, S.Conditional) for node in S.code(body, functions=True))


TREE_DEPTH = 40


def graph_tree(view: Any) -> RenderableType:
    """`graph`: the tree rooted at the output; a node reached again is referenced, long runs collapsed."""
    from rich.tree import Tree

    from .drawing import edge_text, node_lines, run_note

    def label(node: Any) -> Text:
        lines = node_lines(view, node)
        kind = {"leaf": " (leaf)", "detached": " (cut from the graph)"}.get(node.kind, "")
        text = Text.assemble((lines[0], "bold"), kind, ("   " + "   ".join(lines[1:]), "dim"))
        return text

    root = Tree(label(view.nodes[0]))
    drawn = {0}
    # Depth first in the order the tree prints: a node is drawn in full where it first appears on
    # the page, and referenced as "drawn above" wherever it appears after that.
    stack: list[tuple[Any, Iterator[Any], int]] = [(root, iter(view.children.get(0, [])), 0)]
    while stack:
        branch, edges, depth = stack[-1]
        edge = next(edges, None)
        if edge is None:
            stack.pop()
            continue
        child = view.nodes[edge.target]
        if child.kind == "omitted":  # the nodes past the view's limit, or deeper than --depth
            again = "" if child.id not in drawn else " (as above)"
            why = child.note or f"the graph has {view.total:,} nodes, too many to draw each"
            branch.add(Text(f"… {child.count:,} more nodes not drawn{again}: {why}", style="yellow"))
            drawn.add(child.id)
            continue
        prefix = Text(edge_text(view, edge) + "  ", style="cyan")
        if edge.target in drawn:
            branch.add(Text.assemble(prefix, (child.label, "bold"), " (drawn above)"))
            continue
        if child.kind == "collapsed":  # collapsed in the view itself (a graph past VIEW_LIMIT nodes)
            drawn.add(child.id)
            stack.append((branch.add(Text(f"… {child.count} more '{child.label}' nodes like these "
                                          f"({run_note(child)}): the graph has {view.total:,} nodes, "
                                          f"too many to draw each", style="yellow")),
                          iter(view.children.get(child.id, [])), depth))
            continue
        skipped, child, into = _collapse_run(view, child, edge)
        prefix = Text(edge_text(view, into) + "  ", style="cyan")
        target = branch
        if skipped:
            target = branch.add(Text(f"… {skipped} more '{child.label}' nodes like these "
                                     f"({run_note(child)}): see --json or --format dot for each",
                                     style="yellow"))
        drawn.add(child.id)
        if depth >= TREE_DEPTH:
            target.add(Text(f"… deeper nodes not shown (depth {TREE_DEPTH}): see --json", style="yellow"))
            continue
        stack.append((target.add(Text.assemble(prefix, label(child))), iter(view.children.get(child.id, [])),
                      depth + 1))
    if view.hidden:
        return Group(root, Text(f"({view.hidden} constant{'s' if view.hidden > 1 else ''} or cut values not "
                                "drawn, as no gradient reaches them: --all draws them)", style="dim"))
    return Group(root)


def _collapse_run(view: Any, start: Any, into: Any) -> tuple[int, Any, Any]:
    """Past SAME_RUN nodes of one name in a chain (loop iterations, y = f(y) lines), skip to its end.

    Returns how many were skipped, the node to draw next, and the edge into it.
    """
    from ..engine.graphview import SAME_RUN, SUMMARIES

    def same(node: Any) -> list[Any]:  # the inputs that continue the run (not a summary: it is drawn as one)
        return [e for e in view.children.get(node.id, []) if not e.detached and
                view.nodes[e.target].label == node.label and view.nodes[e.target].kind not in SUMMARIES]

    run, node = 0, start
    while len(found := same(node)) == 1:
        run += 1
        node = view.nodes[found[0].target]
    if run < 2 * SAME_RUN:
        return 0, start, into
    node, edge = start, into
    for _ in range(run - SAME_RUN):
        edge = same(node)[0]
        node = view.nodes[edge.target]
    return run - SAME_RUN, node, edge


def count_text(count: int) -> str:
    """A path count for people: 1,024 exactly; past 2^53 - 1 three digits and a power of ten (2.04e90)."""
    from ..engine.graphview import EXACT_COUNTS

    if count <= EXACT_COUNTS:
        return f"{count:,}"
    exponent = len(str(count)) - 1
    scale = 10 ** (exponent - 2)
    digits = (count + scale // 2) // scale  # three significant digits, rounded half up: 100 to 1000
    if digits == 1000:
        digits, exponent = 100, exponent + 1
    return f"{digits // 100}.{digits % 100:02d}e{exponent}"


def explain_view(explanation: Any, view: Any) -> RenderableType:
    """`explain`: each path's product of local derivatives, their sum, and autograd's answer."""
    from ..engine.graphview import STEPS_CEILING

    of, wrt = explanation.of, explanation.wrt
    parts: list[RenderableType] = []
    plural = "s" if explanation.count != 1 else ""
    if explanation.count == 0:
        parts.append(Text(f"no path from {of} to {wrt}: ∂{of}/∂{wrt} = 0"))
        return Group(*parts)
    if explanation.paths:
        parts.append(Text.assemble((f"∂{of}/∂{wrt}", "bold"), f": {explanation.count} path{plural} from {of} to {wrt}"))
        for path in explanation.paths:
            if not path.edges:
                parts.append(Text(f"  {of} is {wrt} itself: ∂{of}/∂{wrt} = 1"))
                continue
            names = [view.nodes[0].label] + [view.nodes[e.target].label for e in path.edges]
            partials = [f"∂{view.nodes[e.source].label}/∂{view.nodes[e.target].label}" for e in path.edges]
            factors = [f"({e.text})" if len(path.edges) > 1 else e.text for e in path.edges]
            parts.append(Text(""))
            parts.append(Text("  " + " → ".join(names), style="bold"))
            parts.append(Text("    " + " · ".join(partials) + " = " + " · ".join(factors)))
            if path.value is not None:
                numbers = " · ".join(B.format_number(float(e.value)) for e in path.edges)
                value = B.format_number(float(path.value))
                parts.append(Text(f"    = {value}" if len(path.edges) == 1 else f"    = {numbers} = {value}"))
        values = [p.value for p in explanation.paths]
        if all(v is not None for v in values) and len(values) > 1:  # one path's value is its sum: said above
            shown = B.format_number(float(values[0])) + "".join(
                f" {'-' if float(v) < 0 else '+'} {B.format_number(abs(float(v)))}" for v in values[1:])
            parts.append(Text(""))
            parts.append(Text(f"  sum over the path{plural}: {shown} = {B.format_number(float(explanation.total))}"))
    else:
        parts.append(Text.assemble((f"∂{of}/∂{wrt}", "bold"), f": {count_text(explanation.count)} paths from {of} "
                                   f"to {wrt}, grouped by the variables that use {wrt} (∂{of}/∂user · ∂user/∂{wrt})"))
        if explanation.too_long:
            parts.append(Text(f"  (listed one by one they would take {explanation.steps:,} steps, more than "
                              f"{STEPS_CEILING:,})", style="dim"))
        for edge, adjoint, through in explanation.groups:
            user = view.nodes[edge.source].label
            line = f"  via {user}: ∂{of}/∂{user} · ∂{user}/∂{wrt} = {B.format_value(adjoint)} · ({edge.text})"
            if adjoint is not None and edge.value is not None:
                line += f" = {B.format_number(float(adjoint * edge.value))}"
            parts.append(Text(line + f"   ({count_text(through)} path{'s' if through != 1 else ''})"))
        if explanation.total is not None:
            parts.append(Text(f"  sum: {B.format_number(float(explanation.total))}"))
    if explanation.gradient is not None:
        shown = B.format_value(explanation.gradient)
        if explanation.total is None:  # tensor edges are maps (g ↦ ...): no number to compare, only autograd's
            label = f"  from autograd: ∂{of}/∂{wrt} = "
            parts += [Text(""), Text(label + _indented(shown, len(label)))]
        else:
            agrees = B.close(explanation.total, explanation.gradient)
            label = f"  {'✓ equals' if agrees else '≠'} ∂{of}/∂{wrt} = "
            parts.append(Text(label + _indented(shown, len(label)) + " from autograd",
                              style="green" if agrees else "red"))
    return Group(*parts)


def _indented(text: str, width: int) -> str:
    """A value's later lines lined up under its first (a matrix after a label)."""
    return text.replace("\n", "\n" + " " * width)


_VERDICT_STYLE = {"right": ("✓ right", "green"), "wrong": ("✗ wrong", "red"), "invalid": ("? invalid", "yellow")}


def check_view(report: Any, heading: str = "", full: bool = False, errors_apart: bool = False) -> RenderableType:
    """`check`: one row per claim; then, for each wrong or invalid one, what is wrong and the correct answer.

    With a key's questions, each claim's points too, a row for each question not answered, and the score.
    errors_apart: an invalid claim's full error goes to standard error (the first one), not here.
    """
    scored = report.max_score is not None
    table = _table(("line", "right"), ("claim", "left"), ("verdict", "left"), ("claimed", "right"),
                   ("correct", "right"), *((("points", "right"),) if scored else ()), ("note", "left"), wrap_last=True)
    # A long claim (a derivation) wraps between words, so that the numbers stay whole; a short one stays on its line.
    table.columns[1].no_wrap = False
    table.columns[1].min_width = min(20, max((len(inert(v.claim)) for v in report.verdicts), default=0))
    details: list[RenderableType] = []
    for verdict in report.verdicts:
        word, style = _VERDICT_STYLE[verdict.status]
        note = verdict.note if verdict.passed else verdict.diagnosis_summary
        points = [_points(verdict)] if scored else []
        table.add_row("" if verdict.line is None else str(verdict.line), inert(verdict.claim), Text(word, style=style),
                      _shown(verdict, "got", full), _shown(verdict, "expected", full), *points,
                      Text(note, style="dim"))
        if not verdict.passed:
            details.append(_verdict_detail(verdict, full, errors_apart))
        elif verdict.working is not None:  # a right answer's derivation: how far it follows
            details.append(Group(*_heading(verdict), _working_line(verdict)))
    for answer in report.answers:
        if answer.status == "missing":
            table.add_row("", inert(answer.question.label), Text("– missing", style="red"), "", "",
                          "0", Text("not answered", style="dim"))
    parts: list[RenderableType] = [Text(heading, style="bold")] if heading else []
    if not report.verdicts and not report.answers:
        return Group(*parts, Text("no claims found", style="bold red"))
    parts.append(table)
    parts += details
    total = len(report.verdicts)
    summary = Text(f"{report.right} of {total} claim{'s' * (total != 1)} right",
                   style="bold green" if report.passed else "bold red")
    if scored:
        summary = Text(f"score {_number(report.score)} of {_number(report.max_score)}; " + summary.plain,
                       style=summary.style)
    if report.first_wrong:
        summary.append(f"; the first wrong node along the chain is {report.first_wrong}", style="bold red")
    return Group(*parts, Text(""), summary)


def _number(points: Any) -> str:
    """Points as people write them: 2, 0.5."""
    return str(int(points)) if float(points).is_integer() else f"{points:g}"


def _points(verdict: Any) -> str:
    """A claim's points out of its question's: '–' where it is not scored (not asked, or answered again)."""
    if verdict.points is None:
        return "–"
    return f"{_number(verdict.points)}"


def _shown(verdict: Any, key: str, full: bool) -> str:
    """A claimed or correct value; in grading, a large one by its shape (the worker kept no more)."""
    value = getattr(verdict, key)
    if value is not None:
        return B.format_value(value, full)
    shape = verdict.elided.get(key)
    return f"({shape_text(shape)}, not kept in grading)" if shape is not None else ""


def _heading(verdict: Any) -> list[RenderableType]:
    """A blank line, then the claim's mark, the claim and its line."""
    where = f" (line {verdict.line})" if verdict.line is not None else ""
    word, style = _VERDICT_STYLE[verdict.status]
    return [Text(""), Text.assemble((word[0] + " ", style), (inert(verdict.claim), "bold"), where)]


def _working_line(verdict: Any) -> Table:
    """'  working: lines 1-2 follow; line 3 (hw.txt:7) does not follow from line 2: …', wrapped under its
    text (a grid, so that a narrow terminal's next line does not start at the margin)."""
    working = verdict.working
    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row("  working: ", inert(working.text()), style="red" if working.broken is not None else "green")
    return grid


def _verdict_detail(verdict: Any, full: bool, errors_apart: bool = False) -> RenderableType:
    lines: list[RenderableType] = _heading(verdict)
    if verdict.status == "invalid":
        if errors_apart and verdict.error:
            lines.append(Text(f"  could not be judged: {inert(verdict.error['message'])}"))
            if verdict.error.get("hint"):
                lines.append(Text(f"  hint: {inert(verdict.error['hint'])}"))
        else:
            lines += [Text("  " + line) for line in verdict.error_message.splitlines()]
        return Group(*lines)
    if verdict.diagnosis:
        lines.append(Text("  " + verdict.diagnosis))
    if verdict.working is not None:
        lines.append(_working_line(verdict))
    correct = _shown(verdict, "expected", full)
    if verdict.derivative:
        text, *where_lines = verdict.derivative.split("\n")
        lines.append(Text(f"  correct: {verdict.label} = {text}" + "".join(f"\n  {w}" for w in where_lines)))
        if text != correct:
            lines.append(Text("           = " + correct.replace("\n", "\n" + " " * 13) + " at the program's values",
                              style="dim"))
    elif correct:  # --reveal verdict or none: no correct value is shown
        prefix = f"  correct: {verdict.label} = "
        lines.append(Text(prefix + correct.replace("\n", "\n" + " " * len(prefix))))
        if verdict.note:  # why no expression is shown (too long to print here)
            lines.append(Text(f"  ({verdict.note})", style="dim"))
    return Group(*lines)


def grading_view(reports: list[Any], totals: dict[str, Any], verbose: bool, full: bool = False,
                 asked: Sequence[Any] = (), mistakes: Sequence[Any] = ()) -> RenderableType:
    """`check key.eq submissions/`: one row per submission, the totals, the class's mistakes, and with -v
    each submission in detail."""
    worked = any(report.derivations[1] for report in reports)  # a column only where derivations were handed in
    table = _table(("submission", "left"), ("score" if asked else "claims", "right"),
                   *((("working", "right"),) if worked else ()), ("result", "left"), wrap_last=True)
    for report in reports:
        if report.error is not None:
            claims = f"0/{_number(report.max_score)}" if asked else "–"
        else:
            claims = f"{_number(report.score)}/{_number(report.max_score)}" if asked else \
                f"{report.right}/{len(report.verdicts)}"
        if report.passed:
            result = Text("full marks" if asked else "all right", style="green")
        else:
            result = Text(inert(report.first_problem()), style="yellow" if report.error is not None else "red")
        follow, lines = report.derivations
        working = [f"{follow}/{lines}" if lines else "–"] if worked else []
        table.add_row(inert(report.name), claims, *working, result)
    parts: list[RenderableType] = [table, Text("")]
    count = totals["submissions"]
    line = (f"{count} submission{'s' * (count != 1)}: {totals['passed']} " + ("full marks" if asked else "all right")
            + f", {totals['failed']} with " + ("points lost" if asked else "wrong or invalid claims")
            + f", {totals['not_judged']} not judged")
    if totals["timed_out"]:
        line += f" ({totals['timed_out']} timed out)"
    if asked:
        line += f"; mean score {_number(totals['mean_score'])} of {_number(totals['max_score'])}"
    else:
        line += f"; {totals['claims_right']} of {totals['claims_total']} claims right"
    parts.append(Text(line, style="bold green" if totals["passed"] == count else "bold"))
    if mistakes:
        judged = count - totals["not_judged"]
        parts += [Text(""), Text("The class's mistakes, most common first:", style="bold")]
        listing = _table(("submissions", "right"), ("question", "left"), ("mistake", "left"), wrap_last=True)
        for mistake in mistakes:
            listing.add_row(f"{mistake.count} of {judged}", inert(mistake.question), inert(mistake.text))
        parts.append(listing)
    if verbose:
        for report in reports:
            parts.append(Text(""))
            if report.error is not None:
                parts += [Text(f"── {inert(report.name)}", style="bold"), Text(report.error_message)]
            else:
                parts.append(check_view(report, f"── {inert(report.name)}", full))
    return Group(*parts)


def gradcheck_view(result: Any, full: bool = False) -> RenderableType:
    """`gradcheck`: per variable, the largest absolute and relative error and where; the worst entries shown."""
    what = "gradients" if result.order == 1 else "Hessian blocks"
    how = "along one random direction per variable, fast mode" if result.mode == "fast" \
        else "against central differences"
    heading = Text.assemble((f"gradcheck of {result.of}", "bold"),
                            f": autograd {what} {how} (eps {B.format_number(result.eps)})")
    table = _table(("variable", "left"), ("shape" if result.mode == "full" else "checked", "left"),
                   ("max abs error", "right"), ("at", "left"), ("max rel error", "right"), ("at", "left"),
                   ("verdict", "left"), words=True)
    details: list[RenderableType] = []
    for c in result.comparisons:
        verdict = Text("✓ pass", style="green") if c.passed else Text("✗ FAIL", style="red")
        shape = {"full": shape_text(c.autograd.shape), "sample": f"{c.checked:,} of {c.elements:,}",
                 "fast": f"{c.elements:,} at once"}[result.mode]
        table.add_row(c.label, shape, f"{c.max_abs:.2e}", _index(c.abs_at),
                      f"{c.max_rel:.2e}", _index(c.rel_at), verdict)
        if not c.passed:
            place = "vᵀ·J·u" if result.mode == "fast" else _index(c.worst_at)
            details.append(Text(f"  {c.label}{place}: autograd {B.format_number(c.worst[0])}, "
                                f"finite differences {B.format_number(c.worst[1])}", style="red"))
    failed = sum(not c.passed for c in result.comparisons)
    total = len(result.comparisons)
    tolerance = f"rtol {B.format_number(result.rtol)}, atol {B.format_number(result.atol)}"
    summary = Text(f"autograd and finite differences agree within {tolerance}", style="bold green") \
        if not failed else Text(f"{failed} of {total} disagree past {tolerance}", style="bold red")
    notes = [Text("checked: a random sample of each variable's elements (--sample, seeded by --seed)")] \
        if result.mode == "sample" else []
    return Group(heading, Text(""), table, *details, *notes, Text(""), summary)


class GradcheckProgress:
    """A long command's progress bar on standard error (a terminal): shown once it has run `after` seconds.

    gradcheck's (elements moved) and minimize's (steps, with `note` formatting the current loss)."""

    after = 1.0

    def __init__(self, console: Callable[[], Console], label: str = "gradcheck: moving elements",
                 note: str = "") -> None:
        self.started = time.monotonic()
        self.console = console  # made only if the bar is shown
        self.label, self.note = label, note
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int, *shown: Any) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < self.after:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[note]}"), TimeRemainingColumn(), console=self.console(),
                                transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total, note="")
        self.bar.update(self.task, completed=done, total=total, note=self.note.format(*shown) if self.note else "")

    def close(self) -> None:
        """Take the bar off the screen (it was shown only if the command ran long enough)."""
        if self.bar is not None:
            self.bar.stop()


def _index(at: tuple[int, ...]) -> str:
    return "" if not at else "[" + ", ".join(map(str, at)) + "]"


def _batch_results(method: str, result: Any) -> dict[str, Any]:
    """One point's results as table columns (title: value or text), for `--at`."""
    if method == "values":
        return dict(result)
    if method == "grad":
        prefix = "vᵀ·∂" if result.vector is not None else "∂"
        return {result.of: result.value, **{f"{prefix}{result.of}/∂{name}": g for name, g in result.grads.items()}}
    if method == "jacobian":
        return {f"∂{result.of}/∂{name}": block for name, block in zip(result.wrt, result.blocks)}
    if method == "hessian":
        return {result.of: result.value, **{f"∂²{result.of}/∂{a}∂{b}": result.blocks[i][j]
                                            for i, a in enumerate(result.wrt) for j, b in enumerate(result.wrt)}}
    if method == "jvp":
        return {result.of: result.value, f"J·v ({result.wrt})": result.jvp}
    if method == "hvp":
        return {result.of: result.value, f"H·v ({result.wrt})": result.hvp}
    return {f"∂{'²' if len(d.wrt) > 1 else ''}{d.of}/{''.join('∂' + w for w in d.wrt)}":
            f"{d.text} = {B.format_number(float(d.value))}" if getattr(d.value, "shape", None) == () else d.text
            for d in result}


def _given(value: Any) -> Any:
    """A value as a point gave it, for its row: a number or an array of numbers as it is; else (a ragged list,
    text in a list: its point's error says why) the JSON it was, cut to a cell's width."""
    if value is None or isinstance(value, str):
        return value
    try:
        if B.to_host(value).dtype.kind in "biuf":
            return value
    except (ValueError, TypeError):
        pass
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return inert(text if len(text) <= 24 else text[:23] + "…")


def batch_view(points: list[Any], method: str, full: bool = False) -> RenderableType:
    """`--at`: one row per point, its given values and then its results (or its error)."""
    given = list(dict.fromkeys(name for point in points for name in point.values)) if method != "values" else []
    results = {id(point): point.result for point in points}
    if method == "diff":
        results = _one_meaning(points)
    rows: list[dict[str, Any]] = []
    for point in points:
        row: dict[str, Any] = {"#": str(point.index), **{name: _given(point.values.get(name)) for name in given}}
        error = point.error
        if error is not None:  # where it is (the points file's line, or the program's), then what
            where = f"{error.source.filename}:{error.pos.line}:{error.pos.column}: " \
                if error.source is not None and error.pos is not None else ""
            row["error"] = inert(where + error.message)
        else:
            row.update(_batch_results(method, results[id(point)]))
        rows.append(row)
    titles = list(dict.fromkeys(title for row in rows for title in row))
    if "error" in titles:  # last: a note that wraps
        titles = [title for title in titles if title != "error"] + ["error"]
    cells = [[row.get(title, "") if title in ("#", "error") or isinstance(row.get(title), str)
              else ("" if row.get(title) is None else Shown(B.to_host(row[title]), full)) for title in titles]
             for row in rows]
    table = FittedTable(tuple((inert(title), "left" if title in ("error", "#") else "right") for title in titles),
                        cells, wrap_last=titles[-1] == "error")
    return Group(table, *_batch_where(points, results)) if method == "diff" else table


def _one_meaning(points: list[Any]) -> dict[int, Any]:
    """diff --at's derivatives (by id of their point) with their shared parts named across the whole table: each
    derivative names its own (t3 = sin(t1 + t2) in one column, t3 = cos(t1 + t2) in the next), but the table
    lists them once under it, so one part has one name everywhere and one name one part."""
    import dataclasses
    import re

    word = re.compile(r"\w+")

    def renamed_in(text: str, names: dict[str, str]) -> str:
        return word.sub(lambda found: names.get(found[0], found[0]), text)

    taken = {w for point in points if point.error is None for d in point.result
             for text in (d.text, *(body for _, body, _ in d.where)) for w in word.findall(text)}
    meaning: dict[str, str] = {}  # a name → the part it names in the table
    named: dict[str, str] = {}  # a part → its name
    fresh = (f"t{k}" for k in itertools.count(1))
    renamed: dict[int, Any] = {}
    for point in points:
        if point.error is not None:
            renamed[id(point)] = point.result
            continue
        derivatives = []
        for d in point.result:
            names: dict[str, str] = {}  # this derivative's name → the table's
            where = []
            for name, written, latex in d.where:  # in order: a part's body names only the parts before it
                body = renamed_in(written, names)
                new = named.get(body)
                if new is None:
                    new = name if name not in meaning else next(n for n in fresh if n not in taken)
                    taken.add(new)
                    meaning[new], named[body] = body, new
                names[name] = new
                where.append((new, body, latex))
            text = renamed_in(d.text, names)
            derivatives.append(dataclasses.replace(d, text=text, where=where) if names else d)
        renamed[id(point)] = derivatives
    return renamed


def _batch_where(points: list[Any], results: dict[int, Any]) -> list[Text]:
    """diff --at: the shared parts its expressions name (t3 = cos(t1 + t2)), under the table as diff writes
    them; one that not every point's expressions have is followed by the points that have it."""
    found: dict[tuple[str, str], list[str]] = {}
    ran = [point for point in points if point.error is None]
    for point in ran:
        for derivative in results[id(point)]:
            for name, text, _ in derivative.where:
                at = found.setdefault((name, text), [])
                if not at or at[-1] != str(point.index):
                    at.append(str(point.index))
    lines = [Text("")] if found else []
    for i, ((name, text), at) in enumerate(found.items()):
        some = "" if len(at) == len(ran) else f"   (#{', #'.join(at)})"
        lines.append(Text(f"{'  where ' if i == 0 else '        '}{name} = {text}{some}"))
    return lines


STOPPED = {
    "steps": "--steps reached",
    "epochs": "--epochs reached",
    "grad_norm": "the gradient's norm fell to --tol",
    "loss_change": "the loss changed by no more than --tol in a step",
    "max_time": "--max-time passed",
    "interrupted": "interrupted (Ctrl-C): the best values so far",
    "not_finite": "the loss or its gradient stopped being finite: the best values before that",
    "converged": "L-BFGS-B converged",
    "line_search": "L-BFGS-B's line search found no lower point",
}


def minimize_view(result: Any, full: bool = False) -> RenderableType:
    """`minimize`: the step explained (--explain), the loss and gradient norm, why it stopped, the values."""
    parts: list[RenderableType] = []
    for shown in result.explained:
        parts += [Text(shown.name, style="bold"), *(Text("  " + line) for line in shown.rule.split("\n"))]
        if shown.worked is not None:  # a scalar: the gradient, then the rule with its numbers
            label, gradient = shown.terms[1]
            parts += [Text(f"  {label} = {B.format_number(float(gradient))}"),
                      *(Text("  " + line) for line in shown.worked.split("\n"))]
        else:
            rows = [[label, shape_text(B.to_host(value).shape), Shown(value, full)] for label, value in shown.terms]
            parts.append(FittedTable((("", "left"), ("shape", "left"), ("value", "right")), rows))
        parts.append(Text(""))
    settings = ", ".join(f"{key} {value}" if key != "method" else str(value) for key, value in result.settings.items())
    steps = f"{result.steps} step{'s' * (result.steps != 1)}"
    parts += [Text.assemble((result.of, "bold"), " = ", B.format_number(result.loss),
                            (f"   after {steps} of {settings}: {STOPPED.get(result.stopped, result.stopped)}", "dim")),
              Text(f"‖∇{result.of}‖ = {B.format_number(result.grad_norm)}"), Text("")]
    rows = [[name, shape_text(B.to_host(value).shape), Shown(value, full)] for name, value in result.values.items()]
    parts.append(FittedTable((("variable", "left"), ("shape", "left"), ("value", "right")), rows))
    return Group(*parts)


def hvp_view(run: Run, result: Any, full: bool = False) -> RenderableType:
    """`hvp`: H·v, the Hessian of the output times the direction v."""
    return _product_view(run, result, [(f"{result.wrt} (direction v)", result.vector),
                                       (f"H·v = ∂²{result.of}/∂{result.wrt}²·v", result.hvp)], full)


def taylor_view(run: Run, result: Any, decimal: bool = False, full: bool = False) -> RenderableType:
    """`taylor`: the polynomial about the point, then a table of its coefficients."""
    from ..engine.symbolic import number

    point = ", ".join(f"{name} = {number(center)}" for name, center in zip(result.wrt, result.center))
    rows = []
    for powers, value in result.terms:
        monomial = "·".join(name + _superscript(power) for name, power in zip(result.wrt, powers) if power) or "1"
        rows.append([monomial, str(sum(powers)), result.coefficient(value, decimal)])
    table = FittedTable((("term", "left"), ("degree", "right"), ("coefficient", "right")), rows)
    heading = Text.assemble((result.of, "bold"), f" ≈ {result.polynomial(decimal)}")
    shifted = ", ".join(f"{name} {'+' if center < 0 else '-'} {number(abs(center))}"  # w2 + 1, not w2 - -1
                        for name, center in zip(result.wrt, result.center) if center)
    about = f"  about {point}, to degree {result.order}" + (f"; the terms are powers of {shifted}" if shifted else "")
    return Group(heading, Text(about, style="dim"), Text(""), table,
                 *_loop_notes(run))


STEPS_WIDTH = 80  # the steps are laid out for this many columns: an expression longer is broken at + and -


def steps_view(found: Any, answer: Any, latex: bool, placeholders: list[str], run: Run | None = None
               ) -> RenderableType:
    """`diff --steps`: each part's derivation, a line a rule, rules aligned at the right where they fit; as
    diff's, a run through a loop or a branch says that the derivation follows the path it took."""
    if latex:
        return Text(_steps_latex(found))
    parts: list[RenderableType] = []
    part, last = None, None
    lines: list[tuple[str, str]] = []  # (text, rule) of one part
    for step in found.steps:
        if step.part != part:
            if lines:
                parts.append(StepLines(lines))
            lines = []
            part = step.part
            statement = step.part.split("/")[0][1:]  # "∂b/∂a" or "dy/dx": one sign, then the name
            defined = found.definitions.get(statement) if step.part != "chain rule" else None
            title = f"{part}, {statement} = {defined}" if defined else \
                f"d{found.of}/d{found.wrt} by the chain rule" if part == "chain rule" else part
            parts.append(Text(title, style="bold"))
        if step.shown_before != last or not lines:  # a new equation (the chain rule statement by statement)
            lines.append((f"  {step.shown_before}", ""))
        lines.append((f"    = {step.shown_after}", f"({step.rule})"))
        last = step.shown_after
    if lines:
        parts.append(StepLines(lines))
    for i, (name, text, _) in enumerate(found.where):  # diff's shared parts, too long to write in place
        parts.append(Text(f"{'  where ' if i == 0 else '        '}{name} = {text}"))
    if placeholders:
        shown = ", ".join(placeholders)
        parts.append(Text(f"  ({shown} ha{'s' if len(placeholders) == 1 else 've'} no value: "
                          f"give --set {placeholders[0]}=... to see the derivative's value)", style="dim"))
    else:
        parts.append(Text(f"  = {_indented(B.format_value(answer.value, False), 4)} at the program's values",
                          style="dim"))
    if run is not None and (run.loops or _branched(run)):
        parts.append(Text("differentiated along the path this run executed (loops and branches as they ran)",
                          style="dim"))
    return Group(*parts)


class StepLines:
    """A part's lines, (text, rule) each: rules in one column where each line and its rule fit, else the rule
    on the next line. Laid out as it renders, from the text as it will be written (translated: θ is \\u03b8 in
    cp1252), so that the rules align in what is written and no line is longer than STEPS_WIDTH there."""

    def __init__(self, lines: list[tuple[str, str]], translate: Callable[[str], str] | None = None) -> None:
        self.lines, self.translate = lines, translate

    def translated(self, translate: Callable[[str], str]) -> StepLines:
        return StepLines(self.lines, translate)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        translate = self.translate
        lines = self.lines if translate is None else [(translate(text), translate(rule)) for text, rule in self.lines]
        fits = [len(text) for text, rule in lines if rule and len(text) + 2 + len(rule) <= STEPS_WIDTH]
        column = max(fits, default=0) + 2
        for text, rule in lines:
            wrapped = _broken(text, STEPS_WIDTH)
            for piece in wrapped[:-1]:
                yield Text(piece)
            last = wrapped[-1]
            if not rule:
                yield Text(last)
            elif len(last) + 2 + len(rule) <= STEPS_WIDTH:
                yield Text.assemble(last.ljust(max(column, len(last) + 2)) if column + len(rule) <= STEPS_WIDTH
                                    else last + "  ", (rule, "dim"))
            else:
                yield Text(last)
                for piece in _broken("      " + rule, STEPS_WIDTH):
                    yield Text(piece, style="dim")


def _broken(text: str, width: int) -> list[str]:
    """text in lines of at most width, continued indented: broken before a + or - between terms where one
    falls in the line's second half, else after a comma, else at a space, else (one long token) anywhere."""
    if len(text) <= width:
        return [text]
    indent = len(text) - len(text.lstrip()) + 4
    pieces: list[str] = []
    rest = text
    while len(rest) > width:
        half = (indent + width) // 2
        cut = max(rest.rfind(" + ", half, width), rest.rfind(" - ", half, width))
        if cut < 0:
            comma = rest.rfind(", ", indent, width - 1)
            cut = comma + 2 if comma > indent else rest.rfind(" ", indent + 1, width)
        if cut <= indent:
            cut = width
        pieces.append(rest[:cut].rstrip())
        rest = " " * indent + rest[cut:].lstrip()
    return [*pieces, rest]


def _steps_latex(found: Any) -> str:
    """One aligned block: each part's derivative and its lines, each with its rule in \\text{}; the chain
    rule's equations start from d/dx[...] itself."""
    from ..engine.symbolic import latex_name

    rows = []
    part, last = None, None
    for step in found.steps:
        rule = rf"&& \text{{({_latex_text(step.rule)})}}"
        if step.part not in (part, "chain rule"):
            top, bottom = (name[1:] for name in step.part.split("/"))  # "∂b/∂a" or "dy/dx": a sign, a name
            d = r"\partial " if step.part.startswith("∂") else "d "
            rows.append(rf"\frac{{{d}{latex_name(top)}}}{{{d}{latex_name(bottom)}}} &= {step.latex_before}")
            rows.append(rf"&= {step.latex} {rule}")
        elif step.part != part or step.latex_before != last:  # a new equation
            rows.append(rf"{step.latex_before} &= {step.latex} {rule}")
        else:
            rows.append(rf"&= {step.latex} {rule}")
        part, last = step.part, step.latex
    rows += [rf"& {latex_name(name)} = {latex} && \text{{(where)}}" for name, _, latex in found.where]
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"


def _latex_text(text: str) -> str:
    """Text for \\text{}: LaTeX's special characters escaped."""
    escapes = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "^": r"\^{}", "&": r"\&",
               "%": r"\%", "#": r"\#", "$": r"\$", "~": r"\~{}", "→": r"$\to$", "∂": r"$\partial$"}
    return "".join(escapes.get(c, c) for c in text)
