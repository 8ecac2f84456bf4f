"""tilecraft's C launcher and its quick launchers (backends/triton/native_launch.py), built and
run on the CPU against a stand-in CUDA driver that records each launch (cuda_stub.py).

The native quick launcher must do what the generated Python one does (`fastpath.quick_launcher`
without `FusedLaunch.native`): launch exactly the argument lists of its specialization, with the
parameters `DirectLauncher.launch` packs, and refuse, having launched nothing, everything else;
so each case runs both and compares, besides checking the launches themselves. Each test taking
`driver` runs twice: the launcher reading torch tensors through Python, and through the C++
tensor reader (tensor_reader.py; built once per machine, cached: ~11 s the first time)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import shutil
import struct
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

import cuda_stub
import tilecraft as ct
from tilecraft import knobs
from tilecraft.backends.base import CHECK_PATH, FusedLaunch
from tilecraft.runtime.fastpath import fast_key, quick_launcher

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if cuda_stub.missing():
    pytest.skip(f"the C launcher cannot be built here: {cuda_stub.missing()}", allow_module_level=True)

from tilecraft.backends.triton import launching, native_launch, tensor_reader  # noqa: E402

LIMIT = 2**24 - 1
ConstInt = ct.Constant[int]
ConstFloat = ct.Constant[float]


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """(launcher module, stand-in driver), the driver reset for each test that takes `driver`."""
    return cuda_stub.build(tmp_path_factory.mktemp("native-launch"))


@pytest.fixture(params=["python reads", "tensor reader"])
def driver(request, stub):
    """The stand-in driver, reset; the launcher reading tensors through Python or the reader."""
    module = stub[0]
    if request.param == "python reads":
        module.use_reader(None)
    elif not (os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")):
        pytest.skip("no C++ compiler for the tensor reader")
    else:
        assert tensor_reader.attach(module, wait=True), "no tensor reader: TILECRAFT_TENSOR_READER=debug says why"
    stub[1].set()
    yield stub[1]
    stub[1].set()
    module.use_reader(None)


@ct.kernel
def scale_shift(X, Y, s, n, T: ConstInt, F: ConstFloat):
    t = ct.load(X, index=(ct.bid(0), 0), shape=(1, T))
    ct.store(Y, index=(ct.bid(0), 0), tile=t * s + n * F)


def _args(s=2.5, n=7, T=32, F=0.5):
    return torch.randn(6, 40)[:, 3:35], torch.full((6, 32), float("nan")), s, n, T, F


def _pair(dl, kernel, args, fused=None):
    """(generated Python, native) quick launchers of `dl`'s specialization (of `fused`, a fused
    launch made otherwise, where given)."""
    fused = dl.fused_launch() if fused is None else fused
    made = [quick_launcher(kernel.plan, args, knobs.BACKEND, knobs.BACKEND.raw(), launch, LIMIT)
            for launch in (FusedLaunch(fused.expr, fused.env), fused)]
    assert type(made[0]).__name__ == "function" and type(made[1]).__name__ == "Quick"
    return made


def _outcome(quick, driver, stream, grid, args):
    """What one call did: (result or exception type, the launch it made or None)."""
    before = driver.launches
    try:
        result = quick(stream, grid, args)
    except Exception as exc:  # noqa: BLE001 - compared between the two launchers
        result = type(exc)
    return result, driver.last() if driver.launches != before else None


class _StreamProtocol:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_a_launch_packs_what_direct_launcher_packs(stub, driver):
    """The native quick launcher's launch equals `DirectLauncher.launch`'s for arguments of the
    same specialization, with their own addresses and scalars, the grid filled out to three."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    _, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    for stream, grid, grid3 in ((0, (6,), (6, 1, 1)), (7, (2, 3), (2, 3, 1)), (_StreamProtocol(9), (1, 2, 3), (1, 2, 3))):
        assert native(stream, grid, (x, y, -1.25, -3, 32, 0.5)) is True
        got = driver.last()
        dl.launch(grid3, (x, y, -1.25, -3), stream)
        assert driver.last() == got
        assert got.grid == grid3 and got.stream == launching.stream_handle(stream) and got.function == 0x5EED
    baked = [v for v, letter in zip(dl._flatten(x, y, -1.25, -3), dl._native_head[3].decode()) if letter != "x"]
    assert got.values == (*baked, 0, 0)  # no scratch memory
    assert {x.data_ptr(), y.data_ptr(), -1.25, -3} <= set(got.values)
    assert not got.dependent


def test_a_dependent_kernel_launches_as_a_programmatic_dependent_launch(stub, driver):
    """A kernel compiled with Triton's `launch_pdl` (split-K's FINISH) launches through
    `cuLaunchKernelEx` with programmatic stream serialization, from `DirectLauncher.launch` and
    from its quick launcher alike, packing what a plain launch packs."""
    args = _args()
    plain = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0], dependent=True)
    _, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    plain.launch((6, 1, 1), (x, y, 1.5, 2), 7)
    want = driver.last()
    dl.launch((6, 1, 1), (x, y, 1.5, 2), 7)
    assert driver.last() == dataclasses.replace(want, dependent=True)
    assert native(7, (6,), (x, y, 1.5, 2, 32, 0.5)) is True and driver.last() == dataclasses.replace(want, dependent=True)


def test_it_refuses_and_accepts_exactly_what_the_python_quick_path_does(stub, driver, monkeypatch):
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    python, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = args[0].clone()[:, :32].contiguous(), torch.empty(6, 32)  # contiguous: other strides than x
    same = (torch.randn(6, 40)[:, 3:35], torch.empty(6, 32))
    lists = [(*same, 1.5, 4, 32, 0.5), (*same, 2.5, 2**31 - 1, 32, 0.5), (*same, 2.5, -2**31 + 1, 32, 0.5),
             (x, y, 2.5, 7, 32, 0.5), (same[0].double(), y, 2.5, 7, 32, 0.5), (same[0], torch.empty(6, 33), 2.5, 7, 32, 0.5),
             (same[0], torch.empty(6, 33)[:, 1:], 2.5, 7, 32, 0.5), (same[0], torch.empty(6, 32, device="meta"), 2.5, 7, 32, 0.5),
             (*same, 2, 7, 32, 0.5), (*same, True, 7, 32, 0.5), (*same, 2.5, 7.0, 32, 0.5), (*same, 2.5, True, 32, 0.5),
             (*same, 2.5, 2**31, 32, 0.5), (*same, 2.5, -2**31 - 1, 32, 0.5), (*same, 2.5, 2**70, 32, 0.5),
             (*same, 2.5, 48, 32, 0.5), (*same, 2.5, -2**31, 32, 0.5), (*same, 2.5, 0, 32, 0.5),  # multiples of 16: another Triton specialization
             (*same, 2.5, 7, 16, 0.5), (*same, 2.5, 7, True, 0.5), (*same, 2.5, 7, 32, -0.5), (*same, 2.5, 7, 32, 1),
             (same[0].numpy(), y, 2.5, 7, 32, 0.5), [*same, 2.5, 7, 32, 0.5], (*same, 2.5, 7, 32), (*same, 2.5, 7, 32, 0.5, 1),
             ()]
    grids = [(6,), (6, 1), (2, 3, 1), (LIMIT,), (LIMIT, LIMIT, LIMIT), (0,), (1, 0), (), (1, 1, 1, 1), (-1,),
             (LIMIT + 1,), (np.int64(2),), (True,), (2.0,), (2**64,), 2, [2], None]
    streams = [0, 7, _StreamProtocol(11), None, object(), -1]
    calls = [(0, (6,), a) for a in lists] + [(0, g, (*same, 2.5, 7, 32, 0.5)) for g in grids]
    calls += [(s, (6,), (*same, 2.5, 7, 32, 0.5)) for s in streams]
    launched = set()
    for i, call in enumerate(calls):
        want = _outcome(python, driver, *call)
        assert _outcome(native, driver, *call) == want, call
        if want[1] is not None:
            launched.add(i)
    assert launched == {0, 1, 2, *(len(lists) + g for g in range(5)), *(len(lists) + len(grids) + s for s in range(3))}
    assert _outcome(native, driver, *calls[-2])[0] is TypeError  # an unsupported stream: stream_handle's error
    assert _outcome(native, driver, *calls[-1])[0] is OverflowError  # a negative handle
    monkeypatch.setenv(knobs.BACKEND.name, "interpreter")  # the backend knob it was made under changed
    assert _outcome(native, driver, *calls[0]) == _outcome(python, driver, *calls[0]) == (False, None)


def test_a_launch_made_for_one_grid_launches_that_grid_only_as_its_own(stub, driver):
    """A fused launch made for one grid (a kernel specialized for it, such as the Gluon variant's,
    which runs the user's grid on another: `fused_launch`'s `grid`) launches the grid it was made
    for, as given in any length, on its own grid, and declines every other, as the Python quick
    path does."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    one_grid = launching.fused_launch(dl._launcher, dl._fused_args, grid=((6, 2, 1), (3, 1, 1)))
    made = _pair(dl, scale_shift, args, one_grid)
    driver.set(types=dl._native_head[3])
    for grid in ((6, 2), (6, 2, 1), (6,), (6, 1, 1), (3,), (2, 6), (6, 2, 2), (12,)):
        outcomes = [_outcome(quick, driver, 7, grid, args) for quick in made]
        assert outcomes[0] == outcomes[1], grid
        result, launch = outcomes[0]
        assert result is (grid in ((6, 2), (6, 2, 1))), grid
        assert launch is None or (launch.grid == (3, 1, 1) and launch.stream == 7)


def test_without_a_context_or_with_a_launch_error(stub, driver):
    """Both quick launchers decline, launching nothing, where no CUDA context is current, or
    another than the one the kernel was loaded in (another device's: the runtime then makes
    the arrays' device current, runtime/devices.py; they once launched the kernel of one
    device's context in another's)."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    assert dl._native_head[4] == cuda_stub.CONTEXT  # the context current when it was made
    for quick in _pair(dl, scale_shift, args):
        before = driver.launches
        for context in (False, cuda_stub.CONTEXT + 0x100):
            driver.set(context=context)
            assert quick(0, (6,), args) is False and driver.launches == before
        driver.set()
        assert quick(0, (6,), args) is True and driver.launches == before + 1
        driver.set(error=700)
        with pytest.raises(RuntimeError, match="cuLaunchKernel: stub error"):
            quick(0, (6,), args)


def test_no_references_are_leaked(stub, driver):
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    _, native = _pair(dl, scale_shift, args)
    stream, handle, other = _StreamProtocol(3), int("1099511627783"), (args[0].double(), *args[1:])
    sparse, unsupported = torch.randn(6, 32).to_sparse(), object()  # errors: data_ptr, stream_handle
    failing = [(unsupported, (6,), args), (0, (6,), (sparse, *args[1:])), (2**64, (6,), args)]
    watched = (*args, stream, handle, other[0], sparse, unsupported)

    def calls(n):
        for _ in range(n):
            assert native(handle, (6,), args) and native(stream, (6, 1), args) and not native(0, (6,), other)
            assert not native(None, (6,), args) and not native(0, (0,), args)
            for call in failing:
                with pytest.raises((TypeError, RuntimeError, OverflowError)):
                    native(*call)
    calls(1)  # first calls may cache what holds an argument (the small int 32 is the interpreter's: shared)
    counts = [sys.getrefcount(x) for x in watched]
    calls(200)
    assert [sys.getrefcount(x) for x in watched] == counts
    tracemalloc.start()  # and no new objects (addresses, shapes, ...) kept
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            native(0, (6,), args)
        assert tracemalloc.get_traced_memory()[0] - before < 16_000
    finally:
        tracemalloc.stop()


def test_numpy_arrays_are_read_along_their_paths(stub, driver):
    """The checks are data (`QuickChecks`): a NumPy array's address and writable flag are read
    along attribute paths (`ctypes.data`, `flags.writeable`), as the generated Python reads them."""
    module = stub[0]
    launcher = native_launch.Native(module.launch, (0x77, 128, 0, b"pxi", cuda_stub.CONTEXT, False), module)
    native = functools.partial(native_launch.quick, launcher, ("p0", "3", "a1"),
                               stream=(_Handle, "handle", launching.stream_handle))
    made = []
    fused = FusedLaunch("_launch(gx, gy, gz, stream, *_head, p0, 3, a1)",
                        {"_launch": module.launch, "_head": launcher.head}, lambda checks: made.append(checks) or native(checks))
    a = np.zeros(16, np.float32)
    quick = quick_launcher((False, False), (a, 5), knobs.BACKEND, knobs.BACKEND.raw(), fused, LIMIT)
    python = quick_launcher((False, False), (a, 5), knobs.BACKEND, knobs.BACKEND.raw(),
                            FusedLaunch(fused.expr, fused.env), LIMIT)
    assert {c[2] for c in made[0].checks if c[0] == CHECK_PATH} >= {(("flags", False), ("writeable", False))}
    driver.set(types=launcher.head[3])
    b = np.ones(16, np.float32)
    readonly = np.ones(16, np.float32)
    readonly.setflags(write=False)
    for args, launches in (((b, -9), True), ((readonly, 5), False), ((np.zeros(17, np.float32)[1:], 5), False),
                           ((b.astype(np.float64), 5), False), ((torch.ones(16), 5), False)):
        assert _outcome(quick, driver, 0, (2,), args) == _outcome(python, driver, 0, (2,), args)
        assert (_outcome(quick, driver, 0, (2,), args)[1] is not None) is launches
    got = driver.last()
    assert got.values == (b.ctypes.data, -9, 0, 0) and got.function == 0x77
    assert quick(_Handle(), (1,), (b, 1)) and driver.last().stream == 12345  # without stream_handle


class _Handle:
    """A stream type the launcher reads the handle of itself (as it does torch's streams)."""

    handle = 12345


def test_the_launcher_packs_each_type_by_its_letter(stub, driver):
    launch, C = stub[0].launch, cuda_stub.CONTEXT
    driver.set(types=b"bBhHiIqQfdpx")
    values = (-5, 250, -300, 60000, -70000, 4_000_000_000, -2**40, 2**63 + 5, 1.5, 2.25, 0xDEAD0)
    assert launch(2, 3, 4, 9, 0xF00, 128, 64, b"bBhHiIqQfdpx", C, False, *values, "not passed") is True
    got = driver.last()
    assert (got.grid, got.block, got.shared, got.stream, got.function) == ((2, 3, 4), (128, 1, 1), 64, 9, 0xF00)
    assert got.values == (*values, 0, 0)
    before = driver.launches
    assert launch(0, 1, 1, 0, 0xF00, 128, 0, b"i", C, False, 1) is True and driver.launches == before  # an empty grid
    driver.set(context=False)
    assert launch(1, 1, 1, 0, 0xF00, 128, 0, b"i", C, False, 1) is False and driver.launches == before
    driver.set(context=C + 0x100)  # another device's context is current: not the kernel's
    assert launch(1, 1, 1, 0, 0xF00, 128, 0, b"i", C, False, 1) is False and driver.launches == before
    driver.set(context=False)
    with pytest.raises(TypeError, match="2 kernel arguments for 1 types"):
        launch(1, 1, 1, 0, 0xF00, 128, 0, b"i", C, False, 1, 2)
    driver.set()  # a context again: values are converted only then
    for letter, (low, high) in {"b": (-2**7, 2**7), "B": (0, 2**8), "h": (-2**15, 2**15), "H": (0, 2**16),
                                "i": (-2**31, 2**31), "I": (0, 2**32), "q": (-2**63, 2**63), "Q": (0, 2**64)}.items():
        for value in (low - 1, high, high + 2**70):  # never truncated: Triton's launcher raises on them too
            with pytest.raises(OverflowError):
                launch(1, 1, 1, 0, 0xF00, 128, 0, letter.encode(), C, False, value)
    assert driver.launches == before


def test_a_malformed_table_is_refused(stub):
    module = stub[0]
    base = dict(env={}, knob=b"K", raw=None, types=(int,), addresses=(None,), checks=(), grid_limit=LIMIT,
                stream_type=int, stream_attr="real", stream_handle=int, function=1,
                context=cuda_stub.CONTEXT, threads=32, shared=0, dependent=False, params=(("i", 0, 0, None),), encode=None, grid=None)
    assert type(module.quick(*base.values())).__name__ == "Quick"
    array = dict(base, types=(torch.Tensor,), addresses=((0, (("data_ptr", True),)),), encode=lambda d, a: b"\0" * 128)
    assert type(module.quick(*{**array, "params": (("m", 3, 0, 0),)}.values())).__name__ == "Quick"
    for change in ({"checks": ((9, 0, None, None),)}, {"checks": ((4, 0, 15, 0),)}, {"checks": ((0, 3, None, 1),)},
                   {"params": (("i", 0, 5, None),)}, {"params": (("i", 1, 0, None),)}, {"params": (("x", 0, 0, None),)},
                   {"checks": ((3, 0, (), 1),)}, {"grid": (1, 2)}, {"grid": ((1, 1), (1, 1, 1))},
                   {"grid": ((1, 1, 1), (1.0, 1, 1))}):
        with pytest.raises((ValueError, TypeError)):
            module.quick(*{**base, **change}.values())
    for change in ({"params": (("i", 3, 0, 0),)}, {"params": (("m", 3, 0, 16),)}, {"params": (("m", 3, 1, 0),)},
                   {"params": (("m", 3, 0, 0),), "encode": None}, {"params": (("m", 3, 0, 0),) * 17}):
        # a map: only as 'm', of one of 16 descriptors, of an array, with `encode`, at most 16 of them
        with pytest.raises((ValueError, TypeError)):
            module.quick(*{**array, **change}.values())


class _Int(int):
    pass


class _Float(float):
    pass


class _Seven(enum.IntEnum):
    SEVEN = 7


class _Tensor(torch.Tensor):
    pass


def _bits(outcome):
    """`_outcome` with the launch's values as bits (NaN parameters compare equal)."""
    result, launch = outcome
    if launch is None:
        return outcome
    return result, (launch.grid, launch.stream, tuple(struct.pack("<d", v) if type(v) is float else v for v in launch.values))


def test_subclasses_odd_values_and_odd_tensors_as_the_python_quick_path(stub, driver):
    """More differential cases: subclasses of int, float and Tensor, an IntEnum (as a scalar, a
    Constant, a grid item and a stream), NaN, -0.0 and huge floats, expanded, empty and sparse
    tensors, and a tensor whose address cannot be read next to a scalar out of range (the
    Python refuses on the range before it reads any address)."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    python, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    sparse = torch.randn(6, 32).to_sparse()
    lists = [(x, y, 2.5, _Seven.SEVEN, 32, 0.5), (x, y, 2.5, _Int(7), 32, 0.5), (x, y, _Float(2.5), 7, 32, 0.5),
             (x, y, 2.5, 7, _Int(32), 0.5), (x, y, 2.5, 7, 32, _Float(0.5)), (x, y, float("nan"), 7, 32, 0.5),
             (x, y, -0.0, 7, 32, 0.5), (x, y, 1e300, 7, 32, 0.5), (x, y, 2.5, 7, 32, float("nan")),
             (x, y, 2.5, 7, 32, -0.0), (torch.nn.Parameter(x.clone()), y, 2.5, 7, 32, 0.5),
             (x.as_subclass(_Tensor), y, 2.5, 7, 32, 0.5), (x, torch.empty(32).expand(6, 32), 2.5, 7, 32, 0.5),
             (x, torch.empty(0, 32), 2.5, 7, 32, 0.5), (x, y.t().contiguous().t(), 2.5, 7, 32, 0.5),
             (sparse, y, 2.5, 7, 32, 0.5), (sparse, y, 2.5, 2**31, 32, 0.5), (sparse, y, 2.5, -2**31 - 1, 32, 0.5)]
    calls = [(0, (6,), a) for a in lists]
    calls += [(s, (6,), (x, y, 2.5, 7, 32, 0.5)) for s in (True, _Seven.SEVEN, _Int(5), 2**64 - 1, 2**64)]
    calls += [(0, g, (x, y, 2.5, 7, 32, 0.5)) for g in ((_Seven.SEVEN,), (_Int(2),), (2, _Seven.SEVEN), (2, 3, True))]
    launched = []
    for i, call in enumerate(calls):
        want = _bits(_outcome(python, driver, *call))
        assert _bits(_outcome(native, driver, *call)) == want, (i, call)
        launched += [i] if want[1] is not None else []
    assert launched == [5, 6, 7, *range(len(lists), len(lists) + 4)]  # Constants NaN and -0.0 differ from 0.5
    assert _outcome(python, driver, *calls[len(lists) - 2]) == (False, None)  # not data_ptr's RuntimeError


class _Counting(torch.overrides.TorchFunctionMode):
    """A torch function mode counting the calls that reach it (the tensors' Python reads)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def test_tensors_the_reader_leaves_to_python_and_the_negative_bit(stub, driver):
    """Where the reader must not answer, or answers only in part, the outcome is still the
    Python quick path's: a lazy negation of the same layout (refused: the full path refuses it),
    a 9-d tensor (no items read), a meta tensor (address 0), a tensor whose address torch refuses
    to give, a Parameter; under a torch function mode, the same calls reach the mode."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    python, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    guarded = torch.empty(6, 32)
    torch._C._set_throw_on_mutable_data_ptr(guarded)
    tensors = [torch._neg_view(x), torch.empty(6, 32, 1, 1, 1, 1, 1, 1, 1).squeeze(-1), torch.empty(6, 32, device="meta"),
               guarded, torch.nn.Parameter(y.clone()), y]
    for tensor in tensors:
        call = (0, (6,), (x, tensor, 2.5, 7, 32, 0.5))
        assert _outcome(native, driver, *call) == _outcome(python, driver, *call), tensor.shape
    assert _outcome(native, driver, 0, (6,), (x, guarded, 2.5, 7, 32, 0.5))[0] is RuntimeError
    assert _outcome(native, driver, 0, (6,), (torch._neg_view(x), y, 2.5, 7, 32, 0.5)) == (False, None)
    for tensor in (y, torch.empty(6, 33)):
        outcomes = []
        for quick in (python, native):
            with _Counting() as mode:
                outcomes.append((_outcome(quick, driver, 0, (6,), (x, tensor, 2.5, 7, 32, 0.5)), mode.calls))
        assert outcomes[0] == outcomes[1] and outcomes[0][1] > 0


def test_the_reader_reads_torch_not_python_attributes(stub, driver, request):
    """The reader takes a tensor's address and items from torch (ATen), not through its Python
    attributes: instance attributes shadowing `data_ptr`, `stride` and `is_neg` show which one
    read them (the one place their outcomes may differ; nothing but a test sets them)."""
    args = _args()
    dl = cuda_stub.direct_launcher(scale_shift, args, stub[0])
    _, native = _pair(dl, scale_shift, args)
    driver.set(types=dl._native_head[3])
    x, y = torch.randn(6, 40)[:, 3:35], torch.empty(6, 32)
    through_python = request.node.callspec.params["driver"] == "python reads"
    y.data_ptr = lambda: 0xBAD0
    assert native(0, (6,), (x, y, 2.5, 7, 32, 0.5)) is True
    assert (0xBAD0 in driver.last().values) is through_python
    assert (torch.Tensor.data_ptr(y) in driver.last().values) is not through_python
    for name, value in (("stride", (0, 0)), ("is_neg", True)):
        z = torch.empty(6, 32)
        setattr(z, name, lambda value=value: value)
        assert native(0, (6,), (x, z, 2.5, 7, 32, 0.5)) is not through_python, name


def _tensors():
    """Torch tensors of many kinds and layouts: views, 0-d, empty, expanded, 8-d and 9-d,
    channels-last, other dtypes, negative-bit, conjugate, lazily cloned, requiring grad,
    inference, Parameter, meta, sparse and nested ones."""
    x = torch.randn(4, 6)
    with torch.inference_mode():
        inference = torch.randn(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # nested tensors are a prototype
        nested = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
    return [x, x[:, 1:5], x.t(), x.view(-1)[5:], torch.tensor(3.0), torch.tensor(3.0, dtype=torch.float64),
            torch.empty(0, 5), torch.empty(0), torch.empty(5, 0), torch.randn(5).expand(3, 5), torch.empty([1] * 8),
            torch.empty([2] + [1] * 8), torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
            torch.randn(2, 3, 4, 5), torch.zeros(4, 6, dtype=torch.bool), torch.zeros(4, 6, dtype=torch.uint16),
            torch._neg_view(x), torch.randn(3, dtype=torch.cfloat).conj(), torch.view_as_real(torch.randn(3, dtype=torch.cfloat)),
            torch._lazy_clone(x), torch.randn(4, 6, requires_grad=True), torch.randn(4, 6, requires_grad=True) * 2,
            inference, torch.nn.Parameter(torch.randn(4, 6)), torch.empty(4, 6, device="meta"),
            torch.empty(1).expand(2**31, 1), torch.randn(4, 6).to_sparse(), nested]


def _key(tensor):
    """The fast key of `tensor` as one array argument (Python reads), None where reading it raises."""
    try:
        return fast_key((False,), (tensor,))
    except RuntimeError:
        return None


def test_each_tensor_launches_only_specializations_of_its_own_key(stub, driver):
    """Quick launchers specialized for each tensor of `_tensors`, called with each of them: a
    call launches exactly when the tensor has the launcher's fast key (and type), and otherwise
    refuses or raises as the Python quick path does, its own tensor included: what the reader
    reads equals the Python reads, item by item, for every kind of tensor it reads."""
    module = stub[0]
    launcher = native_launch.Native(module.launch, (0x77, 128, 0, b"p", cuda_stub.CONTEXT, False), module)
    fused = FusedLaunch("_launch(gx, gy, gz, stream, *_head, p0)", {"_launch": module.launch, "_head": launcher.head},
                        functools.partial(native_launch.quick, launcher, ("p0",),
                                          stream=(_Handle, "handle", launching.stream_handle)))
    tensors = _tensors()
    keys = [_key(t) for t in tensors]
    driver.set(types=b"p")
    launchers = 0
    for s, key in zip(tensors, keys):
        if key is None:
            continue
        python, native = (quick_launcher((False,), (s,), knobs.BACKEND, knobs.BACKEND.raw(), launch, LIMIT)
                          for launch in (FusedLaunch(fused.expr, fused.env), fused))
        assert type(native).__name__ == "Quick"
        launchers += 1
        for t, other in zip(tensors, keys):
            want = _outcome(python, driver, 0, (1,), (t,))
            assert _outcome(native, driver, 0, (1,), (t,)) == want, (s.shape, t.shape)
            assert (want[1] is not None) is (other is not None and other[0] == key[0] and type(t) is type(s))
            if want[1] is not None:
                assert want[1].values == (t.data_ptr(), 0, 0)
    assert launchers == len(tensors) - 2  # all but the sparse and the nested one
