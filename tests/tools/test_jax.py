"""tilecraft.jax: tile kernels called from JAX (cuTile's `cuda.tile.jax`).

Tests taking `backend` run cutile_call on that backend: interpreter and triton-interpret run the
kernel on the host through jax.pure_callback; triton (TILECRAFT_TEST_BACKENDS=triton on a GPU with
JAX's CUDA plugin and jax_triton) launches it through jax_triton. Without a GPU, the GPU path is
checked in two halves: its argument arrangement runs under Triton's interpreter exactly as
jax_triton would call it, and jax_triton's own lowering compiles the kernel for sm_90 with
jaxlib's kernel-call objects stood in for.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys

import ml_dtypes
import numpy as np
import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX shares the GPU with torch's tests
jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import tilecraft as ct  # noqa: E402
from tests.conftest import numpy_to_torch, torch_to_numpy, unavailable_reason  # noqa: E402
from tests.error_location import check_error  # noqa: E402
from tilecraft.jax import InputOutput, OutputPlaceholder, cutile_call  # noqa: E402
from tilecraft.jax import call as jax_call  # noqa: E402

TILE = 8


@ct.kernel
def affine(x, y, a, b: ct.Constant[float], T: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, bid, ct.load(x, bid, T) * a + b)


@ct.kernel
def add_2d(x, y, z, TM: ct.Constant[int], TN: ct.Constant[int]):
    i, j = ct.bid(0), ct.bid(1)
    ct.store(z, (i, j), ct.load(x, (i, j), (TM, TN)) + ct.load(y, (i, j), (TM, TN)))


@ct.kernel
def split(x, pos, neg, T: ct.Constant[int]):
    v = ct.load(x, ct.bid(0), T)
    ct.store(pos, ct.bid(0), v)
    ct.store(neg, ct.bid(0), -v)


@ct.kernel
def accumulate(total, x, T: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(total, bid, ct.load(total, bid, T) + ct.load(x, bid, T))


@ct.kernel
def mixed(scale: ct.Constant[int], pair, out, acc, k, T: ct.Constant[int]):
    bid = ct.bid(0)
    v = ct.load(pair[0], bid, T) * scale + ct.load(pair[1], bid, T) * k[0] + k[1]
    ct.store(out, bid, v)
    ct.store(acc, bid, ct.load(acc, bid, T) - v)


@ct.kernel
def tuple_annotated(x, y, cfg: tuple[ct.Constant[int], int]):
    ct.store(y, ct.bid(0), ct.load(x, ct.bid(0), cfg[0]) + cfg[1])


@ct.kernel
def wide_scalar(x: ct.IndexedWithInt64, y, n: ct.ScalarInt64, T: ct.Constant[int]):
    ct.store(y, ct.bid(0), ct.load(x, ct.bid(0), T).astype(ct.int64) + n)


@ct.kernel
def signed(x, y, flag, T: ct.Constant[int]):
    v = ct.load(x, ct.bid(0), T)
    ct.store(y, ct.bid(0), ct.where(flag, v, -v))


@ct.kernel
def twice_as_f32(x, y, T: ct.Constant[int]):
    v = ct.load(x, ct.bid(0), T).astype(ct.float32)
    ct.store(y, ct.bid(0), (v * 2.0 + 1.0).astype(y.dtype))


@ct.kernel
def copy(x, y, T: ct.Constant[int]):
    ct.store(y, ct.bid(0), ct.load(x, ct.bid(0), T))


@ct.kernel
def writes_its_input(x, y, T: ct.Constant[int]):
    ct.store(x, ct.bid(0), ct.load(y, ct.bid(0), T))  # WRITE


@ct.kernel
def mistyped(x, y, T: ct.Constant[int]):
    ct.store(y, ct.bid(0), ct.load(x, ct.bid(0), T) + "text")  # BAD


def _values(n, dtype=np.float32, seed=0):
    """Nonzero values (an output element left unwritten shows)."""
    g = np.random.default_rng(seed)
    return (g.uniform(0.5, 4.0, n) * g.choice([-1, 1], n)).astype(dtype)


def _blocks(n):
    return ((n + TILE - 1) // TILE,)


def _gpu_ready(backend):
    """Skip `triton` where JAX has no GPU or jax_triton is missing."""
    if backend != "triton":
        return
    if jax.default_backend() != "gpu":
        pytest.skip("triton: JAX has no GPU here")
    if importlib.util.find_spec("jax_triton") is None:
        pytest.skip("triton: jax_triton is not installed")


@pytest.fixture
def run(backend):
    _gpu_ready(backend)
    return lambda grid, kernel, args: cutile_call(grid, kernel, args, backend=backend)


# ---- results ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [37, 64])
def test_eager_and_jit_agree_with_reference(run, n):
    x = jnp.asarray(_values(n))
    ref = np.asarray(x, np.float64) * 1.5 + 0.25

    def f(x):
        return run(_blocks(n), affine, (x, OutputPlaceholder(x.shape, x.dtype), 1.5, 0.25, TILE))

    np.testing.assert_allclose(np.asarray(f(x)), ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jax.jit(f)(x)), ref, rtol=1e-6)


def test_two_dimensional_grid_with_partial_tiles(run):
    x, y = _values(19 * 33).reshape(19, 33), _values(19 * 33, seed=1).reshape(19, 33)
    f = jax.jit(lambda x, y: run((3, 3), add_2d, (x, y, OutputPlaceholder(x.shape, x.dtype), 8, 16)))
    np.testing.assert_allclose(np.asarray(f(x, y)), x.astype(np.float64) + y, rtol=1e-6)


def test_multiple_outputs_come_back_in_argument_order(run):
    x = _values(21)
    ph = OutputPlaceholder((21,), jnp.float32)
    pos, neg = jax.jit(lambda x: run(_blocks(21), split, (x, ph, ph, TILE)))(x)
    np.testing.assert_array_equal(np.asarray(pos), x)
    np.testing.assert_array_equal(np.asarray(neg), -x)


def test_input_output_updates_in_place_and_leaves_the_original(run):
    total, x = jnp.asarray(_values(30)), jnp.asarray(_values(30, seed=2))

    @jax.jit
    def step(total, x):
        new = run(_blocks(30), accumulate, (InputOutput(total), x, TILE))
        return new, total  # the original is still needed: XLA keeps it

    new, old = step(total, x)
    np.testing.assert_allclose(np.asarray(new), np.asarray(total, np.float64) + np.asarray(x), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(old), np.asarray(total))


def test_tuples_constants_first_and_outputs_after_an_updated_input(run):
    a, b, acc = (jnp.asarray(_values(20, seed=s)) for s in (3, 4, 5))
    out, acc2 = jax.jit(lambda a, b, acc: run(
        _blocks(20), mixed, (3, (a, b), OutputPlaceholder((20,), jnp.float32), InputOutput(acc), (2.0, -1), TILE)))(
        a, b, acc)
    v = np.asarray(a, np.float64) * 3 + np.asarray(b, np.float64) * 2 - 1
    np.testing.assert_allclose(np.asarray(out), v, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(acc2), np.asarray(acc, np.float64) - v, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [2**33 + 5, -7, 1])
def test_runtime_int64_scalar(run, n):
    x = np.arange(-9, 9, dtype=np.int32)
    f = jax.jit(lambda x, n: run(_blocks(18), wide_scalar, (x, OutputPlaceholder((18,), jnp.int64), n, TILE)),
                static_argnums=1)
    with jax.enable_x64(True):
        y = np.asarray(f(jnp.asarray(x), n))
    np.testing.assert_array_equal(y.astype(object), x.astype(object) + n)


@pytest.mark.parametrize("flag", [True, False])
def test_runtime_bool_scalar(run, flag):
    x = _values(18)
    y = jax.jit(lambda x, flag: run(_blocks(18), signed, (x, OutputPlaceholder(x.shape, x.dtype), flag, TILE)),
                static_argnums=1)(x, flag)
    np.testing.assert_array_equal(np.asarray(y), x if flag else -x)


def test_runtime_scalar_reuses_the_compiled_kernel_and_a_constant_does_not(run):
    x = jnp.asarray(_values(16))
    jax_call._COMPILE_CACHE.clear()
    for a, b in [(2.0, 0.5), (3.0, 0.5), (2.0, -1.0)]:
        y = run(_blocks(16), affine, (x, OutputPlaceholder((16,), jnp.float32), a, b, TILE))
        np.testing.assert_allclose(np.asarray(y), np.asarray(x, np.float64) * a + b, rtol=1e-6)
    assert len(jax_call._COMPILE_CACHE) == 2  # a (runtime) shares one; b (Constant) makes a second


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint16"])
def test_narrow_dtypes(run, dtype):
    d = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = (np.arange(23) % 7 - (0 if d.kind == "u" else 3)).astype(d)
    y = jax.jit(lambda x: run(_blocks(23), twice_as_f32, (x, OutputPlaceholder(x.shape, x.dtype), TILE)))(x)
    ref = (x.astype(np.float64) * 2 + 1).astype(np.float32).astype(d)
    assert np.asarray(y).dtype == d
    np.testing.assert_array_equal(np.asarray(y).astype(np.float64), ref.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float8_e8m0fnu", "bool"])
def test_copy_of_dtypes_without_arithmetic(run, dtype):
    d = np.dtype(getattr(ml_dtypes, dtype, dtype))
    x = (2.0 ** (np.arange(13) - 6)).astype(d) if dtype != "bool" else np.arange(13) % 3 == 0
    y = jax.jit(lambda x: run(_blocks(13), copy, (x, OutputPlaceholder(x.shape, x.dtype), TILE)))(x)
    np.testing.assert_array_equal(np.asarray(y).view(np.uint8), x.view(np.uint8))


def test_tuple_annotations_compile_constant_items_in(run):
    x = jnp.asarray(_values(24))
    jax_call._COMPILE_CACHE.clear()
    for tile, k in [(8, 1), (8, 5), (4, 5)]:
        y = run((24 // tile,), tuple_annotated, (x, OutputPlaceholder((24,), jnp.float32), (tile, k)))
        np.testing.assert_allclose(np.asarray(y), np.asarray(x, np.float64) + k, rtol=1e-6)
    assert len(jax_call._COMPILE_CACHE) == 2  # one per tile size (a Constant item), not per k


def test_empty_grid_launches_nothing(run):
    x = jnp.asarray(_values(8))
    y, total = run((0,), mixed, (1, (x, x), OutputPlaceholder((8,), jnp.float32), InputOutput(x), (1.0, 1), TILE))
    assert y.shape == (8,)
    np.testing.assert_array_equal(np.asarray(total), np.asarray(x))


def test_each_call_is_one_operation_of_the_lowered_computation(backend, run):
    ph = OutputPlaceholder((16,), jnp.float32)

    def graph(x):
        y1 = run(_blocks(16), affine, (x, ph, 1.0, 0.0, TILE))
        y2 = run(_blocks(16), affine, (y1, ph, 2.0, 0.0, TILE))
        return run(_blocks(16), split, (y2, ph, ph, TILE))

    x = jnp.asarray(_values(16))
    text = jax.jit(graph).lower(x).as_text()
    # CPU backends run as host callbacks: a CPU one, or a GPU one where jax's device is a GPU
    operation = r"@cutile_launch\(" if backend == "triton" else r"_python_[a-z]+_callback\("
    assert len(re.findall(operation, text)) == 3, text
    pos, neg = jax.jit(graph)(x)
    np.testing.assert_allclose(np.asarray(neg), -2 * np.asarray(x), rtol=1e-6)


# ---- errors ----------------------------------------------------------------------------------------------
def _ph():
    return OutputPlaceholder((8,), jnp.float32)


def test_argument_errors():
    x = jnp.zeros(8, jnp.float32)
    with pytest.raises(TypeError, match="affine expects 5 arguments, got 4"):
        cutile_call((1,), affine, (x, _ph(), 1.0, 2.0))
    with pytest.raises(TypeError, match="unexpected type for argument `x`: list"):
        cutile_call((1,), affine, ([x], _ph(), 1.0, 2.0, TILE))
    with pytest.raises(TypeError, match="argument `T` is annotated ct.Constant; expected a static scalar"):
        jax.jit(lambda t: cutile_call((1,), affine, (x, _ph(), 1.0, 2.0, t)))(TILE)
    with pytest.raises(TypeError, match=r"tuple_annotated: argument `cfg` expects a tuple of length 2, got 3"):
        cutile_call((1,), tuple_annotated, (x, _ph(), (8, 1, 2)))
    with pytest.raises(TypeError, match=r"argument `cfg\[0\]` is annotated ct.Constant; expected a static scalar"):
        cutile_call((1,), tuple_annotated, (x, _ph(), (x, 1)))
    with pytest.raises(TypeError, match="expects a kernel made by @tilecraft.kernel"):
        cutile_call((1,), lambda x: x, (x,))
    with pytest.raises(ValueError, match="at most 3 are allowed"):
        cutile_call((1, 1, 1, 1), affine, (x, _ph(), 1.0, 2.0, TILE))
    with pytest.raises(ValueError, match="'cuda' is not a backend"):
        cutile_call((1,), affine, (x, _ph(), 1.0, 2.0, TILE), backend="cuda")


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="JAX computes on a GPU here")
def test_triton_backend_needs_jax_on_a_gpu():
    with pytest.raises(ValueError, match="runs kernels on JAX's GPU"):
        cutile_call((1,), affine, (jnp.zeros(8), _ph(), 1.0, 2.0, TILE), backend="triton")


def test_a_kernel_writing_a_plain_input_is_refused_at_its_parameter(backend):
    _gpu_ready(backend)
    x = jnp.zeros(8, jnp.float32)
    with pytest.raises(ct.TileArgumentError, match=r"`x` is a JAX array that the kernel writes to.*InputOutput\(x\)"):
        cutile_call((1,), writes_its_input, (x, x, TILE), backend=backend)


def test_compile_errors_surface_at_the_call_with_their_location(backend):
    _gpu_ready(backend)
    with pytest.raises(ct.TileTypeError) as excinfo:
        jax.jit(lambda x: cutile_call((1,), mistyped, (x, _ph(), TILE), backend=backend))(jnp.zeros(8))
    check_error(excinfo, mistyped.fn, "# BAD")


# ---- the GPU path without a GPU ------------------------------------------------------------------------------
needs_triton = pytest.mark.skipif(unavailable_reason("triton-interpret") is not None,
                                  reason=str(unavailable_reason("triton-interpret")))

_CASES = {
    "outputs last": (affine, lambda: (jnp.asarray(_values(37)), _ph37(), 1.5, 0.25, TILE), (5,)),
    "two outputs": (split, lambda: (jnp.asarray(_values(37)), _ph37(), _ph37(), TILE), (5,)),
    "in place": (accumulate, lambda: (InputOutput(jnp.asarray(_values(37))), jnp.asarray(_values(37, seed=1)), TILE),
                 (5,)),
    "tuples, an update before an output": (mixed, lambda: (
        2, (jnp.asarray(_values(37)), jnp.asarray(_values(37, seed=2))), _ph37(), InputOutput(jnp.asarray(_values(37))),
        (1.0, 1), TILE), (5,)),
}


def _ph37():
    return OutputPlaceholder((37,), jnp.float32)


@needs_triton
@pytest.mark.parametrize("case", list(_CASES))
def test_gpu_arrangement_runs_as_jax_triton_calls_it(case):
    """The entry, called as jax_triton does (operands in order, then every output buffer; an
    aliased output is its input's buffer), computes what the host path computes."""
    from tilecraft.jax import gpu
    kernel, make_args, grid = _CASES[case]
    args = make_args()
    expected = cutile_call(grid, kernel, args, backend="interpreter")
    expected = expected if isinstance(expected, tuple) else (expected,)
    call = jax_call.classify(kernel, args)
    plan = gpu.launch_plan(kernel, call, "sm_90", 90, interpret=True)
    operands = [numpy_to_torch(np.asarray(v)) if isinstance(v, jax.Array) else v for v in plan.operands]
    arrays = [v for v in operands if not isinstance(v, (bool, int, float))]
    outputs = [numpy_to_torch(np.full(o.shape, np.nan, o.dtype)) for o in call.outputs]
    for operand, output in plan.aliases.items():
        outputs[output] = arrays[operand]
    plan.entry.fn.run(*operands, *outputs, grid=grid + (1,) * (3 - len(grid)), warmup=False)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(torch_to_numpy(got), np.asarray(want))


@pytest.fixture
def jax_triton_for_cuda(monkeypatch):
    """jax_triton's own lowering for CUDA without a GPU: JAX lowers for CUDA on any machine
    (export), and jaxlib's kernel-call objects, which a JAX without CUDA lacks, are stood in for
    by recorders. Yields `lower(f, *specs)` -> (MLIR text, [(kernel name, PTX, grid, params)])."""
    if unavailable_reason("triton-interpret") is not None:
        pytest.skip(str(unavailable_reason("triton-interpret")))
    if importlib.util.find_spec("jax_triton") is None:
        pytest.skip("jax_triton is not installed")
    if jax.default_backend() == "gpu":
        pytest.skip("the real jaxlib runs here (backend triton)")
    import jaxlib.gpu_triton as gpu_triton
    from jax import export

    from tilecraft.jax import gpu
    made: list = []

    class KernelCall:
        def __init__(self, kernel, gx, gy, gz, params):
            made.append((*kernel, (gx, gy, gz), params))

        def to_proto(self, name, metadata):
            return name.encode()

    stand_ins = {
        "TritonKernel": lambda name, warps, ctas, shared, ptx, ttir, cc: (name, ptx), "TritonKernelCall": KernelCall,
        "create_array_parameter": lambda zeroed, align: ("array", align),
        "create_scalar_parameter": lambda value, dtype: ("scalar", value, dtype),
        "get_compute_capability": lambda device: 90, "get_serialized_metadata": lambda b: b,
        "get_custom_call": lambda: None, "get_arch_details": lambda device: "", "TritonAutotunedKernelCall": None,
    }
    for name, value in stand_ins.items():
        monkeypatch.setattr(gpu_triton, name, value, raising=False)
    monkeypatch.setattr(gpu, "register_target", lambda: True)
    monkeypatch.setattr(gpu, "_arch", lambda: ("sm_90", 90))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)

    def lower(f, *specs):
        made.clear()
        exported = export.export(jax.jit(f), platforms=["cuda"],
                                 disabled_checks=[export.DisabledSafetyCheck.custom_call("cutile_launch")])(*specs)
        assert "TRITON_CACHE_DIR" not in os.environ  # jax_triton's import blanks it; put back
        return exported.mlir_module(), list(made)

    try:
        yield lower
    finally:  # the next import of jax_triton is a fresh one, with the real jaxlib objects
        for name in [m for m in sys.modules if m.startswith("jax_triton")]:
            del sys.modules[name]


def test_jax_triton_lowers_the_call_for_a_gpu(jax_triton_for_cuda):
    """The entry compiles for sm_90 with the operands, scalar types and trailing outputs the
    arrangement gives jax_triton, as the custom call `cutile_launch` with the InputOutput aliased."""
    spec = jax.ShapeDtypeStruct((37,), jnp.float32)
    text, made = jax_triton_for_cuda(lambda a, b, acc: cutile_call((5,), mixed, (
        2, (a, b), OutputPlaceholder((37,), jnp.float32), InputOutput(acc), (1.5, 1), TILE)), spec, spec, spec)
    assert text.count("stablehlo.custom_call @cutile_launch(") == 1
    assert "output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [1], operand_index = 2" \
        in text
    (name, ptx, grid, params), = made
    assert name.startswith("mixed_entry") and ".entry mixed_entry" in ptx and grid == (5, 1, 1)
    # a, its size; b, its size; the output's size; acc, its size; k[0] as fp64, k[1] == 1 (a constant);
    # then the two outputs: out's buffer and acc's (aliased, unused by the kernel)
    assert params == [("array", 16), ("scalar", 37, "i32"), ("array", 16), ("scalar", 37, "i32"),
                      ("scalar", 37, "i32"), ("array", 16), ("scalar", 37, "i32"), ("scalar", 1.5, "fp64"),
                      ("array", 16), ("array", 16)]


@pytest.mark.parametrize("flag, passed", [(False, [("scalar", 0, "i32")]), (True, [])])
def test_jax_triton_gets_bools_as_ints(jax_triton_for_cuda, flag, passed):
    """jax_triton types a bool "B", which Triton 3.6 cannot specialize: bools go as 0 or 1 (1 is
    compiled in), and the entry casts them back."""
    spec = jax.ShapeDtypeStruct((18,), jnp.float32)
    _, made = jax_triton_for_cuda(lambda x: cutile_call((3,), signed, (x, OutputPlaceholder((18,), jnp.float32),
                                                                       flag, TILE)), spec)
    assert made[0][3] == [("array", 16), ("scalar", 18, "i32"), ("scalar", 18, "i32"), *passed, ("array", 16)]


@pytest.mark.parametrize("dtype", ["float8_e8m0fnu", "bool", "bfloat16", "float8_e4m3fn", "float8_e5m2", "uint16"])
def test_jax_triton_compiles_every_array_dtype(jax_triton_for_cuda, dtype):
    d = np.dtype(getattr(ml_dtypes, dtype, dtype))
    kernel = copy if dtype in ("bool", "float8_e8m0fnu") else twice_as_f32
    text, made = jax_triton_for_cuda(lambda x: cutile_call((2,), kernel, (x, OutputPlaceholder(x.shape, x.dtype),
                                                                         TILE)), jax.ShapeDtypeStruct((13,), d))
    assert len(made) == 1 and ".entry" in made[0][1] and text.count("@cutile_launch(") == 1
    assert ("bitcast_convert" in text) == (dtype == "float8_e8m0fnu")  # jax_triton has no name for it: bytes
