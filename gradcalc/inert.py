"""Text from a file made inert before it reaches a terminal.

A submission's file name, a claim, a line of a program: any of them may hold an
escape sequence (ESC [2J clears the screen, OSC 52 writes the clipboard), a
newline that forges a row of a table, or a bidi override that reverses what the
reader sees. Every such character is shown as a visible escape instead, the way
Python's repr shows it (`\\x1b`, `\\n`, `\\u202e`), so text output stays one line
per row and nothing in it is an instruction to the terminal. JSON keeps the
characters themselves, written as \\u escapes (the same string once parsed).
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, the line and paragraph separators, and the bidi marks, embeddings,
# overrides and isolates (Trojan Source, CVE-2021-42574). Patterns, compiled where first used (re keeps
# them): compiling these classes at import took 2 ms of every command's start-up.
# zero-width characters too (U+200B-U+200D, the word joiner, U+FEFF): shown, else a caret under them looks misplaced
_OTHERS = "\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff"
_UNSAFE_TEXT = f"[\x00-\x1f{_OTHERS}]"
_UNSAFE_LINES = f"[\x00-\x09\x0b-\x1f{_OTHERS}]"  # a newline kept
# JSON escapes C0 itself; what is left to escape there (outside strings JSON has only ASCII).
_UNSAFE_JSON = f"[{_OTHERS}]"
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str) -> str:
    """One line of text safe to print: every control or bidi character as a visible escape."""
    return re.sub(_UNSAFE_TEXT, _escape, text) if re.search(_UNSAFE_TEXT, text) else text


def inert_lines(text: str) -> str:
    """Text of several lines safe to print: as inert(), keeping its newlines."""
    return re.sub(_UNSAFE_LINES, _escape, text) if re.search(_UNSAFE_LINES, text) else text


def inert_json(text: str) -> str:
    """Serialised JSON with the characters JSON leaves raw (DEL, C1, bidi) as \\u escapes."""
    if text.isascii() and "\x7f" not in text:  # most documents: nothing to escape, no pattern to compile
        return text
    return re.sub(_UNSAFE_JSON, lambda m: f"\\u{ord(m.group()):04x}", text) if re.search(_UNSAFE_JSON, text) else text
