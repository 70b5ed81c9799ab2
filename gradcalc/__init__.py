"""gradcalc: a command-line gradient calculator and expression differentiator.

The public names are imported when first used, so that `gradcalc`'s command line
starts (and can be interrupted cleanly) before NumPy and the parser load.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import GradcalcError
    from .program.api import Gradients, Program, Run, load, parse_program

__version__ = "0.1.0"

__all__ = ["GradcalcError", "Gradients", "Program", "Run", "__version__", "load", "parse_program"]

_HOMES = {"Gradients": "program.api", "Program": "program.api", "Run": "program.api", "load": "program.api",
          "parse_program": "program.api", "GradcalcError": "errors"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'gradcalc' has no attribute '{name}'")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value
