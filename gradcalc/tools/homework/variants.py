"""Variants: each student's own copy of a key, its numbers drawn from a seed and the student's id.

Only a top-level `name = number` (or `name = -number`) assigned once is varied: the number keeps its sign, its
decimals and its kind (an integer stays an integer, never 0), and moves to between half and one and a half
times itself. Numbers in scientific notation, in expressions and in tensors stay as written. Each variant must
run: a draw that breaks the program (a shape, a domain) is drawn again.
"""

from __future__ import annotations

import csv
import io
import os
import random
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from ...errors import GradcalcError, UsageError
from ...files import read_text
from ...language import syntax as S
from .gradebook import student

DRAWS = 20  # tries for a variant that runs
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # an id that is a file name of its own in any folder


def roster(path: str, limit: int) -> list[str]:
    """The students' ids: the `student` column of a CSV roster with a header row (else its first column)."""
    rows = list(csv.reader(io.StringIO(read_text(path, limit))))
    if len(rows) < 2:
        raise UsageError(f"{path}: no students", "give a CSV file with a header row and a row per student")
    header = [cell.strip().lower() for cell in rows[0]]
    column = header.index("student") if "student" in header else 0
    return [row[column].strip() for row in rows[1:] if len(row) > column and row[column].strip()]


def checked_ids(ids: list[str], where: str) -> list[str]:
    """The ids, each a file name of its own and given once (UsageError naming `where` if not)."""
    for id_ in ids:
        if not _ID.fullmatch(id_):
            raise UsageError(f"{where}: '{id_}' cannot name a file",
                             "ids are letters, digits, '.', '_' and '-', starting with a letter or digit")
    twice = [id_ for id_, count in Counter(ids).items() if count > 1]
    if twice:
        raise UsageError(f"{where}: '{twice[0]}' is listed twice", "give each student once")
    return ids


def _varied(module: S.Module) -> list[S.Number]:
    """The numbers a variant draws anew: each top-level `name = number` of a name assigned once."""
    counts = Counter(stmt.name for stmt in S.statements(module.body) if isinstance(stmt, S.Assign))
    found = []
    for stmt in module.body:
        if not isinstance(stmt, S.Assign) or stmt.op != "=" or counts[stmt.name] != 1:
            continue
        value = stmt.value.operand if isinstance(stmt.value, S.Unary) and stmt.value.op in ("-", "−") \
            else stmt.value
        if isinstance(value, S.Number) and re.fullmatch(r"\d+(\.\d*)?|\.\d+", value.text) and value.value != 0:
            found.append(value)
    return found


def _draw(text: str, rng: random.Random) -> str:
    """A number like `text`: as many decimals, between half and 1.5 times it, never 0, unlike it if it can be."""
    value = float(text)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    step = 10.0 ** -decimals
    low, high = max(step, round(value * 0.5 / step) * step), max(step, round(value * 1.5 / step) * step)
    choices = round((high - low) / step) + 1
    for _ in range(5):
        drawn = f"{low + rng.randrange(choices) * step:.{decimals}f}"
        if drawn != text:
            return drawn
    return drawn


def variant(source: str, numbers: list[S.Number], rng: random.Random) -> tuple[str, dict[str, str]]:
    """The key's text with its varied numbers drawn anew, and each number's text before and after."""
    lines = source.split("\n")
    changed: dict[str, str] = {}
    for number in sorted(numbers, key=lambda n: (n.pos.line, -n.pos.column)):  # right to left on each line
        line = lines[number.pos.line - 1]
        start = number.pos.column - 1
        drawn = _draw(number.text, rng)
        lines[number.pos.line - 1] = line[:start] + drawn + line[start + len(number.text):]
        changed[f"{number.pos.line}:{number.pos.column}"] = drawn
    return "\n".join(lines), changed


def make(text: str, module: S.Module, ids: list[str], seed: int, runs: Callable[[str], Any],
         heading: str) -> dict[str, str]:
    """Each student's variant text (`runs(text)` must run it, raising GradcalcError where it fails)."""
    numbers = _varied(module)
    if not numbers:
        raise UsageError("the key has no number to vary", "assign its values as `w1 = 3` at the top level")
    made: dict[str, str] = {}
    for id_ in ids:
        rng = random.Random(f"{seed}:{id_}")  # a student's variant depends on the seed and the id only
        for _ in range(DRAWS):
            drawn, _changed = variant(text, numbers, rng)
            try:
                runs(drawn)
            except GradcalcError:
                continue
            made[id_] = f"# {heading} for {id_}\n{drawn}"
            break
        else:
            raise UsageError(f"no variant of the key runs for {id_} in {DRAWS} draws",
                             "vary fewer numbers: write the ones that must stay as expressions, such as 4 + 0")
    return made


def variant_for(name: str, folder: str) -> str | None:
    """The variant a submission is judged against: FOLDER/ID.eq, where ID is its name without extension, or
    the folder the submission is in (alice/answers.txt: alice)."""
    parts = student(name).replace("\\", "/").split("/")
    id_ = parts[0] if len(parts) > 1 else parts[-1]
    path = os.path.join(folder, f"{id_}.eq")
    return path if _ID.fullmatch(id_) and os.path.isfile(path) else None
