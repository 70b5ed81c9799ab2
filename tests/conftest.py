"""Shared fixtures: every test starts on the CPU in float64, recording graphs."""

from __future__ import annotations

import pytest
from hypothesis import settings

import gradcalc  # noqa: F401  (installs the derivative table on the primitives)
from gradcalc.engine import backend, graph

# The property tests draw the same examples on every run, so that a CI result can be reproduced and a
# landing does not depend on luck; `pytest --hypothesis-profile=explore` searches new examples, and
# `--hypothesis-profile=quick` draws a tenth as many (helpers.examples) for a quick look while working.
settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, print_blob=True)
settings.register_profile("quick", derandomize=True, max_examples=10, print_blob=True)
settings.load_profile("default")


@pytest.fixture(autouse=True)
def float64_cpu():
    """A run with dtype='float32' switches the backend globally; put it back around every test."""
    backend.use("cpu", "float64")
    graph.recording = True
    yield
    backend.use("cpu", "float64")
    graph.recording = True
