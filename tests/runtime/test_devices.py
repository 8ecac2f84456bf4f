"""A CUDA launch runs on the device holding its arrays, never merely the current one
(runtime/devices.py): compiled, specialized and launched with that device current, the current
device restored after; arrays on two devices, or a stream of another device, refused before
anything runs. On the CPU through a stand-in: tensors that say they are on cuda:<i>, torch's
device functions replaced by a record of the current device, and a backend for CUDA arrays
that runs the interpreter and notes the current device at each step. The launches themselves
on two GPUs: the tests at the end (skipped with fewer)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends import registry
from tilecraft.backends.arrays import as_numpy
from tilecraft.backends.registry import CUDA, BackendSpec
from tilecraft.runtime import devices

from conftest import gluon_matmul_case, gluon_variant_launches

torch = pytest.importorskip("torch")

ConstInt = ct.Constant[int]
STAND_IN = "gpu-stand-in"


class _Tensor(torch.Tensor):
    """A CPU tensor that says it is on cuda:<gpu> (what the runtime reads of where it is)."""

    gpu = 0

    @property
    def device(self):
        return torch.device("cuda", self.gpu)

    @property
    def is_cuda(self):
        return True


_Tensor.__module__, _Tensor.__name__ = "torch", "Tensor"  # the fast path takes torch.Tensor only


def on(gpu: int, t: torch.Tensor) -> _Tensor:
    x = t.as_subclass(_Tensor)
    x.gpu = gpu
    return x


class _Stream:
    """A stream of cuda:<device_index>, as torch streams say theirs."""

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index


class _Gpus:
    """The stand-in's CUDA state: the current device, the switches made, and what ran where."""

    def __init__(self) -> None:
        self.current = 0
        self.switches = 0
        self.log: list[tuple[str, int]] = []  # (step, the current device then)


class _Switch:
    """`torch.cuda.device(index)` of the stand-in."""

    def __init__(self, gpus: _Gpus, index: int) -> None:
        self.gpus, self.index = gpus, index

    def __enter__(self) -> None:
        self.before, self.gpus.current = self.gpus.current, self.index
        self.gpus.switches += 1

    def __exit__(self, *exc: Any) -> None:
        self.gpus.current = self.before


class _Kernel:
    """The interpreter's kernel, noting the current device at each launch and specialization."""

    def __init__(self, inner: Any, gpus: _Gpus) -> None:
        self.inner, self.gpus = inner, gpus

    def launch(self, grid, args, stream=None, *, dependent=False):
        self.gpus.log.append(("launch", self.gpus.current))
        self.inner.launch(grid, args, None)

    def specialize(self, args):
        self.gpus.log.append(("specialize", self.gpus.current))
        return self


class _Backend:
    def __init__(self, gpus: _Gpus) -> None:
        self.gpus = gpus

    def compile(self, fn, facts):
        self.gpus.log.append(("compile", self.gpus.current))
        return _Kernel(registry.get("interpreter").backend.compile(fn, facts), self.gpus)


@pytest.fixture
def gpus(monkeypatch):
    """The stand-in CUDA devices (cuda:0 current, cuda:1 of another capability) and backend."""
    state = _Gpus()
    monkeypatch.setattr(devices, "current_device", lambda: state.current)
    monkeypatch.setattr(torch.cuda, "device", lambda index: _Switch(state, index))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: {0: (8, 0), 1: (9, 0)}[index])
    registry.register(BackendSpec(STAND_IN, CUDA, lambda: _Backend(state),
                                  lambda x: as_numpy(x.as_subclass(torch.Tensor))))
    yield state
    registry.unregister(STAND_IN)


def scale_fn(X, Y, F: ConstInt):
    i = ct.bid(0)
    ct.store(Y, index=(i,), tile=ct.load(X, index=(i,), shape=(16,), padding_mode=ct.PaddingMode.ZERO) * F)


def _launch(k, gpu, stream, n=37, factor=3, x=None):
    """A launch of `k` on arrays of cuda:<gpu>: its output (poisoned) checked against float64."""
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32) if x is None else x
    y = torch.full((n,), float("nan"))
    ct.launch(stream, (math.ceil(n / 16),), k, (on(gpu, torch.from_numpy(x)), on(gpu, y), factor), backend=STAND_IN)
    np.testing.assert_allclose(y.numpy(), x.astype(np.float64) * factor, rtol=1e-6)


def test_arrays_on_another_device_compile_and_launch_there(gpus):
    """Arrays on cuda:1 with cuda:0 current: the first launch compiles, launches and
    specializes with cuda:1 current, for its capability; the cached launches (fast path) run
    with cuda:1 current too; cuda:0 is current again after each. They once all ran on cuda:0."""
    k = ct.kernel(scale_fn)
    for stream in (0, _Stream(1), 0):
        _launch(k, 1, stream)
        assert gpus.current == 0
    assert gpus.log == [("compile", 1), ("launch", 1), ("specialize", 1), ("launch", 1), ("launch", 1)]
    assert [key.arch for key in k.variants] == ["sm_90"]
    assert [hit[4] for hit in k.fast.values()] == [1]  # the entry's device


def test_cached_launches_on_the_current_device_switch_nothing(gpus):
    k = ct.kernel(scale_fn)
    for _ in range(3):
        _launch(k, 0, 0)
    gpus.current = 1  # the arrays of the same key stay on cuda:0; the other device is current now
    _launch(k, 0, _Stream(0))
    assert gpus.switches == 1 and gpus.current == 1
    assert gpus.log == [("compile", 0), ("launch", 0), ("specialize", 0), ("launch", 0), ("launch", 0), ("launch", 0)]
    assert [key.arch for key in k.variants] == ["sm_80"]


def test_arrays_on_two_devices_are_refused(gpus):
    k = ct.kernel(scale_fn)
    x, y = torch.zeros(16), torch.zeros(16)
    with pytest.raises(ValueError, match=r"different devices \(`X` on cuda:0, `Y` on cuda:1\)"):
        ct.launch(0, (1,), k, (on(0, x), on(1, y), 2), backend=STAND_IN)
    _, arrays, _ = ct.kernel(lambda xs, out: None).describe(([on(1, x), on(0, y)], on(1, y)))
    with pytest.raises(ValueError, match=r"`xs\[0\]` on cuda:1, `xs\[1\]` on cuda:0"):
        devices.array_device(arrays)
    assert not gpus.log


def test_a_stream_of_another_device_is_refused(gpus):
    """Before anything runs: at the first launch, and at a cached one made from the other
    device (a cached launch on the arrays' own device leaves it to CUDA, which refuses a launch
    on another device's stream)."""
    k = ct.kernel(scale_fn)
    x, y = torch.ones(16), torch.full((16,), float("nan"))
    with pytest.raises(ValueError, match=r"`stream` is a stream of cuda:0, but the launch's arrays are on cuda:1"):
        ct.launch(_Stream(0), (1,), k, (on(1, x), on(1, y), 2), backend=STAND_IN)
    assert not gpus.log and not k.fast
    _launch(k, 1, _Stream(1))
    with pytest.raises(ValueError, match="stream of cuda:0"):
        ct.launch(_Stream(0), (1,), k, (on(1, x), on(1, y), 2), backend=STAND_IN)
    assert gpus.log[-1] == ("specialize", 1) and gpus.current == 0 and y.isnan().all()


def noop_fn(n):
    ct.bid(0)


def test_a_launch_without_arrays_runs_on_its_streams_device_or_the_current(gpus):
    """Nothing says where else: a stream that says its device, else the current device; no fast
    entry (its kernel would stay on the first launch's device)."""
    k = ct.kernel(noop_fn)
    ct.launch(_Stream(1), (1,), k, (5,), backend=STAND_IN)
    ct.launch(0, (1,), k, (5,), backend=STAND_IN)
    assert [d for step, d in gpus.log if step == "launch"] == [1, 0] and not k.fast


def test_the_triton_backend_compiles_for_the_current_devices_capability(monkeypatch):
    """The backend asks the current device's capability per device (the launch made the
    arrays' device current), not once for the process: on a machine with an sm_80 and an
    sm_90 GPU, kernels for the sm_90 one get tensor descriptors and the others do not."""
    pytest.importorskip("triton")
    import tilecraft.backends.triton as triton_backend
    from tilecraft.backends.base import BackendKind

    class Target:
        backend = "cuda"

        def __init__(self, arch):
            self.arch = arch

    class Active:
        device = 0

        def get_current_device(self):
            return self.device

        def get_current_target(self):
            return Target({0: 80, 1: 90}[self.device])

    active = Active()
    monkeypatch.setattr(triton_backend, "driver", type("Driver", (), {"active": active}))
    backend = triton_backend.TritonBackend(BackendKind.TRITON)
    assert not backend._descriptors_available()
    active.device = 1
    assert backend._descriptors_available() and backend._gpu_capability() == 90
    active.device = 0
    assert not backend._descriptors_available() and backend._gpu_capability() == 80
    assert triton_backend.TritonBackend(BackendKind.TRITON, capability=90)._gpu_capability() == 90


# ---- on two GPUs ---------------------------------------------------------------------------------

two_gpus = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                              reason="needs two CUDA devices")


@ct.kernel
def axpy(X, Y, Out, a: float, T: ConstInt):
    i = ct.bid(0)
    x = ct.load(X, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(Y, index=(i,), shape=(T,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(Out, index=(i,), tile=x * a + y)


@pytest.fixture
def on_gpu0():
    """cuda:0 current for the test, as it was after."""
    before = torch.cuda.current_device()
    torch.cuda.set_device(0)
    yield
    torch.cuda.set_device(before)


def _axpy(k, device, stream, n=1001, a=1.75):
    """`axpy` on `n` floats of `device` (output poisoned), checked against float64."""
    gen = torch.Generator(device=device).manual_seed(n)
    x = torch.randn(n, device=device, generator=gen)
    y = torch.randn(n, device=device, generator=gen)
    out = torch.full((n,), float("nan"), device=device)
    ct.launch(stream, (math.ceil(n / 128),), k, (x, y, out, a, 128))
    torch.cuda.synchronize(device)
    want = x.double() * a + y.double()
    torch.testing.assert_close(out.double(), want, rtol=1e-6, atol=1e-6)


@two_gpus
def test_two_gpus_arrays_on_cuda1_with_cuda0_current(on_gpu0):
    """The first launch and the cached ones (the quick path declines: cuda:0's context is
    current; the fast path makes cuda:1 current and launches through it) compute right on
    cuda:1, on its default stream, a stream of it and its current stream; with cuda:1 current
    (no switch), and on cuda:0 after; cuda:0 stays current."""
    k = axpy.replace_hints()  # its own cache: the first launch compiles
    side = torch.cuda.Stream(device=1)
    for stream in (0, 0, side, torch.cuda.current_stream(1), 0):
        _axpy(k, "cuda:1", stream)
        assert torch.cuda.current_device() == 0
    with torch.cuda.device(1):
        for _ in range(2):
            _axpy(k, "cuda:1", torch.cuda.current_stream())
    for _ in range(2):
        _axpy(k, "cuda:0", 0)
    assert sorted(hit[4] for hit in k.fast.values()) == [0, 1]


@two_gpus
def test_two_gpus_a_stream_of_the_other_device_is_refused(on_gpu0):
    k = axpy.replace_hints()
    x = torch.ones(256, device="cuda:1")
    out = torch.full((256,), float("nan"), device="cuda:1")
    for _ in range(2):  # the first launch, then a cached one
        with pytest.raises(ValueError, match=r"`stream` is a stream of cuda:0, but the launch's arrays are on cuda:1"):
            ct.launch(torch.cuda.current_stream(0), (2,), k, (x, x, out, 2.0, 128))
        torch.cuda.synchronize(1)
        assert out.isnan().all()
        ct.launch(0, (2,), k, (x, x, out.clone(), 2.0, 128))  # caches it for the second round


@two_gpus
def test_two_gpus_cuda_array_interface_stays_on_its_device(on_gpu0):
    """An array given through the CUDA array interface (as CuPy's) on cuda:1 is written in
    place: it was once copied to the current device and the kernel wrote the copy."""

    class Interface:
        def __init__(self, t):
            self.__cuda_array_interface__ = t.__cuda_array_interface__

    k = axpy.replace_hints()
    x = torch.arange(300, dtype=torch.float32, device="cuda:1")
    out = torch.full((300,), float("nan"), device="cuda:1")
    ct.launch(0, (3,), k, (x, x, Interface(out), 0.5, 128))
    torch.cuda.synchronize(1)
    torch.testing.assert_close(out.double(), x.double() * 1.5)


@two_gpus
def test_two_gpus_gluon_matmul_on_cuda1(on_gpu0):
    """The sample matmul on cuda:1 with cuda:0 current, three launches (the third calls the
    compiled kernel directly), each right; on an sm_90 cuda:1 they run the Gluon variant."""
    from tilecraft.library import matmul_kernel
    kernel = matmul_kernel.replace_hints()
    a, b, c, want, grid = gluon_matmul_case("cuda:1")
    for _ in range(3):
        c.fill_(float("nan"))
        ct.launch(torch.cuda.current_stream(1), grid, kernel, (a, b, c, 128, 256, 64))
        torch.cuda.synchronize(1)
        torch.testing.assert_close(c.double(), want, rtol=1e-2, atol=1e-2 * math.sqrt(a.shape[1]))
        assert torch.cuda.current_device() == 0
    if torch.cuda.get_device_capability(1) == (9, 0):
        assert gluon_variant_launches(kernel) == 3
