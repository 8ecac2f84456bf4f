"""Correctly rounded arithmetic (RN/RZ/RM/RP) and flush-to-zero: the NumPy reference
(backends/interpreter/rounding.py) against exact rational arithmetic (fractions.Fraction) rounded
here, and the Triton helpers (backends/triton/rounding.py) run by Triton's CPU interpreter (and
compiled, where a CUDA device is present) against the NumPy results, bit for bit (NaNs: the
canonical quiet NaN).

The helpers run in kernels built here the way the Triton backend loads generated code (functions
re-wrapped as `InterpretedFunction`), so TRITON_INTERPRET need not be set before Triton is
imported."""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
import tempfile
import types
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

try:
    import tilecraft  # noqa: F401
except Exception:  # while the package does not import: load the few modules these tests need alone
    # (the packages on the way become bare namespaces, so their __init__ files do not run)
    for _name in [m for m in sys.modules if m == "tilecraft" or m.startswith("tilecraft.")]:
        del sys.modules[_name]
    _root = Path(__file__).resolve().parents[2] / "tilecraft"
    for _name, _path in (("tilecraft", _root), ("tilecraft.ir", _root / "ir"),
                         ("tilecraft.language", _root / "language"), ("tilecraft.backends", _root / "backends"),
                         ("tilecraft.backends.interpreter", _root / "backends" / "interpreter"),
                         ("tilecraft.backends.triton", _root / "backends" / "triton")):
        _pkg = types.ModuleType(_name)
        _pkg.__path__ = [str(_path)]
        sys.modules[_name] = _pkg

from tilecraft.backends.interpreter import rounding as R  # noqa: E402
from tilecraft.backends.triton import rounding as TR  # noqa: E402
from tilecraft.ir.kinds import BinaryFn, UnaryFn  # noqa: E402
from tilecraft.language import dtypes as D  # noqa: E402
from tilecraft.language.enums import RoundingMode  # noqa: E402

RN, RZ, RM, RP = RoundingMode.RN, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP
MODES = (RN, RZ, RM, RP)
DTYPES = (D.float16, D.bfloat16, D.float32, D.float64)
FNS = (BinaryFn.ADD, BinaryFn.SUB, BinaryFn.MUL, BinaryFn.TRUEDIV, UnaryFn.SQRT)

# dtype -> (precision p including the leading bit, emin, emax, unsigned bits dtype)
FORMATS = {
    D.float16: (11, -14, 15, np.uint16),
    D.bfloat16: (8, -126, 127, np.uint16),
    D.float32: (24, -126, 127, np.uint32),
    D.float64: (53, -1022, 1023, np.uint64),
}


# ---- the exact reference --------------------------------------------------------------------

def round_fraction(q: Fraction, dtype, mode) -> float:
    """Nonzero rational q rounded to `dtype` in `mode` (a Python float, ±inf on overflow)."""
    p, emin, emax, _ = FORMATS[dtype]
    neg, a = q < 0, abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2(a)) is e or e - 1
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - p + 1)
    n, rest = divmod(a, quantum)  # a = (n + rest / quantum) * quantum
    n = int(n)
    toward_inf = (mode is RP and not neg) or (mode is RM and neg)
    if rest:
        if mode is RN:
            half = quantum / 2
            n += 1 if rest > half or (rest == half and n % 2) else 0
        elif toward_inf:
            n += 1
    big = Fraction(2) ** (emax + 1)
    m = n * quantum
    if m >= big:  # overflow: infinity unless the mode rounds this sign toward zero
        m = math.inf if mode is RN or toward_inf else float((big - Fraction(2) ** (emax - p + 1)))
    value = float(m)
    return -value if neg else value


def _frac_sqrt(x: float, dtype, mode) -> float:
    """sqrt(x) for positive finite x, rounded: with x = M * 2**E, the integer square root of
    M * 2**shift (E - shift even, 150+ bits), plus a half (never a tie) when inexact."""
    m, e = math.frexp(x)
    big_m, big_e = int(m * 2 ** 53), e - 53
    shift = 160 - big_m.bit_length()
    shift += (big_e - shift) % 2
    n = big_m << shift
    s = math.isqrt(n)
    value = Fraction(s) + (Fraction(1, 2) if s * s != n else 0)
    return round_fraction(value * Fraction(2) ** ((big_e - shift) // 2), dtype, mode)


def reference(fn, xs: np.ndarray, ys: np.ndarray | None, dtype, mode) -> np.ndarray:
    """The correctly rounded results, one value at a time from the exact rationals."""
    out = []
    with np.errstate(invalid="ignore"):
        xs = xs.astype(np.float64)
    for i, x in enumerate(xs):
        x = float(x)
        y = float(ys[i]) if ys is not None else None
        if fn is BinaryFn.SUB:
            y = -y
        out.append(_reference_one(fn, x, y, dtype, mode))
    return np.array(out, dtype=np.float64).astype(dtype.np_dtype)


def _reference_one(fn, x: float, y: float | None, dtype, mode) -> float:
    nan, inf = math.nan, math.inf
    if fn is UnaryFn.SQRT:
        if math.isnan(x) or x < 0:
            return nan
        if x == 0 or x == inf:
            return x
        return _frac_sqrt(x, dtype, mode)
    if math.isnan(x) or math.isnan(y):
        return nan
    sx, sy = math.copysign(1, x) < 0, math.copysign(1, y) < 0
    if fn in (BinaryFn.ADD, BinaryFn.SUB):
        if math.isinf(x) or math.isinf(y):
            if math.isinf(x) and math.isinf(y) and sx != sy:
                return nan
            return x if math.isinf(x) else y
        q = Fraction(x) + Fraction(y)
        if q == 0:  # exact zero: -0 for (-0) + (-0), and under RM for all but (+0) + (+0)
            return -0.0 if (sx and sy) or (mode is RM and not (x == 0 and y == 0 and not sx and not sy)) else 0.0
        return round_fraction(q, dtype, mode)
    zero_sign = -0.0 if sx != sy else 0.0
    if fn is BinaryFn.MUL:
        if math.isinf(x) or math.isinf(y):
            return nan if x == 0 or y == 0 else math.copysign(inf, zero_sign)
        if x == 0 or y == 0:
            return zero_sign
        q = Fraction(x) * Fraction(y)
    else:
        if (math.isinf(x) and math.isinf(y)) or (x == 0 and y == 0):
            return nan
        if math.isinf(x) or y == 0:
            return math.copysign(inf, zero_sign)
        if math.isinf(y) or x == 0:
            return zero_sign
        q = Fraction(x) / Fraction(y)
    r = round_fraction(q, dtype, mode)
    return math.copysign(0.0, zero_sign) if r == 0 else r


# ---- inputs ---------------------------------------------------------------------------------

def _from_parts(rng, dtype, n, exps, mant_bits=None) -> np.ndarray:
    """n random values of `dtype` with exponents drawn from `exps`, random signs and mantissas
    (only `mant_bits` leading mantissa bits nonzero, when given)."""
    p, emin, emax, udt = FORMATS[dtype]
    width = np.dtype(udt).itemsize * 8
    frac_bits = p - 1
    e = np.clip(rng.choice(exps, n), emin, emax)
    frac = rng.integers(0, 1 << frac_bits, n, dtype=np.uint64)
    if mant_bits is not None:
        frac &= np.uint64(((1 << frac_bits) - 1) ^ ((1 << (frac_bits - mant_bits)) - 1))
    bias = emax
    bits = (frac | ((e + bias).astype(np.uint64) << np.uint64(frac_bits))
            | (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(width - 1)))
    return bits.astype(udt).view(dtype.np_dtype)


def _specials(dtype) -> np.ndarray:
    p, emin, emax, udt = FORMATS[dtype]
    fin = ml_dtypes.finfo(dtype.np_dtype) if dtype is D.bfloat16 else np.finfo(dtype.np_dtype)
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, float(fin.max), -float(fin.max),
            float(fin.smallest_normal), -float(fin.smallest_normal), 2.0 ** (emin - p + 1), -(2.0 ** (emin - p + 1)),
            3.0, 0.5, float(fin.max) / 2, 2.0 ** (emin - 1), 1.5 * 2.0 ** emin]
    return np.array(vals, dtype=np.float64).astype(dtype.np_dtype)


@functools.lru_cache(maxsize=None)
def operands(dtype, fn) -> tuple[np.ndarray, np.ndarray]:
    """About 600 operand pairs: all pairs of special values, random bit patterns (subnormals, NaNs,
    infinities included), far-apart exponents, ties (short mantissas), values near overflow and
    underflow, cancellations."""
    p, emin, emax, udt = FORMATS[dtype]
    rng = np.random.default_rng([DTYPES.index(dtype), FNS.index(fn)])
    sp = _specials(dtype)
    xs, ys = [np.repeat(sp, len(sp))], [np.tile(sp, len(sp))]
    k = 24
    width = np.dtype(udt).itemsize * 8
    rand_bits = lambda: rng.integers(0, 1 << width, k, dtype=np.uint64 if width == 64 else np.int64,  # noqa: E731
                                     endpoint=False).astype(udt).view(dtype.np_dtype)
    mid = np.arange(-4, 5)
    xs.append(rand_bits()), ys.append(rand_bits())
    xs.append(_from_parts(rng, dtype, k, mid)), ys.append(_from_parts(rng, dtype, k, mid))
    # far apart: the second operand 2**-1 .. 2**-(p + 40) of the first's scale
    xs.append(_from_parts(rng, dtype, k, mid)), ys.append(_from_parts(rng, dtype, k, -np.arange(1, p + 40)))
    # ties and exact results: short mantissas
    short = (p + 1) // 2
    xs.append(_from_parts(rng, dtype, k, mid, short)), ys.append(_from_parts(rng, dtype, k, mid - p, short))
    xs.append(_from_parts(rng, dtype, k, mid, short)), ys.append(_from_parts(rng, dtype, k, mid, short))
    # near overflow and underflow (products and quotients too)
    hi, lo = np.arange(emax - 3, emax + 1), np.arange(emin - 3, emin + 3)
    half = np.arange(emax // 2 - 2, emax // 2 + 3)
    xs.append(_from_parts(rng, dtype, k, hi)), ys.append(_from_parts(rng, dtype, k, np.r_[hi, half, -half]))
    xs.append(_from_parts(rng, dtype, k, lo)), ys.append(_from_parts(rng, dtype, k, np.r_[lo, mid, -mid]))
    sub = rng.integers(1, 1 << (p - 1), k).astype(np.uint64) | (rng.integers(0, 2, k).astype(np.uint64)
                                                              << np.uint64(width - 1))
    xs.append(sub.astype(udt).view(dtype.np_dtype)), ys.append(_from_parts(rng, dtype, k, np.r_[mid, -half]))
    # cancellation: y = ±x, and y one unit away from x
    x = _from_parts(rng, dtype, k, mid)
    xs.append(x), ys.append(np.where(rng.integers(0, 2, k) == 1, x, -x).astype(dtype.np_dtype))
    x = _from_parts(rng, dtype, k, np.r_[mid, lo])
    xs.append(x), ys.append((x.view(udt) + udt(1)).view(dtype.np_dtype))
    x, y = np.concatenate(xs), np.concatenate(ys)
    return x, y


def bits_of(a: np.ndarray, dtype) -> np.ndarray:
    return np.asarray(a).view(FORMATS[dtype][3])


def assert_same_bits(got: np.ndarray, want: np.ndarray, dtype, x, y, what: str) -> None:
    g, w = bits_of(got, dtype), bits_of(want, dtype)
    bad = np.flatnonzero(g != w)
    if bad.size:
        i = bad[0]
        yi = "" if y is None else f", y={float(y[i])!r} (0x{int(bits_of(y, dtype)[i]):x})"
        raise AssertionError(f"{what}: {bad.size} of {g.size} differ; first: x={float(x[i])!r} "
                             f"(0x{int(bits_of(x, dtype)[i]):x}){yi}: got 0x{int(g[i]):x} ({float(got[i])!r}), "
                             f"want 0x{int(w[i]):x} ({float(want[i])!r})")


def canonical(a: np.ndarray, dtype) -> np.ndarray:
    """`a` with every NaN replaced by the canonical quiet NaN (positive, top mantissa bit)."""
    p, _, _, udt = FORMATS[dtype]
    width = np.dtype(udt).itemsize * 8
    nan = ((1 << (width - p + 1)) - 1) << (p - 2)
    b = bits_of(a, dtype).copy()
    b[np.isnan(np.asarray(a, np.float64) if dtype is not D.bfloat16 else a.astype(np.float32))] = nan
    return b.view(dtype.np_dtype)


def compute_numpy(fn, x, y, dtype, mode):
    if fn is UnaryFn.SQRT:
        return R.rounded_sqrt(x, dtype, mode)
    return R.rounded_binary(fn, x, y, dtype, mode)


CASES = [(d, f) for d in DTYPES for f in FNS]


def _id(case) -> str:
    return f"{case[0].name}-{case[1].value}"


# ---- the NumPy reference against the exact one ----------------------------------------------

@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_numpy_matches_exact(case, mode):
    dtype, fn = case
    x, y = operands(dtype, fn)
    if fn is UnaryFn.SQRT:
        x = np.concatenate([x, np.abs(y)])  # mostly nonnegative operands for sqrt
        y = None
    want = canonical(reference(fn, x, y, dtype, mode), dtype)
    got = compute_numpy(fn, x, y, dtype, mode)
    assert got.dtype == dtype.np_dtype and got.shape == x.shape
    assert_same_bits(got, want, dtype, x, y, f"numpy {fn.value} {dtype.name} {mode.name}")


def test_numpy_shapes_and_scalars():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = R.rounded_binary(BinaryFn.ADD, x, np.float32(0.1), D.float32, RZ)
    assert got.shape == (2, 3) and got.dtype == np.float32
    assert float(got[0, 1]) == float(np.nextafter(np.float32(1.1), np.float32(0)))
    xs = np.array([[1.0], [-2.0]], np.float16)
    ys = np.array([3.0, 0.1, -0.0], np.float16)
    got = R.rounded_binary(BinaryFn.TRUEDIV, xs, ys, D.float16, RM)
    assert got.shape == (2, 3)
    bx, by = (a.ravel() for a in np.broadcast_arrays(xs, ys))
    assert_same_bits(got.ravel(), reference(BinaryFn.TRUEDIV, bx, by, D.float16, RM), D.float16, bx, by, "broadcast")
    assert R.rounded_sqrt(np.float64(2.0), D.float64, RP).shape == ()
    assert float(R.rounded_sqrt(np.float64(2.0), D.float64, RM)) == np.nextafter(math.sqrt(2.0), 0.0)  # RN is above
    assert float(R.rounded_sqrt(np.float64(2.0), D.float64, RP)) == math.sqrt(2.0)
    assert np.signbit(R.rounded_binary(BinaryFn.SUB, np.float16(1), np.float16(1), D.float16, RM))
    assert not np.signbit(R.rounded_binary(BinaryFn.SUB, np.float16(1), np.float16(1), D.float16, RP))


def test_flush_subnormals():
    vals = np.array([0.0, -0.0, 1e-40, -1e-40, 2.0 ** -126, -(2.0 ** -126), 2.0 ** -149, 1.0, math.inf,
                     math.nan], np.float32)
    got = R.flush_subnormals(vals)
    want = np.array([0.0, -0.0, 0.0, -0.0, 2.0 ** -126, -(2.0 ** -126), 0.0, 1.0, math.inf, math.nan], np.float32)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert np.array_equal(got, want, equal_nan=True)
    with pytest.raises(TypeError):
        R.flush_subnormals(np.zeros(2, np.float64))


# ---- the Triton helpers under the interpreter, against the NumPy reference ------------------

def _closure(names) -> list[str]:
    seen: list[str] = []

    def visit(name):
        for dep in TR.NEEDS[name]:
            visit(dep)
        if name not in seen:
            seen.append(name)
    for name in names:
        visit(name)
    return seen


_KERNEL = '''
@triton.jit
def {kernel}(X, Y, OUT, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(X + i, mask=m)
    y = tl.load(Y + i, mask=m)
    tl.store(OUT + i, {call}, mask=m)
'''


def _kernel_module(tmp: str, interpret: bool) -> dict:
    """One module with a tiny kernel per (dtype, fn, mode) and one for flush-to-zero, loaded the
    way the Triton backend loads generated code: its `@triton.jit` functions re-wrapped as
    `InterpretedFunction` (interpreter) or `JITFunction` (GPU), whatever TRITON_INTERPRET says."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    calls = {}
    for dtype, fn in CASES:
        for mode in MODES:
            name = TR.rounded_call(fn, dtype, mode)
            calls[(dtype, fn, mode)] = (f"k{len(calls)}", f"{name}(x)" if fn is UnaryFn.SQRT else f"{name}(x, y)")
    calls["flush"] = ("k_flush", f"{TR.FLUSH_HELPER}(x)")
    # a scalar second operand (broadcast), and bfloat16 operands widened to float32 first
    calls["scalar_y"] = ("k_scalar_y", f"{TR.rounded_call(BinaryFn.TRUEDIV, D.float64, RZ)}(x, tl.load(Y))")
    calls["scalar_x"] = ("k_scalar_x", f"{TR.rounded_call(BinaryFn.SUB, D.float32, RM)}(tl.load(X), y)")
    calls["widened"] = ("k_widened", f"{TR.rounded_call(BinaryFn.ADD, D.bfloat16, RP)}(x, y)")  # X, Y: float32
    helpers = _closure([TR.rounded_call(fn, d, m) for d, fn in CASES for m in MODES] + [TR.FLUSH_HELPER])
    source = "import triton\nimport triton.language as tl\n\n" + "\n\n".join(TR.HELPERS[h] for h in helpers)
    source += "".join(_KERNEL.format(kernel=k, call=c) for k, c in calls.values())
    modname = f"tcr_rounding_test_kernels_{'interp' if interpret else 'gpu'}"
    path = Path(tmp) / f"{modname}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wrap = InterpretedFunction if interpret else JITFunction
    for name in helpers + [k for k, _ in calls.values()]:
        setattr(module, name, wrap(getattr(module, name).fn))
    return {key: getattr(module, k) for key, (k, _) in calls.items()}


@pytest.fixture(scope="module")
def triton_kernels():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    with tempfile.TemporaryDirectory() as tmp:
        yield _kernel_module(tmp, interpret=True)


def _to_torch(a: np.ndarray, dtype, device: str = "cpu"):
    import torch
    if dtype is D.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def _from_torch(t, dtype) -> np.ndarray:
    import torch
    t = t.cpu()
    if dtype is D.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).view(dtype.np_dtype)
    return t.numpy()


def run_triton(kernel, x: np.ndarray, y: np.ndarray, dtype, device: str = "cpu") -> np.ndarray:
    n = x.size
    out = _to_torch(np.zeros(n, dtype.np_dtype), dtype, device)
    block = 1 << max(n - 1, 1).bit_length()
    with np.errstate(all="ignore"):  # the interpreter's NumPy ops on infinities and NaNs
        kernel[(1,)](_to_torch(x, dtype, device), _to_torch(y, dtype, device), out, n, BLOCK=block)
    return _from_torch(out, dtype)


def _case_inputs(dtype, fn) -> tuple[np.ndarray, np.ndarray]:
    x, y = operands(dtype, fn)
    if fn is UnaryFn.SQRT:
        x = np.concatenate([x, np.abs(y)])
        y = x
    return x, y


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_triton_matches_numpy(triton_kernels, case, mode):
    dtype, fn = case
    x, y = _case_inputs(dtype, fn)
    got = run_triton(triton_kernels[(dtype, fn, mode)], x, y, dtype)
    want = compute_numpy(fn, x, None if fn is UnaryFn.SQRT else y, dtype, mode)
    assert_same_bits(got, want, dtype, x, y, f"triton {fn.value} {dtype.name} {mode.name}")


def test_triton_flush(triton_kernels):
    x = np.concatenate([_specials(D.float32), operands(D.float32, BinaryFn.ADD)[0]])
    got = run_triton(triton_kernels["flush"], x, x, D.float32)
    assert_same_bits(got, R.flush_subnormals(x), D.float32, x, None, "triton flush")


def _check_operand_forms(kernels, device: str) -> None:
    """A scalar (0-d) operand broadcast against a block; bfloat16 operands given as float32."""
    x, y = operands(D.float64, BinaryFn.TRUEDIV)
    got = run_triton(kernels["scalar_y"], x, np.full_like(y, 3.0), D.float64, device)
    want = R.rounded_binary(BinaryFn.TRUEDIV, x, np.float64(3.0), D.float64, RZ)
    assert_same_bits(got, want, D.float64, x, None, f"{device} scalar y")
    x, y = operands(D.float32, BinaryFn.SUB)
    for x0 in (x[0], np.float32(1.0), np.float32(-np.inf)):
        got = run_triton(kernels["scalar_x"], np.full_like(x, x0), y, D.float32, device)
        want = R.rounded_binary(BinaryFn.SUB, x0, y, D.float32, RM)
        assert_same_bits(got, want, D.float32, y, None, f"{device} scalar x={x0}")
    # bfloat16 values widened to float32 outside the kernel (the interpreter's own bfloat16 ->
    # float32 cast loses subnormals)
    x, y = operands(D.bfloat16, BinaryFn.ADD)
    out = _to_torch(np.zeros(x.size, x.dtype), D.bfloat16, device)
    with np.errstate(all="ignore"):
        kernels["widened"][(1,)](_to_torch(x.astype(np.float32), D.float32, device),
                                 _to_torch(y.astype(np.float32), D.float32, device), out, x.size, BLOCK=1024)
    want = R.rounded_binary(BinaryFn.ADD, x, y, D.bfloat16, RP)
    assert_same_bits(_from_torch(out, D.bfloat16), want, D.bfloat16, x, y, f"{device} widened bfloat16")


def test_triton_operand_forms(triton_kernels):
    _check_operand_forms(triton_kernels, "cpu")


def test_triton_gpu_matches_numpy():
    """The same helpers compiled for the GPU (Triton fuses multiply-add there by default)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        kernels = _kernel_module(tmp, interpret=False)
        for dtype, fn in CASES:
            x, y = _case_inputs(dtype, fn)
            for mode in MODES:
                got = run_triton(kernels[(dtype, fn, mode)], x, y, dtype, "cuda")
                want = compute_numpy(fn, x, None if fn is UnaryFn.SQRT else y, dtype, mode)
                try:
                    assert_same_bits(got, want, dtype, x, y, f"gpu {fn.value} {dtype.name} {mode.name}")
                except AssertionError as e:
                    failures.append(str(e))
        x = np.concatenate([_specials(D.float32), operands(D.float32, BinaryFn.ADD)[0]])
        got = run_triton(kernels["flush"], x, x, D.float32, "cuda")
        try:
            assert_same_bits(got, R.flush_subnormals(x), D.float32, x, None, "gpu flush")
        except AssertionError as e:
            failures.append(str(e))
        try:
            _check_operand_forms(kernels, "cuda")
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


def test_rounded_call_names():
    assert TR.rounded_call(BinaryFn.ADD, D.float32, RZ) == "_tcr_add_f32_rz"
    assert TR.rounded_call(UnaryFn.SQRT, D.bfloat16, RM) == "_tcr_sqrt_bf16_rm"
    for d in DTYPES:
        for f in FNS:
            for m in MODES:
                assert TR.rounded_call(f, d, m) in TR.HELPERS
    assert TR.FLUSH_HELPER in TR.HELPERS
    assert all(dep in TR.HELPERS for deps in TR.NEEDS.values() for dep in deps)
    assert all(name.startswith("_tcr_") for name in TR.HELPERS)
    with pytest.raises(ValueError):
        TR.rounded_call(BinaryFn.ADD, D.float32, RoundingMode.APPROX)
    with pytest.raises(TypeError):
        TR.rounded_call(BinaryFn.ADD, D.int32, RN)
