"""Shared fixtures: every test starts on the CPU in float64, recording graphs."""

from __future__ import annotations

import pytest

import gradcalc  # noqa: F401  (installs the derivative table on the primitives)
from gradcalc import backend, graph


@pytest.fixture(autouse=True)
def float64_cpu():
    """A run with dtype='float32' switches the backend globally; put it back around every test."""
    backend.use("cpu", "float64")
    graph.recording = True
    yield
    backend.use("cpu", "float64")
    graph.recording = True
