"""ct.print, print and ct.printf on every backend: the text cuTile prints (tiles as nested lists
of elements formatted by C printf conversions), in block order, and cuTile's compile errors."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import random_array, rng


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


# ---- ct.printf of 1-D tiles, every dtype ----------------------------------------------------------------------
@ct.kernel
def printf_tile(x, FMT: ct.Constant[str], TILE: ct.Constant[int]):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.printf(FMT, bid, t)


_INT_FORMATS = {"int8": "%d", "int16": "%d", "int32": "%i", "int64": "%lld", "uint8": "%u", "uint16": "%u",
                "uint32": "%u", "uint64": "%llu", "bool": "%d"}
_FLOAT_FORMATS = {"float16": "%.5f", "bfloat16": "%.5f", "float32": "%.5f", "float64": "%.5lf"}


def _values(dtype: str) -> np.ndarray:
    """13 values of `dtype` (two tiles of 8, the second padded), with each dtype's extremes."""
    g = rng("print", dtype)
    if dtype == "bool":
        return g.integers(0, 2, 13).astype(np.bool_)
    if dtype in _INT_FORMATS:
        info = np.iinfo(dtype)
        a = g.integers(info.min, info.max, 13, dtype=dtype, endpoint=True)
        a[:2] = info.min, info.max
        return a
    a = random_array(g, (13,), dtype, -1000, 1000)
    a[:4] = np.array([np.inf, -np.inf, -0.0, np.nan]).astype(a.dtype)
    return a


@pytest.mark.parametrize("dtype", [*_INT_FORMATS, *_FLOAT_FORMATS])
def test_printf_1d_tiles(dev, capsys, dtype: str) -> None:
    x = _values(dtype)
    fmt = _INT_FORMATS.get(dtype) or _FLOAT_FORMATS[dtype]
    dev.launch((2,), printf_tile, (dev.put(x), f"tile[%d]:{fmt}\n", 8))
    padded = np.concatenate([x, np.zeros(3, x.dtype)])
    if dtype in _INT_FORMATS:
        items = [str(int(v)) for v in padded]
    else:
        items = ["%.5f" % float(v) for v in padded]  # C and Python agree on finite values, inf, nan
    assert printed(capsys) == [f"tile[{b}]:[{', '.join(items[8 * b:8 * b + 8])}]" for b in range(2)]


# ---- print / ct.print: default formats, Python format specs, 2-D tiles ------------------------------------------
@ct.kernel
def print_forms(x, y):
    tx = ct.load(x, (0,), (4,))
    ty = ct.load(y, (0, 0), (2, 4))
    print("x:", tx, "y:", ty)
    ct.print(f"s={ct.sum(ty)} r={ct.sum(ty, 1, keepdims=True)} f={tx:>9.3f} e={tx:+.2e}", end="|\n")
    ct.print(f"{ty:<4d}|{ty:04x}|{ty:#o}", sep="")
    ct.print("100% sure", tx > 0, ty.astype(ct.uint64) * 3, tx.astype(ct.float64), sep=": ")


def test_print_default_formats_and_specs(dev, capsys) -> None:
    x = np.array([1.5, -0.25, 1e6, 0.0], np.float32)
    y = np.array([[0, 7, 8, 100], [5, 64, 9, 1]], np.int32)
    dev.launch((1,), print_forms, (dev.put(x), dev.put(y)))
    assert printed(capsys) == [
        "x: [1.500000, -0.250000, 1000000.000000, 0.000000] y: [[0, 7, 8, 100], [5, 64, 9, 1]]",
        "s=194 r=[[115], [79]] f=[    1.500,    -0.250, 1000000.000,     0.000] "
        "e=[+1.50e+00, -2.50e-01, +1.00e+06, +0.00e+00]|",
        "[[0   , 7   , 8   , 100 ], [5   , 64  , 9   , 1   ]]|[[0000, 0007, 0008, 0064], [0005, 0040, 0009, 0001]]|"
        "[[0, 07, 010, 0144], [05, 0100, 011, 01]]",
        "100% sure: [1, 0, 1, 0]: [[0, 21, 24, 300], [15, 192, 27, 3]]: [1.500000, -0.250000, 1000000.000000, 0.000000]",
    ]


# ---- tuples, strings, dataclasses, dtypes -----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Pair:
    a: Any
    b: Any = dataclasses.field(repr=False)
    tag: str = "p"


@dataclasses.dataclass(frozen=True)
class Named:
    v: Any

    def __str__(self) -> str:
        return f"Named<{self.v}>"


@dataclasses.dataclass(frozen=True, repr=False)
class Opaque:
    v: Any


@ct.kernel
def print_objects(x):
    t = ct.load(x, (0,), (2,))
    bid = ct.bid(0)
    ct.print((t, bid, "s", x.shape))
    ct.print(Pair(t, t + 1))
    print(Named(t), (Named(t),), Opaque(t))
    ct.print(f"{(bid,)} {()} {ct.int8} {x.dtype} {repr(f'it' + f's {bid}')} {str(t)}")


def test_print_tuples_dataclasses_and_strings(dev, capsys) -> None:
    dev.launch((1,), print_objects, (dev.put(np.array([3, -4], np.int32)),))
    assert printed(capsys) == ["([3, -4], 0, 's', (2,))",
                               "Pair(a=[3, -4], tag='p')",
                               "Named<[3, -4]> (Named(v=[3, -4]),) <Opaque object>",
                               "(0,) () int8 int32 'its 0' [3, -4]"]


# ---- order: blocks x fastest, a block's prints in program order, prints in loops and branches -------------------
@ct.kernel
def print_order(n):
    bx = ct.bid(0)
    by = ct.bid(1)
    for i in range(n):
        ct.printf("b(%d,%d) i=%d\n", bx, by, i)
    if bx == 1:
        ct.print("x is 1 in row", by)


def test_prints_come_in_block_order(dev, capsys) -> None:
    dev.launch((3, 2), print_order, (2,))
    want = []
    for y in range(2):
        for x in range(3):
            want += [f"b({x},{y}) i=0", f"b({x},{y}) i=1"] + [f"x is 1 in row {y}"] * (x == 1)
    assert printed(capsys) == want


# ---- integer conversions read the promoted argument, dtype calls wrap --------------------------------------------
@ct.kernel
def printf_wrap(x):
    t = ct.load(x, (0,), (2,))
    ct.printf("%u %x %d %lu %llu %hhd|", t, t, ct.uint32(-1), ct.uint32(-1), ct.uint64(-1), ct.int32(200))
    ct.printf("%d %u %f %e %%\n", -1, 123, 3.14, 2.0)


def test_printf_integer_widths_and_constants(dev, capsys) -> None:
    dev.launch((1,), printf_wrap, (dev.put(np.array([-1, 255], np.int32)),))
    assert printed(capsys) == ["[4294967295, 255] [ffffffff, ff] -1 4294967295 18446744073709551615 -56|"
                               "-1 123 3.140000 2.000000e+00 %"]


# ---- the Triton backend's record buffer -------------------------------------------------------------------------
@ct.kernel
def print_many(n):
    for i in range(n):
        ct.printf("%d\n", i)


@pytest.mark.only_backends("triton-interpret", "triton")
def test_prints_beyond_the_record_buffer_are_dropped_with_a_warning(dev, capsys, monkeypatch) -> None:
    from tilecraft.backends.triton import printing
    monkeypatch.setattr(printing, "MAX_WORDS", 10)  # three records of 3 words fit
    dev.launch((1,), print_many, (10,))
    out = capsys.readouterr()
    assert out.out.splitlines() == ["0", "1", "2"]
    assert "kernel `print_many` printed more than its print buffer holds (30 of 10 words)" in out.err


@pytest.mark.only_backends("triton-interpret", "triton")
def test_only_printing_kernels_take_the_record_buffer(dev, capsys) -> None:
    dev.launch((1,), print_many, (1,))
    out = dev.poison((4,), np.int32)
    dev.launch((1,), printf_tile_free, (out,))
    printing_kernel = next(iter(print_many.variants.values())).compiled.lowered
    plain_kernel = next(iter(printf_tile_free.variants.values())).compiled.lowered
    assert printing_kernel.prints is not None and "print_buf" in printing_kernel.signature
    assert plain_kernel.prints is None and not any(p.startswith("print") for p in plain_kernel.signature)
    assert printed(capsys) == ["0"]


@ct.kernel
def printf_tile_free(out):
    ct.store(out, (0,), ct.arange(4, dtype=ct.int32))


# ---- compile errors ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CustomFormat:
    v: Any

    def __format__(self, spec: str) -> str:
        return "custom"


def bad_format_arg(t):
    ct.printf(t, t)


def bad_conversion(t):
    ct.printf("%d\n", t * 0.5)


def bad_format(t):
    ct.printf("%%%+3", t)


def unsupported_specifier(t):
    ct.printf("%s", t)


def too_many(t):
    ct.printf("%d", t, t)


def too_few(t):
    ct.printf("%d %d", t)


def repr_conversion(t):
    ct.print(f"{t!r}")


def dynamic_spec(t):
    width = 5
    ct.print(f"{t:{width}}")


def spec_on_tuple(t):
    ct.print(f"{t.shape:10}")


def custom_format(t):
    print(f"{CustomFormat(1)}")


def spec_for_ints_on_floats(t):
    ct.print(f"{t * 0.5:.2d}")


def python_only_spec(t):
    ct.print(f"{t:,}")


def sep_not_string(t):
    print(t, t, sep=3)


@ct.kernel
def run_bad(x, WHICH: ct.Constant[int]):
    t = ct.load(x, (0,), (4,))
    _BAD[WHICH][0](t)


_BAD = [
    (bad_format_arg, ct.TileTypeError,
     'Invalid argument "format" of printf(): Expected a string constant, but given value is not constant'),
    (bad_conversion, ct.TileTypeError, "Format %d for arg #0 got unexpected type of Tile[float32,(4)]"),
    (bad_format, ct.TileTypeError, "Invalid format string"),
    (unsupported_specifier, ct.TileTypeError, "Specifier s in %s is not supported"),
    (too_many, ct.TileTypeError, "Too many arguments for format string"),
    (too_few, ct.TileTypeError, "Not enough arguments for format string"),
    (repr_conversion, ct.TileSyntaxError, "f-string: !r, !s, !a conversions are not supported"),
    (dynamic_spec, ct.TileSyntaxError, "f-string: format spec must be a literal string"),
    (spec_on_tuple, ct.TileTypeError, "f-string: cannot apply format spec to a value of type"),
    (custom_format, ct.TileTypeError, "Formatting dataclass values with custom __format__() is not supported"),
    (spec_for_ints_on_floats, ct.TileTypeError, "print(): format spec '.2d' is incompatible with dtype float32"),
    (python_only_spec, ct.TileTypeError, "print(): unsupported format spec ','"),
    (sep_not_string, ct.TileTypeError, "print(): `sep` must be a string"),
]


@pytest.mark.parametrize("which", range(len(_BAD)), ids=[f.__name__ for f, _, _ in _BAD])
def test_print_errors_use_cutile_wording_at_the_call(which: int) -> None:
    fn, error, message = _BAD[which]
    with pytest.raises(error) as info:
        ct.launch(None, (1,), run_bad, (np.zeros(4, np.int32), which), backend="interpreter")
    assert info.value.message.startswith(message)
    lines, first = inspect.getsourcelines(fn)
    assert info.value.loc is not None and info.value.loc.line == first + len(lines) - 1


# ---- the IR op ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, ok", [("%f|%%", True), ("%5.2e\n", True), ("%d", False), ("%f %f", False),
                                     ("5%!", False), ("none", False)])
def test_print_op_format_must_fit_its_tiles(fmt: str, ok: bool) -> None:
    from tilecraft.errors import TileInternalError
    from tilecraft.ir import Block, Builder, Function, ops
    from tilecraft.ir.verifier import verify
    from tilecraft.language import dtypes as D
    b = Builder()
    fn = Function("k", [], [], Block(), None)
    with b.inside(fn.body):
        b.emit(ops.Print, format=fmt, tiles=(b.value(ops.Const, value=1.5, dtype=D.float32),))
    if ok:
        verify(fn)
    else:
        with pytest.raises(TileInternalError, match="does not fit its tiles"):
            verify(fn)
