"""The command line: each command parses options, makes one library call, hands the result to a view.

Errors become messages and exit codes in one place, `_guarded`; how a result, warning or error is
written (JSON or text) is decided in another, the command's `Output` (output.py).
"""

from __future__ import annotations

import functools
import inspect
import io
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Optional, get_type_hints

import typer
import typer.core

from .. import __version__
from ..errors import (
    GradcalcError,
    InternalError,
    LimitExceeded,
    UsageError,
    out_of_memory,
)
from . import examples as _examples
from .output import Color, Output
from .symbols import encodable_streams

if TYPE_CHECKING:  # types only: the grad and eval paths do not load the checking modules
    from ..errors import Source
    from ..language.syntax import Claim
    from ..tools.homework.check import Unreadable

EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT, EXIT_BUG = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe

# Click's base error, whether Typer vendors Click (0.26+) or depends on it.
_ClickError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _Group(typer.core.TyperGroup):
    """The root command. Click runs without its own error handling (standalone_mode=False), so that
    `_guarded` reports a usage error (an unknown option, a missing value, a bad choice) as it reports
    every other error: `error:` and a hint, or with --json one JSON error document; exit 2."""

    def main(self, args: Any = None, *positional: Any, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if kwargs.get("standalone_mode") is False:
            return super().main(argv, *positional, **kwargs)
        if not positional:  # `gradcalc` whatever the launcher (python -m, a console script): usage, completion
            kwargs.setdefault("prog_name", "gradcalc")
        if not argv and not os.environ.get(_COMPLETE_VAR):
            # Nothing to do is a usage error (as rg, uv and curl treat it): the commands on stderr, exit 2;
            # standard output and status 0 are for what was asked for (--help).
            sys.stderr.write(_short_help(self))
            sys.exit(EXIT_BAD_INPUT)
        status: Any = EXIT_OK

        def parse_and_run() -> None:
            nonlocal status  # Click returns the code of typer.Exit (and of --help) instead of exiting
            try:
                status = super(_Group, self).main(argv, *positional, **{**kwargs, "standalone_mode": False})
            except _ClickError as error:  # raised only while the command line is read
                raise _usage_error(error, argv[0] if argv[0] in self.commands else None) from None

        try:
            _guarded(Output(json="--json" in argv), parse_and_run)
        except typer.Exit as stop:
            sys.exit(stop.exit_code)
        except typer.Abort:
            sys.exit(130)
        sys.exit(status if isinstance(status, int) else EXIT_OK)


_COMPLETE_VAR = "_GRADCALC_COMPLETE"  # Click's name for it: _{PROG_NAME}_COMPLETE


def _short_help(group: Any) -> str:
    """What bare `gradcalc` prints: how to call it, each command in a line, an example (--help has the rest)."""
    import shutil
    import textwrap

    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    pad = max(map(len, group.commands)) + 4
    lines = ["usage: gradcalc COMMAND [FILE | -e PROGRAM] [OPTIONS]", "", "commands:"]
    for name, command in group.commands.items():
        summary = (command.help or "").strip().split("\n")[0]
        lines += textwrap.wrap(summary, width, initial_indent=f"  {name:<{pad - 2}}", subsequent_indent=" " * pad)
    lines += ["", "example: gradcalc grad -e 'y = x^2 * sin(x)' --set x=2", "",
              "'gradcalc COMMAND --help' shows a command's options and examples; 'gradcalc --help' shows all.", ""]
    return "\n".join(lines)


def _usage_error(error: Any, command: str | None) -> UsageError:
    """Click's usage error as gradcalc's own: its message in gradcalc's words, the way out as the hint."""
    message = error.format_message().strip()
    # Click appends its suggestions to the message: they are the hint.
    found = re.search(r"\s*\(?((?:Did you mean|Possible options:)[^)]*?)\)?$", message)
    suggestion = ""
    if found:
        message, suggestion = message[:found.start()], found.group(1)
        suggestion = suggestion[0].lower() + suggestion[1:] + ("" if suggestion.endswith("?") else ";")
    if len(message) > 1 and message[0].isupper() and message[1].islower():  # "No such option" as gradcalc words it
        message = message[0].lower() + message[1:]
    # Click's parser does not always say which command it was reading: the command line does.
    path = f"gradcalc {command}" if command else "gradcalc"
    listed = f"'{path} --help' lists the {'options' if command else 'commands'}"
    return UsageError(message.rstrip(".").strip(), f"{suggestion} {listed}" if suggestion else listed)


def _builtins_epilog() -> str:
    """The builtin functions, for the top-level help (an unknown function's error points here)."""
    from ..program.builtins import BUILTINS

    return "[bold]Builtin functions[/bold]: " + " ".join(sorted(BUILTINS, key=str.lower)) + \
        "; constants pi (π) and e. docs/language.md says what each does."


app = typer.Typer(
    cls=_Group,
    name="gradcalc",
    help="Gradient calculator and expression differentiator: write equations, get values, gradients and the graph.",
    epilog=_builtins_epilog(),
    add_completion=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Dtype(str, Enum):
    float64 = "float64"
    float32 = "float32"


class Device(str, Enum):
    cpu = "cpu"
    gpu = "gpu"


class Common:
    """Options every command shares: where the program comes from and how it runs."""

    def __init__(self, **options: Any) -> None:
        self.__dict__.update(options)  # one attribute per _COMMON_OPTIONS name (a dataclass cost 1.5 ms to make)

    file: Optional[str]
    expr: Optional[str]
    set: list[str]
    values: Optional[str]
    seed: int
    dtype: Dtype
    device: Device
    json: bool
    color: Color
    full: bool
    max_elements: int
    max_iterations: int
    max_depth: int
    max_recursion: int
    allow_read: list[str]
    max_file_size: str
    max_memory: str
    timeout: Optional[float]
    no_anomaly: bool

    @cached_property
    def out(self) -> Output:
        """Where the command's result, warnings and errors go (the one reader of --json)."""
        return Output(self.json, self.color)

    @cached_property
    def file_limit(self) -> int:
        """--max-file-size in bytes (parsed once; a bad size is a UsageError)."""
        from ..files import parse_size

        return parse_size(self.max_file_size, "--max-file-size")

    @cached_property
    def memory_budget(self) -> int | None:
        """--max-memory in bytes, or None on the GPU (CUDA maps its own memory: the kernel's limit would break it)."""
        from ..files import parse_size

        budget = parse_size(self.max_memory, "--max-memory")
        return budget if self.device is Device.cpu else None


# --color, every command's (doctor's too): the flag wins over NO_COLOR and FORCE_COLOR (output.console).
_COLOR = Annotated[Color, typer.Option(
    help="Colour: auto (in a terminal, unless NO_COLOR; FORCE_COLOR in a pipe too), always or never, "
    "whatever the environment says.")]

_COMMON_OPTIONS: dict[str, tuple[Any, Any]] = {
    "file": (Annotated[Optional[str], typer.Argument(
        metavar="FILE", help="Program file (.eq); '-' reads standard input.", show_default=False)], None),
    "expr": (Annotated[Optional[str], typer.Option(
        "--expr", "-e", metavar="TEXT", help="The program text itself, instead of FILE.")], None),
    "set": (Annotated[list[str], typer.Option(
        "--set", metavar="NAME=VALUE",
        help="Replace a leaf's value: a number, a JSON array or a constant expression (repeatable).")], []),
    "values": (Annotated[Optional[str], typer.Option(
        "--values", metavar="FILE", help="Leaf values from a JSON object or an .npz file.")], None),
    "seed": (Annotated[int, typer.Option(min=0, help="Seed of randn/rand.")], 0),
    "dtype": (Annotated[Dtype, typer.Option(help="Floating-point type.")], Dtype.float64),
    "device": (Annotated[Device, typer.Option(help="cpu (NumPy) or gpu (CuPy).")], Device.cpu),
    "json": (Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")], False),
    "color": (_COLOR, Color.auto),
    "full": (Annotated[bool, typer.Option("--full", help="Print large tensors in full.")], False),
    "max_elements": (Annotated[int, typer.Option(
        min=1, help="Largest tensor allowed, in elements.", rich_help_panel="Limits")], 10**8),
    "max_iterations": (Annotated[int, typer.Option(
        min=0, help="Most iterations one loop may run.", rich_help_panel="Limits")], 1_000_000),
    "max_depth": (Annotated[int, typer.Option(
        min=1, max=100_000, help="Deepest nesting of brackets and expressions.", rich_help_panel="Limits")], 200),
    "max_recursion": (Annotated[int, typer.Option(
        min=1, max=100_000, help="Deepest nesting of function calls.", rich_help_panel="Limits")], 200),
    "allow_read": (Annotated[list[str], typer.Option(
        "--allow-read", metavar="DIR", help="Let load() read files in DIR too (repeatable).",
        rich_help_panel="Limits")], []),
    "max_file_size": (Annotated[str, typer.Option(
        metavar="SIZE", help="Largest file read: a program, an answers file, a submission, CSV or JSON data "
        "(K, M, G: powers of 1024).", rich_help_panel="Limits")], "10M"),
    "max_memory": (Annotated[str, typer.Option(
        metavar="SIZE", help="Memory a run may take beyond gradcalc's own (all its tensors together; per "
        "submission when grading; Linux).", rich_help_panel="Limits")], "4G"),
    "timeout": (Annotated[Optional[float], typer.Option(
        metavar="SECONDS", help="Stop the command after SECONDS (default: no limit; grading: 10 s per "
        "submission).", show_default=False, rich_help_panel="Limits")], None),
    # One name, not --anomaly/--no-anomaly: Rich's help gives a pair a column of its own, which squeezed every
    # command's option help into a third of an 80-column terminal. Warning is the default; this turns it off.
    "no_anomaly": (Annotated[bool, typer.Option(
        "--no-anomaly", help="Do not warn where a NaN or an infinite value or gradient started (by default "
        "gradcalc does, checking only then).")], False),
}


def command(examples: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a command that takes the shared options as `common`, with examples in its help."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        app.command(name=fn.__name__.rstrip("_"))(_Callback(fn, examples))
        return fn

    return register


class _Callback:
    """What Typer calls for a command: the shared options gathered into `common`, then the command.

    Its signature (file first, then the command's own options, then the shared ones) is made when Typer
    first reads it: a run builds only the command it names (main), so the others' annotations, postponed
    strings in this module, are never evaluated.
    """

    def __init__(self, fn: Callable[..., None], examples: str) -> None:
        self.fn = fn
        self.__name__ = self.__qualname__ = fn.__name__
        self.__module__ = fn.__module__
        self.__doc__ = (fn.__doc__ or "") + "\n\n[bold]Examples[/bold]\n\n" + examples

    def __call__(self, **kwargs: Any) -> None:
        common = Common(**{name: kwargs.pop(name) for name in _COMMON_OPTIONS})
        _guarded(common.out, lambda: _limited(common, lambda: self.fn(common=common, **kwargs)))

    @cached_property
    def __signature__(self) -> inspect.Signature:
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in inspect.signature(self.fn, eval_str=True).parameters.values() if p.name != "common"]
        shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
                  for name, (annotation, default) in _COMMON_OPTIONS.items()]
        return inspect.Signature([shared[0], *own, *shared[1:]])

    @cached_property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}


def _resolved(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A function Typer reads on every start, its annotations evaluated once: Typer evaluates the strings
    that annotations are in this module each time it reads one (twice per command built, ~0.5 ms each)."""
    fn.__annotations__ = get_type_hints(fn, include_extras=True)
    return fn


def _limited(common: Common, body: Callable[[], None]) -> None:
    """Run a command within its time and memory limits (the memory budget is the kernel's: CPU only)."""
    from ..program.limits import deadline, memory_budget, seconds

    timeout = seconds(common.timeout)
    common.file_limit  # noqa: B018  (a bad size is refused before anything runs)
    with deadline(timeout), memory_budget(common.memory_budget):
        body()


def _guarded(out: Output, body: Callable[[], None]) -> None:
    """The one place where errors become messages and exit codes (`out` says how they are written)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a CLI speaks in its own messages, never Python warnings
            body()
    except GradcalcError as error:
        raise out.error(error, EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        raise out.interrupted() from None
    except BrokenPipeError:  # the reader went away (`gradcalc ... | head`): stop quietly, as Unix tools do
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        except (OSError, ValueError, AttributeError):  # not a real file (captured output): nothing to flush
            pass
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    except (typer.Exit, typer.Abort):
        raise
    except RecursionError:
        raise out.error(LimitExceeded("the program nests too deeply", "split deep expressions into statements"),
                        EXIT_BAD_INPUT) from None
    except MemoryError:
        raise out.error(out_of_memory(), EXIT_BAD_INPUT) from None
    except Exception as exc:  # a bug in gradcalc: say so plainly, without a traceback
        bug = InternalError(f"internal error: {type(exc).__name__}: {exc}",
                            "this is a bug in gradcalc; please report it with the program that caused it")
        raise out.error(bug, EXIT_BUG) from None


def _program(common: Common) -> Any:
    from ..files import read_text
    from ..program.api import Program

    if common.expr is not None:
        if common.file is not None:
            raise UsageError("give the program as FILE or with -e, not both", "drop one of them")
        return Program(_expr_text(common.expr), "<expr>", None, common.max_depth)
    if common.file is None:
        raise UsageError("no program given", "pass a FILE, '-' for standard input, or -e 'y = x^2'")
    if common.file == "-":
        return Program(read_text("-", common.file_limit), "<stdin>", None, common.max_depth)
    return Program.from_file(common.file, common.max_depth, common.file_limit)


def _expr_text(expr: str) -> str:
    """-e's program text: `\\n` typed in it is a line end, and its lines end as a file's do (a lone \\r too)."""
    from ..files import lines_ended

    return lines_ended(expr.replace("\\n", "\n"))


def _inputs(common: Common) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if common.values:
        from ..engine import backend
        from ..files import describe

        try:
            values.update(backend.read_values(common.values, common.file_limit))
        except GradcalcError:
            raise
        except Exception as exc:  # json's, zipfile's and NumPy's many ways to say the file is malformed
            raise UsageError(f"--values {common.values}: cannot read it ({describe(exc)})",
                             'give a JSON object such as {"a": 2} or an .npz file') from None
    for item in common.set:
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UsageError(f"--set {item!r} is not NAME=VALUE", "for example --set a=3 or --set x='[1, 2]'")
        values[name.strip()] = text.strip()
    return values


def _run(common: Common, program: Any = None, values: dict[str, Any] | None = None,
         keep_values: bool = False) -> Any:
    program = program or _program(common)
    return program.run(
        _inputs(common) if values is None else values,
        keep_values=keep_values,
        seed=common.seed,
        dtype=common.dtype.value,
        device=common.device.value,
        max_elements=common.max_elements,
        max_iterations=common.max_iterations,
        max_recursion=common.max_recursion,
        allow_read=common.allow_read,
        max_file_size=common.file_limit,
    )


def _run_options(common: Common) -> dict[str, Any]:
    """Program.run's keywords from the shared options, for a command that runs the program many times."""
    return dict(seed=common.seed, dtype=common.dtype.value, device=common.device.value,
                max_elements=common.max_elements, max_iterations=common.max_iterations,
                max_recursion=common.max_recursion, allow_read=common.allow_read, max_file_size=common.file_limit)


def _anomalies(common: Common, run: Any, of: str | None = None, wrt: list[str] | None = None,
               grads: dict[str, Any] | None = None, vector: Any = None) -> list[dict[str, Any]]:
    """Where the run's (and the gradients') NaNs and infinities started, as warnings (program/anomaly.py);
    the JSON entries for the document's "warnings". Nothing is looked at unless something is not finite."""
    from ..engine import backend as B
    from ..engine.graph import finite

    if common.no_anomaly or (all(finite(node.value) for node in run.frame.values())
                              and all(finite(B.asarray(g)) for g in (grads or {}).values())):
        return []  # nothing to trace: the locator's module is not even loaded (it is on every run's path)
    from ..program import anomaly

    found = anomaly.forward(run)
    if grads is not None and of is not None and wrt is not None:
        found += anomaly.backward(run, of, wrt, grads, vector)
    filename = run.program.source.filename
    for item in found:
        common.out.warning(item.text(filename))
    return [item.doc(filename) for item in found]


def _names(options: list[str]) -> list[str]:
    """--wrt a --wrt b and --wrt a,b alike."""
    return [name.strip() for option in options for name in option.split(",") if name.strip()]


def _views() -> Any:
    """The Rich views, imported only when a person reads the output (JSON never needs Rich)."""
    from . import render

    return render


@_resolved
def _complete_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of --of and --wrt: the program's variables, from FILE or -e (parsed, not run)."""
    try:
        from ..files import parse_size, read_text
        from ..language import syntax as S
        from ..program.api import Program

        # An option still waiting for its value (--wrt<TAB>) leaves FILE unparsed, in ctx.args.
        expr, file = ctx.params.get("expr"), ctx.params.get("file") or next(iter(ctx.args), None)
        if expr is not None:
            text = _expr_text(expr)
        elif file and file != "-":
            text = read_text(file, parse_size(ctx.params.get("max_file_size") or "10M", "--max-file-size"))
        else:
            return []
        program = Program(text)
        names = list(program.free_names())
        stack: list[Any] = list(reversed(program.module.body))
        while stack:  # in program order; a function's locals are not the program's variables
            stmt = stack.pop()
            if isinstance(stmt, S.Assign):
                names.append(stmt.name)
            elif isinstance(stmt, S.For):
                names.append(stmt.var)
            if not isinstance(stmt, S.FuncDef):
                stack += reversed([*getattr(stmt, "body", []), *(getattr(stmt, "orelse", None) or [])])
    except Exception:  # a program that does not parse (yet) has nothing to offer
        return []
    before, comma, last = incomplete.rpartition(",")  # --wrt w1,a<TAB>
    return [before + comma + name for name in dict.fromkeys(names) if name.startswith(last)]


_OF = Annotated[Optional[str], typer.Option(
    "--of", metavar="NAME", autocompletion=_complete_names,
    help="The output to differentiate (default: the last variable assigned).")]
_WRT = Annotated[list[str], typer.Option(
    "--wrt", metavar="NAME", autocompletion=_complete_names,
    help="Differentiate with respect to NAME (repeatable or comma-separated; default: every leaf). Intermediates "
    "are allowed.")]


# --at: grad, eval, jacobian, hessian, jvp, hvp and diff at many points (program/batch.py).
_AT = Annotated[Optional[str], typer.Option(
    "--at", metavar="POINTS", rich_help_panel="Many points",
    help="Run at many points: a JSON Lines or CSV file of leaf values, or '-' (standard input). One result "
    "per point (JSON Lines with --json).")]
_IGNORE_EXTRA = Annotated[bool, typer.Option(
    "--ignore-extra", rich_help_panel="Many points",
    help="With --at: skip a point's keys that are not the program's leaves (else that point is an error).")]


def _batch(common: Common, at: str, ignore_extra: bool, method: str, arguments: dict[str, Any]) -> None:
    """--at: the command at every point, written a chunk at a time; exit 2 if any point failed (3: a bug)."""
    from ..engine import backend
    from ..errors import InternalError
    from ..program.api import to_array
    from ..program.batch import read_points, run_chunks
    from . import jsonout

    if at == "-" and common.file == "-":
        raise UsageError("the program and --at cannot both be standard input", "give the program as a FILE or -e")
    program = _program(common)
    backend.use(common.device.value, common.dtype.value, common.max_elements)
    defaults = {name: backend.to_host(to_array(f"--set {name}", value, common.seed))
                for name, value in _inputs(common).items()}  # every point's, where it gives no value of its own
    records = read_points(at, sys.stdin.buffer if at == "-" and hasattr(sys.stdin, "buffer") else
                          sys.stdin if at == "-" else None, max_line=common.file_limit)
    points = (_with_defaults(record, defaults) for record in records)
    options: dict[str, Any] = dict(seed=common.seed, dtype=common.dtype.value, device=common.device.value,
                   max_elements=common.max_elements, max_iterations=common.max_iterations,
                   max_recursion=common.max_recursion, allow_read=common.allow_read, max_file_size=common.file_limit)
    status = EXIT_OK
    for chunk in run_chunks(program, points, method, arguments, ignore_extra=ignore_extra, **options):
        failed = [point for point in chunk if point.error is not None]
        if failed:
            status = max(status, EXIT_BUG if any(isinstance(p.error, InternalError) for p in failed)
                         else EXIT_BAD_INPUT)
        if common.json:
            jsonout.write_lines(jsonout.point_docs(chunk, method), sys.stdout)
        else:
            view = _views().batch_view(chunk, method, common.full)
            common.out.result(dict, lambda: view)  # noqa: B023  (used at once)
        sys.stdout.flush()  # each chunk as it is done: a reader downstream of a stream sees it now
    if status != EXIT_OK:
        if not common.json:
            sys.stderr.write("error: some points failed (their rows say why)\n")
        raise typer.Exit(status)


def _with_defaults(record: Any, defaults: dict[str, Any]) -> Any:
    """A point with the --set values it does not give (in place: a read record keeps its place for errors)."""
    if isinstance(record, dict):
        for name, value in defaults.items():
            record.setdefault(name, value)
    return record


class Mode(str, Enum):
    auto = "auto"
    rev = "rev"
    fwd = "fwd"


@command(
    "  gradcalc eval -e 'a = 2; w = 3; L = (w*a - 1)^2'\n\n"
    "  gradcalc eval -e 'x = linspace(0, 1, 5); y = x^2' --json\n\n"
    "  gradcalc eval net.eq --set a=3        (net.eq: a program file of your own)"
)
def eval_(common: Common, at: _AT = None, ignore_extra: _IGNORE_EXTRA = False) -> None:
    """Print every variable's value, its shape, and the operation that made it."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "values", {})
    run = _run(common)
    warnings = _anomalies(common, run)
    common.out.result(lambda: jsonout.warned(jsonout.values_doc(run), warnings),
                      lambda: _views().values_view(run, common.full))


@command(
    "  gradcalc grad -e 'a = 2; w = 3; L = (w*a - 1)^2'\n\n"
    "  gradcalc grad -e 'a = 2; w = 3; L = (w*a - 1)^2' --wrt w --json\n\n"
    "  gradcalc grad -e 'x = [1, 2, 3]; y = x^2' --vector ones      (a tensor output: vᵀ·J)\n\n"
    "  gradcalc grad -e 'y = x^2 * sin(x)' --set x=2\n\n"
    "  gradcalc grad net.eq --wrt w1,a        (net.eq: a program file of your own)"
)
def grad(
    common: Common,
    of: _OF = None,
    wrt: _WRT = [],  # noqa: B006  (Typer reads the default)
    vector: Annotated[Optional[str], typer.Option(
        "--vector", metavar="V", help="For a non-scalar output: 'ones' or a JSON array v; prints vᵀ·J.")] = None,
    at: _AT = None,
    ignore_extra: _IGNORE_EXTRA = False,
) -> None:
    """Print the output's value and its gradient with respect to each variable."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "grad", dict(of=of, wrt=_names(wrt) or None, vector=vector))
    run = _run(common)
    result = run.grad(of, _names(wrt) or None, vector, retain_graph=False)
    warnings = _anomalies(common, run, result.of, list(result.grads), result.grads, result.vector)
    common.out.result(lambda: jsonout.warned(jsonout.grad_doc(result), warnings),
                      lambda: _views().grad_view(run, result, common.full))


@command(
    "  gradcalc jacobian -e 'x = [1, 2, 3]; y = 2*x' --of y --wrt x\n\n"
    "  gradcalc jacobian -e 'W = randn(3, 4); b = zeros(3); x = ones(4); y = tanh(W @ x + b)' --wrt x --json\n\n"
    "  gradcalc jacobian -e 'x = [1, 2]; y = [x[0]*x[1], x[0]^2]' --wrt x --mode fwd"
)
def jacobian(
    common: Common,
    of: _OF = None,
    wrt: _WRT = [],  # noqa: B006  (Typer reads the default)
    mode: Annotated[Mode, typer.Option(help="rev: one VJP per output entry; fwd: one JVP per input entry; "
                                            "auto: whichever needs fewer (all batched into one pass).")] = Mode.auto,
    at: _AT = None,
    ignore_extra: _IGNORE_EXTRA = False,
) -> None:
    """Print the full Jacobian ∂of/∂wrt, shape of.shape + wrt.shape, as a labelled matrix."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "jacobian", dict(of=of, wrt=_names(wrt) or None, mode=mode.value))
    run = _run(common)
    result = run.jacobian(of, _names(wrt) or None, mode.value)
    warnings = _anomalies(common, run)  # the values' NaNs (a Jacobian's are not traced backward yet)
    common.out.result(lambda: jsonout.warned(jsonout.jacobian_doc(result), warnings),
                      lambda: _views().jacobian_view(run, result, common.full))


@command(
    "  gradcalc hessian -e 'x = [1, 2, 3]; L = sum(x^4) + sum(x[:-1] * x[1:])' --wrt x\n\n"
    "  gradcalc hessian -e 'x = 1.5; y = 2; L = x^2 * y^3' --wrt x,y --json"
)
def hessian(common: Common, of: _OF = None, wrt: _WRT = [],  # noqa: B006
            at: _AT = None, ignore_extra: _IGNORE_EXTRA = False) -> None:
    """Print the Hessian of a scalar output: the block ∂²of/∂a∂b for each pair of --wrt variables."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "hessian", dict(of=of, wrt=_names(wrt) or None))
    run = _run(common)
    result = run.hessian(of, _names(wrt) or None)
    warnings = _anomalies(common, run)  # the values' NaNs (a Hessian's are not traced backward yet)
    common.out.result(lambda: jsonout.warned(jsonout.hessian_doc(result), warnings),
                      lambda: _views().hessian_view(run, result, common.full))


@command(
    "  gradcalc jvp -e 'x = [1, 2, 3]; y = x^2' --of y --wrt x --tangent '[1, 0, 0]'\n\n"
    "  gradcalc jvp -e 'y = x^2 * sin(x)' --set x=2 --wrt x --tangent 1"
)
def jvp(
    common: Common,
    wrt: Annotated[str, typer.Option("--wrt", metavar="NAME", autocompletion=_complete_names,
                                     help="The variable that moves.")],
    tangent: Annotated[str, typer.Option("--tangent", metavar="V", help="Its direction v: 'ones', a number "
                                         "(every entry) or a JSON array of its shape.")],
    of: _OF = None,
    at: _AT = None,
    ignore_extra: _IGNORE_EXTRA = False,
) -> None:
    """Print J·v, how the output changes when --wrt moves along --tangent (forward mode)."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "jvp", dict(of=of, wrt=wrt, tangent=tangent))
    run = _run(common)
    result = run.jvp(of, wrt, tangent)
    warnings = _anomalies(common, run)  # the values' NaNs (J·v's are not traced yet)
    common.out.result(lambda: jsonout.warned(jsonout.jvp_doc(result), warnings),
                      lambda: _views().jvp_view(run, result, common.full))


@command(
    "  gradcalc hvp -e 'x = [1, 2, 3]; L = sum(x^4) + x[0]*x[1]' --wrt x --vector '[1, 0, 0]'\n\n"
    "  gradcalc hvp -e 'x = [1, 2]; v = [0.5, -1]; L = sum(exp(x))' --wrt x --vector v      (v: a variable)\n\n"
    "  gradcalc hvp net.eq --wrt x --vector v --at points.jsonl        (x and v from each point)"
)
def hvp(
    common: Common,
    wrt: Annotated[str, typer.Option("--wrt", metavar="NAME", autocompletion=_complete_names,
                                     help="The variable x of the Hessian ∂²of/∂x².")],
    vector: Annotated[str, typer.Option("--vector", metavar="V", help="The direction v: 'ones', a value as --set "
                                        "takes it (a number, a JSON array, randn(3)) or a variable's name.")],
    of: _OF = None,
    at: _AT = None,
    ignore_extra: _IGNORE_EXTRA = False,
) -> None:
    """Print H·v, the Hessian of a scalar output times v, without forming the Hessian (linear in the size of --wrt)."""
    from . import jsonout

    if at is not None:
        return _batch(common, at, ignore_extra, "hvp", dict(of=of, wrt=wrt, vector=vector))
    run = _run(common)
    result = run.hvp(of, wrt, vector)
    warnings = _anomalies(common, run, result.of, [wrt], {wrt: result.hvp})
    common.out.result(lambda: jsonout.warned(jsonout.hvp_doc(result), warnings),
                      lambda: _views().hvp_view(run, result, common.full))


@command(
    "  gradcalc taylor -e 'y = exp(x)' --wrt x --at 0 --order 5\n\n"
    "  gradcalc taylor -e 'y = log(x)' --wrt x --at 1 --order 4\n\n"
    "  gradcalc taylor -e 'z = exp(x) * cos(y)' --wrt x,y --at 0,0 --order 3 --json"
)
def taylor(
    common: Common,
    wrt: _WRT = [],  # noqa: B006  (Typer reads the default)
    at: Annotated[Optional[str], typer.Option(
        "--at", metavar="A", help="The point: one value for every --wrt variable, or one each, comma-separated "
        "(default: their values in the program).")] = None,
    order: Annotated[int, typer.Option(min=0, help="The highest degree of the polynomial.")] = 3,
    of: _OF = None,
    decimal: Annotated[bool, typer.Option("--decimal", help="Coefficients as decimals (0.16666666666666666), "
                                          "not fractions (1/6).")] = False,
) -> None:
    """Print the Taylor polynomial of a scalar output about a point: its coefficients and the polynomial."""
    from . import jsonout

    program = _program(common)
    values = _inputs(common)
    names = _names(wrt)
    if at is not None:
        points = _names([at])
        if not names:
            raise UsageError("--at needs --wrt: which variables does the point give?", "add --wrt x (or x,y)")
        if len(points) not in (1, len(names)):
            raise UsageError(f"--at gives {len(points)} values for {len(names)} variables ({', '.join(names)})",
                             "give one value for all, or one each: --at 0,1")
        values.update(zip(names, points * len(names) if len(points) == 1 else points))
    run = _run(common, program, values)
    result = run.taylor(of, names or None, order)
    warnings = _anomalies(common, run)
    common.out.result(lambda: jsonout.warned(jsonout.taylor_doc(result, decimal), warnings),
                      lambda: _views().taylor_view(run, result, decimal, common.full))


class Terms(str, Enum):
    leaves = "leaves"
    intermediates = "intermediates"
    shortest = "shortest"


@command(
    "  gradcalc diff -e 'a = 2; w = 3; L = (w*a - 1)^2' --of L --wrt w\n\n"
    "  gradcalc diff -e 'y = x^2 * sin(x)' --wrt x\n\n"
    "  gradcalc diff -e 'y = x^2 * sin(x)' --wrt x --order 2 --latex\n\n"
    "  gradcalc diff -e 'z = x^3 * y^2' --wrt x,y,x        (∂³z/∂x∂y∂x)\n\n"
    "  gradcalc diff -e 'a = 2; h = tanh(3*a); L = h^2' --wrt a --in-terms-of intermediates --json"
)
def diff(
    common: Common,
    of: _OF = None,
    wrt: _WRT = [],  # noqa: B006
    order: Annotated[int, typer.Option(min=1, help="1: first derivatives; N: derivatives of order N (scalar "
                                                 "variables; --wrt x,y,x names one mixed partial).")] = 1,
    keep: Annotated[list[str], typer.Option(
        "--keep", metavar="NAME", help="Keep the named intermediate as a symbol instead of expanding it "
        "(repeatable or comma-separated).")] = [],  # noqa: B006
    in_terms_of: Annotated[Terms, typer.Option(
        help="leaves: expand everything; intermediates: keep every named intermediate; shortest: whichever "
        "of the two reads shorter.")] = Terms.leaves,
    latex: Annotated[bool, typer.Option("--latex", help="Print LaTeX instead of gradcalc syntax.")] = False,
    at: _AT = None,
    ignore_extra: _IGNORE_EXTRA = False,
    decimal: Annotated[bool, typer.Option("--decimal", help="Numbers as decimals (0.5), not fractions (1/2); "
                                          "only long ones (2/3) as fractions.")] = False,
    steps: Annotated[bool, typer.Option("--steps", help="The derivation, one named rule a line (one scalar "
                                        "--wrt variable).")] = False,
) -> None:
    """Print each derivative as a simplified expression, and its value at the program's values."""
    from . import jsonout

    if steps:
        other = [flag for flag, given in [("--order", order != 1), ("--keep", bool(keep)), ("--at", at is not None),
                                          ("--in-terms-of", in_terms_of is not Terms.leaves)] if given]
        return _diff_steps(common, of, _names(wrt), latex, decimal, other[0] if other else "")
    if at is not None:
        return _batch(common, at, ignore_extra, "diff", dict(
            of=of, wrt=_names(wrt) or None, order=order, keep=_names(keep),
            intermediates=in_terms_of is Terms.intermediates, shortest=in_terms_of is Terms.shortest, decimal=decimal))
    program = _program(common)
    values = _inputs(common)
    placeholders = [name for name in program.free_names() if name not in values]
    for name in placeholders:  # a formula with no values still has a derivative: differentiate at a generic point
        values[name] = PLACEHOLDER
    run = _run(common, program, values)
    results = run.diff(of, _names(wrt) or None, order, _names(keep), in_terms_of is Terms.intermediates,
                       shortest=in_terms_of is Terms.shortest, decimal=decimal)
    common.out.result(lambda: jsonout.diff_doc(results, placeholders),
                      lambda: _views().diff_view(run, results, latex, placeholders, common.full))


def _diff_steps(common: Common, of: str | None, wrt: list[str], latex: bool, decimal: bool, other: str) -> None:
    """diff --steps: the derivation of one derivative (engine/steps.py)."""
    from . import jsonout

    if other:
        raise UsageError(f"--steps and {other} do not combine: the steps follow one first derivative",
                         f"drop {other}, or drop --steps")
    if len(wrt) > 1:
        raise UsageError(f"--steps follows one derivative, and --wrt names {len(wrt)}",
                         f"give one variable, as in --wrt {wrt[0]}")
    program = _program(common)
    values = _inputs(common)
    placeholders = [name for name in program.free_names() if name not in values]
    for name in placeholders:
        values[name] = PLACEHOLDER
    run = _run(common, program, values)
    found, answer = run.steps(of, wrt[0] if wrt else None, decimal=decimal)
    common.out.result(lambda: jsonout.steps_doc(found, answer, placeholders),
                      lambda: _views().steps_view(found, answer, latex, placeholders, run))


class Format(str, Enum):
    tree = "tree"
    dot = "dot"
    mermaid = "mermaid"
    svg = "svg"
    png = "png"
    html = "html"


class Detail(str, Enum):
    none = "none"
    shape = "shape"
    summary = "summary"
    full = "full"


class Direction(str, Enum):
    TB = "TB"
    LR = "LR"


# What -o's suffix says the format is, when --format does not.
_SUFFIXES = {".dot": Format.dot, ".gv": Format.dot, ".mmd": Format.mermaid, ".mermaid": Format.mermaid,
             ".svg": Format.svg, ".png": Format.png, ".html": Format.html, ".htm": Format.html}


@command(
    "  gradcalc graph -e 'a = 2; w = 3; L = (w*a - 1)^2'\n\n"
    "  gradcalc graph -e 'a = 2; w = 3; L = (w*a - 1)^2' -o graph.dot       (the format from the suffix)\n\n"
    "  gradcalc graph -e 'a = 2; w = 3; L = (w*a - 1)^2' --format mermaid\n\n"
    "  gradcalc graph net.eq -o graph.svg        (net.eq: a file of your own; needs Graphviz)\n\n"
    "  gradcalc graph net.eq --format png > graph.png\n\n"
    "  gradcalc graph net.eq -o graph.html        (a page that plays the backward pass, step by step)\n\n"
    "  gradcalc graph net.eq --focus W1 --detail shape\n\n"
    "  gradcalc graph net.eq --expand f --all --depth 3"
)
def graph(
    common: Common,
    of: _OF = None,
    format_: Annotated[Optional[Format], typer.Option(
        "--format", help="tree (for people), dot or mermaid (text), svg or png (drawn by Graphviz), html "
        "(a page that plays the backward pass). Default: the one -o's suffix names (.dot .gv .mmd .svg .png "
        ".html), else tree.", show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write to FILE instead of standard output ('-': standard output, "
        "even a PNG to a terminal).")] = None,
    detail: Annotated[Detail, typer.Option(
        metavar="LEVEL", help="How much of a tensor each node shows: none (names only), shape, summary (shape, "
        "min, max and norm), full (the values). Scalars are shown in full but for none.")] = Detail.summary,
    focus: Annotated[list[str], typer.Option(
        metavar="NAME", autocompletion=_complete_names, help="Only the nodes on paths from the output to NAME "
        "(as explain's paths); repeat it for several.", show_default=False)] = [],  # noqa: B006
    depth: Annotated[Optional[int], typer.Option(
        min=1, metavar="K", help="Only the nodes within K edges of the output; the rest are one '… N more' "
        "node.", show_default=False)] = None,
    expand: Annotated[list[str], typer.Option(
        metavar="FUNCTION", help="Draw FUNCTION's calls node by node (each call is one node, its result, "
        "otherwise); repeat it for several.", show_default=False)] = [],  # noqa: B006
    everything: Annotated[bool, typer.Option(
        "--all", help="Draw the constants and the values cut from the gradient (detach, no_grad) too.")] = False,
    direction: Annotated[Direction, typer.Option(
        metavar="DIR", help="Layout of dot, mermaid, svg and png: TB (output at the top) or LR (at the "
        "left).")] = Direction.TB,
    dpi: Annotated[Optional[int], typer.Option(
        min=1, max=1200, metavar="N", help="A PNG's dots per inch (Graphviz's -Gdpi; default 96).",
        show_default=False)] = None,
    size: Annotated[Optional[str], typer.Option(
        metavar="WxH", help="A PNG's largest size in pixels, e.g. 1920x1080: a larger picture is scaled down "
        "to fit.", show_default=False)] = None,
) -> None:
    """Print the computation graph: each variable's grad_fn, value and gradient; each edge's local derivative."""
    from ..engine import graphview
    from . import drawing

    kind = _graph_format(format_, output, common.json)  # a contradiction is refused before the program runs
    if (dpi is not None or size is not None) and kind is not Format.png:
        given = "--json" if common.json else "the tree" if kind is Format.tree else f"--format {kind.value}"
        raise UsageError(f"{'--dpi' if dpi is not None else '--size'} sizes a PNG, not {given}",
                         "add --format png (or -o graph.png), or drop it")
    if direction is not Direction.TB and kind is Format.tree and not common.json:
        raise UsageError("--direction lays out dot, mermaid, svg and png: the tree grows downwards",
                         "add --format svg (or dot, mermaid, png), or drop --direction")
    pixels = _pixels(size) if size is not None else None
    functions = tuple(_names(expand))
    options = graphview.Options(values=detail.value, focus=tuple(_names(focus)), depth=depth,
                                expand=functions, everything=everything, direction=direction.value)
    run = _run(common, keep_values=True)
    from ..language import syntax as S

    defined = {stmt.name for stmt in run.program.module.body if isinstance(stmt, S.FuncDef)}
    for name in functions:
        if name not in defined:
            raise UsageError(f"--expand {name}: the program defines no function {name}",
                             f"its functions: {', '.join(sorted(defined))}" if defined else
                             "--expand opens a function of the program; this one defines none")
    view = run.graph(of, options)

    def shown() -> Any:  # the tree (Rich) on standard output, or the bytes of a file format where -o says
        if kind is Format.tree:
            return _views().graph_tree(view)
        if kind is Format.html:
            from . import page

            return _write(page.html(view, run), output)
        data = {"dot": drawing.dot, "mermaid": drawing.mermaid}[kind.value](view).encode("utf-8") \
            if kind in (Format.dot, Format.mermaid) else drawing.picture(view, kind.value, dpi, pixels)
        _write(data, output)

    common.out.result(lambda: drawing.view_json(view), shown)


def _pixels(size: str) -> tuple[int, int]:
    """--size WxH: two whole numbers of pixels."""
    width, _, height = size.lower().replace("×", "x").partition("x")
    if not (width.strip().isdigit() and height.strip().isdigit() and int(width) > 0 and int(height) > 0):
        raise UsageError(f"--size {size}: expected the width and height in pixels, as 1920x1080",
                         "give two whole numbers above 0 joined by x")
    return int(width), int(height)


def _graph_format(given: Format | None, output: str | None, json: bool) -> Format:
    """The format --format gives or -o's suffix implies; a UsageError where the flags contradict each other."""
    if json and (given is not None or output is not None):
        flag = f"--format {given.value}" if given is not None else f"-o {output}"
        raise UsageError(f"--json and {flag} do not combine: --json prints the graph as one JSON document",
                         "drop --json for the graph as a file format, or drop " + flag.split(maxsplit=1)[0] +
                         " for the JSON (redirect it to keep it: > graph.json)")
    to_file = output not in (None, "-")
    if given is Format.tree and to_file:
        raise UsageError("-o writes --format dot, mermaid, svg, png or html: the tree is for the terminal",
                         "drop -o, or pick another --format")
    suffix = os.path.splitext(output)[1].lower() if output is not None and to_file else ""
    implied = _SUFFIXES.get(suffix)
    if given is not None and implied is not None and implied is not given:
        raise UsageError(f"--format {given.value} contradicts -o {output}: a {suffix} file is {implied.value}",
                         f"drop --format, or name the file for {given.value}")
    kind = given or implied or Format.tree
    if kind is Format.tree and to_file:
        raise UsageError(f"cannot tell the format of -o {output} from its suffix",
                         "name the file .dot, .gv, .mmd, .svg, .png or .html, or give --format")
    if kind is Format.png and output is None and sys.stdout.isatty():  # as curl: binary is not shown on a screen
        raise UsageError("a PNG is binary: it is not written to a terminal",
                         "redirect it (> graph.png), write it with -o graph.png, or force it with -o -")
    return kind


def _write(data: bytes, path: str | None) -> None:
    """A file format's bytes to path, or to standard output (None or '-'): the same bytes either way."""
    if path in (None, "-"):
        sys.stdout.flush()
        stream = getattr(sys.stdout, "buffer", None)
        if stream is None:  # a text-only stream (an embedding): text formats only
            sys.stdout.write(data.decode("utf-8"))
            return
        stream.write(data)
        stream.flush()
        return
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}", "check the folder exists and is writable") from None


@command(
    "  gradcalc explain -e 'a = 2; b = 3*a; c = a^2; L = b*c' --of L --wrt a\n\n"
    "  gradcalc explain -e 'a = 2; b = 3*a; c = a^2; L = b*c' --of L --wrt a --json"
)
def explain(
    common: Common,
    wrt: Annotated[list[str], typer.Option("--wrt", metavar="NAME", autocompletion=_complete_names,
                                           help="The variable whose gradient to explain (one).")],
    of: _OF = None,
    max_paths: Annotated[int, typer.Option(min=1, help="List the paths one by one up to this many; "
                                           "past it, group them by the variables that use --wrt.")] = 24,
) -> None:
    """Spell out the chain rule: every path from the output to --wrt, the product along it, and their sum."""
    names = _names(wrt)
    if len(names) != 1:  # a repeated --wrt was the last one, silently
        raise UsageError(f"explain takes one variable, got {len(names)}: {', '.join(names)}",
                         "run it once for each: " + "; ".join(f"gradcalc explain ... --wrt {n}" for n in names[:3]))
    run = _run(common, keep_values=True)
    explanation, view = run.explain(of, names[0], max_paths)
    from . import jsonout

    common.out.result(lambda: jsonout.explain_doc(explanation, view),
                      lambda: _views().explain_view(explanation, view))


class Reveal(str, Enum):
    none = "none"
    verdict = "verdict"
    answer = "answer"
    all = "all"


class GradeFormat(str, Enum):
    csv = "csv"
    gradescope = "gradescope"


@command(
    "  gradcalc check -e 'a = 2; w = 3; L = (w*a - 1)^2' --claim 'dL/dw = 2*(w*a - 1)*a' --claim 'dL/da = 30'\n\n"
    "  gradcalc check net.eq answers.txt          (net.eq: a program file; answers.txt: a claim per line)\n\n"
    "  gradcalc check homework.eq                 (a program with its own check statements)\n\n"
    "  gradcalc check key.eq submissions/ -j 2 --json   (grade a folder of answers files)"
)
def check(
    common: Common,
    answers: Annotated[list[str], typer.Argument(
        metavar="[ANSWERS]...", show_default=False,
        help="An answers file (a claim per line, or several separated by ',' or ';'), or several files / "
             "folders of submissions to grade: "
             "each an answers file or a model with check statements.")] = [],  # noqa: B006
    claim: Annotated[list[str], typer.Option(
        "--claim", metavar="CLAIM", help="A claim to judge, such as 'dL/dw1 = -w3*a', '∂L/∂a ≈ 2.5' or "
        "'L = 15' (repeatable; written as in notes, −w₃·a, x², √x, 3x sin(x), d²y/dx², or in LaTeX).")] = [],  # noqa: B006
    rtol: Annotated[Optional[float], typer.Option(
        min=0, help="Relative tolerance; replaces the default rule (numbers to the digits written, "
        "expressions to 1e-6).", show_default=False)] = None,
    atol: Annotated[Optional[float], typer.Option(min=0, help="Absolute tolerance (see --rtol).",
                                                  show_default=False)] = None,
    points: Annotated[int, typer.Option(min=0, max=100, help="Random points near the program's values "
                                        "where an expression claim must hold too.")] = 4,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Grading: every submission in detail.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, max=256, help="Grading: submissions judged "
                                      "in parallel.")] = 1,
    in_terms_of: Annotated[Terms, typer.Option(
        metavar="FORM", help="How a correct derivative is written, as diff's --in-terms-of: shortest (the leaves "
        "or the program's intermediates, whichever is shorter), leaves, or intermediates.")] = Terms.shortest,
    reveal: Annotated[Reveal, typer.Option(
        metavar="LEVEL", help="What the table, JSON, gradebooks and feedback show: none (right or wrong, and "
        "points), verdict (and the diagnosis), answer (and the correct value), all (and the correct "
        "expression).")] = Reveal.all,
    format_: Annotated[Optional[GradeFormat], typer.Option(
        "--format", metavar="FORMAT", help="A gradebook: csv (a row per student, a column per question) or "
        "gradescope (one submission's results.json), on standard output or into -o FILE.",
        show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the --format gradebook to FILE (replaced if it exists); "
        "the table (or --json) still goes to standard output.", show_default=False)] = None,
    feedback: Annotated[Optional[str], typer.Option(
        "--feedback", metavar="DIR", help="Write a Markdown feedback file per student into DIR (made if "
        "missing; a file of the same name is replaced).", show_default=False)] = None,
    variants: Annotated[Optional[str], typer.Option(
        "--variants", metavar="DIR", help="Judge each submission against its student's variant, DIR/ID.eq "
        "(gradcalc variants).", show_default=False)] = None,
) -> None:
    """Judge claimed derivatives (numbers or expressions) right or wrong, say what is wrong, or grade many."""
    from ..tools.homework import check as C
    from ..tools.homework import rubric
    from . import jsonout

    if common.expr is not None and common.file is not None:  # -e takes the program: FILE is the first answers
        answers, common.file = [common.file, *answers], None
    if answers.count("-") + (common.file == "-") > 1:
        raise UsageError("standard input ('-') can be read once", "give the program or the answers as a file")
    gradebook = _gradebook_format(format_, output, common.json)
    grading = len(answers) > 1 or any(os.path.isdir(path) for path in answers)
    if grading:
        from ..program.limits import disarm

        disarm()  # grading: --timeout is each submission's, not the command's
    program = _program(common)
    run = _run(common, program, keep_values=True)
    judge = C.Judge(run, C.Tolerance.for_dtype(run.dtype, rtol, atol), points, common.seed, in_terms_of.value)
    asked = rubric.questions(program.module, run.frame, program.source)
    level = reveal.value

    def judge_of(variant: str) -> Any:
        """A student's variant's judge: the variant file run as the key is."""
        from ..program.api import Program

        own = _run(common, Program.from_file(variant, common.max_depth, common.file_limit), keep_values=True)
        return C.Judge(own, C.Tolerance.for_dtype(own.dtype, rtol, atol), points, common.seed,
                       in_terms_of.value)

    if variants is not None and not os.path.isdir(variants):
        raise UsageError(f"--variants {variants}: no such folder", "give the folder gradcalc variants wrote")
    if grading:
        if claim:
            raise UsageError("--claim cannot be combined with grading several submissions",
                             "put the claims in each submission, or check one answers file")
        from ..tools.homework.grading import DEFAULT_TIMEOUT, grade

        items = C.submissions(answers)
        if not items:
            raise UsageError("no submissions found in " + ", ".join(answers), "give a folder with answers files")
        if gradebook == "gradescope" and len(items) != 1:
            raise UsageError(f"--format gradescope writes one submission's results.json, and {len(items)} were "
                             "found: " + ", ".join(item.name for item in items[:5]),
                             "give the one answers file, or a folder holding only it (/autograder/submission/)")
        timeout = common.timeout or DEFAULT_TIMEOUT
        if variants is None:
            graded = grade(C.JudgeMaker(judge), items, jobs, timeout, common.memory_budget)
        else:
            graded = _graded_by_variant(items, variants, judge_of,
                                        lambda own, some: grade(C.JudgeMaker(own), some, jobs, timeout,
                                                                common.memory_budget))
    else:
        if variants is not None and answers:
            from ..tools.homework.variants import variant_for

            found = variant_for(os.path.basename(answers[0]), variants)
            if found is None:
                raise UsageError(f"no variant for {answers[0]} in {variants}",
                                 "name the answers file after the student's id (ID.txt), as in the roster")
            judge = judge_of(found)
        graded = [_checked(common, judge, program, answers, claim)]
    graded = [rubric.score(report, asked, run.frame) for report in graded]
    mistakes = rubric.mistakes(graded, asked, level) if grading else []
    reports = [rubric.revealed(report, level) for report in graded]
    _gradebooks(reports, asked, gradebook, output, feedback)
    if gradebook is not None and output is None:
        pass  # the gradebook is the standard output
    elif grading:
        totals = jsonout.grading_totals(reports)
        common.out.result(lambda: jsonout.grading_doc(reports, asked, mistakes, level),
                          lambda: _views().grading_view(reports, totals, verbose, common.full, asked, mistakes))
    elif reports[0].error is None:
        common.out.result(lambda: jsonout.check_doc(reports[0]),
                          lambda: _views().check_view(reports[0], full=common.full, errors_apart=True))
    report = reports[0]
    if not grading and report.error is not None:  # the submission itself does not read: a student's slip
        raise common.out.failed(lambda: {"error": report.error}, lambda: report.error_message + "\n", EXIT_WRONG)
    invalid = [v for v in report.verdicts if v.status == "invalid"]
    if not grading and invalid:  # the first claim that could not be judged, where errors go (line, caret)
        more = len(invalid) - 1
        raise common.out.failed(lambda: {"error": invalid[0].error}, lambda: invalid[0].error_message + "\n" + (
            f"  ({more} more claim{'s' * (more != 1)} could not be judged: see the table)\n" if more else ""),
            EXIT_WRONG)
    if not all(r.passed for r in reports):
        raise typer.Exit(EXIT_WRONG)


def _graded_by_variant(items: list[Any], folder: str, judge_of: Callable[[str], Any],
                       grade: Callable[[Any, list[Any]], list[Any]]) -> list[Any]:
    """Each submission judged against its student's variant (grouped: one key run per variant); one without a
    variant is not judged."""
    from ..errors import FileProblem
    from ..tools.homework import check as C
    from ..tools.homework.variants import variant_for

    results: list[Any] = [None] * len(items)
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        found = variant_for(item.name, folder)
        if found is None:
            results[index] = C.failed_report(item.name, FileProblem(
                f"no variant for {item.name} in {folder}", "name each submission after its student's id (ID.txt or "
                "ID/...), as in the roster"))
        else:
            groups.setdefault(found, []).append(index)
    for variant, indices in groups.items():
        for index, report in zip(indices, grade(judge_of(variant), [items[i] for i in indices])):
            results[index] = report
    return results


def _gradebook_format(given: GradeFormat | None, output: str | None, json: bool) -> str | None:
    """--format, or what -o's suffix says (.csv); refused where standard output would carry two documents."""
    if given is None and output is not None:
        if not output.lower().endswith(".csv"):
            raise UsageError(f"-o {output}: which gradebook?", "add --format csv or --format gradescope")
        given = GradeFormat.csv
    if given is not None and output in (None, "-") and json:
        raise UsageError(f"--json and --format {given.value} would both be the standard output",
                         "write the gradebook to a file: -o FILE (the JSON stays on standard output)")
    return None if given is None else given.value


def _checked(common: Common, judge: Any, program: Any, answers: list[str], claim: list[str]) -> Any:
    """One submission judged in this process: --claim options, one answers file, or the program's own claims."""
    from ..errors import FileProblem
    from ..tools.homework import check as C

    groups: list[tuple[Sequence[Claim | Unreadable], Source]] = [C.parse_claim_option(text) for text in claim]
    name = answers[0] if answers else program.source.filename
    if answers:
        try:
            groups.append(C.read_claims(answers[0], common.file_limit))
        except (FileProblem, UsageError):
            raise  # the file named cannot be read: the command cannot do its job (2)
        except GradcalcError as exc:  # it reads, but does not parse (a model file): the student's slip (1)
            return C.failed_report(name, exc)
    if not groups:
        groups.append((C.claims_of_program(program.module), program.source))
    if not any(claims for claims, _ in groups) and not answers:  # an empty answers file is the student's: 1
        raise UsageError("there are no claims to check",
                         "pass --claim 'dL/dw1 = ...', an answers file, or write `check dL/dw1 = ...` in the program")
    return judge.report(name, *groups)


def _gradebooks(reports: list[Any], asked: list[Any], gradebook: str | None, output: str | None,
                feedback: str | None) -> None:
    """The --format gradebook (to -o FILE or standard output) and the --feedback files."""
    from ..tools.homework import gradebook as G

    if gradebook == "csv":
        _write(G.csv_text(reports, asked).encode("utf-8"), output)
    elif gradebook == "gradescope":
        from . import jsonout

        stream = io.StringIO()
        jsonout.write(G.gradescope_doc(reports[0], asked), stream)
        _write(stream.getvalue().encode("utf-8"), output)
    if feedback is not None:
        G.write_folder(feedback, G.feedback_files(reports, asked))


@command(
    "  gradcalc variants -e 'a = 2; w = 3; L = (w*a - 1)^2' --student alice --student bob -o variants\n\n"
    "  gradcalc variants key.eq --roster roster.csv -o variants/      (variants/ID.eq: a model per student)\n\n"
    "  gradcalc check key.eq submissions/ --variants variants/   (each judged against its student's own)"
)
def variants(
    common: Common,
    output: Annotated[str, typer.Option(
        "--output", "-o", metavar="DIR", help="The folder to write ID.eq into (made if missing; a file of the same "
        "name is replaced).", show_default=False)],
    roster: Annotated[Optional[str], typer.Option(
        "--roster", metavar="FILE", help="A CSV file with a header row: the students' ids, in its `student` column "
        "(else its first).", show_default=False)] = None,
    student: Annotated[list[str], typer.Option(
        "--student", metavar="ID", help="A student's id (repeatable), instead of or besides --roster.",
        show_default=False)] = [],  # noqa: B006
) -> None:
    """Give each student a copy of the key with numbers of their own (drawn from --seed and their id)."""
    from ..program.api import Program
    from ..tools.homework import gradebook as G
    from ..tools.homework import variants as V

    program = _program(common)
    _run(common, program)  # the key itself must run
    ids = V.checked_ids([*(V.roster(roster, common.file_limit) if roster is not None else []), *student],
                        roster or "--student")
    if not ids:
        raise UsageError("no students given", "pass --roster roster.csv, or --student ID for each student")

    def runs(text: str) -> None:
        _run(common, Program(text, program.source.filename, None, common.max_depth))

    made = V.make(program.source.text, program.module, ids, common.seed,
                  runs, f"gradcalc variants (seed {common.seed})")
    G.write_folder(output, {f"{id_}.eq": text for id_, text in made.items()})
    common.out.result(lambda: {"variants": [{"student": id_, "file": os.path.join(output, f"{id_}.eq")}
                                            for id_ in made]},
                      lambda: f"wrote {len(made)} variant{'s' * (len(made) != 1)} into {output}: "
                      + ", ".join(f"{id_}.eq" for id_ in list(made)[:5]) + (", …" if len(made) > 5 else "") + "\n")


@command(
    "  gradcalc gradcheck -e 'x = [0.5, 1.5]; L = sum(x^3 * log(x))'\n\n"
    "  gradcalc gradcheck -e 'W = randn(2, 3); x = [1, 2, 3]; y = tanh(W @ x)' --wrt W   (a tensor output: its "
    "whole Jacobian)\n\n"
    "  gradcalc gradcheck -e 'x = [0.5, 1.5]; L = sum(x^3 * log(x))' --order 2 --json"
)
def gradcheck(
    common: Common,
    of: _OF = None,
    wrt: Annotated[list[str], typer.Option("--wrt", metavar="NAME", autocompletion=_complete_names,
                                           help="Leaves to move (repeatable or comma-separated; default: every "
                                           "leaf the output depends on differentiably).")] = [],  # noqa: B006
    eps: Annotated[Optional[float], typer.Option(help="The step of the central differences "
                                                 "[default: 1e-6; 1e-3 in float32].", show_default=False)] = None,
    rtol: Annotated[Optional[float], typer.Option(help="Relative tolerance [default: 1e-3; 1e-2 in float32].",
                                                  show_default=False)] = None,
    atol: Annotated[Optional[float], typer.Option(help="Absolute tolerance [default: 1e-5; 1e-3 in float32].",
                                                  show_default=False)] = None,
    order: Annotated[int, typer.Option(min=1, max=2, help="1: gradients (Jacobians); 2: Hessians.")] = 1,
    fast: Annotated[bool, typer.Option("--fast", help="Compare vᵀ·J·u along one random direction u per variable "
                                       "(PyTorch's fast_mode): two runs per variable.")] = False,
    sample: Annotated[Optional[int], typer.Option(metavar="K", help="Check K random elements of each variable "
                                                  "(seeded by --seed).", show_default=False)] = None,
) -> None:
    """Check autograd against central finite differences, per variable and element; exit 1 past tolerance."""
    from ..tools.gradcheck import gradcheck as check_gradients
    from . import jsonout

    warning = ("in float32, finite differences are good to about 1e-3 at best: the defaults are --eps 1e-3 "
               "--rtol 1e-2 --atol 1e-3; float64 (the default dtype) checks to 1e-6") \
        if common.dtype is Dtype.float32 else None
    if warning:  # with --json it is part of the document instead
        common.out.warning(warning)
    run = _run(common)
    # A bar for a long check, on a terminal only: never in a pipe, a log or a --json document's stream.
    progress = None
    if not common.json and sys.stderr.isatty():
        from .output import console

        progress = _views().GradcheckProgress(functools.partial(console, sys.stderr, color=common.color))
    try:
        result = check_gradients(run, of, _names(wrt) or None, eps, rtol, atol, order, fast=fast, sample=sample,
                                 seed=common.seed, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    common.out.result(lambda: jsonout.gradcheck_doc(result, warning),
                      lambda: _views().gradcheck_view(result, common.full))
    if not result.passed:
        raise typer.Exit(EXIT_WRONG)


class Method(str, Enum):
    gd = "gd"
    momentum = "momentum"
    adam = "adam"
    lbfgs = "lbfgs"


@command(
    "  gradcalc minimize -e 'x = -1.2; y = 1; L = (1 - x)^2 + 100*(y - x^2)^2' --method adam --lr 0.02 "
    "--steps 5000\n\n"
    "  gradcalc minimize -e 'w = 3; L = (w - 1)^2' --steps 1 --explain      (one step in full)\n\n"
    "  gradcalc minimize fit.eq --data X,Y --batch-size 32 --epochs 5 --shuffle --method adam --save w.npz\n\n"
    "  gradcalc grad fit.eq --values w.npz       (the fitted values, read back)"
)
def minimize(
    common: Common,
    of: Annotated[Optional[str], typer.Option(
        "--of", metavar="NAME", autocompletion=_complete_names,
        help="The scalar output to minimise (default: the last variable assigned).")] = None,
    wrt: Annotated[list[str], typer.Option(
        "--wrt", metavar="NAME", autocompletion=_complete_names,
        help="The parameters (repeatable or comma-separated; default: every leaf the output depends on, "
        "less --data; constants never).")] = [],  # noqa: B006
    method: Annotated[Method, typer.Option(help="gd, momentum (torch.optim.SGD's), adam (torch.optim.Adam's) or "
                                           "lbfgs (SciPy's L-BFGS-B: pip install 'gradcalc\\[opt]').")] = Method.gd,
    lr: Annotated[Optional[float], typer.Option(help="Learning rate \\[default: 0.01; adam 0.001].",
                                                show_default=False)] = None,
    momentum: Annotated[float, typer.Option(help="momentum's μ.")] = 0.9,
    betas: Annotated[str, typer.Option(metavar="B1,B2", help="adam's β₁ and β₂.")] = "0.9,0.999",
    steps: Annotated[Optional[int], typer.Option(help="Most steps \\[default: 1000, or what --epochs makes].",
                                                 show_default=False)] = None,
    tol: Annotated[Optional[float], typer.Option(help="Stop when the gradient's norm, or the change of the loss "
                                                 "in a step, is at most TOL.", show_default=False)] = None,
    max_time: Annotated[Optional[float], typer.Option(metavar="SECONDS", help="Stop after SECONDS.",
                                                      show_default=False)] = None,
    data: Annotated[list[str], typer.Option(
        "--data", metavar="NAME", autocompletion=_complete_names,
        help="Data leaves or constants, batched over their first axis (repeatable or comma-separated).")] = [],  # noqa: B006
    batch_size: Annotated[Optional[int], typer.Option(help="Examples per step \\[default: all of them].",
                                                      show_default=False)] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Passes over the data.", show_default=False)] = None,
    shuffle: Annotated[bool, typer.Option("--shuffle", help="A new order of the examples each epoch "
                                          "(seeded by --seed).")] = False,
    bounds: Annotated[list[str], typer.Option(
        "--bounds", metavar="NAME=LOW:HIGH", help="Keep a parameter within bounds (repeatable; either side may "
        "be empty).")] = [],  # noqa: B006
    every: Annotated[Optional[int], typer.Option(metavar="K", help="With --json: the values in the trace every "
                                                 "K steps.", show_default=False)] = None,
    save: Annotated[Optional[str], typer.Option(metavar="FILE", help="Write the values found to FILE (.npz, else "
                                                "JSON), for --values FILE.", show_default=False)] = None,
    explain_: Annotated[bool, typer.Option("--explain", help="Show the step in full: each gradient, the rule with "
                                           "its numbers, old and new values (one step).")] = False,
    plot: Annotated[Optional[str], typer.Option(metavar="FILE", help="Draw the loss at each step (and the path, for "
                                                "two parameters) to FILE: .svg, .png or .pdf (pip install "
                                                "'gradcalc\\[plot]').", show_default=False)] = None,
) -> None:
    """Minimise a scalar output over the program's leaves: gradient descent, momentum, Adam or L-BFGS-B."""
    from ..program.limits import seconds
    from ..tools import minimize as M
    from . import jsonout

    try:
        pair = tuple(float(b) for b in betas.split(","))
    except ValueError:
        pair = ()
    if len(pair) != 2:
        raise UsageError(f"--betas {betas!r} is not two numbers B1,B2", "for example --betas 0.9,0.999")
    settings = M.Settings(method.value, lr, momentum, (pair[0], pair[1]), steps, tol, seconds(max_time, "--max-time"),
                          _names(data), batch_size, epochs, shuffle, common.seed, every, M.parse_bounds(bounds),
                          explain_, path=plot is not None)
    M.check_settings(settings)
    if plot is not None:
        from . import charts

        charts.check_file(plot, "--plot")
    if save is not None and save.strip() in ("", "-"):
        raise UsageError("--save needs a file name", "for example --save values.json or --save values.npz")
    program = _program(common)
    options = _run_options(common)
    progress = None
    if not common.json and sys.stderr.isatty():  # a bar on a terminal only: never in a pipe, a log or --json
        from .output import console

        progress = _views().GradcheckProgress(functools.partial(console, sys.stderr, color=common.color),
                                              label="minimize", note="loss {:.6g}")
    try:
        result = M.minimize(program, _inputs(common), options, of, _names(wrt) or None, settings, progress)
    finally:
        if progress is not None:
            progress.close()
    if save is not None:
        _save_values(result.values, save)
    if plot is not None:
        _draw_minimized(common, program, options, result, plot)
    common.out.result(lambda: jsonout.minimize_doc(result), lambda: _views().minimize_view(result, common.full))


def _draw_minimized(common: Common, program: Any, options: dict[str, Any], result: Any, path: str) -> None:
    """minimize --plot: the loss curve, and for two scalar parameters their path over the loss's contours."""
    from ..tools import plot as P
    from . import charts

    plane, surface = charts.plane_of(result), None
    if plane:
        xs, ys = charts.path_of(result)
        surface = P.surface(program, _inputs(common), options, result.of, (plane[0], plane[1]),
                            [P.around(xs), P.around(ys)], P.DEFAULT_POINTS[2])
    charts.minimized_file(result, path, surface)


def _save_values(values: dict[str, Any], path: str) -> None:
    """--save: the values as .npz (by the suffix) or a JSON object, both of which --values reads."""
    from ..engine import backend
    from . import jsonout

    if path.lower().endswith(".npz"):
        stream = io.BytesIO()
        backend.numpy.savez(stream, **values)
        _write(stream.getvalue(), path)
        return
    text = io.StringIO()
    jsonout.write({name: backend.to_json(value) for name, value in values.items()}, text)
    _write(text.getvalue().encode("utf-8"), path)


@command(
    "  gradcalc plot -e 'y = x^2*sin(x)' --wrt x --range -3:3\n\n"
    "  gradcalc plot -e 'y = x^2*sin(x)' --wrt x --range -3:3 --order 2 --tangent 1.5 -o y.svg\n\n"
    "  gradcalc plot -e 'x = 0; y = 0; L = (1 - x)^2 + 100*(y - x^2)^2' --wrt x,y --range -2:2      (contours "
    "of L, ∇L as arrows)"
)
def plot(
    common: Common,
    wrt: Annotated[list[str], typer.Option(
        "--wrt", metavar="NAME", autocompletion=_complete_names,
        help="The leaf to move (a curve), or two (a contour); comma-separated or repeated.")],
    range_: Annotated[list[str], typer.Option(
        "--range", metavar="LOW:HIGH", help="Where each --wrt leaf goes: one for all, or one each "
        "\\[default: its value ± 3].", show_default=False)] = [],  # noqa: B006
    of: Annotated[Optional[str], typer.Option(
        "--of", metavar="NAME", autocompletion=_complete_names,
        help="The scalar output to draw (default: the last variable assigned).")] = None,
    order: Annotated[int, typer.Option(min=1, max=2, help="Derivatives drawn: 1 (∂y/∂x) or 2 (∂²y/∂x² too).")] = 1,
    tangent: Annotated[Optional[float], typer.Option(metavar="A", help="Draw the tangent line at A.",
                                                     show_default=False)] = None,
    points: Annotated[Optional[int], typer.Option(metavar="N", help="Samples \\[default: 201; a contour 41 per "
                                                  "axis].", show_default=False)] = None,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Draw to FILE, .svg, .png or .pdf (Matplotlib: pip install "
        "'gradcalc\\[plot]'), instead of a text plot.", show_default=False)] = None,
) -> None:
    """Draw a scalar output and its derivatives over a leaf, or its contours and gradient over two leaves."""
    import shutil

    from ..tools import plot as P
    from . import charts, jsonout
    from .symbols import plain_symbols

    names = _names(wrt)
    spans, count = P.check_request(names, range_, points, order, tangent)
    if output is not None:
        charts.check_file(output, "-o")
    elif not common.json:
        charts.check_text()
    program = _program(common)
    options = _run_options(common)
    found: Any = P.curve(program, _inputs(common), options, of, names[0], spans[0], count, order, tangent) \
        if len(names) == 1 else P.surface(program, _inputs(common), options, of, (names[0], names[1]), spans, count)
    if output is not None:
        (charts.curve_file if len(names) == 1 else charts.surface_file)(found, output)
    width, height = shutil.get_terminal_size((80, 24))
    common.out.result(lambda: jsonout.plot_doc(found),
                      lambda: None if output is not None else
                      (charts.curve_text if len(names) == 1 else charts.surface_text)(
                          found, width, max(12, min(height - 4, 30)), plain_symbols(sys.stdout) is not None))


class Target(str, Enum):
    numpy = "numpy"
    torch = "torch"
    jax = "jax"


@command(
    "  gradcalc export -e 'a = 2; w = 3; L = (w*a - 1)^2' --to numpy\n\n"
    "  gradcalc export net.eq --to torch -o net_torch.py      (net.eq: a program file of your own)\n\n"
    "  gradcalc export net.eq --to jax --of L --wrt w1,w2 -o net_jax.py"
)
def export(
    common: Common,
    of: _OF = None,
    wrt: Annotated[list[str], typer.Option("--wrt", metavar="NAME", autocompletion=_complete_names,
                                           help="Leaves to differentiate by (repeatable or comma-separated; "
                                           "default: every leaf).")] = [],  # noqa: B006
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the module to FILE instead of standard output.")] = None,
    to: Annotated[Target, typer.Option(help="The library the module computes with: numpy (the backward pass "
                                       "written out), torch (torch.autograd.grad) or jax (jax.value_and_grad).")
                  ] = Target.numpy,
) -> None:
    """Write the program as a Python module: f(leaves) and value_and_grad(leaves), in NumPy, PyTorch or JAX."""
    from ..tools.export import write

    run = _run(common, keep_values=True)
    source = write(run, to.value, of, _names(wrt) or None, common.file or "<expr>")
    if output is not None and output != "-":
        _write(source.encode("utf-8"), output)
    common.out.result(lambda: {"to": to.value, "output": output, "module": None if output else source},
                      lambda: None if output not in (None, "-") else source)


@app.command(epilog="[bold]Examples[/bold]\n\n  gradcalc doctor\n\n  gradcalc doctor --json")
def doctor(json_: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of a table.")] = False,
           color: _COLOR = Color.auto) -> None:
    """Report the devices gradcalc can run on (--device cpu|gpu), and the libraries and tools it found."""
    import platform
    import shutil

    from ..engine import backend

    def body() -> None:
        found = backend.devices()
        tools = {"python": platform.python_version(), "gradcalc": __version__,
                 "graphviz": shutil.which("dot") or None}
        out.result(lambda: {"devices": found, "versions": tools}, lambda: _doctor_text(found, tools))

    out = Output(json_, color)
    _guarded(out, body)


@app.command(epilog=_examples.EPILOG)
def examples(
    dir_: Annotated[str, typer.Argument(
        metavar="[DIR]", help="The folder to write: a new or empty one (default: ./gradcalc-examples).",
        show_default=False)] = _examples.DEFAULT_DIR,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of text.")] = False,
    color: _COLOR = Color.auto,
) -> None:
    """Copy the sample programs, answers and submissions into DIR, to run the docs' commands on them."""
    out = Output(json_, color)

    def body() -> None:
        doc, view = _examples.copy(dir_)
        out.result(lambda: doc, view)

    _guarded(out, body)


def _doctor_text(found: list[dict[str, Any]], tools: dict[str, Any]) -> str:
    """doctor's view: a line per device (and its hint), then the versions."""
    lines = []
    for entry in found:
        state = "available" if entry["available"] else "not available"
        line = f"{entry['device']:<4} {state}: " + ", ".join(
            str(part) for part in (entry["library"], entry["detail"]) if part)
        lines.append(line + (f"\n     hint: {entry['hint']}" if entry.get("hint") else "") + "\n")
    lines.append(f"python {tools['python']}, gradcalc {tools['gradcalc']}; graphviz (for --format "
                 f"svg|png): {tools['graphviz'] or 'not found'}\n")
    return "".join(lines)


PLACEHOLDER = 0.7  # the point a formula is differentiated at when its variables have no values


@_resolved
def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"gradcalc {__version__}\n")
        raise typer.Exit()


@app.callback()
@_resolved
def main_options(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """gradcalc: values, gradients and derivatives of equation programs, from the shell."""


def main() -> None:
    import gc
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on Ctrl-C is _guarded's to report
    encodable_streams()  # cp1252, ASCII, a C locale: the product's symbols in ASCII (symbols.SYMBOLS), not a crash
    # Typer makes a Click command of every registered command on each start (all of them cost ten times one,
    # #21); a run needs only the one it names. `gradcalc --help` and a mistyped name see all.
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    chosen = [c for c in app.registered_commands if (c.name or c.callback.__name__) == name]  # type: ignore[union-attr]
    if chosen:
        app.registered_commands = chosen
    was_null = _stdout_is_null()
    try:
        app()
    except SystemExit as stop:
        # Click and Rich answer a closed pipe under --help or --version with status 1, after wrapping
        # stdout (Click) or pointing it at /dev/null (Rich): the status a shell gives such a tool is 141.
        closed = type(sys.stdout).__name__ == "PacifyFlushWrapper" or (not was_null and _stdout_is_null())
        if stop.code == 1 and closed:
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        raise
    finally:
        # The process ends here. Python's collection at exit would scan every object NumPy, Typer and the run
        # made (40 ms, more than parsing a program); frozen, they are not scanned, and the OS frees them all.
        gc.freeze()


def _stdout_is_null() -> bool:
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError, AttributeError):  # captured output: no file behind it
        return False
