"""The lexer of lalr.py as a class Lark's own parser takes (`lexer=`); imported only with Lark.

Lark's parser runs only on a text the tables rejected (its error is the one reported) and in the
tests, as the reference the fast loop is compared with. The class lives in a module of its own so
that Lark can pickle it into its cache of the analysed grammar.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lark.exceptions import UnexpectedCharacters
from lark.lexer import Lexer

from . import lalr


class LarkLexer(Lexer):
    """lalr.Lexer behind Lark's lexer interface; a character no terminal matches is Lark's UnexpectedCharacters."""

    def __init__(self, conf: Any) -> None:
        self.lexer = lalr.lexer()

    def lex(self, text: str) -> Iterator[lalr.Token]:  # type: ignore[override]  # Lark's interface 0: the text
        try:
            tokens = self.lexer.lex(text)
        except lalr.BadCharacter as bad:  # the tokens before it first: the parser's error there comes first
            yield from bad.tokens
            raise UnexpectedCharacters(text, bad.pos, bad.line, bad.column) from None
        yield from tokens
