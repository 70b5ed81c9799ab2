"""JSON documents, built from plain dicts and written with the standard library (never through Rich)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from . import backend as B
from .api import Gradients, Run


def values_doc(run: Run) -> dict[str, Any]:
    return {"values": {name: B.to_json(node.value) for name, node in run.frame.items()}}


def grad_doc(result: Gradients) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "of": result.of,
        "value": B.to_json(result.value),
        "grad": {name: B.to_json(g) for name, g in result.grads.items()},
    }
    if result.no_path:
        doc["no_path"] = sorted(result.no_path)
    return doc


def write(doc: dict[str, Any], stream: TextIO) -> None:
    """Strict RFC 8259 JSON: allow_nan=False proves no NaN slipped through as a bare token."""
    stream.write(json.dumps(doc, allow_nan=False, ensure_ascii=False))
    stream.write("\n")
