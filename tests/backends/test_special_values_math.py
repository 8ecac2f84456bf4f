"""Reductions, scans and float math on special values through every backend, against exact
references computed here (as tests/backends/test_special_values.py does for casts and ops).

Reductions and scans run along the rows of one tile whose rows are built so that every result,
and every prefix of a scan in either direction, is the same in any order of operations: signed
zeros, infinities, NaN, subnormals, small exact values, sums and products that overflow however
they are grouped, and integer limits (integers wrap, a ring: any order is exact). sum/prod are
IEEE's (a sum of -0.0s only is -0.0, 0 * inf NaN, signs of zero products from the operands'),
max/min order -0.0 below +0.0 and ignore NaN (all NaN: NaN) or, with propagate_nan, give NaN;
argmax/argmin give the first index of the extreme, ignoring NaN or, with propagate_nan, the
first NaN (../shared/spec/cutile-api.md 3.7).

Float math at its special points follows C99 Annex F bit for bit (results 0, +-inf, NaN, and
the exact ones of exp(+-0), cos(+-0), cosh(+-0), tanh(+-inf), pow(x, +-0), pow(1, y),
pow(-1, +-inf)); other results lie within CUDA's documented ulp bounds (the C++ Programming
Guide's table, as tests/backends/test_ops_elementwise.py uses them). rsqrt, not in C99, takes
1 / sqrt(x). floor and ceil are exact everywhere.

Left out as unspecified: sums or products whose rounding depends on the order; argmax/argmin
where the extreme is a zero and both signs of zero hold it (-0.0 == +0.0 ties numerically but
max orders them), and of all-NaN slices without propagate_nan; NaN signs and payloads.
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
from test_interpreter_ir import FORMATS, round_exact
from test_special_values import FLOATS, INTS, ZERO, all_pairs, describe, run_ops, tile_for
from tilecraft.language import dtypes as D

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning",
                                        "ignore:divide by zero:RuntimeWarning")
NAN, INF = math.nan, math.inf


def limits(dtype: str) -> tuple[float, float]:
    """(largest finite, smallest subnormal) of a float dtype."""
    p, emin, emax = FORMATS[D.dtype_by_name(dtype)]
    return (2 - 2.0 ** (1 - p)) * 2.0**emax, 2.0 ** (emin - p + 1)


# ---- reductions and scans ------------------------------------------------------------------------------

def float_rows(dtype: str) -> np.ndarray:
    """Rows of 8 whose every sum, product, extreme and prefix is independent of the order."""
    m, t = limits(dtype)
    rows = [[-0.0] * 8,
            [-0.0, -0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0],      # one +0.0: sum +0.0, max +0.0
            [1, 2, -1, 4, 0.5, -2, 1, 3],                          # exact in every format
            [3, -1, 3, -1, 0.5, 3, -1, 2],                         # ties: the first index
            [1, INF, 2, -3, 0.5, INF, -1, 2],
            [-INF, 1, INF, -2, -INF, 0.5, 3, 2],                   # inf - inf
            [NAN, 1, -2, NAN, 3, 0.5, -INF, 2],
            [2, 0.0, -1, -1, 2, NAN, -0.0, NAN],                   # the first NaN not first
            [NAN] * 8,
            [0.0, INF, 1, 2, -1, 1, 1, 1],                         # 0 * inf
            [-0.0, 5, -1, 2, 0.0, -3, 1, -0.0],                    # signs of zero products
            [m, m, 1, m, 2, 1, 3, m],                              # overflow in any grouping
            [-m, 1, -m, 2, 1, 3, 1, 1],
            [t, -t, t, 2 * t, 0.0, -0.0, t, 3 * t]]                # subnormals kept; t * t is 0
    return np.array(rows).astype(np_dtype(dtype))


def int_rows(dtype: str) -> np.ndarray:
    """Rows of 8 at the limits of an integer dtype (wrapped), with ties at the extremes."""
    info = np.iinfo(np_dtype(dtype))
    lo, hi = int(info.min), int(info.max)
    rows = [[hi, 1, hi, 2, 3, hi, 7, 100], [lo, -1, lo, 3, hi, -2, lo, 5], [2, 3, -5, 7, 11, 13, -17, 19],
            [0] * 8, [5, hi, 1, hi, lo, 0, lo, 3], [hi, hi, hi, hi, lo, lo, lo, lo]]
    return np.array([wrap(r, np_dtype(dtype)) for r in rows])


def float_sum(v: list[float], dtype: D.DType) -> float:
    """IEEE sum, rounded once: NaN from NaN or inf - inf; -0.0 only from -0.0s."""
    if any(map(math.isnan, v)) or (INF in v and -INF in v):
        return NAN
    if INF in v or -INF in v:
        return INF if INF in v else -INF
    negative_zero = all(x == 0 and math.copysign(1, x) < 0 for x in v)
    return round_exact(sum(map(Fraction, v), Fraction(0)), dtype, None, negative_zero)


def float_prod(v: list[float], dtype: D.DType) -> float:
    """IEEE product, rounded once: NaN from NaN or 0 * inf; the sign from the operands'."""
    if any(map(math.isnan, v)) or (0 in v and any(map(math.isinf, v))):
        return NAN
    negative = sum(math.copysign(1, x) < 0 for x in v) % 2 == 1
    if any(map(math.isinf, v)):
        return -INF if negative else INF
    return round_exact(math.prod(map(Fraction, v)), dtype, None, negative)


def extreme(v: list[Any], highest: bool, nan_wins: bool) -> tuple[Any, int | None]:
    """(max or min, the first index holding it; None where unspecified): NaN ignored or, with
    `nan_wins`, winning at its first index; -0.0 orders below +0.0."""
    nans = [i for i, x in enumerate(v) if isinstance(x, float) and math.isnan(x)]
    if nans and (nan_wins or len(nans) == len(v)):
        return NAN, nans[0] if nan_wins else None
    key = lambda x: (x, math.copysign(1, x))  # noqa: E731
    best = (max if highest else min)((x for x in v if x == x), key=key)
    ties = [i for i, x in enumerate(v) if x == best]
    both_zeros = best == 0 and len({math.copysign(1, v[i]) for i in ties}) > 1
    return best, None if both_zeros else ties[0]


REDUCTIONS = ["sum", "prod", "max", "min", "max_nan", "min_nan", "argmax", "argmin", "argmax_nan", "argmin_nan"]
SCANS = ["cumsum", "cumprod", "cumsum_rev", "cumprod_rev"]


@ct.kernel
def reduce_kernel(x, outs, scans, R: ct.Constant[int], N: ct.Constant[int]):
    t = ct.load(x, (0, 0), (R, N), padding_mode=ZERO)
    results = (ct.sum(t, axis=1), ct.prod(t, axis=1), ct.max(t, axis=1), ct.min(t, axis=1),
               ct.max(t, axis=1, propagate_nan=True), ct.min(t, axis=1, propagate_nan=True),
               ct.argmax(t, axis=1), ct.argmin(t, axis=1), ct.argmax(t, axis=1, propagate_nan=True),
               ct.argmin(t, axis=1, propagate_nan=True))
    prefixes = (ct.cumsum(t, axis=1), ct.cumprod(t, axis=1), ct.cumsum(t, axis=1, reverse=True),
                ct.cumprod(t, axis=1, reverse=True))
    for i, o in ct.static_iter(enumerate(outs)):
        ct.store(o, (0,), results[i])
    for i, o in ct.static_iter(enumerate(scans)):
        ct.store(o, (0, 0), prefixes[i])


@functools.lru_cache(maxsize=None)
def reduce_cases(dtype: str) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(rows, name -> (wanted result, which elements are specified))."""
    rows = float_rows(dtype) if dtype in FLOATS else int_rows(dtype)
    d, t = rows.dtype, D.dtype_by_name(dtype)
    floating = dtype in FLOATS
    total = (lambda v: float_sum(v, t)) if floating else sum
    product = (lambda v: float_prod(v, t)) if floating else math.prod
    per_row: dict[str, list[Any]] = {name: [] for name in REDUCTIONS + SCANS}
    for r in rows.tolist() if not floating else rows.astype(np.float64).tolist():
        per_row["sum"].append(total(r))
        per_row["prod"].append(product(r))
        for name, highest, nan_wins in (("max", True, False), ("min", False, False),
                                        ("max_nan", True, True), ("min_nan", False, True)):
            value, index = extreme(r, highest, nan_wins)
            per_row[name].append(value)
            per_row["arg" + name].append(index)
        n = len(r)
        per_row["cumsum"].append([total(r[:k + 1]) for k in range(n)])
        per_row["cumprod"].append([product(r[:k + 1]) for k in range(n)])
        per_row["cumsum_rev"].append([total(r[k:]) for k in range(n)])
        per_row["cumprod_rev"].append([product(r[k:]) for k in range(n)])
    want = {}
    for name, vals in per_row.items():
        if name.startswith("arg"):
            checked = np.array([v is not None for v in vals])
            want[name] = (np.array([0 if v is None else v for v in vals], np.int32), checked)
        else:
            out = np.array(vals, np.float64 if floating else object)
            want[name] = (out.astype(d) if floating else wrap(out, d), np.ones(out.shape, bool))
    return rows, want


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_reductions_and_scans_special_values(dev, dtype: str) -> None:
    """sum, prod, max, min (with and without propagate_nan), argmax, argmin and cumsum, cumprod
    (both directions) along rows of special values, bit for bit: a single infinity wins a sum,
    inf - inf and 0 * inf are NaN, sums of -0.0s are -0.0, zero products take the operands'
    signs, sums and products past the largest finite value are infinite, subnormal sums stay
    (a flushing reduction gives 0), ties give the first index; integers wrap."""
    rows, want = reduce_cases(dtype)
    outs = tuple(dev.poison((rows.shape[0],), want[n][0].dtype) for n in REDUCTIONS)
    scans = tuple(dev.poison(rows.shape, rows.dtype) for _ in SCANS)
    dev.launch((1,), reduce_kernel, (dev.put(rows), outs, scans, tile_for(rows.shape[0]), rows.shape[1]))
    got = dict(zip(REDUCTIONS, map(dev.get, outs))) | dict(zip(SCANS, map(dev.get, scans)))
    failures = []
    for name, (w, checked) in want.items():
        g = got[name]
        operand = rows if g.ndim == 2 else np.array([str(r.tolist()) for r in rows])
        failures += describe(f"{dtype} {name}", g.reshape(-1), w.reshape(-1), checked.reshape(-1),
                             operand.reshape(-1))
    assert not failures, "\n".join(failures)


# ---- float math ----------------------------------------------------------------------------------------

def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


MATH: dict[str, tuple[Callable[..., np.ndarray], float, float]] = {
    # name: (float64 reference, CUDA's ulp bound for float32, for float64), in math_kernel's order
    "exp": (np.exp, 2, 1), "exp2": (np.exp2, 2, 1), "log": (np.log, 1, 1), "log2": (np.log2, 1, 1),
    "rsqrt": (_rsqrt, 2, 1), "sin": (np.sin, 2, 2), "cos": (np.cos, 2, 2), "tan": (np.tan, 4, 2),
    "sinh": (np.sinh, 3, 2), "cosh": (np.cosh, 2, 1), "tanh": (np.tanh, 2, 1),
    "floor": (np.floor, 0, 0), "ceil": (np.ceil, 0, 0),
}
POW_ATAN2: dict[str, tuple[Callable[..., np.ndarray], float, float]] = {
    "pow": (np.power, 8, 2), "atan2": (np.arctan2, 3, 2),   # CUDA's powf 8 (as test_ops_elementwise), atan2f 3
}


@ct.kernel
def math_kernel(x, outs, T: ct.Constant[int]):
    a = ct.load(x, (0,), (T,), padding_mode=ZERO)
    results = (ct.exp(a), ct.exp2(a), ct.log(a), ct.log2(a), ct.rsqrt(a), ct.sin(a), ct.cos(a), ct.tan(a),
               ct.sinh(a), ct.cosh(a), ct.tanh(a), ct.floor(a), ct.ceil(a))
    for i, o in ct.static_iter(enumerate(outs)):
        ct.store(o, (0,), results[i])


@ct.kernel
def pow_atan2_kernel(x, y, outs, T: ct.Constant[int]):
    a = ct.load(x, (0,), (T,), padding_mode=ZERO)
    b = ct.load(y, (0,), (T,), padding_mode=ZERO)
    results = (a ** b, ct.atan2(a, b))
    for i, o in ct.static_iter(enumerate(outs)):
        ct.store(o, (0,), results[i])


def math_operands(dtype: str) -> np.ndarray:
    """Zeros, infinities, NaN, +-1, halves, values far past exp's range, the smallest subnormal
    and the largest finite value, each of both signs."""
    m, t = limits(dtype)
    vals = [0.0, INF, 1.0, 0.5, 1.5, 2.5, 3.0, 1000.0, t, m]
    return np.array(vals + [-v for v in vals] + [NAN]).astype(np_dtype(dtype))


def ulp_bound(dtype: str, f32: float, f64: float) -> float:
    """The error allowed against the float64 reference, in ulps of the dtype: CUDA's bound plus
    the half ulp of rounding the exact value (float64: a whole ulp, the reference being rounded
    too); float16 and bfloat16 compute in float32 and round once."""
    if dtype == "float64":
        return f64 + 1
    p = FORMATS[D.dtype_by_name(dtype)][0]
    return f32 + 0.5 if dtype == "float32" else 0.5 + (f32 + 0.5) * 2.0 ** (p - 24)


def ulps_off(got: np.ndarray, want: np.ndarray, dtype: str) -> np.ndarray:
    """|got - want| in units of the dtype's spacing at `want` (float64; its subnormal spacing
    at the bottom); NaN where got is NaN."""
    p, emin, _ = FORMATS[D.dtype_by_name(dtype)]
    _, e = np.frexp(np.abs(want))
    unit = np.ldexp(1.0, np.maximum(e - 1, emin) - p + 1)
    with np.errstate(invalid="ignore"):
        return np.abs(got.astype(np.float64) - want) / unit


def check_math(what: str, got: np.ndarray, want: np.ndarray, exact: np.ndarray, ulps: float, dtype: str,
               *operands: np.ndarray) -> list[str]:
    """Lines for the lanes of `got` off `want` (float64): bit for bit where `exact` (and where
    `want` is zero, infinite or NaN in the dtype: past its range), within `ulps` elsewhere."""
    rounded = want.astype(got.dtype).astype(np.float64)
    want = np.where((rounded == 0) | np.isinf(rounded), rounded, want)
    exact = exact | (want == 0) | ~np.isfinite(want)
    lines = describe(what, got, want.astype(got.dtype), exact, *operands)
    err = ulps_off(got, np.where(exact, 1.0, want), dtype)
    for k in np.flatnonzero(~exact & ~(err <= ulps))[:4]:
        lines.append(f"{what}: {', '.join(repr(x[k].item()) for x in operands)} gave {got[k].item()!r}, want "
                     f"{want[k]!r} within {ulps:g} ulp ({err[k]:.3g})")
    return lines


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_math_special_values(dev, dtype: str) -> None:
    """exp, exp2, log, log2, rsqrt, sin, cos, tan, sinh, cosh, tanh, floor, ceil of signed zeros,
    infinities, NaN, halves, +-1000, the smallest subnormal and the largest finite value: exp(-inf)
    = +0, exp(+-0) = 1, log(+-0) = -inf, log(-x) NaN, log(1) = +0, rsqrt(-0.0) = -inf, sin(-0.0) =
    -0.0, sin(inf) NaN, cos(+-0) = 1, tanh(+-inf) = +-1, sinh(-inf) = -inf, floor(-0.5) = -1,
    ceil(-0.5) = -0.0, exp(1000) = inf; the rest within CUDA's ulp bounds."""
    x = math_operands(dtype)
    a = x.astype(np.float64)
    with np.errstate(all="ignore"):
        want = {name: ref(a) for name, (ref, _, _) in MATH.items()}
    got = run_ops(dev, math_kernel, (x,), {name: np.empty(x.size, x.dtype) for name in MATH})
    special = (a == 0) | ~np.isfinite(a)
    failures = [line for name, (_, f32, f64) in MATH.items()
                for line in check_math(f"{dtype} {name}", got[name], want[name],
                                       special | (f32 == 0), ulp_bound(dtype, f32, f64), dtype, x)]
    assert not failures, "\n".join(failures)


BINARY_OPERANDS = [0.0, 0.5, 1.0, 2.0, 2.5, 3.0, INF]
"""pow and atan2 take every pair of these, of both signs, and NaN."""


def c99_pow_exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where C99 gives pow a result of 1 exactly (pow(x, +-0), pow(+1, y), pow(-1, +-inf))."""
    return (b == 0) | (a == 1) | ((a == -1) & np.isinf(b))


@pytest.mark.parametrize("dtype", FLOATS)
def test_pow_atan2_special_points(dev, dtype: str) -> None:
    """x ** y and atan2(y, x) on every pair of signed zeros, halves, small integers, infinities
    and NaN, against C99 Annex F: pow(NaN, 0) = 1, pow(1, NaN) = 1, pow(-1, inf) = 1, pow(-0.0,
    -3) = -inf, pow(-0.0, -2.5) = inf, pow(-0.0, 3) = -0.0, pow(-2, 2.5) NaN, pow(-inf, -3) =
    -0.0, pow(0.5, -inf) = inf; atan2(+-0, -0.0) = +-pi, atan2(-0.0, 0.0) = -0.0, atan2(-inf,
    inf) = -pi/4, atan2(1, -inf) = pi; the rest within CUDA's ulp bounds."""
    v = np.array(BINARY_OPERANDS + [-v for v in BINARY_OPERANDS] + [NAN]).astype(np_dtype(dtype))
    x, y = all_pairs(v)
    a, b = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(all="ignore"):
        want = {name: ref(a, b) for name, (ref, _, _) in POW_ATAN2.items()}
    got = run_ops(dev, pow_atan2_kernel, (x, y), {name: np.empty(x.size, x.dtype) for name in POW_ATAN2})
    exact = {"pow": c99_pow_exact(a, b), "atan2": np.zeros(x.size, bool)}
    failures = [line for name, (_, f32, f64) in POW_ATAN2.items()
                for line in check_math(f"{dtype} {name}", got[name], want[name], exact[name],
                                       ulp_bound(dtype, f32, f64), dtype, x, y)]
    assert not failures, "\n".join(failures)
