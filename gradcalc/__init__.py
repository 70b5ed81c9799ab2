"""gradcalc: a command-line gradient calculator and expression differentiator."""

from . import rules as _rules  # noqa: F401  (attaches the derivative table to the primitives)
from .api import Gradients, Program, Run, load, parse_program
from .errors import GradcalcError

__version__ = "0.1.0"

__all__ = ["GradcalcError", "Gradients", "Program", "Run", "__version__", "load", "parse_program"]
