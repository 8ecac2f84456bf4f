"""Dataclasses in tile code follow cuTile's rules whether their fields are constants or tiles:
methods, `__call__` and `__setitem__` are compiled, `dataclasses.replace` works, unsupported
classes are refused in cuTile's wording; `ct.static_def` functions run as Python."""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass

import numpy as np
import pytest

import tilecraft as ct


def marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if "# ERR" in text)


@dataclass(frozen=True)
class Affine:
    scale: int
    shift: int = 0

    def __call__(self, t):
        return t * self.scale + self.shift   # tile arithmetic: compiled, not run by Python

    @property
    def ramp(self):
        return ct.arange(8, dtype=ct.int32) * self.scale


@dataclass(frozen=True)
class Sink:
    arr: ct.Array

    def __setitem__(self, index, value):
        ct.scatter(self.arr, index, value + 1000)


@ct.kernel
def constant_record_kernel(x, out):
    f = Affine(3)
    g = dataclasses.replace(f, shift=-4)
    t = ct.load(x, (0,), (8,))
    ct.store(out, (0,), g(t) + f.ramp)
    sink = Sink(out)
    sink[8] = g.shift


def test_constant_records_compile_their_methods(dev) -> None:
    x = np.arange(8, dtype=np.int32) * 5 - 9
    out = dev.poison((9,), np.int32)
    dev.launch((1,), constant_record_kernel, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), np.append(x * 3 - 4 + np.arange(8) * 3, 996))


@ct.static_def
def digits(*values):
    """Python at compile time: lists, while loops."""
    acc, rest = 0, list(values)
    while rest:
        acc = acc * 10 + rest.pop(0)
    return acc


@dataclass(frozen=True)
class Grid:
    rows: int
    cols: int

    @ct.static_def
    def __init__(self, size):
        object.__setattr__(self, "rows", size // 4)
        object.__setattr__(self, "cols", size % 4 + 1)

    @ct.static_def
    def __call__(self, t):
        return t.shape[0] * 100 + self.rows * 10 + self.cols   # t is a symbol: its shape is known


@ct.kernel
def static_def_kernel(out, N: ct.Constant[int]):
    g = Grid(N)
    t = ct.zeros((16,), ct.int32)
    ct.scatter(out, 0, digits(g.rows, g.cols, 7))
    ct.scatter(out, 1, g(t))


def test_static_def_functions_run_as_python(dev) -> None:
    out = dev.poison((2,), np.int32)
    dev.launch((1,), static_def_kernel, (out, 13))
    assert dev.get(out).tolist() == [327, 1632]


@ct.static_def
def bad_divide(n):
    return 10 // n


@ct.kernel
def static_def_raises(out):
    ct.scatter(out, 0, bad_divide(0))  # ERR


def test_static_def_exception() -> None:
    with pytest.raises(ct.TileStaticEvalError, match=re.escape(
            "Exception was raised inside @static_def function (ZeroDivisionError: integer division or modulo by "
            "zero)")) as ei:
        ct.launch(None, (1,), static_def_raises, (np.zeros(1, np.int32),))
    assert ei.value.loc.line == marked_line(static_def_raises.fn)


@dataclass
class Loose:
    v: int


@dataclass(frozen=True, init=False)
class NoInit:
    v: int


@dataclass(frozen=True)
class OwnInit:
    v: int

    def __init__(self, v):
        object.__setattr__(self, "v", v)


@dataclass(frozen=True)
class NewBase:
    v: int

    def __new__(cls, *args):
        return object.__new__(cls)


@dataclass(frozen=True)
class NewChild(NewBase):
    w: int = 0


class PlainChild(Affine):
    pass


@dataclass(frozen=True)
class HiddenField:
    v: int
    w: int = dataclasses.field(init=False, default=2)


@dataclass(frozen=True)
class Factory:
    v: tuple = dataclasses.field(default_factory=tuple)


@ct.kernel
def build(out, which: ct.Constant[int]):
    classes = (Loose, NoInit, OwnInit, NewChild, PlainChild, HiddenField, Factory)
    obj = classes[which](1)  # ERR


@pytest.mark.parametrize("which, message", [
    (0, "Only frozen dataclasses are supported"),
    (1, "Dataclass instance creation is only supported for dataclasses with a default generated __init__() method"),
    (2, "Dataclass instance creation is only supported for dataclasses with a default generated __init__() method"),
    (3, "Dataclasses with custom __new__ are not supported"),
    (4, "Non-dataclass subclasses of a dataclass are not supported"),
    (5, "Dataclasses with init=False fields are not supported"),
    (6, "Dataclasses with default_factory fields are not supported"),
])
def test_unsupported_dataclasses(which: int, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), build, (np.zeros(1, np.int32), which))
    assert ei.value.loc.line == marked_line(build.fn)


@ct.kernel
def replace_unknown(out):
    f = dataclasses.replace(Affine(2), offset=1)  # ERR


@ct.kernel
def call_without_dunder(out):
    s = Sink(out)
    s(1)  # ERR


@ct.kernel
def thawed_from_static_eval(out):
    v = ct.static_eval(Loose(3))  # ERR


@pytest.mark.parametrize("kernel, message", [
    (replace_unknown, "Dataclass 'Affine' has no such field 'offset'"),
    (call_without_dunder, "Cannot call an object of type Sink"),
    (thawed_from_static_eval, "Only frozen dataclasses are supported"),
], ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_dataclass_errors(kernel, message: str) -> None:
    with pytest.raises(ct.TileTypeError, match=re.escape(message)) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(1, np.int32),))
    assert ei.value.loc.line == marked_line(kernel.fn)
