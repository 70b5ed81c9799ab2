"""A stand-in for CuPy on machines without a GPU: arrays that live "on a device".

It keeps CuPy's rules that matter to gradcalc's backend contract:
- a device array is not a NumPy array: converting it implicitly (numpy.asarray,
  numpy.array2string, any numpy.* function) raises TypeError, as CuPy does;
- device and host arrays do not mix in one operation;
- indexing and reductions give 0-d device arrays, never NumPy scalars;
- `.get()` / `asnumpy()` move a value to the host, explicitly.

It also counts the copies between host and device (`transfers`): on a real GPU each one
waits for the kernels queued before it, so a test can hold the engine to none.

So the engine run with `--device gpu` over this module fails wherever code
outside gradcalc/engine/backend.py reaches for NumPy on a device value.
"""

from __future__ import annotations

import types
from typing import Any

import numpy
import numpy.lib.mixins

transfers = {"to_host": 0, "to_device": 0}


class FakeDeviceArray(numpy.lib.mixins.NDArrayOperatorsMixin):
    """An array on the fake device (wraps a NumPy array that must not leak)."""

    __slots__ = ("_host",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, host: numpy.ndarray) -> None:
        self._host = host

    # --- CuPy's refusals ---------------------------------------------------------------------
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("Implicit conversion to a NumPy array is not allowed (fake device): use .get()")

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        raise TypeError(f"numpy.{func.__name__} called on a device array outside the backend (fake device)")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for item in inputs:
            if isinstance(item, numpy.ndarray):
                raise TypeError(f"{ufunc.__name__}: a host array mixed with a device array (fake device)")
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(unwrap(o) for o in out)
        result = getattr(ufunc, method)(*(unwrap(i) for i in inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return wrap(result)

    # --- what CuPy arrays offer --------------------------------------------------------------
    def get(self) -> numpy.ndarray:
        transfers["to_host"] += 1
        return numpy.array(self._host)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._host.shape

    @property
    def ndim(self) -> int:
        return self._host.ndim

    @property
    def size(self) -> int:
        return self._host.size

    @property
    def dtype(self) -> Any:
        return self._host.dtype

    @property
    def T(self) -> FakeDeviceArray:
        return wrap(self._host.T)

    def __getitem__(self, index: Any) -> Any:
        return wrap(self._host[unwrap(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(value, numpy.ndarray):
            raise TypeError("assigning a host array into a device array (fake device)")
        self._host[unwrap(index)] = unwrap(value)

    def __len__(self) -> int:
        return len(self._host)

    def __iter__(self) -> Any:
        return (wrap(item) for item in self._host)

    def __float__(self) -> float:
        return float(self._host)

    def __int__(self) -> int:
        return int(self._host)

    def __index__(self) -> int:
        return self._host.__index__()

    def __bool__(self) -> bool:
        return bool(self._host)

    def __repr__(self) -> str:
        return f"fake_device_array({self._host!r})"

    def __getattr__(self, name: str) -> Any:  # methods: reshape, astype, sum, ...
        if name.startswith("__"):  # never __array_interface__ and the like: NumPy would read the host array
            raise AttributeError(name)
        attribute = getattr(self._host, name)
        if not callable(attribute):
            return wrap(attribute)

        def method(*args: Any, **kwargs: Any) -> Any:
            return wrap(attribute(*(unwrap(a) for a in args), **{k: unwrap(v) for k, v in kwargs.items()}))

        return method


def unwrap(value: Any) -> Any:
    if isinstance(value, FakeDeviceArray):
        return value._host
    if isinstance(value, (list, tuple)):
        return type(value)(unwrap(v) for v in value)
    return value


def wrap(value: Any) -> Any:
    if isinstance(value, numpy.ndarray):
        return FakeDeviceArray(value)
    if isinstance(value, numpy.generic):  # CuPy has no scalars: a 0-d array
        return FakeDeviceArray(numpy.asarray(value))
    if isinstance(value, tuple):
        return tuple(wrap(v) for v in value)
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value


class _Namespace(types.ModuleType):
    """numpy's functions, taking and giving device arrays; host arrays are accepted only by asarray."""

    def __init__(self, name: str, source: Any) -> None:
        super().__init__(name)
        self._source = source

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._source, name)
        if isinstance(attribute, types.ModuleType):
            return _Namespace(f"{self.__name__}.{name}", attribute)
        if not callable(attribute) or isinstance(attribute, type):
            return attribute  # dtypes, constants, classes

        def function(*args: Any, **kwargs: Any) -> Any:
            if name not in ("asarray", "array") and any(isinstance(a, numpy.ndarray) and a.ndim
                                                        for a in args):
                raise TypeError(f"{self.__name__}.{name}: a host array given to a device function (fake device)")
            if name in ("asarray", "array") and args and not isinstance(args[0], FakeDeviceArray):
                transfers["to_device"] += 1
            return wrap(attribute(*(unwrap(a) for a in args), **{k: unwrap(v) for k, v in kwargs.items()}))

        return function


def make_module() -> types.ModuleType:
    """A module that `import cupy` can return."""
    module = _Namespace("cupy", numpy)
    module.__version__ = "0.0-fake"  # type: ignore[attr-defined]
    module.ndarray = FakeDeviceArray  # type: ignore[attr-defined]
    module.asnumpy = lambda value: value.get() if isinstance(value, FakeDeviceArray) else numpy.asarray(value)  # type: ignore[attr-defined]
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda index: {"name": b"Fake GPU", "totalGlobalMem": 16 * 2**30},
    )
    module.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    return module
