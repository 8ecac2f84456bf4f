"""Shared test fixtures: the `backend` parameter and device helpers.

Every test that takes the `backend` argument (directly or through `dev`, `to_device`,
`from_device`, `launch`) runs once per selected backend:

  interpreter       NumPy arrays, the reference NumPy executor of the IR
  triton-interpret  CPU torch tensors, the generated Triton code under Triton's CPU interpreter
  triton            CUDA torch tensors, the generated Triton code on a real GPU

Choose the backends with `--backend=a,b` or `TILECRAFT_TEST_BACKENDS=a,b` (the option wins;
default: interpreter,triton-interpret). A selected backend that cannot run here (Triton backend
not importable yet, no CUDA device) is skipped with the reason.

Test markers (registered below):
  @pytest.mark.only_backends("interpreter", ...)          run only on these backends
  @pytest.mark.xfail_backend("triton-interpret", reason=..., params=[{"dtype": "bfloat16"}])
      strict xfail on that backend, for the parametrizations matching one of `params`
      (dicts of parameter values; a tuple value lists alternatives; omitted: all)
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest

ALL_BACKENDS = ("interpreter", "triton-interpret", "triton")
DEFAULT_BACKENDS = ("interpreter", "triton-interpret")
ENV_VAR = "TILECRAFT_TEST_BACKENDS"
_session_cache: list[str] = []   # the temporary compile cache this process made, if any


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", action="store", default=None,
                     help=f"comma-separated backends to test ({', '.join(ALL_BACKENDS)}); "
                          f"default: ${ENV_VAR} or {','.join(DEFAULT_BACKENDS)}")


def pytest_configure(config: pytest.Config) -> None:
    # A fresh compile cache per session (unless one is chosen): the on-disk IR cache is keyed by
    # tilecraft's version, not its source, so IR cached by an older working tree would be reused.
    if "TILECRAFT_CACHE_DIR" not in os.environ:
        _session_cache.append(tempfile.mkdtemp(prefix="tilecraft-test-cache-"))
        os.environ["TILECRAFT_CACHE_DIR"] = _session_cache[0]
    config.addinivalue_line("markers", "only_backends(*names): run the test only on these backends")
    config.addinivalue_line("markers", "xfail_backend(*names, reason, params=None): strict xfail on these "
                                       "backends (for matching parametrizations)")
    config.addinivalue_line("markers", "slow: long-running tests")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_cache:
        os.environ.pop("TILECRAFT_CACHE_DIR", None)
        shutil.rmtree(_session_cache.pop(), ignore_errors=True)


def selected_backends(config: pytest.Config) -> tuple[str, ...]:
    raw = config.getoption("--backend") or os.environ.get(ENV_VAR) or ",".join(DEFAULT_BACKENDS)
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    bad = [n for n in names if n not in ALL_BACKENDS]
    if bad:
        raise pytest.UsageError(f"unknown backend(s) {bad}; choose from {', '.join(ALL_BACKENDS)}")
    return names


@functools.lru_cache(maxsize=None)
def unavailable_reason(name: str) -> str | None:
    """Why `name` cannot run in this environment, or None when it can."""
    if name == "interpreter":
        return None
    try:
        import tilecraft.backends.triton  # noqa: F401
    except Exception as exc:  # not written yet, or triton missing
        return (f"{name}: tilecraft.backends.triton cannot be imported yet "
                f"({type(exc).__name__}: {exc})")
    try:
        import torch
    except Exception as exc:
        return f"{name}: torch is not available ({exc})"
    if name == "triton" and not torch.cuda.is_available():
        return "triton: no CUDA device (torch.cuda.is_available() is False)"
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    names = selected_backends(metafunc.config)
    only = metafunc.definition.get_closest_marker("only_backends")
    params = []
    for name in names:
        marks: list[Any] = []
        reason = unavailable_reason(name)
        if reason is not None:
            marks.append(pytest.mark.skip(reason=reason))
        elif only is not None and name not in only.args:
            marks.append(pytest.mark.skip(reason=f"test runs only on {', '.join(only.args)}"))
        params.append(pytest.param(name, id=name, marks=marks))
    metafunc.parametrize("backend", params)


def _matches(params: dict[str, Any], want: Any) -> bool:
    """Whether a test's parameters match one `params=` entry of an xfail_backend marker: a dict
    whose values must equal the test's (a tuple value lists alternatives)."""
    for key, value in want.items():
        options = value if isinstance(value, tuple) else (value,)
        if params.get(key, object()) not in options:
            return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Turn `xfail_backend(*backends, reason=..., params=[{...}, ...])` markers into strict
    xfails of the matching parametrizations (all of the test's, when params is omitted)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "backend" not in callspec.params:
            continue
        for m in item.iter_markers("xfail_backend"):
            if callspec.params["backend"] not in m.args:
                continue
            wanted = m.kwargs.get("params")
            if wanted is None or any(_matches(callspec.params, w) for w in wanted):
                item.add_marker(pytest.mark.xfail(strict=True, reason=m.kwargs.get("reason", "")))
                break


# ---- converting arrays ---------------------------------------------------------------------------------
_BITS_VIEW = {"bfloat16": np.int16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
              "float8_e8m0fnu": np.uint8}


def _torch_dtype_of(np_dtype: np.dtype) -> Any:
    import torch
    return getattr(torch, np.dtype(np_dtype).name)


def numpy_to_torch(a: np.ndarray, device: str = "cpu") -> Any:
    """A torch tensor with the same values, dtype and shape as `a` (a contiguous copy)."""
    import torch
    a = np.array(a, order="C")   # (np.ascontiguousarray would turn 0-d into 1-d)
    name = a.dtype.name
    if name in _BITS_VIEW:
        t = torch.from_numpy(a.view(_BITS_VIEW[name]).copy()).view(_torch_dtype_of(a.dtype))
    else:
        t = torch.from_numpy(a.copy())
    return t.to(device)


def torch_to_numpy(t: Any) -> np.ndarray:
    """A NumPy copy of a torch tensor (bfloat16 / float8 through ml_dtypes)."""
    import torch
    t = t.detach().cpu()
    name = str(t.dtype).removeprefix("torch.")
    if name in _BITS_VIEW:
        bits = {np.int16: torch.int16, np.uint8: torch.uint8}[_BITS_VIEW[name]]
        return t.view(bits).numpy().view(getattr(ml_dtypes, name)).copy()
    return t.numpy().copy()


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.copy()
    return torch_to_numpy(x)


@dataclass(frozen=True)
class Device:
    """What a test needs to know about the backend it runs on."""

    name: str
    launched: list = field(default_factory=list, compare=False, repr=False)

    @property
    def is_torch(self) -> bool:
        return self.name != "interpreter"

    @property
    def torch_device(self) -> str:
        return "cuda" if self.name == "triton" else "cpu"

    def put(self, a: Any) -> Any:
        """NumPy array → the backend's array type (NumPy, CPU torch, CUDA torch); a copy."""
        a = np.asarray(a)
        if not self.is_torch:
            return a.copy()
        return numpy_to_torch(a, self.torch_device)

    def get(self, x: Any) -> np.ndarray:
        """Backend array → NumPy copy."""
        return to_numpy(x)

    def poison(self, shape: Any, dtype: Any, value: Any = None) -> Any:
        """A fresh device array filled with NaN (floats) or a sentinel (ints, bool: True)."""
        return self.put(poisoned(shape, dtype, value))

    def permute(self, x: Any, axes: tuple[int, ...]) -> Any:
        """A transposed view (no copy) of a device array."""
        return x.transpose(axes) if not self.is_torch else x.permute(*axes)

    def launch(self, grid: tuple[int, ...], kernel: Any, args: tuple[Any, ...], *, sync: bool = True,
               **options: Any) -> None:
        """ct.launch on this backend, or on `backend=` (a name registered for the same device;
        `options`: ct.launch's other keyword options); on the GPU, then wait for the kernel
        unless `sync` is False."""
        import tilecraft as ct
        if kernel not in self.launched:
            self.launched.append(kernel)
        options.setdefault("backend", self.name)
        if self.name == "triton":
            import torch
            stream = torch.cuda.current_stream()
            ct.launch(stream, grid, kernel, args, **options)
            if sync:
                torch.cuda.synchronize()
        else:
            ct.launch(None, grid, kernel, args, **options)


def kernel_ir(kernel: Any, *args: Any) -> Any:
    """The Tile IR `kernel` is specialized to for `args` (NumPy arrays stand for any arrays)."""
    specs, _, _ = kernel.describe(args)
    return kernel.lower(specs)


def gluon_matmul_case(device: str) -> tuple:
    """(a, b, c, want, grid) for the sample matmul at bf16 3700x2056x296 with 128x256x64 tiles on
    torch device `device`, a grid its Gluon variant takes on the H200: c uninitialized, want the
    float64 product."""
    import math
    import torch
    m, n, k = 3700, 2056, 296
    gen = torch.Generator(device=device).manual_seed(5)
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(k, n, device=device, dtype=torch.bfloat16, generator=gen)
    c = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    return a, b, c, a.double() @ b.double(), (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)


def gluon_variant_launches(kernel: Any) -> int:
    """How many launches of `kernel`'s variants ran their warp-specialized Gluon kernel."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.gluon import WarpSpecializedKernel
    ws = [wrapped_as(v.compiled, WarpSpecializedKernel) for v in kernel.variants.values()]
    return sum(w.variant_launches for w in ws if w is not None)


def fast_launchers(kernel: Any, name: str) -> list:
    """The launchers the runtime's fast path keeps for backend `name` (on sm_90, for a kernel
    with a Gluon variant, the Triton kernel's inside the launcher choosing between the two; for
    one with split-K variants, the launcher of the kernel it wraps where an unsplit launch made
    one)."""
    from tilecraft.backends.gluon.kernel import WarpSpecializedLauncher
    from tilecraft.backends.splitting import SplitLauncher
    found = [hit[0] for key, hit in kernel.fast.items() if key[1] == name]
    found = [f.main if isinstance(f, WarpSpecializedLauncher) else f for f in found]
    return [f.main if isinstance(f, SplitLauncher) and f.main is not None else f for f in found]


def run_matmul(dev: Any, backend: str, grid: tuple[int, int, int], kernel: Any, a: np.ndarray, b: np.ndarray,
               args: tuple, dtype: str = "float32") -> np.ndarray:
    """Launch a matmul-shaped `kernel` as (A, B, C, *args) on `backend` over `grid`, C a poisoned
    array of `dtype` with A's rows and B's columns; C back as NumPy."""
    c = dev.poison((a.shape[0], b.shape[1]), dtype)
    dev.launch(grid, kernel, (dev.put(a), dev.put(b), c, *args), backend=backend)
    return dev.get(c)


SENTINEL = 0x5A


def poisoned(shape: Any, dtype: Any, value: Any = None) -> np.ndarray:
    """A NumPy array filled with NaN (float dtypes) or a sentinel (0x5A for ints, True for bool)."""
    d = np.dtype(dtype)
    if value is None:
        if d.kind == "b":
            value = True
        elif d.kind in "iu":
            value = SENTINEL
        else:
            value = np.nan
    return np.full(shape, value, dtype=d)


@pytest.fixture
def dev(backend: str) -> Device:
    return Device(backend)


def generated_sources(dev: Device) -> str:
    """The Triton source of every kernel variant the test launched on `dev`."""
    out = []
    for kernel in dev.launched:
        for key, variant in getattr(kernel, "variants", {}).items():
            source = getattr(variant.compiled, "source", None)
            backend = getattr(key, "backend", None)
            if source and getattr(backend, "value", backend) == dev.name:  # a registered name (or enum)
                out.append(source)
    return "\n".join(out)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """On a failure under a Triton backend, show the generated source in the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        dev = getattr(item, "funcargs", {}).get("dev")
        if isinstance(dev, Device) and dev.is_torch:
            source = generated_sources(dev)
            if source:
                rep.sections.append(("generated Triton source", source))


@pytest.fixture
def to_device(dev: Device) -> Callable[[np.ndarray], Any]:
    return dev.put


@pytest.fixture
def from_device(dev: Device) -> Callable[[Any], np.ndarray]:
    return dev.get


@pytest.fixture
def launch(dev: Device) -> Callable[..., None]:
    return dev.launch


@pytest.fixture
def backend_variant(backend):
    """`make(suffix, **options) -> name`: registers, for this test, `backend` built with `options`
    (InterpreterBackend's for the interpreter, TritonBackend's for a Triton backend): the pass
    tests force a derived kernel (split-K parts, operand staging) on every launch this way."""
    made = []

    def make(suffix: str, **options) -> str:
        from tilecraft.backends import registry
        from tilecraft.backends.interpreter import InterpreterBackend
        base = registry.get(backend)
        name = f"{backend}-{suffix}"
        if backend == "interpreter":
            build = lambda: InterpreterBackend(**options)  # noqa: E731
        else:
            from tilecraft.backends.triton import TritonBackend
            build = lambda: TritonBackend(base.backend.kind, **options)  # noqa: E731
        registry.register(registry.BackendSpec(name, base.device, build, base.to_array, base.packages))
        made.append(name)
        return name

    yield make
    from tilecraft.backends import registry
    for name in made:
        registry.unregister(name)


@pytest.fixture
def staged_backend(backend_variant):
    """`backend` (a Triton one) with operand staging forced on every launch (key True), also with
    tensor descriptors forced ("tma"), and with staging off (False): key -> name."""
    return {key: backend_variant(f"staged-{key}", stage_operands=stage, descriptors=tma, stream_k=False)
            for key, stage, tma in ((True, True, None), ("tma", True, True), (False, False, None))}
