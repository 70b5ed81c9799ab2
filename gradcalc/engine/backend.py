"""The array library: the only module that imports NumPy (or CuPy, for --device gpu).

Everything else reaches arrays through `backend.xp` and the helpers here, so
switching devices is one call to `use()`, and `using()` switches for a block and switches back
(a Run enters the state it was made with around everything it computes).
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy

from ..errors import GradcalcError, LimitExceeded, UsageError

xp: Any = numpy  # the array namespace in use: numpy, or cupy after use("gpu")
host: Any = numpy  # the namespace of values moved to the host (to_host) for output and judging
device = "cpu"
dtype: Any = numpy.float64
_dtype_name = "float64"  # dtype's name, kept beside it: asked for on every Run method call (state())
max_elements = 10**8

DTYPES = {"float64": numpy.float64, "float32": numpy.float32}
DEFAULT_MAX_ELEMENTS = 10**8

Array = Any  # a NumPy or CuPy array, or a NumPy scalar


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse rather than hand it back to the system at once.

    A backward pass allocates and frees the same large temporaries again and again. By
    default glibc maps each one afresh and trims the heap as soon as it is freed, so every
    reuse faults its pages back in: a Hessian of n = 500 took 9 ms instead of 1.4 ms, the
    10^7-element gradient 380 ms instead of 210 ms, for the same peak memory. Linux with
    glibc only (elsewhere the allocator keeps its defaults); GRADCALC_KEEP_MEMORY=0 opts out.
    Returns whether the setting took.
    """
    import ctypes
    import os

    if not sys.platform.startswith("linux") or os.environ.get("GRADCALC_KEEP_MEMORY") == "0":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl, for one)
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    # Arrays up to 512 MiB come from the heap (reused), and up to 1 GiB of freed heap is kept.
    return bool(mallopt(m_mmap_threshold, 512 * 2**20)) and bool(mallopt(m_trim_threshold, 2**30))


keep_freed_memory()


_switched: list[Callable[[Any], None]] = []


def on_switch(callback: Callable[[Any], None]) -> None:
    """Have `callback(xp)` called whenever use() switches the array namespace (ops binds its primitives so)."""
    _switched.append(callback)


def use(device_name: str = "cpu", dtype_name: str = "float64", elements: int = DEFAULT_MAX_ELEMENTS) -> None:
    """Select the device, the float type and the tensor-size limit for what follows."""
    global xp, device, dtype, max_elements, _dtype_name
    if dtype_name not in DTYPES:
        raise UsageError(f"unknown dtype '{dtype_name}'", "use --dtype float64 (the default) or --dtype float32")
    if device_name == "cpu":
        namespace = numpy
    elif device_name == "gpu":
        namespace = _cupy()
    else:
        raise UsageError(f"unknown device '{device_name}'", "use --device cpu (the default) or --device gpu")
    if namespace is not xp:
        xp = namespace
        for callback in _switched:
            callback(xp)
    device = device_name
    dtype = DTYPES[dtype_name]
    _dtype_name = dtype_name
    max_elements = elements


State = tuple  # (device, dtype name, max_elements): what use() selects


def state() -> State:
    """The engine's current selection, as use() takes it: using(*state()) changes nothing."""
    return device, dtype_name(), max_elements


@contextlib.contextmanager
def using(device_name: str = "cpu", dtype_name: str = "float64", elements: int = DEFAULT_MAX_ELEMENTS
          ) -> Iterator[None]:
    """use() for a block: the caller's device, dtype and limit come back after it, error or not."""
    previous = state()
    if previous != (device_name, dtype_name, elements):  # already there (the usual case): nothing to switch
        use(device_name, dtype_name, elements)
    try:
        yield
    finally:
        if state() != previous:  # switched here, or by the block (a nested Program.run)
            use(*previous)


def _cupy() -> Any:
    try:
        import cupy
    except ImportError:
        raise UsageError(
            "--device gpu needs CuPy, which is not installed",
            "install it with: pip install 'gradcalc[gpu]'  (or run on the CPU: --device cpu)",
        ) from None
    except Exception as exc:  # installed but broken: a CUDA library missing, a version mismatch
        raise UsageError(f"--device gpu: CuPy is installed but cannot be loaded ({type(exc).__name__}: {exc})",
                         "reinstall it for your CUDA version (pip install 'gradcalc[gpu]' is for CUDA 12), "
                         "or run on the CPU: --device cpu") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy raises its own CUDA error types
        raise UsageError(f"--device gpu: CuPy cannot reach a CUDA device ({exc})",
                         "check the NVIDIA driver with nvidia-smi, or run on the CPU: --device cpu") from None
    if count == 0:
        raise UsageError("--device gpu: no CUDA device found", "run on the CPU: --device cpu")
    return cupy


def devices() -> list[dict[str, Any]]:
    """What `gradcalc doctor` reports: the CPU always; the GPU when CuPy reaches one, else why not."""
    import os

    found: list[dict[str, Any]] = [{"device": "cpu", "available": True, "library": f"NumPy {numpy.__version__}",
                                    "detail": f"{os.cpu_count()} cores"}]
    try:
        cupy = _cupy()
    except UsageError as exc:
        found.append({"device": "gpu", "available": False, "library": None, "detail": exc.message, "hint": exc.hint})
        return found
    names = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        properties = cupy.cuda.runtime.getDeviceProperties(index)
        name = properties["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        names.append(f"{name} ({properties['totalGlobalMem'] / 2**30:.0f} GiB)")
    found.append({"device": "gpu", "available": True, "library": f"CuPy {cupy.__version__}",
                  "detail": ", ".join(names)})
    return found


def dtype_name() -> str:
    return _dtype_name


def check_size(shape: tuple[int, ...], what: str) -> None:
    """Refuse, before allocating, a tensor larger than --max-elements.

    One size past the limit is refused too, though another size of 0 leaves no elements
    (zeros(0, 10^20)): the library cannot represent such a dimension, and no tensor needs it."""
    size = math.prod(shape)
    longest = max(shape, default=0)
    if size > max_elements or longest > max_elements:
        shown = "(" + ", ".join(_count(n, grouped=False) for n in shape) + ("," if len(shape) == 1 else "") + ")"
        problem = f"would have {_count(size)} elements" if size > max_elements else f"has a size of {_count(longest)}"
        raise LimitExceeded(
            f"{what} {problem} (shape {shown}), more than the limit of {max_elements:,} elements",
            "make it smaller, or raise the limit with --max-elements",
        )


def _count(n: int, grouped: bool = True) -> str:
    """A size as people read it: 1,000,000; or about 1.00e+20 past 15 digits (a size may have hundreds)."""
    digits = str(n)
    if len(digits) > 15:
        return f"about {digits[0]}.{digits[1:3]}e+{len(digits) - 1}"
    return f"{n:,}" if grouped else digits


def scalar(value: float) -> Array:
    """A scalar of the working dtype."""
    if xp is numpy:
        return dtype(value)  # the NumPy scalar itself (a third of asarray(...)[()]'s time)
    # A fill kernel, queued like any other: asarray would copy from the host synchronously,
    # stalling until the GPU has finished everything before it.
    return xp.full((), value, dtype=dtype)


def asarray(value: Any) -> Array:
    """Numbers or nested lists (or a host or device array) as an array of the working dtype."""
    if xp is not numpy and isinstance(value, xp.ndarray):  # on the device already: no trip to the host
        check_size(value.shape, "the value")
        array = value.astype(dtype, copy=False)
        return array[()] if array.ndim == 0 else array
    host = numpy.asarray(value)
    if host.dtype.kind not in "biuf":
        raise GradcalcError(f"expected numbers, got {host.dtype.name} data", "give numbers or nested lists of numbers")
    check_size(host.shape, "the value")
    with errstate():  # 1e300 in float32 is inf, as in PyTorch, not a warning
        array = xp.asarray(host, dtype=dtype)
    return array[()] if array.ndim == 0 else array


def to_host(value: Array) -> Any:
    """A NumPy array (or NumPy scalar) for output."""
    if xp is not numpy and hasattr(value, "get"):
        value = value.get()
    return numpy.asarray(value)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(numpy.broadcast_shapes(*shapes))


def summed_axes(source: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The axes a value of shape `source`, broadcast from `shape`, is summed over to get back to it.

    Undoing broadcasting (a gradient's unbroadcast): the leading axes `shape` lacks, and
    those where `shape` has 1 and `source` does not.
    """
    lead = len(source) - len(shape)
    return tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and source[lead + i] != 1)


def errstate() -> Any:
    """Floating-point warnings off: NaN and infinity are values, as in PyTorch."""
    return numpy.errstate(all="ignore")


class Random:
    """The one random generator of a run, seeded by --seed.

    Numbers are drawn on the host and moved to the device, so a seed gives the
    same values on CPU and GPU.
    """

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise UsageError(f"the seed must be 0 or more, got {seed}", "use --seed 0, 1, 2, ...")
        self.seed = seed
        self._generator: Any = None  # made on first draw: numpy.random costs start-up time

    @property
    def generator(self) -> Any:
        if self._generator is None:
            self._generator = numpy.random.default_rng(self.seed)
        return self._generator

    def normal(self, shape: tuple[int, ...]) -> Array:
        return asarray(self.generator.standard_normal(shape))

    def uniform(self, shape: tuple[int, ...]) -> Array:
        return asarray(self.generator.random(shape))


def load_file(handle: BinaryIO, name: str, member: str | None, shown: str, max_text: int) -> Any:
    """Read .npy, .npz (one member), .csv or .json data from an open file into a host array.

    Array files are read header first: their element count is checked against --max-elements
    before their data is read, and no more data is read than the header promises (a member of a
    zip bomb expands no further). Text files are read to at most max_text bytes.
    `shown` is the path as the program wrote it, for messages.
    """
    import json

    from ..files import read_bounded

    lower = name.lower()
    if lower.endswith(".npy"):
        return _read_npy(handle, shown)
    if lower.endswith(".npz"):
        arrays = _read_npz(handle, shown, member, one=True)
        return next(iter(arrays.values()))
    if lower.endswith((".csv", ".json")):
        text = read_bounded(handle, max_text, shown).decode("utf-8-sig")
        if lower.endswith(".json"):
            return numpy.asarray(json.loads(text), dtype=numpy.float64)
        try:
            return numpy.loadtxt(io.StringIO(text), delimiter=",", ndmin=1)
        except ValueError:
            return numpy.loadtxt(io.StringIO(text), delimiter=",", ndmin=1, skiprows=1)  # a header row
    raise GradcalcError(f"cannot read '{shown}': unknown file type", "load reads .npy, .npz, .csv and .json files")


def _read_npy(stream: BinaryIO, shown: str) -> Any:
    """One array in NumPy's format from a stream: header, checks, then exactly the data it declares."""
    from numpy.lib import format as npy

    version = npy.read_magic(stream)
    if version == (1, 0):
        shape, fortran, kind = npy.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran, kind = npy.read_array_header_2_0(stream)
    else:
        raise GradcalcError(f"{shown}: .npy format version {version[0]}.{version[1]} is not read",
                            "save it with numpy.save (format 1.0 or 2.0)")
    if kind.hasobject or kind.kind not in "biuf":
        raise GradcalcError(f"{shown} holds {kind.name} data, not numbers (pickled objects are never read)",
                            "save an array of numbers with numpy.save")
    check_size(tuple(shape), f"the array in {shown}")
    count = math.prod(shape)
    data = stream.read(count * kind.itemsize)
    if len(data) != count * kind.itemsize:
        raise GradcalcError(f"{shown} is cut short: its header promises {count:,} numbers",
                            "save the file again")
    return numpy.frombuffer(data, dtype=kind, count=count).reshape(shape, order="F" if fortran else "C")


def _read_npz(handle: BinaryIO, shown: str, member: str | None = None, one: bool = False) -> dict[str, Any]:
    """The arrays of an .npz archive (only `member`, or its only one, when one=True), each read as _read_npy."""
    import zipfile

    with zipfile.ZipFile(handle) as archive:
        members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()
                   if info.filename.endswith(".npy")}
        names = list(members)
        if one:
            if member is None:
                if len(names) != 1:
                    raise GradcalcError(
                        f"{shown} holds {len(names)} arrays: {', '.join(names[:12])}",
                        f'name one: load("{shown}", "{names[0] if names else "x"}")',
                    )
                member = names[0]
            if member not in members:
                raise GradcalcError(f"{shown} has no array named '{member}'", f"it has: {', '.join(names[:12])}")
            names = [member]
        arrays = {}
        for name in names:
            with archive.open(members[name]) as stream:
                arrays[name] = _read_npy(stream, f"{shown} ({name})")  # type: ignore[arg-type]
        return arrays


def read_values(path: str, max_text: int) -> dict[str, Any]:
    """A --values file: a JSON object of numbers and arrays, or an .npz archive."""
    import json

    from ..files import open_regular, read_bounded

    with open_regular(path) as handle:
        if path.lower().endswith(".npz"):
            return _read_npz(handle, path)
        data = json.loads(read_bounded(handle, max_text, path).decode("utf-8-sig"))
    if not isinstance(data, dict):
        raise GradcalcError(f"{path} must hold a JSON object of names and values", 'for example {"a": 2, "x": [1, 2]}')
    return data


JSON_BLOCK = 1 << 13  # entries: an array up to this size becomes lists at once; a larger one is written in blocks


class JsonArray:
    """A host array on its way to JSON: jsonout.write writes it a block of rows at a time.

    Nested lists of Python floats cost four times the array (a list slot and a float object per
    entry, 32 bytes against 8), and the JSON text as much again: a 10^8-entry Jacobian needed
    over 6 GB. Written in blocks, the output costs a block, whatever the array's size.
    """

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def chunks(self, block: int = JSON_BLOCK) -> Any:
        """The JSON text, in pieces of about `block` entries: what json.dumps(the nested lists) gives."""
        import json

        def text(part: Any) -> str:
            return json.dumps(_plain(part), allow_nan=False)

        def pieces(part: Any) -> Any:
            if part.size <= block or part.ndim == 0:
                yield text(part)
                return
            rows = max(1, block // (part[0].size or 1))  # whole rows (sub-arrays) per piece
            yield "["
            for start in range(0, part.shape[0], rows):
                if start:
                    yield ", "
                if part.ndim == 1 or rows > 1:
                    yield text(part[start:start + rows])[1:-1]  # the entries, without the brackets
                else:  # one row is more than a block: its own rows, block by block
                    yield from pieces(part[start])
            yield "]"

        return pieces(self.array)


def _plain(host: Any) -> Any:
    """Numbers and nested lists; NaN and infinities as the strings JSON lacks."""
    if numpy.isfinite(host).all():
        return host.tolist()
    texts = numpy.where(numpy.isnan(host), "NaN", numpy.where(host > 0, "Infinity", "-Infinity"))
    return numpy.where(numpy.isfinite(host), host.astype(object), texts).tolist()


def to_json(value: Any) -> Any:
    """A value for JSON: a number (or "NaN", "Infinity", "-Infinity"), nested lists, or, for a large
    array, a JsonArray that jsonout writes block by block."""
    host = to_host(value)
    if host.dtype.kind == "b":
        host = host.astype(numpy.float64)
    if host.size <= JSON_BLOCK:
        return _plain(host)
    return JsonArray(host)


def format_number(number: float) -> str:
    """Six significant digits, no trailing zeros: 15, -1, 2.5, 0.0512, 1.5e-07."""
    if math.isnan(number):
        return "nan"
    if number in (float("inf"), float("-inf")):
        return "inf" if number > 0 else "-inf"
    text = f"{number:.6g}"
    return "0" if text == "-0" else text


def format_value(value: Any, full: bool = False, threshold: int = 64) -> str:
    """A value for people: a number, or a compact nested list (summarised unless full)."""
    host = to_host(value)
    if host.ndim == 0:
        return format_number(float(host))
    flat = host.reshape(-1)
    sample = flat if flat.size <= 10_000 else numpy.concatenate([flat[:5000], flat[-5000:]])
    width = max((len(format_number(float(v))) for v in sample), default=1)  # aligned columns
    return numpy.array2string(
        host,
        separator=", ",
        formatter={"float_kind": lambda v: format_number(float(v)).rjust(width)},
        threshold=sys.maxsize if full else threshold,
        edgeitems=3,
        max_line_width=72,
    )


def is_symmetric(matrix: Any) -> bool:
    """A square matrix equal to its transpose, to rounding."""
    host = to_host(matrix)
    square = host.ndim == 2 and host.shape[0] == host.shape[1]
    return square and bool(numpy.allclose(host, host.T, rtol=1e-10, atol=1e-12))


def close(a: Any, b: Any) -> bool:
    """Equal to rounding (a path sum against autograd's gradient); NaN equals NaN, as both are undefined."""
    return bool(numpy.allclose(to_host(a), to_host(b), rtol=1e-9, atol=1e-12, equal_nan=True))
