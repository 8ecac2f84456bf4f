"""Special values through every backend, bit for bit against references computed here.

Casts between every pair of value dtypes, and elementwise ops with exact IEEE answers
(arithmetic correctly rounded, min/max, comparisons, select, negation, abs, sqrt, floor, ceil;
integer wraparound, bitwise ops, shifts, Python // and %), on operands at the edges of each
format: signed zeros, subnormals, the largest finite values and values just past those of
narrower formats, ties, infinities, NaN, integer limits. The references are exact (Python
integers and fractions, rounded once by the interpreter tests' `round_exact`; fp8 through
`satfinite_reference`), never a backend's output, so a lowering that differs only on the GPU
(as Triton's float8_e5m2 to bfloat16, which made infinities finite) fails here under
`TILECRAFT_TEST_BACKENDS=triton`. One kernel per source dtype (casts) or operand dtype (ops)
writes every result, and a failure lists every differing (pair or op, operand) at once.

Left out, as docs/conformance.md lists them unspecified: float-to-int casts of NaN, infinities
and values out of the destination's range; the sign and payload of NaN results (only NaN
positions are compared); integer // and % by zero. Also left out: `min // -1` and `min % -1`
(the quotient overflows: undefined in LLVM's sdiv, which the GPU code may use), and casts to
float8_e8m0fnu (the Triton backend has none; the language takes only RZ and RP
from floats into it); casts from it are checked for all 256 codes.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import pytest

import tilecraft as ct
from optest_utils import np_dtype, wrap
from test_fp8_saturation import satfinite_reference
from test_interpreter_ir import FORMATS, reference_binary, reference_sqrt, round_exact
from tilecraft.ir import BinaryFn
from tilecraft.language import dtypes as D

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
FP8 = ["float8_e4m3fn", "float8_e5m2"]
CAST_DSTS = ["bool_", *INTS, *FLOATS, *FP8]   # plus tfloat32 from the float sources
E8M0 = "float8_e8m0fnu"  # a source only (2**(code - 127), NaN): casts into it take RZ or RP
ZERO = ct.PaddingMode.ZERO
pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning",
                                        "ignore:divide by zero:RuntimeWarning")


def tile_for(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def differing(got: np.ndarray, want: np.ndarray, checked: np.ndarray | None) -> np.ndarray:
    """Indices of checked lanes (None: all) that differ: a NaN against a non-NaN, or other bits
    (a NaN's bits are unspecified)."""
    if got.dtype.kind == "b":
        bad = got != want
    else:
        with np.errstate(invalid="ignore"):
            gnan, wnan = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
        bad = (gnan != wnan) | (~gnan & (bits(got) != bits(want)))
    return np.flatnonzero(bad if checked is None else bad & checked)


def describe(what: str, got: np.ndarray, want: np.ndarray, checked: np.ndarray | None,
             *operands: np.ndarray) -> list[str]:
    """One line per differing result (the first four of each), naming the operands."""
    bad = differing(got, want, checked)
    return [f"{what}: {', '.join(repr(x[k].item()) for x in operands)} gave {got[k].item()!r}, want "
            f"{want[k].item()!r}" + (f" ({bad.size} lanes differ)" if i == 0 and bad.size > 4 else "")
            for i, k in enumerate(bad[:4])]


# ---- casts ---------------------------------------------------------------------------------------------

def _pm(values: list[float]) -> list[float]:
    return values + [-v for v in values]


def cast_float_edges() -> list[float]:
    """float64 values around every destination's limits: largest finite, the tie past it and a
    value below that tie; smallest subnormal, ties at half and 1.5 times it; smallest normal;
    ties between 1 and its successor at even and odd last bits, and just above; integer limits
    and truncations; infinities and NaN (cast to each source: some become inf, zero or a
    neighbour, which the references take as they are)."""
    vals = [0.0, 1.0, 0.5, 0.99, 1.5, 2.5, 127.9, 128.0, 128.9, 129.0, 255.5, 256.0, 32767.5, 32768.0,
            32769.0, 65535.9, 65536.0, 2.0**31 - 128, 2.0**31, 2.0**31 + 1, 2.0**32 - 1, 2.0**32,
            2.0**63 - 2**39, 2.0**63 - 1024, 2.0**63, 2.0**64 - 2**40, 2.0**64 - 2048, 2.0**64,
            2.0**24 + 1, 2.0**24 + 2, 2.0**53 + 2, 1e300, 5e-324, math.inf,
            416.0, 448.0, 464.0, 465.0, 480.0, 57344.0, 61440.0, 61441.0]
    for p, emin, emax in (*FORMATS.values(), (4, -6, 8)):   # and float8_e4m3fn's grid
        top = (2 - 2.0 ** (1 - p)) * 2.0**emax
        tiny = 2.0 ** (emin - p + 1)
        tie = 2.0 ** -p
        vals += [top, top + 2.0 ** (emax - p), top + 2.0 ** (emax - p) * (1 - 2.0**-20), tiny, tiny / 2,
                 tiny * 1.5, tiny * 2.5, tiny * 0.75, 2.0**emin, 2.0**emin - tiny, 1 + tie, 1 + 3 * tie,
                 1 + tie + 2.0**-22, 1 + tie + 2.0**-40]
    return _pm(vals) + [math.nan]


INT_EDGES = [0, 1, 2, 127, 128, 255, 256, 257, 259, 447, 448, 449, 464, 465, 2049, 2051, 32767, 32768,
             57344, 61440, 61441, 65504, 65519, 65520, 65535, 65536, 2**24 + 1, 2**24 + 3, 2**31 - 1,
             2**31, 2**32 - 1, 2**32, 2**32 + 2**24 + 1, 2**53 + 1, 2**53 + 3, 2**62 + 2**54 + 1,
             2**63 - 1, 2**63, 2**63 + 2**39 + 1, 2**64 - 1, 3 * 2**60 + 2**35]
"""Integers at the limits of every integer type, ties in each float format (257 in bfloat16,
2049 in float16, 2**24 + 1 in float32, 464 in float8_e4m3fn), values just above a bfloat16
tie that float32 would round onto it (2**32 + 2**24 + 1), and past the fp8 limits."""


@functools.lru_cache(maxsize=None)
def cast_sources(src: str) -> np.ndarray:
    """The source array: every code of an 8-bit float; the edge values (and their negations)
    that `src` holds for the others, each once."""
    d = np_dtype(src)
    if src in FP8 or src == E8M0:
        return np.arange(256, dtype=np.uint8).view(d)
    if src == "bool_":
        return np.array([False, True])
    if src in INTS:
        info = np.iinfo(d)
        vals = sorted({v for e in INT_EDGES for v in (e, -e, e - 1, -e - 1) if info.min <= v <= info.max})
        return np.array(vals, d)
    with np.errstate(all="ignore"):
        x = np.array(cast_float_edges()).astype(d)
    _, first = np.unique(bits(x), return_index=True)
    return x[np.sort(first)]


def cast_value(v: bool | int | float, dst: str) -> bool | int | float | None:
    """`v` cast from `src` to `dst` (not an 8-bit float) by the language's rules; None where
    cuTile leaves it unspecified."""
    if dst == "bool_":
        return v != 0
    if dst in INTS:
        info = np.iinfo(np_dtype(dst))
        if isinstance(v, float):
            if not math.isfinite(v) or not info.min <= math.trunc(v) <= info.max:
                return None
            return math.trunc(v)
        return int(wrap(int(v), np_dtype(dst)))
    if isinstance(v, float) and not math.isfinite(v):
        return v
    fmt = D.dtype_by_name(dst)
    return round_exact(Fraction(v), fmt, None, math.copysign(1, v) < 0)


@functools.lru_cache(maxsize=None)
def cast_references(src: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """dst -> (wanted result, which lanes are specified), for every destination of `src`."""
    x = cast_sources(src)
    kind = "bool" if src == "bool_" else "int" if src in INTS else "float"
    vals = [bool(v) if kind == "bool" else int(v) if kind == "int" else float(v) for v in x]
    refs = {}
    for dst in CAST_DSTS + (["tfloat32"] if kind == "float" else []):
        if dst == src:
            refs[dst] = (x.copy(), np.ones(x.size, bool))
            continue
        if dst in FP8:
            refs[dst] = (satfinite_reference(x.astype(np.float64), dst), np.ones(x.size, bool))
            continue
        want = [cast_value(v, dst) for v in vals]
        checked = np.array([w is not None for w in want])
        store = np.float32 if dst == "tfloat32" else np_dtype(dst)
        filled = [0 if w is None else w for w in want]
        refs[dst] = (np.array(filled, object if dst in INTS else np.float64).astype(store), checked)
    return refs


@ct.kernel
def cast_kernel(x, outs, tf32, T: ct.Constant[int], TF32: ct.Constant[bool]):
    t = ct.load(x, (0,), (T,), padding_mode=ZERO)
    for o in ct.static_iter(outs):
        ct.store(o, (0,), t.astype(o.dtype))
    if TF32:
        ct.store(tf32, (0,), t.astype(ct.tfloat32).astype(ct.float32))


@pytest.mark.parametrize("src", [*CAST_DSTS, E8M0])
def test_cast_special_values(dev, src: str) -> None:
    """astype from `src` to every value dtype (and tfloat32 from the floats), bit for bit:
    exact where the value fits, round to nearest even once (from 64-bit integers and float64
    too), overflow to infinity or (fp8) to the largest finite value, truncation toward zero
    into integers, wraparound between integers, != 0 into bool."""
    x = cast_sources(src)
    refs = cast_references(src)
    outs = tuple(dev.poison(x.shape, np_dtype(d)) for d in CAST_DSTS)
    tf32 = dev.poison(x.shape, np.float32)
    dev.launch((1,), cast_kernel, (dev.put(x), outs, tf32, tile_for(x.size), "tfloat32" in refs))
    got = dict(zip(CAST_DSTS, outs)) | {"tfloat32": tf32}
    failures = []
    for dst, (want, checked) in refs.items():
        failures += describe(f"{src} -> {dst}", dev.get(got[dst]), want, checked, x)
    assert not failures, "\n".join(failures)


# ---- float ops -----------------------------------------------------------------------------------------

def float_operands(dtype: str) -> np.ndarray:
    """Both signs of zero, the smallest subnormal, the largest subnormal, the smallest normal,
    2**-p (1 plus it is a tie), 0.1, 0.5, 1, its successor, 1.5, 2, 3, 2**emax, the largest
    finite value, infinity; and NaN."""
    p, emin, emax = FORMATS[D.dtype_by_name(dtype)]
    tiny = 2.0 ** (emin - p + 1)
    vals = [0.0, tiny, 2.0**emin - tiny, 2.0**emin, 2.0**-p, 0.1, 0.5, 1.0, 1 + 2.0 ** (1 - p), 1.5, 2.0,
            3.0, 2.0**emax, (2 - 2.0 ** (1 - p)) * 2.0**emax, math.inf]
    return np.array(_pm(vals) + [math.nan]).astype(np_dtype(dtype))


def _minimum(a: np.ndarray, b: np.ndarray, nan_wins: bool) -> np.ndarray:
    """IEEE minimumNumber (NaN ignored) or minimum (NaN wins), -0.0 below +0.0."""
    low = np.where((a < b) | ((a == b) & np.signbit(a)), a, b)
    either = np.where(np.isnan(a), b, np.where(np.isnan(b), a, low))
    return np.where(np.isnan(a) | np.isnan(b), np.nan, low) if nan_wins else either


def _exact(fn: BinaryFn) -> Callable[[np.ndarray, np.ndarray, D.DType], np.ndarray]:
    """Lanewise `fn` correctly rounded to the dtype (the interpreter tests' exact reference)."""
    return lambda a, b, t: np.array([reference_binary(fn, float(x), float(y), t, None) for x, y in zip(a, b)])


FLOAT_REFS: dict[str, Callable[..., np.ndarray]] = {
    # name: float64 reference of (a, b, c, dtype); in the order of float_ops_kernel's results
    "add": lambda a, b, c, t: _exact(BinaryFn.ADD)(a, b, t),
    "sub": lambda a, b, c, t: _exact(BinaryFn.SUB)(a, b, t),
    "mul": lambda a, b, c, t: _exact(BinaryFn.MUL)(a, b, t),
    "truediv": lambda a, b, c, t: _exact(BinaryFn.TRUEDIV)(a, b, t),
    "minimum": lambda a, b, c, t: _minimum(a, b, False),
    "maximum": lambda a, b, c, t: -_minimum(-a, -b, False),
    "minimum_nan": lambda a, b, c, t: _minimum(a, b, True),
    "maximum_nan": lambda a, b, c, t: -_minimum(-a, -b, True),
    "negative": lambda a, b, c, t: -a,
    "abs": lambda a, b, c, t: np.abs(a),
    "sqrt": lambda a, b, c, t: np.array([reference_sqrt(float(x), t, None) for x in a]),
    "floor": lambda a, b, c, t: np.floor(a),
    "ceil": lambda a, b, c, t: np.ceil(a),
    "where": lambda a, b, c, t: np.where(c, a, b),
}
COMPARE_REFS: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}
"""The six comparisons, in the order of the kernels' results (after the others)."""


@ct.kernel
def float_ops_kernel(x, y, z, outs, T: ct.Constant[int]):
    a = ct.load(x, (0,), (T,), padding_mode=ZERO)
    b = ct.load(y, (0,), (T,), padding_mode=ZERO)
    c = ct.load(z, (0,), (T,), padding_mode=ZERO)
    results = (a + b, a - b, a * b, a / b, ct.minimum(a, b), ct.maximum(a, b),
               ct.minimum(a, b, propagate_nan=True), ct.maximum(a, b, propagate_nan=True),
               -a, abs(a), ct.sqrt(a), ct.floor(a), ct.ceil(a), ct.where(c, a, b),
               a == b, a != b, a < b, a <= b, a > b, a >= b, ct.isnan(a))
    ct.static_assert(len(outs) == len(results), "one output per result")
    for i, o in ct.static_iter(enumerate(outs)):
        ct.store(o, (0,), results[i])


def all_pairs(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(v, v.size), np.tile(v, v.size)


@functools.lru_cache(maxsize=None)
def float_cases(dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(a, b, c, name -> wanted result) over all pairs of float_operands (c: a bool pattern)."""
    x, y = all_pairs(float_operands(dtype))
    c = np.arange(x.size) % 3 == 0
    a, b, t = x.astype(np.float64), y.astype(np.float64), D.dtype_by_name(dtype)
    with np.errstate(invalid="ignore"):
        want = {name: ref(a, b, c, t).astype(np_dtype(dtype)) for name, ref in FLOAT_REFS.items()}
        want |= {name: ref(a, b) for name, ref in COMPARE_REFS.items()}
    return x, y, c, want | {"isnan": np.isnan(a)}


def run_ops(dev: Any, kernel: Any, inputs: tuple[np.ndarray, ...],
            want: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One launch of `kernel` on `inputs`, one poisoned output per entry of `want`: name -> result."""
    outs = tuple(dev.poison(w.shape, w.dtype) for w in want.values())
    dev.launch((1,), kernel, (*map(dev.put, inputs), outs, tile_for(inputs[0].size)))
    return {name: dev.get(o) for name, o in zip(want, outs)}


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_ops_special_values(dev, dtype: str) -> None:
    """Every op on every pair of special operands: +, -, *, / and sqrt correctly rounded
    (subnormal results kept, overflow to infinity, 0/0 and inf - inf NaN, x/0 signed
    infinities); minimum/maximum ignore a NaN operand (or, with propagate_nan, return NaN) and
    order -0.0 below +0.0; comparisons ordered but !=; where, negation, abs, floor, ceil exact,
    signs of zeros included."""
    x, y, c, want = float_cases(dtype)
    got = run_ops(dev, float_ops_kernel, (x, y, c), want)
    failures = [line for name in want for line in describe(f"{dtype} {name}", got[name], want[name], None, x, y)]
    assert not failures, "\n".join(failures)


# ---- integer ops ---------------------------------------------------------------------------------------

def int_operands(dtype: str) -> np.ndarray:
    """Small values of both signs, the limits and their neighbours, the half-width power of
    two, alternating bits."""
    d = np_dtype(dtype)
    info, width = np.iinfo(d), 8 * d.itemsize
    vals = [0, 1, 2, 3, 7, 100, 2 ** (width // 2), 2 ** (width - 1) - 1, int("55" * (width // 8), 16)]
    vals += [-v for v in vals[1:]] + [info.min, info.min + 1, info.max, info.max - 1]
    return np.array(sorted({int(wrap(v, d)) for v in vals}), d)


INT_REFS: dict[str, tuple[str, Callable[[int, int], int]]] = {
    # name: (the second operand: b, the divisor q or the shift s; reference on Python ints),
    # in the order of int_ops_kernel's results; wrapped to the dtype afterwards
    "add": ("b", lambda a, b: a + b), "sub": ("b", lambda a, b: a - b), "mul": ("b", lambda a, b: a * b),
    "and": ("b", lambda a, b: a & b), "or": ("b", lambda a, b: a | b), "xor": ("b", lambda a, b: a ^ b),
    "invert": ("b", lambda a, b: ~a), "negative": ("b", lambda a, b: -a), "abs": ("b", lambda a, b: abs(a)),
    "minimum": ("b", min), "maximum": ("b", max),
    "floordiv": ("q", lambda a, q: a // q), "mod": ("q", lambda a, q: a % q),
    "<<": ("s", lambda a, s: a << s), ">>": ("s", lambda a, s: a >> s),   # Python's >>: arithmetic
}


@ct.kernel
def int_ops_kernel(x, y, z, w, outs, T: ct.Constant[int]):
    a = ct.load(x, (0,), (T,), padding_mode=ZERO)
    b = ct.load(y, (0,), (T,), padding_mode=ZERO)
    q = ct.load(z, (0,), (T,), padding_mode=ZERO)
    s = ct.load(w, (0,), (T,), padding_mode=ZERO)
    results = (a + b, a - b, a * b, a & b, a | b, a ^ b, ~a, -a, abs(a), ct.minimum(a, b), ct.maximum(a, b),
               a // q, a % q, a << s, a >> s, a == b, a != b, a < b, a <= b, a > b, a >= b)
    ct.static_assert(len(outs) == len(results), "one output per result")
    for i, o in ct.static_iter(enumerate(outs)):
        ct.store(o, (0,), results[i])


@functools.lru_cache(maxsize=None)
def int_cases(dtype: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({a, b, q, s}: operands over all pairs of int_operands, name -> wanted result): the
    divisor q is b but 1 where b is 0 or where a // b overflows (min // -1); the shift amount s
    runs through 0 .. bits - 1."""
    d = np_dtype(dtype)
    a, b = (np.resize(v, tile_for(v.size)) for v in all_pairs(int_operands(dtype)))  # no padded lanes: no x // 0
    info = np.iinfo(d)
    overflows = (a == info.min) & (b == -1) if info.min < 0 else False
    q = np.where((b == 0) | overflows, 1, b).astype(d)
    ops = {"a": a, "b": b, "q": q, "s": (np.arange(a.size) % (8 * d.itemsize)).astype(d)}
    py = {k: v.tolist() for k, v in ops.items()}
    want = {name: wrap([ref(x, y) for x, y in zip(py["a"], py[second])], d)
            for name, (second, ref) in INT_REFS.items()}
    want |= {name: np.array([ref(x, y) for x, y in zip(py["a"], py["b"])]) for name, ref in COMPARE_REFS.items()}
    return ops, want


@pytest.mark.parametrize("dtype", INTS)
def test_int_ops_special_values(dev, dtype: str) -> None:
    """+, -, *, negation and abs wrap around at the limits; &, |, ^, ~; shifts by 0 .. bits-1
    (>> arithmetic for signed, logical for unsigned); // and % round toward -inf with the
    divisor's sign; minimum, maximum and the six comparisons in the type's order (unsigned:
    its max above everything)."""
    ops, want = int_cases(dtype)
    got = run_ops(dev, int_ops_kernel, (ops["a"], ops["b"], ops["q"], ops["s"]), want)
    failures = [line for name in want for line in
                describe(f"{dtype} {name}", got[name], want[name], None, ops["a"], ops[INT_REFS.get(name, "b")[0]])]
    assert not failures, "\n".join(failures)
