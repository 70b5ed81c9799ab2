"""Lark's LALR tables kept as plain data, and the lean lexer and loop that run them without Lark.

Lark builds the tables from gradcalc.lark (`build`); `lalr_tables.json`, shipped beside this module,
holds what it built, with the grammar it was built from. When that grammar is not the one beside it
(the grammar was edited and the tables not regenerated) the tables are built again from it, so the
grammar stays the only source of the language; tests/test_parser.py checks that the shipped tables
equal a fresh build. Regenerate them with `python -m gradcalc.language.lalr`.

Importing this module imports neither Lark nor anything but the standard library: a command's
start-up pays for a JSON load, not for Lark's analysis of the grammar (nor for importing Lark).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
GRAMMAR = os.path.join(HERE, "gradcalc.lark")
TABLES = os.path.join(HERE, "lalr_tables.json")
STARTS = ("start", "value", "claims")  # the grammar's start symbols: a program, a --set value, a claims file
END = "$END"


class Token(str):
    """A token: its text, with the attributes of Lark's Token that gradcalc and Lark's parser read."""

    end_line = end_column = end_pos = None  # never read by gradcalc: one class attribute, not one per token
    type: str
    start_pos: int | None
    line: int | None
    column: int | None

    def __new__(cls, kind: str, value: str, start_pos: int | None = None, line: int | None = None,
                column: int | None = None) -> Token:
        token = str.__new__(cls, value)
        token.type, token.start_pos, token.line, token.column = kind, start_pos, line, column
        return token

    _future_new = classmethod(__new__)  # Lark's spelling, for code written against Lark's Token

    @property
    def value(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str(self)!r})"

    def __reduce__(self) -> Any:
        return Token, (self.type, str(self), self.start_pos, self.line, self.column)


class BadCharacter(Exception):
    """The lexer met a character no terminal matches (where, for the error message)."""

    def __init__(self, pos: int, line: int, column: int) -> None:
        super().__init__(pos, line, column)
        self.pos, self.line, self.column = pos, line, column
        self.tokens: list[Token] = []  # the text's tokens before it


def grammar_text() -> str:
    """The grammar: gradcalc.lark, shipped beside this module (in a checkout and in the wheel alike)."""
    with open(GRAMMAR, encoding="utf-8") as file:
        return file.read()


def build(grammar: str | None = None) -> dict[str, Any]:
    """The tables Lark builds from the grammar, as plain data (JSON's types), states numbered canonically.

    Lark's own numbering can follow set iteration order; here states are numbered in the order a
    breadth-first walk from the start states meets them, symbols taken in sorted order, and rules in
    the order they are first met, so that the same grammar always gives the same data.
    """
    from lark import Lark
    from lark.parse_tree_builder import maybe_create_child_filter
    from lark.parsers.lalr_analysis import Shift

    text = grammar_text() if grammar is None else grammar
    lark = Lark(text, parser="lalr", start=list(STARTS), maybe_placeholders=True, lexer="basic")
    table = lark.parser.parser.parser.parse_table  # ParsingFrontend → LALR_Parser → its _Parser
    order: dict[int, int] = {}
    queue = [table.start_states[start] for start in STARTS]
    for state in queue:
        if state not in order:
            order[state] = len(order)
            queue.extend(arg for _, (action, arg) in sorted(table.states[state].items()) if action is Shift)
    rules: list[list[Any]] = []
    rule_index: dict[Any, int] = {}
    rows: list[dict[str, int]] = []
    for state in sorted(order, key=order.__getitem__):
        row: dict[str, int] = {}
        for symbol, (action, arg) in sorted(table.states[state].items()):
            if action is Shift:
                row[symbol] = order[arg]
                continue
            if arg not in rule_index:
                rule_index[arg] = len(rules)
                rules.append(_rule(arg, maybe_create_child_filter))
            row[symbol] = ~rule_index[arg]
        rows.append(row)
    return {
        "grammar": text,
        "lexer": _lexer_data(lark.lexer_conf),
        "starts": {start: [order[table.start_states[start]], order[table.end_states[start]]] for start in STARTS},
        "rules": rules,
        "states": rows,
    }


def _rule(rule: Any, child_filter: Callable[..., Any]) -> list[Any]:
    """[size, symbol, callback name, expand1, include, nones at the end]: how Lark's tree builder makes its node.

    `include` is None when every child is kept as it is, else [index, splice, nones before] per kept child
    (a `_rule`'s children are spliced into its parent's; `[optional]` items missing are None).
    """
    options = rule.options
    made = child_filter(rule.expansion, options.keep_all_tokens, False, options.empty_indices)
    include: list[list[Any]] | None = None
    trailing = 0
    if made is not None:  # partial(ChildFilterLALR, to_include, nones) or partial(..._NoPlaceholders, [(i, x)])
        args = made.args
        include = [[i, bool(expand), int(rest[0]) if rest else 0] for i, expand, *rest in args[0]]
        trailing = int(args[1]) if len(args) > 1 else 0
    name = rule.alias or options.template_source or rule.origin.name
    expand1 = bool(options.expand1 and not rule.alias)
    return [len(rule.expansion), rule.origin.name, str(name), expand1, include, trailing]


def _lexer_data(conf: Any) -> dict[str, Any]:
    """Lark's terminals as one regular expression, tried in Lark's order (longer literals first); keywords,
    which NAME also matches, as a table from text to type, as Lark types them."""
    name_pattern = re.compile(next(t.pattern.to_regexp() for t in conf.terminals if t.name == "NAME"))
    keywords = {t.pattern.value: t.name for t in conf.terminals
                if t.pattern.type == "str" and name_pattern.fullmatch(t.pattern.value)}
    ordered = sorted((t for t in conf.terminals if t.name not in set(keywords.values())),
                     key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    return {
        "pattern": "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in ordered),
        "keywords": dict(sorted(keywords.items())),
        "ignore": sorted(conf.ignore),
    }


_loaded: dict[str, Any] | None = None


def tables() -> dict[str, Any]:
    """The tables for the grammar beside this module: the shipped ones, or built again if the grammar changed."""
    global _loaded
    if _loaded is None:
        grammar = grammar_text()
        try:
            with open(TABLES, encoding="utf-8") as file:
                data = json.load(file)
        except (OSError, ValueError):
            data = None
        _loaded = data if data is not None and data.get("grammar") == grammar else build(grammar)
    return _loaded


def write(path: str = TABLES) -> None:
    """Write the tables built from the grammar now (atomically: a reader never sees half a file)."""
    data = build()
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        json.dump(data, file, ensure_ascii=False, separators=(",", ":"))
        file.write("\n")
    os.replace(temporary, path)


SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")  # w₁ is w1


def composed(name: str) -> str:
    """A name's accents composed as Python composes identifiers' (NFC): y + ̂ and ŷ are one name."""
    import unicodedata  # only for names beyond ASCII: not at start-up

    return unicodedata.normalize("NFC", name)


BLANKS = "\t\f "  # what a piece may start with before its token: ignored, as is a \r after them


class Lexer:
    """The grammar's terminals as one regular expression; the text cut into pieces by it in one call.

    `findall` with the alternation's groups made plain cuts the whole text in C (a match object a
    token, and a group for each of some thirty terminals, cost twice as much); a piece is a token with
    the blanks before it, and what it is (kind, where its token starts, its text) is read once per
    distinct piece, by the named expression, and kept. Names beyond ASCII are read as the language
    reads them: subscript digits as digits, accents composed.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.pattern = re.compile(data["pattern"])
        self.keywords: dict[str, str] = data["keywords"]
        self.ignore = frozenset(data["ignore"])
        if any((found := self.pattern.match(c + "\r")) is None or found.lastgroup not in self.ignore
               or found.end() != 2 for c in BLANKS):
            raise ValueError("the grammar's blanks are not what the lexer takes them for: see lalr.BLANKS")
        # the same alternation, tried in the same order, after the blanks before a token (not before \r:
        # the ignored run takes it; else, and before what nothing matches, the run is the alternation's own):
        # findall returns the pieces' texts
        self.pieces = re.compile(f"(?:[{BLANKS}]++(?!\r))?(?:{_plain(data['pattern'])})")
        if self.pieces.groups:  # a `(` _plain did not see (in a character class): say so, not lex wrongly
            raise ValueError("the lexer's pattern has a group that could not be made plain")
        # a piece's text → (its token's kind, "" for blanks and what is ignored; where the token starts; its text)
        self.read: dict[str, tuple[str, int, str]] = {}

    def lex(self, text: str) -> list[Token]:
        """The tokens of the text; BadCharacter (with the tokens before it) at a character nothing matches."""
        pieces = self.pieces.findall(text)
        if sum(map(len, pieces)) != len(text):  # findall steps over a character nothing matches: find it
            bad = self._bad(text)
            bad.tokens = self.lex(text[:bad.pos])
            raise bad
        read, read_new, new = self.read, self._read, str.__new__
        tokens: list[Token] = []
        append = tokens.append
        pos, line, line_start = 0, 1, 0
        for piece in pieces:
            entry = read.get(piece)
            if entry is None:
                entry = read_new(piece)
            kind, skip, value = entry
            if kind:
                token = new(Token, value)  # Token(...) without a Python-level __new__: one per token, it shows
                start = pos + skip
                token.type, token.start_pos, token.line, token.column = kind, start, line, start - line_start + 1
                append(token)
            if "\n" in piece:
                line += piece.count("\n")
                line_start = pos + piece.rindex("\n") + 1
            pos += len(piece)
        return tokens

    def _read(self, piece: str) -> tuple[str, int, str]:
        """What a piece of text is, as the named expression reads its token; remembered."""
        value = piece.lstrip(BLANKS)
        skip = len(piece) - len(value)  # the blanks before the token
        entry = ("", 0, "")
        if value:
            found = self.pattern.match(value)
            assert found is not None and found.end() == len(value), piece  # a piece is one terminal's match
            kind = found.lastgroup or ""
            if kind in self.ignore:
                kind = ""
            elif kind == "NAME":
                if not value.isascii():
                    value = composed(value.translate(SUBSCRIPTS))
                kind = self.keywords.get(value, "NAME")
            entry = (kind, skip, value)
        if len(self.read) < 100_000:  # names are the only open-ended kind: a bound on what is kept
            self.read[piece] = entry
        return entry

    def _bad(self, text: str) -> BadCharacter:
        """Where the text has a character no terminal matches (the first), as an error."""
        pos, line, line_start = 0, 1, 0
        for found in iter(self.pattern.scanner(text).match, None):  # type: ignore[attr-defined]  # not in typeshed
            value = found.group()
            if "\n" in value:
                line += value.count("\n")
                line_start = pos + value.rindex("\n") + 1
            pos = found.end()
        return BadCharacter(pos, line, pos - line_start + 1)


def _plain(pattern: str) -> str:
    """A pattern with its groups, named or not, made non-capturing (findall then returns whole matches)."""
    return re.sub(r"(?<!\\)\((?!\?)|\(\?P<\w+>", "(?:", pattern)


_lexer: Lexer | None = None


def lexer() -> Lexer:
    """The lexer of the grammar's terminals (made once)."""
    global _lexer
    if _lexer is None:
        _lexer = Lexer(tables()["lexer"])
    return _lexer


class Rejected(Exception):
    """The loop met a token the table has no action for: Lark's own parser explains the error.

    Its argument, where there is one, is the offset of the line where the statement it rejected starts:
    the text before it parsed, and the statement starts as the program's first would.
    """


SEPARATORS = frozenset({"_NL", "SEMICOLON"})  # what ends a statement (a program's `_sep`)


class Parser:
    """The tables run by a lean loop, with `callbacks`' methods (one per rule or alias) building the nodes.

    A rule of one child marked `?` (`?expr: or_test`) passes its child up without a call; a `_rule`
    with no method gives its children, which its parent splices into its own, as Lark does. Each
    other rule's reduction is a small function written from its table entry (which children it
    keeps, where a missing `[optional]` is None), so the loop runs no generic filtering per node;
    it is written the first time the rule is reduced (a program uses a few dozen of some 180).

    A program is read a statement at a time (tokens up to a separator outside braces). What the
    loop does with a statement depends only on the states it starts in and its tokens' kinds, so
    the reductions it made are recorded under those the second time a shape is met, and from the third
    (`y = a*x + b` and `h = w*u - c` are one shape) replayed as straight-line code, with no table lookup.
    """

    def __init__(self, data: dict[str, Any], start: str, callbacks: object) -> None:
        self.start_state, self.end_state = data["starts"][start]
        self.rows: list[dict[str, int]] = data["states"]
        if any(row.get(END, -1) >= 0 for row in self.rows):  # the loop returns at the end state instead
            raise ValueError("the tables shift the end of the input: not an LALR table Lark builds")
        self.units: dict[tuple[int, int, str], int] = {}  # see _unit_run
        # (size, goto symbol, the reduction taking its children off the values, or None for a unit rule)
        self.rules: list[tuple[int, str, Callable[[list[Any]], Any] | None]] = []
        self.made: list[tuple[Callable[..., Any] | None, bool, list[list[Any]] | None, int]] = []  # see _reduction
        for size, symbol, name, expand1, include, trailing in data["rules"]:
            method = getattr(callbacks, name, None)
            if method is None and not name.startswith("_") and not expand1:
                raise TypeError(f"the grammar's rule {name!r} has no method in {type(callbacks).__name__}")
            unit = size == 1 and expand1 and include is None
            self.made.append((method, expand1, include, trailing))
            self.rules.append((size, symbol, None if unit else self._lazy(len(self.rules))))
        self.statements = start == "start"  # a program: read a statement at a time (see parse)
        # (states, kinds) → None once met, then [the replay once written, the reductions recorded, the states after]
        self.shapes: dict[tuple[tuple[int, ...], tuple[str, ...]], list[Any] | None] = {}

    def _lazy(self, index: int) -> Callable[[list[Any]], Any]:
        """The rule's reduction, written when it is first reduced (and put in its place in `rules`)."""

        def first(values: list[Any]) -> Any:
            size, symbol, _ = self.rules[index]
            reduce = _reduction(size, *self.made[index])
            self.rules[index] = (size, symbol, reduce)
            return reduce(values)

        return first

    def parse(self, chunks: Iterable[list[Token]]) -> Any:
        """The tree of the tokens, given in lists (a program's end where its statements end: see Parser)."""
        states = [self.start_state]
        values: list[Any] = []
        if not self.statements:
            result = self._run(states, values, chain.from_iterable(chunks), None)
            if result is _MORE:
                raise Rejected
            return result
        shapes = self.shapes
        previous = ""  # the kind of the last token before this statement
        for chunk in chunks:
            try:
                if chunk and chunk[-1].type in SEPARATORS and len(states) <= 16:
                    key = (tuple(states), tuple([token.type for token in chunk]))
                    shape = shapes.get(key, _UNSEEN)
                    if shape is _UNSEEN:  # met once: remembered, not recorded (a program of new shapes pays no more)
                        self._run(states, values, chunk, None)
                        if len(shapes) >= 4096:  # a program of ever new shapes: keep the memory bounded
                            shapes.clear()
                        shapes[key] = None
                    elif shape is None:  # met twice: its reductions recorded
                        record: list[int] = []
                        self._run(states, values, chunk, record)
                        shapes[key] = [None, record, tuple(states)]
                    else:  # from the third on: replayed, the code written once
                        replay, recorded, after = shape
                        if replay is None:
                            replay = shape[0] = self._compiled(recorded)
                        replay(values, chunk)
                        states[:] = after
                else:
                    result = self._run(states, values, chunk, None)
                    if result is not _MORE:
                        return result
            except Rejected as rejected:
                # a statement that starts a line: Lark need read only from there (see parser._parse)
                if not rejected.args and previous == "_NL" and chunk:
                    raise Rejected(chunk[0].start_pos) from None
                raise
            if chunk:
                previous = chunk[-1].type
        raise Rejected

    def _run(self, states: list[int], values: list[Any], tokens: Iterable[Token], record: list[int] | None) -> Any:
        """The LALR loop over `tokens`, from `states` and `values` (changed in place): the result at the
        end state, else _MORE; each reduction made (a rule's index, -1 a shift) appended to `record`."""
        rows, rules, end, units = self.rows, self.rules, self.end_state, self.units
        for token in tokens:
            kind = token.type
            while True:
                top = states[-1]
                action = rows[top].get(kind)
                if action is None:  # the end is never shifted (checked when the tables are read)
                    raise Rejected
                if action >= 0:
                    states.append(action)
                    values.append(token)
                    if record is not None:
                        record.append(-1)
                    break
                size, symbol, reduce = rules[~action]
                if reduce is None:  # a run of unit rules (`?expr: or_test`, ...) only replaces the top state
                    key = (states[-2], top, kind)
                    state = units.get(key)
                    states[-1] = self._unit_run(*key) if state is None else state
                    continue
                values.append(reduce(values))
                if record is not None:
                    record.append(~action)
                if size:
                    del states[-size:]
                state = rows[states[-1]][symbol]
                if state == end:  # only the start symbol leads there, and only at the end
                    return values[-1]
                states.append(state)
        return _MORE

    def _compiled(self, record: list[int]) -> Callable[[list[Any], list[Token]], None]:
        """A statement's recorded shifts and reductions as one straight-line function of (values, tokens):
        each reduction's code (as _reduction writes it) on local names, the values list touched once at the end."""
        lines = ["def replay(values, tokens):", f"    {''.join(f't{i}, ' for i in range(record.count(-1)))}= tokens"]
        namespace: dict[str, Any] = {}
        stack: list[str] = []  # what the loop's values would hold above those the statement found, as local names
        below = shifted = 0  # of the values the statement found, how many its reductions took; tokens shifted
        for n, step in enumerate(record):
            if step < 0:
                stack.append(f"t{shifted}")
                shifted += 1
                continue
            size = self.rules[step][0]
            method, expand1, include, trailing = self.made[step]
            if size > len(stack):  # the rest of its children: on top of the values it found, deepest first
                taken = size - len(stack)
                for j in range(taken):
                    lines.append(f"    v{below + j} = values[-{below + taken - j}]")
                stack[:0] = [f"v{below + j}" for j in range(taken)]
                below += taken
            children = stack[len(stack) - size:]
            del stack[len(stack) - size:]
            if method is not None:
                namespace[f"m{step}"] = method
            lines += ["    " + line for line in _reduction_code(children, method and f"m{step}", expand1, include,
                                                                  trailing, f"x{n}")]
            stack.append(f"x{n}")
        if below:
            lines.append(f"    del values[-{below}:]")
        lines.append(f"    values.extend(({''.join(f'{name}, ' for name in stack)}))")
        exec("\n".join(lines), namespace)  # written from the recorded rule numbers, not from input
        replay: Callable[[list[Any], list[Token]], None] = namespace["replay"]
        return replay

    def _unit_run(self, below: int, top: int, kind: str) -> int:
        """The state a run of unit reductions ends in, from `top` over `below`, before `kind`; remembered.

        Each unit reduction pops one state and pushes the goto from the one below, which stays:
        the whole run depends on these three alone (a chain of ten precedence levels is one lookup).
        """
        state = top
        while True:
            action = self.rows[state].get(kind)
            if action is None or action >= 0 or self.rules[~action][2] is not None:
                break
            state = self.rows[below][self.rules[~action][1]]
        self.units[below, top, kind] = state
        return state


def _reduction(size: int, method: Callable[..., Any] | None, expand1: bool, include: list[list[Any]] | None,
               trailing: int) -> Callable[[list[Any]], Any]:
    """A function that takes a rule's `size` children off the values and returns its node (see _reduction_code)."""
    names = [f"c{i}" for i in range(size)]
    lines = ["def reduce(values):"]
    if size:
        lines += [f"    {''.join(f'{name}, ' for name in names)}= values[-{size}:]", f"    del values[-{size}:]"]
    lines += ["    " + line for line in _reduction_code(names, method and "build", expand1, include, trailing, "node")]
    lines.append("    return node")
    namespace: dict[str, Any] = {"build": method}
    exec("\n".join(lines), namespace)  # the rule's own code: written from the table's data, not from input
    reduce: Callable[[list[Any]], Any] = namespace["reduce"]
    return reduce


def _reduction_code(children: list[str], build: str | None, expand1: bool, include: list[list[Any]] | None,
                    trailing: int, node: str) -> list[str]:
    """Lines that set `node` to a rule's node from its children's names, as Lark's tree builder makes it: the
    kept children (a `_rule`'s spliced in, None for a missing optional) passed to `build`, or the list itself
    for a `_rule` without a method; `?rule` passes a lone child up."""
    steps = [[i, False, 0] for i in range(len(children))] if include is None else include
    parts: list[str] = []  # the kept children as list items: `c0`, `*c1`, `None`
    for i, splice, nones in steps:
        parts += ["None"] * nones + [f"*{children[i]}" if splice else children[i]]
    parts += ["None"] * trailing
    if not any(part.startswith("*") for part in parts):  # as many children every time: no list to build
        if expand1 and len(parts) == 1:
            return [f"{node} = {parts[0]}"]
        return [f"{node} = {build}({', '.join(parts)})" if build else f"{node} = [{', '.join(parts)}]"]
    # Lark's tree builder grows a first spliced list in place (a left-recursive rule's list): so does this
    first = parts[0]
    lines = [f"{node} = {first[1:]}" if first.startswith("*") else f"{node} = [{first}]"]
    for part in parts[1:]:
        lines.append(f"{node}.extend({part[1:]})" if part.startswith("*") else f"{node}.append({part})")
    if expand1:
        lines.append(f"{node} = {node}[0] if len({node}) == 1 else {f'{build}(*{node})' if build else node}")
    elif build:
        lines.append(f"{node} = {build}(*{node})")
    return lines


END_TOKEN = Token(END, "")
_MORE = object()  # the loop ran out of tokens before the end state
_UNSEEN: list[Any] = []  # a statement's shape not met before (Parser.shapes)


if __name__ == "__main__":
    write()
