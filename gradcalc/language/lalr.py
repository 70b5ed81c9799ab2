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
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, compress
from typing import TYPE_CHECKING, Any

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
    kept: set[str] = set()  # the terminals some rule keeps as a child (the others, `_NL` and `;`, are filtered out)
    for rule in lark.rules:
        made = maybe_create_child_filter(rule.expansion, rule.options.keep_all_tokens, False,
                                         list(rule.options.empty_indices))
        positions = range(len(rule.expansion)) if made is None else [i for i, *_ in made.args[0]]
        kept.update(rule.expansion[i].name for i in positions if rule.expansion[i].is_term)
    return {
        "grammar": text,
        "lexer": _lexer_data(lark.lexer_conf),
        "kept": sorted(kept),
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
    """Lark's terminals as one regular expression, tried in Lark's order (longer literals first); the same in the
    order the lexer scans with (_scan_order); keywords, which NAME also matches, as a table from text to type."""
    name_pattern = re.compile(next(t.pattern.to_regexp() for t in conf.terminals if t.name == "NAME"))
    keywords = {t.pattern.value: t.name for t in conf.terminals
                if t.pattern.type == "str" and name_pattern.fullmatch(t.pattern.value)}
    ordered = sorted((t for t in conf.terminals if t.name not in set(keywords.values())),
                     key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    alternatives = [(t.name, t.pattern.to_regexp()) for t in ordered]
    return {
        "pattern": "|".join(f"(?P<{name}>{regexp})" for name, regexp in alternatives),
        "scan": "|".join(_alternatives(regexp) for _, regexp in _scan_order(alternatives)),
        "keywords": dict(sorted(keywords.items())),
        "ignore": sorted(conf.ignore),
        # the terminals whose every match has one length (a replay writes a token's width, not its len())
        "widths": {t.name: t.pattern.max_width for t in sorted(conf.terminals, key=lambda t: t.name)
                   if t.pattern.min_width == t.pattern.max_width and t.name != "NAME"},
    }


# The terminals a program is mostly made of, tried first where that changes nothing (see _scan_order).
COMMON = ("NAME", "NUMBER", "LPAR", "RPAR", "MUL_OP", "ADD_OP", "EQUALS", "_NL", "COMMA", "LSQB", "RSQB", "POW_OP")


def _scan_order(alternatives: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The terminals in an order the alternation matches exactly as in Lark's, the common ones first.

    An alternation takes, at each place, the first alternative that matches there. Two terminals can both
    match at one place only if a match of each can start with the same character, so only such pairs keep
    their order: each common terminal is moved forward with those it must follow. (Each `*`, `=` or `(` of a
    program was tried against some forty alternatives before its own: a fifth of the lexer's time.)
    """
    firsts = [_first_characters(regexp) for _, regexp in alternatives]

    def meet(a: frozenset[str] | None, b: frozenset[str] | None) -> bool:
        return a is None or b is None or bool(a & b)

    placed: list[int] = []

    def place(i: int) -> None:
        if i not in placed:
            for k in range(i):
                if meet(firsts[k], firsts[i]):
                    place(k)
            placed.append(i)

    names = [name for name, _ in alternatives]
    for name in COMMON:
        if name in names:
            place(names.index(name))
    for i in range(len(alternatives)):
        place(i)
    return [alternatives[i] for i in placed]


def _alternatives(regexp: str) -> str:
    """A terminal's expression as alternatives of the scanning alternation: a group of alternatives loses its
    group, which changes no match (the first alternative that matches is taken, as from the group), and lets
    the matcher skip each one that starts with another character than the text's ("*" was tried against the
    seven assignment operators inside one group)."""
    from re import _constants as C  # the standard library's own reading of an expression, at build only
    from re import _parser

    parsed = _parser.parse(regexp)  # (which reads a group of alternatives as the alternatives)
    if regexp.startswith("(?:") and regexp.endswith(")") and len(parsed) == 1 and parsed[0][0] is C.BRANCH:
        try:
            alone = repr(_parser.parse(regexp[3:-1])) == repr(parsed)  # not (?:a)|(?:b): one group, the whole
        except re.error:
            alone = False
        if alone:
            return regexp[3:-1]
    return f"(?:{regexp})"


def _first_characters(regexp: str) -> frozenset[str] | None:
    """The characters a match of the expression can start with, as the standard library reads the expression;
    None where that is not worked out here (any character: a set's complement, a class, an empty match)."""
    from re import _constants as C  # the standard library's own reading of an expression, at build only
    from re import _parser

    def first(items: Any) -> tuple[frozenset[str] | None, bool]:  # (characters, whether it can match nothing)
        found: set[str] = set()
        for op, av in items:
            if op in (C.ASSERT, C.ASSERT_NOT, C.AT):  # zero-width: what follows starts the match (a superset)
                continue
            if op is C.LITERAL:
                return frozenset(found | {chr(av)}), False
            if op is C.IN:
                for item, value in av:
                    if item is C.LITERAL:
                        found.add(chr(value))
                    elif item is C.RANGE and value[1] - value[0] < 4096:
                        found.update(map(chr, range(value[0], value[1] + 1)))
                    else:
                        return None, False
                return frozenset(found), False
            if op is C.BRANCH:
                parts = [first(branch) for branch in av[1]]
                if any(chars is None for chars, _ in parts):
                    return None, False
                found.update(*(chars for chars, _ in parts if chars is not None))
                if not any(empty for _, empty in parts):
                    return frozenset(found), False
                continue
            if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) or op is C.SUBPATTERN or op is C.ATOMIC_GROUP:
                if op is C.SUBPATTERN and (av[1] or av[2]):  # flags (case) change what a character matches
                    return None, False
                body = av if op is C.ATOMIC_GROUP else av[-1]
                chars, empty = first(body)
                if chars is None:
                    return None, False
                found |= chars
                if not (empty or (op not in (C.SUBPATTERN, C.ATOMIC_GROUP) and av[0] == 0)):
                    return frozenset(found), False
                continue
            return None, False
        return frozenset(found), True

    chars, empty = first(_parser.parse(regexp))
    return None if empty else chars


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


BLANKS = "\t\f "  # what a piece may end with after its token: ignored, as is a \r after them


class _Table(dict[str, str]):
    """A piece's text → what the lexer makes of it (its kind, or its text): a dict whose missing entries it reads,
    so that the table is consulted in C (`map`) and Python runs only for a piece not met before."""

    def __init__(self, read: Callable[[str], tuple[str, str]], which: int) -> None:
        super().__init__()
        self.read_new, self.which = read, which

    def __missing__(self, piece: str) -> str:
        return self.read_new(piece)[self.which]


class Lexer:
    """The grammar's terminals as one regular expression; the text cut into pieces by it in one call.

    `findall` with the alternation's groups made plain cuts the whole text in C (a match object a
    token, and a group for each of some thirty terminals, cost twice as much); a piece is a token with
    the blanks after it, and what it is (kind and text) is read once per
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
        # the same alternation, in the scanning order (_scan_order), and the blanks after a token (not before \r: the
        # ignored run takes it, as it takes blanks at a line's start): findall returns the pieces' texts
        self.pieces = re.compile(f"(?:{_plain(data['scan'])})(?:[{BLANKS}]++(?!\r))?")
        if self.pieces.groups:  # a `(` _plain did not see (in a character class): say so, not lex wrongly
            raise ValueError("the lexer's pattern has a group that could not be made plain")
        # a piece's text → its token's kind ("" for what is ignored), and → its text (interned; for what is ignored
        # the piece itself, whose new lines count); a token starts where its piece does
        self.kinds, self.texts = _Table(self._read, 0), _Table(self._read, 1)

    def cut(self, text: str) -> tuple[tuple[str, ...], tuple[str, ...], list[int]]:
        """The text's pieces as parallel sequences: kinds ("" for what is ignored), texts, and where each starts
        (with the text's end last); BadCharacter at a character nothing matches. Made by C loops: Python runs
        only for a piece not met before."""
        pieces = self.pieces.findall(text)
        starts = list(accumulate(map(len, pieces), initial=0))
        if starts[-1] != len(text):  # findall steps over a character nothing matches: find it
            raise self._bad(text)
        if not pieces:
            return (), (), starts
        kinds = tuple(map(self.kinds.__getitem__, pieces))  # (reading a new piece's text too)
        return kinds, tuple(map(self.texts.__getitem__, pieces)), starts

    def lex(self, text: str) -> list[Token]:
        """The tokens of the text; BadCharacter (with the tokens before it) at a character nothing matches."""
        try:
            kinds, texts, starts = self.cut(text)
        except BadCharacter as bad:
            bad.tokens = self.lex(text[:bad.pos])
            raise
        return tokens(kinds, texts, starts, 0, len(kinds), 1, -1)[0]

    def _read(self, piece: str) -> tuple[str, str]:
        """What a piece of text is, as the named expression reads its token: its kind and text; remembered."""
        found = self.pattern.match(piece)
        assert found is not None and not piece[found.end():].strip(BLANKS), piece  # a terminal's match, and blanks
        kind, value = found.lastgroup or "", found.group()
        if kind in self.ignore:
            kind, value = "", piece
        elif kind == "NAME":
            if not value.isascii():
                value = composed(value.translate(SUBSCRIPTS))
            kind = self.keywords.get(value, "NAME")
        value = sys.intern(value)  # one string for all the `y`s: the tree's names are interned
        if len(self.kinds) < 100_000:  # names are the only open-ended kind: a bound on what is kept
            self.kinds[piece], self.texts[piece] = kind, value
        return kind, value

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


def tokens(kinds: Sequence[str], texts: Sequence[str], starts: Sequence[int], begin: int, end: int, line: int,
           base: int) -> tuple[list[Token], int, int]:
    """The tokens of the lexer's pieces begin..end, the first on `line` (a column is its start - `base`);
    the line and base after them."""
    made: list[Token] = []
    append, new = made.append, str.__new__
    for k in range(begin, end):
        kind, value, start = kinds[k], texts[k], starts[k]
        if kind:
            token = new(Token, value)  # Token(...) without a Python-level __new__: one per token, it shows
            token.type, token.start_pos, token.line, token.column = kind, start, line, start - base
            append(token)
        if "\n" in value:  # a new line (or several), or a line continued by `\`
            line += value.count("\n")
            base = start + value.rindex("\n")
    return made, line, base


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


class Parser:
    """The tables run by a lean loop, building each rule's node as `callbacks` (a method per rule or alias) or
    `nodes` (a template per alias: see _filled) say.

    A rule of one child marked `?` (`?expr: or_test`) passes its child up without a call; a `_rule`
    with no method gives its children, which its parent splices into its own, as Lark does. Each
    other rule's reduction is a small function written from its table entry (which children it
    keeps, where a missing `[optional]` is None), so the loop runs no generic filtering per node;
    it is written the first time the rule is reduced (a program uses a few dozen of some 180).

    A program (`program`) is read a statement at a time from the lexer's parallel kinds, texts and starts.
    What the loop does with a statement depends only on the states it starts in and its tokens' kinds, so
    the reductions it made are recorded under those the first time a shape is met, and from the third (`y =
    a*x + b` and `h = w*u - c` are one shape) replayed as straight-line code that reads the texts and starts
    where they lie: no token object is made, and a template's node is written in place. Blocks' { and } are
    tracked across statements. What the post-lexer must see whole (brackets over lines, `else` on a new line,
    check statements) it gets as tokens, inside the blocks open there, and a statement of it is replayed by
    shape from its tokens (_chunks); a text any other start symbol reads goes through it whole (`parse`).
    """

    def __init__(self, data: dict[str, Any], start: str, callbacks: object, nodes: dict[str, Template] | None = None,
                 namespace: dict[str, Any] | None = None) -> None:
        self.start_state, self.end_state = data["starts"][start]
        self.rows: list[dict[str, int]] = data["states"]
        if any(row.get(END, -1) >= 0 for row in self.rows):  # the loop returns at the end state instead
            raise ValueError("the tables shift the end of the input: not an LALR table Lark builds")
        nodes = nodes or {}
        self.kept = frozenset(data["kept"])  # the terminals a node may keep (see _compiled)
        self.widths: dict[str, int] = data["lexer"]["widths"]
        self.namespace = {**(namespace or {}), "Token_": Token, "new_": object.__new__}  # what the code reads
        self.units: dict[tuple[int, int, str], int] = {}  # see _unit_run
        # (size, goto symbol, the reduction taking its children off the values, or None for a unit rule)
        self.rules: list[tuple[int, str, Callable[[list[Any]], Any] | None]] = []
        self.made: list[tuple[Callable[..., Any] | None, Template | None, bool, list[list[Any]] | None, int]] = []
        for size, symbol, name, expand1, include, trailing in data["rules"]:
            template = nodes.get(name)
            method = None if template is not None else getattr(callbacks, name, None)
            if method is None and template is None and not name.startswith("_") and not expand1:
                raise TypeError(f"the grammar's rule {name!r} has no method in {type(callbacks).__name__}")
            unit = size == 1 and expand1 and include is None
            self.made.append((method, template, expand1, include, trailing))
            self.rules.append((size, symbol, None if unit else self._lazy(len(self.rules))))
        # states → kinds → [the replay once written, the reductions recorded, the states after, times run; in
        # `program`, the blocks closed, the depth added and where blocks open (_Brackets.plain), and the replay of
        # a run of the shape (None until its first replay, then whether it can run, then the replay written: see
        # _compiled)]; _STRETCH for a statement the post-lexer must see
        self.shapes: dict[tuple[int, ...], dict[tuple[str, ...], list[Any]]] = {}
        self.recorded = 0  # shapes recorded since the table was last emptied
        self.states: dict[tuple[int, ...], tuple[int, ...]] = {}  # see _state

    def _lazy(self, index: int) -> Callable[[list[Any]], Any]:
        """The rule's reduction, written when it is first reduced (and put in its place in `rules`)."""

        def first(values: list[Any]) -> Any:
            size, symbol, _ = self.rules[index]
            reduce = _reduction(size, *self.made[index], self.namespace)
            self.rules[index] = (size, symbol, reduce)
            return reduce(values)

        return first

    def parse(self, chunks: Iterable[list[Token]]) -> Any:
        """The tree of the tokens, given in lists (the post-lexer's), the last ending with END_TOKEN."""
        result = self._chunks([self.start_state], [], chunks, None)
        if result is _MORE:
            raise Rejected
        return result

    def program(self, kinds: tuple[str, ...], texts: tuple[str, ...], starts: list[int], post: Statements) -> Any:
        """A program's tree from the lexer's cut (Lexer.cut), read a statement at a time (see the class)."""
        if "" in kinds:  # comments and trailing blanks, out; a line continued by `\` moves the lines: tokens count them
            if any("\n" in text for kind, text in zip(kinds, texts) if not kind):
                made = tokens(kinds, texts, starts, 0, len(kinds), 1, -1)[0]
                # (from the text's start: a rejected statement that starts a line is explained from its line)
                result = self._chunks([self.start_state], [], chain(post.chunks(made), ([END_TOKEN],)), "")
                if result is _MORE:
                    raise Rejected
                return result
            keep = list(map(bool, kinds))
            kinds, texts = tuple(compress(kinds, keep)), tuple(compress(texts, keep))
            starts = list(compress(starts, keep))
        states = [self.start_state]
        values: list[Any] = []
        tables, joins, index = self.shapes, post.joins, kinds.index
        stops = joins | {"_NL"}  # what ends a run of one shape after a statement (see _compiled)
        state = self._state(states)  # the states as a tuple (one object for equal ones): a shape's key, what it leaves
        table = tables.setdefault(state, {})  # the shapes met in those states
        n = len(kinds)
        semicolon = _find(index, "SEMICOLON", 0, n)  # the first `;` at or after i
        i, line, base, previous = 0, 1, -1, ""  # base: a column is a start - base
        braces: list[Any] = []  # the blocks' { open here: a Token, or (its index, line, base) (see _opener)
        deepest = post.max_depth
        line_first = 0  # the first token of this line's first statement, where that statement is not in a block
        while i < n:
            if previous == "_NL":
                line_first = -1 if braces else i
            if semicolon < i:
                semicolon = _find(index, "SEMICOLON", i, n)
            try:
                j = index("_NL", i, semicolon)
            except ValueError:
                j = semicolon
            if j == n:
                break  # the last statement, with no separator
            shape_kinds = kinds[i:j + 1]
            shape = table.get(shape_kinds)
            end = j + 1  # the next statement's first token
            separator = kinds[j]
            if separator == "_NL":
                while end < n and kinds[end] == "_NL":  # the new lines of blank and comment lines: one
                    end += 1
            if shape is None:  # met first: what the post-lexer would make of it, whether it runs or not
                plain = post.plain(shape_kinds)
                table = self._room(state, table)
                shape = table[shape_kinds] = _STRETCH if plain is None else [None, None, None, 0, *plain, None]
            # (`} ⏎ else {`: the post-lexer joins them; a } with no { open, brackets too deep: its errors)
            if shape is _STRETCH or (end < n and kinds[end] in joins) or shape[4] > len(braces) \
                    or len(braces) + shape[5] > deepest:
                states[:] = state
                i, line, base, previous = self._stretch(states, values, kinds, texts, starts, i, line, base,
                                                        previous, post, post.stretch(kinds, i), braces)
                state = self._state(states)
                table = tables.setdefault(state, {})
                continue
            # from its third time, replayed (unless so long that writing the replay costs more)
            if shape[0] is not None or (shape[3] >= 2 and j - i < LONGEST_REPLAY):
                if shape[0] is None:
                    shape[0] = self._compiled(shape[1], shape_kinds)
                shape[0](values, texts, starts, i, line, base)
                if shape[7] is None:  # whether the statements after it of its shape can be replayed in one call: where
                    # it ends a line in the state it starts in, opening and closing no block (see _compiled)
                    shape[7] = separator == "_NL" and shape[2] is state and not (shape[4] or shape[6]) \
                        and shape_kinds[0] not in joins
                if shape[2] is not state:
                    state = shape[2]
                    table = tables.setdefault(state, {})
            else:
                states[:] = state
                made = tokens(kinds, texts, starts, i, j + 1, line, base)[0]
                record: list[int] | None = [] if shape[1] is None else None
                try:
                    self._run(states, values, made, record)
                except Rejected:
                    # a statement on a line whose first one is not in a block: Lark need read only from that line's
                    # start (parser._parse), however many `;` come before it there
                    if line_first > 0 and not braces:
                        raise Rejected(starts[line_first]) from None
                    raise
                if record is not None:
                    shape[1], shape[2] = record, self._state(states)
                shape[3] += 1
                state, table = shape[2], tables.setdefault(shape[2], {})
            if shape[4] or shape[6]:  # the blocks it closed and opened
                del braces[len(braces) - shape[4]:]
                braces += [(i + k, line, base) for k in shape[6]]
            previous = separator
            if separator == "_NL":
                for m in range(j, end) if end > j + 1 else (j,):
                    text = texts[m]
                    line += text.count("\n")
                    base = starts[m] + text.rindex("\n")
            i = end
            # a run of statements of one shape (a chain's, a layer's) from its second: replayed in one call
            if shape[7] and i < n and kinds[i] == shape_kinds[0] and kinds[i:i + len(shape_kinds)] == shape_kinds:
                if shape[7] is True:
                    shape[7] = self._compiled(shape[1], shape_kinds, run=True)
                i, line, base = shape[7](values, kinds, texts, starts, i, line, base, n, stops)
        states[:] = state
        if i < n or braces:  # (a block never closed: the post-lexer says so)
            self._stretch(states, values, kinds, texts, starts, i, line, base, previous, post, n, braces)
        result = self._run(states, values, [END_TOKEN], None)
        if result is _MORE:
            raise Rejected
        return result

    def _stretch(self, states: list[int], values: list[Any], kinds: tuple[str, ...], texts: tuple[str, ...],
                 starts: list[int], i: int, line: int, base: int, previous: str, post: Statements,
                 end: int, braces: list[Any]) -> tuple[int, int, int, str]:
        """The statements kinds[i:end], which the post-lexer must see whole, parsed as tokens through it (inside
        the blocks `braces` opened, which it leaves as they are then): where they end, the line and base there,
        and the last token's kind."""
        made, line, base = tokens(kinds, texts, starts, i, end, line, base)
        opened = [self._opener(brace, kinds, texts, starts) for brace in braces]
        # a rejected statement in a block is explained from the text's start (Lark needs its {)
        self._chunks(states, values, post.chunks(made, opened, final=end == len(kinds)),
                     "" if braces else previous)
        braces[:] = post.open
        return end, line, base, kinds[end - 1] if end > i else previous

    @staticmethod
    def _opener(brace: Any, kinds: tuple[str, ...], texts: tuple[str, ...], starts: list[int]) -> Token:
        """A block's open {, as the token the post-lexer keeps for its messages."""
        if isinstance(brace, Token):
            return brace
        k, line, base = brace
        return Token(kinds[k], texts[k], starts[k], line, starts[k] - base)

    def _room(self, state: tuple[int, ...],
              table: dict[tuple[str, ...], list[Any]]) -> dict[tuple[str, ...], list[Any]]:
        """The table to put a new shape in (`table`, the shapes met in `state`): emptied with the others first when
        a program of ever new shapes has filled them, so that memory stays bounded."""
        self.recorded += 1
        if self.recorded <= 4096:
            return table
        self.shapes.clear()
        self.recorded = 0
        return self.shapes.setdefault(state, {})

    def _state(self, states: list[int]) -> tuple[int, ...]:
        """The states as a tuple, one object for equal ones (a replay compares them by identity)."""
        state = tuple(states)
        return self.states.setdefault(state, state)

    def _chunks(self, states: list[int], values: list[Any], chunks: Iterable[list[Token]], previous: str | None) -> Any:
        """The loop over the post-lexer's chunks: the result at the end state, else _MORE. `previous` (the kind
        before them; None for what is not a program) lets Lark explain a rejected statement from its line.

        A program's statement of a shape met before is replayed as in `program`, from its tokens (a statement over
        several lines, a check's claim as the dialect reads it, `} ⏎ else {`)."""
        tables = self.shapes
        for chunk in chunks:
            try:
                if previous is None or not chunk or chunk[-1].type not in _SEPARATORS:
                    result = self._run(states, values, chunk, None)
                else:
                    state = self._state(states)
                    kinds = (_TOKENS, *[token.type for token in chunk])  # (keyed apart from `program`'s shapes)
                    table = tables.setdefault(state, {})
                    shape = table.get(kinds)
                    if shape is None:
                        table = self._room(state, table)
                        shape = table[kinds] = [None, None, None, 0]
                    if shape[0] is not None or (shape[3] >= 2 and len(chunk) < LONGEST_REPLAY):
                        if shape[0] is None:
                            shape[0] = self._compiled(shape[1], kinds[1:], tokens=True)
                        shape[0](values, chunk)
                        states[:] = shape[2]
                    else:
                        record: list[int] | None = [] if shape[1] is None else None
                        self._run(states, values, chunk, record)
                        if record is not None:
                            shape[1], shape[2] = record, self._state(states)
                        shape[3] += 1
                    result = _MORE
            except Rejected as rejected:
                if not rejected.args and previous == "_NL" and chunk:
                    raise Rejected(chunk[0].start_pos) from None
                raise
            if result is not _MORE:
                return result
            if chunk and previous is not None:
                previous = chunk[-1].type
        return _MORE

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

    def _compiled(self, record: list[int], kinds: tuple[str, ...], tokens: bool = False,
                  run: bool = False) -> Callable[..., Any]:
        """A statement's recorded shifts and reductions as one straight-line function of (values, texts, starts, i,
        line, base): each reduction's code (as _reduction writes it) on local names, its tokens read where the
        lexer left them (token k's text t{k}, start s{k}), the values list touched once at the end. With `tokens`,
        a function of (values, tokens): token k is the local t{k}, as a reduction reads a token.

        With `run`, for a statement that ends a line in the state it starts in: a loop of it over the statements
        from kinds[i] while they have its kinds and the next token is not one of `stops` (a join such as `else`,
        or a new line the program loop must count), a function of (values, kinds, texts, starts, i, line, base, n,
        stops) that returns the i, line and base after them. (The program loop's bookkeeping cost a chain's
        statement half as much as its replay: 14k instructions against 30k.)"""
        count = len(kinds)
        lines = ["def replay(values, tokens):", f"    {''.join(f't{k}, ' for k in range(count))}= tokens"] if tokens \
            else ["def replay(values, texts, starts, i, line, base):",
                  f"    {''.join(f't{k}, ' for k in range(count))}= texts[i:i + {count}]",
                  f"    {''.join(f's{k}, ' for k in range(count))}= starts[i:i + {count}]"]
        if run:
            lines[0] = "def replay(values, kinds, texts, starts, i, line, base, n, stops):"
            # (`while True`: its jump back warms the code up, so that Python specializes it while the loop runs;
            # a `while` with a condition jumps back with an instruction that does not, in Python 3.11)
            after = f"i + {count}"  # the next statement's first token
            lines[1:1] = ["  while True:",
                          f"    if kinds[i:{after}] != KINDS or {after} < n and kinds[{after}] in stops:",
                          "      return i, line, base"]
        namespace = dict(self.namespace)
        stack: list[Any] = []  # what the loop's values would hold above those the statement found: names, _Slots
        below = shifted = 0  # of the values the statement found, how many its reductions took; tokens shifted
        for n, step in enumerate(record):
            if step < 0:
                kind = kinds[shifted]
                stack.append(f"t{shifted}" if tokens else _Slot(shifted, kind, self.widths.get(kind)))
                shifted += 1
                continue
            size = self.rules[step][0]
            method, template, expand1, include, trailing = self.made[step]
            if size > len(stack):  # the rest of its children: on top of the values it found, deepest first
                taken = size - len(stack)
                for k in range(taken):
                    lines.append(f"    v{below + k} = values[-{below + taken - k}]")
                stack[:0] = [f"v{below + k}" for k in range(taken)]
                below += taken
            children = stack[len(stack) - size:]
            del stack[len(stack) - size:]
            if method is not None:
                namespace[f"m{step}"] = method
            code, result = _reduction_code(children, method and f"m{step}", template, expand1, include, trailing,
                                           f"x{n}", namespace)
            lines += ["    " + line for line in code]
            stack.append(result)
        if below:
            lines.append(f"    del values[-{below}:]")
        # a token left on the values (the separator) that no rule keeps is filtered out when its rule is reduced,
        # in the next statement: None stands for it (a token object for it was an eleventh of a chain's parse)
        left = ["None" if isinstance(part, _Slot) and part.kind not in self.kept else _value(part) for part in stack]
        lines.append(f"    values.extend(({''.join(f'{part}, ' for part in left)}))")
        if run:  # (the body's four spaces are inside a two-space loop)
            last = count - 1
            lines += [f"    line += t{last}.count('\\n')", f"    base = s{last} + t{last}.rindex('\\n')",
                      f"    i += {count}"]
            namespace["KINDS"] = kinds
        exec("\n".join(lines), namespace)  # written from the recorded rule numbers, not from input
        replay: Callable[..., Any] = namespace["replay"]
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


if TYPE_CHECKING:  # for the checker only (a Protocol class costs start-up time)
    from typing import Protocol

    class Statements(Protocol):
        """The post-lexer, as a program's loop asks it where statements end (parser._Brackets)."""

        joins: frozenset[str]  # the kinds that continue the statement before them after a new line (`else`)
        max_depth: int  # brackets nested deeper are an error
        open: list[Token]  # the brackets open where its chunks stopped

        def plain(self, kinds: tuple[str, ...]) -> tuple[int, int, tuple[int, ...]] | None:
            """Whether a statement of these kinds (its separator last) passes the post-lexer as it is: if so, the
            open blocks it closes, how much deeper its brackets go, and where the blocks it opens start."""

        def stretch(self, kinds: tuple[str, ...], i: int) -> int:
            """Where the statements from kinds[i] end that the post-lexer must see whole."""

        def chunks(self, stream: Iterable[Token], opened: Iterable[Token] = (), final: bool = True
                   ) -> Iterator[list[Token]]:
            """The post-lexer's chunks of the tokens, in the blocks `opened` (`final`: the text ends there)."""


def _find(index: Callable[..., int], kind: str, start: int, stop: int) -> int:
    """Where `kind` is first in [start, stop) of a sequence (by its `index`), else `stop`."""
    try:
        return index(kind, start, stop)
    except ValueError:
        return stop


class _Slot:
    """A token of a replayed statement: its text and start are the local names t{k} and s{k} (see _compiled)."""

    __slots__ = ("k", "kind", "width")

    def __init__(self, k: int, kind: str, width: int | None) -> None:
        self.k, self.kind, self.width = k, kind, width  # width: every token of the kind has it


class _Splice:
    """A `_rule`'s list of children, spliced into its parent's."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


# How a child is written in a reduction's code: a local name holding a node or a Token (or None), or a
# replayed statement's token, read from the lexer's texts and starts. A namespace gives Pos and token_pos.
def _value(part: str | _Slot) -> str:
    if part is _EMPTY:
        return "[]"
    if isinstance(part, _Slot):
        return f"Token_({part.kind!r}, t{part.k}, s{part.k}, line, s{part.k} - base)"
    return part


def _text(part: str | _Slot) -> str:
    return f"t{part.k}" if isinstance(part, _Slot) else f"str({part})"


def _name(part: str | _Slot) -> str:  # interned: the lexer interns what it reads
    return f"t{part.k}" if isinstance(part, _Slot) else f"intern(str({part}))"


def _pos(part: str | _Slot) -> str:  # a plain (line, column, width): a node names it when asked (syntax._Node.pos)
    if isinstance(part, _Slot):
        return f"(line, s{part.k} - base, {part.width or f'len(t{part.k})'})"
    return f"token_pos({part})"


Template = str | tuple[str, ...]  # a node's code (see _filled)
_SPELLINGS = {None: _value, "text": _text, "name": _name, "pos": _pos}
_FIELD = re.compile(r"\{(\*|\d+)(?:\.(text|name|pos))?\}")


def _filled(template: Template, part: Callable[[int], str | _Slot], every: str) -> str:
    """A template's code: `{k}` child k, `{k.text}` a token child's text, `{k.name}` its text interned, `{k.pos}`
    its place, and `{*}` every child (written `every`), each as `part` says child k is written. A template
    (class, *arguments) is the class called with them."""
    def field(found: re.Match[str]) -> str:
        if found[1] == "*":
            return every
        return _SPELLINGS[found[2]](part(int(found[1])))

    if isinstance(template, tuple):
        return f"{template[0]}({', '.join(_FIELD.sub(field, argument) for argument in template[1:])})"
    return _FIELD.sub(field, template)


def _inlined(template: Template, part: Callable[[int], str | _Slot], namespace: dict[str, Any],
             node: str) -> list[str] | None:
    """A template (class, *arguments) as lines that make the node without calling its __init__ (a Python
    call a node: a fifth of a statement's replay), where the class's __init__ only keeps its arguments; else None."""
    if not isinstance(template, tuple):
        return None
    cls = namespace[template[0]]
    slots = _plain_slots(cls)
    if slots is None:
        return None
    arguments = [_filled(argument, part, "") for argument in template[1:]]
    return [f"{node} = new_({template[0]})", *(f"{node}.{slot} = {value}" for slot, value in zip(slots, arguments))]


_PLAIN: dict[type, tuple[str, ...] | None] = {}


def _plain_slots(cls: type) -> tuple[str, ...] | None:
    """The slots where the class's __init__ keeps its arguments, in their order, when it keeps each in a slot of
    its own and does nothing else (checked by making one from markers), else None."""
    if cls not in _PLAIN:
        code = cls.__init__.__code__  # type: ignore[misc]  # a Python class's own __init__
        count = code.co_argcount - 1
        slots = {slot for kind in cls.__mro__ for slot in getattr(kind, "__slots__", ())}
        markers = [object() for _ in range(count)]
        try:
            made = cls(*markers)
            kept = {id(getattr(made, slot, None)): slot for slot in slots}
            where = tuple(kept.get(id(marker), "") for marker in markers)
            plain = len(slots) == count and "" not in where and len(set(where)) == count
        except Exception:  # an __init__ that does more than keep its arguments
            plain = False
        _PLAIN[cls] = where if plain else None
    return _PLAIN[cls]


def template_method(template: Template, namespace: dict[str, Any]) -> Callable[..., Any]:
    """A template as a method of the children (`self, *c`): what Lark's transformer calls."""
    code = f"def method(self, *c):\n    return {_filled(template, lambda k: f'c[{k}]', '*c')}"
    scope = dict(namespace)
    exec(code, scope)  # written from the template, not from input
    method: Callable[..., Any] = scope["method"]
    return method


def _reduction(size: int, method: Callable[..., Any] | None, template: Template | None, expand1: bool,
               include: list[list[Any]] | None, trailing: int, namespace: dict[str, Any]) -> Callable[[list[Any]], Any]:
    """A function that takes a rule's `size` children off the values and returns its node (see _reduction_code)."""
    names = [f"c{i}" for i in range(size)]
    lines = ["def reduce(values):"]
    if size:
        lines += [f"    {''.join(f'{name}, ' for name in names)}= values[-{size}:]", f"    del values[-{size}:]"]
    code, result = _reduction_code(names, method and "build", template, expand1, include, trailing, "node", namespace)
    lines += ["    " + line for line in code]
    lines.append(f"    return {_value(result)}")
    scope = {**namespace, "build": method}
    exec("\n".join(lines), scope)  # the rule's own code: written from the table's data, not from input
    reduce: Callable[[list[Any]], Any] = scope["reduce"]
    return reduce


def _reduction_code(children: list[Any], build: str | None, template: Template | None, expand1: bool,
                    include: list[list[Any]] | None, trailing: int, node: str,
                    inline: dict[str, Any] | None = None) -> tuple[list[str], Any]:
    """Lines that set `node` to a rule's node from its children, as Lark's tree builder makes it: the kept
    children (a `_rule`'s spliced in, None for a missing optional) given to the template, or passed to `build`, or
    the list itself for a `_rule` without either; `?rule` passes a lone child up. With the node's name (or the
    child passed up, with no line at all). With `inline` (the namespace), a plain node is made in place (_inlined)."""
    steps = [[i, False, 0] for i in range(len(children))] if include is None else include
    parts: list[Any] = []  # the kept children: names, _Slots, "None", and _Splices
    for i, splice, nones in steps:
        parts += ["None"] * nones + [_Splice(children[i]) if splice else children[i]]
    parts += ["None"] * trailing
    if not any(isinstance(part, _Splice) for part in parts):  # as many children every time: no list to build
        if (expand1 and len(parts) == 1) or template == "{0}":
            return [], parts[0]
        if not parts and build is None and template is None:  # `_sep`'s: nothing to splice, no list made
            return [], _EMPTY
        if template is not None:
            lines = None if inline is None else _inlined(template, parts.__getitem__, inline, node)
            every = ", ".join(map(_value, parts))
            return lines or [f"{node} = {_filled(template, parts.__getitem__, every)}"], node
        values = ", ".join(map(_value, parts))
        return [f"{node} = {build}({values})" if build else f"{node} = [{values}]"], node
    # Lark's tree builder grows a first spliced list in place (a left-recursive rule's list): so does this
    parts = [part for part in parts if not (isinstance(part, _Splice) and part.name is _EMPTY)] or [_Splice(_EMPTY)]
    first = parts[0]
    lines = [f"{node} = {_value(first.name)}" if isinstance(first, _Splice) else f"{node} = [{_value(first)}]"]
    for part in parts[1:]:
        lines.append(f"{node}.extend({part.name})" if isinstance(part, _Splice) else f"{node}.append({_value(part)})")
    made = node
    if template is not None:
        made = _filled(template, lambda k: f"{node}[{k}]", f"*{node}")
    elif build:
        made = f"{build}(*{node})"
    if expand1:
        lines.append(f"{node} = {node}[0] if len({node}) == 1 else {made}")
    elif made != node:
        lines.append(f"{node} = {made}")
    return lines, node


END_TOKEN = Token(END, "")
_MORE = object()  # the loop ran out of tokens before the end state
_STRETCH: list[Any] = []  # a statement's shape that the post-lexer must see (Parser.shapes)
_SEPARATORS = frozenset({"_NL", "SEMICOLON"})  # what ends a program's statement (its `_sep`)
_TOKENS = "(tokens)"  # the first of a key in Parser.shapes for a statement replayed from its tokens (_chunks)
LONGEST_REPLAY = 2048  # tokens: a longer statement's replay took longer to write than three readings of it
_EMPTY = "[]"  # a rule's node that is an empty list, spliced into its parent's: nothing (see _reduction_code)


if __name__ == "__main__":
    write()
