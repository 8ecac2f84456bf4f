"""The quick path of a cached launch (`fastpath.quick_launcher`, tried first by `ct.launch`): one
generated function per specialization that launches only when the arguments have that
specialization's fast key exactly, and otherwise does nothing, so the existing path runs (and
produces every error). The backend's part is a stand-in `FusedLaunch` here; the Triton
backend's (`DirectLauncher.fused_launch`) is checked against `DirectLauncher.launch`."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft import knobs
from tilecraft.backends.base import FusedLaunch
from tilecraft.backends.interpreter.backend import InterpretedKernel
from tilecraft.errors import TileArgumentError
from tilecraft.runtime.fastpath import fast_key, quick_launcher

torch = pytest.importorskip("torch")

LIMIT = 2**24 - 1


def _recorder(result=True):
    calls = []
    launch = FusedLaunch("_record(gx, gy, gz, stream, p0, a0, a1)",
                         {"_record": lambda *xs: calls.append(xs) or result})
    return calls, launch


def _quick(args, plan=(False, False, True), result=True):
    calls, launch = _recorder(result)
    return calls, quick_launcher(plan, args, knobs.BACKEND, knobs.BACKEND.raw(), launch, LIMIT)


def test_launches_arguments_of_its_key_with_each_address_and_the_grid_normalized():
    t, u = torch.zeros(16), torch.zeros(16)
    calls, quick = _quick((t, 3, 8))
    for grid, grid3 in (((5,), (5, 1, 1)), ((2, 3), (2, 3, 1)), ((2, 3, 4), (2, 3, 4)), ((LIMIT,), (LIMIT, 1, 1))):
        assert quick(7, grid, (u, 4, 8))
        assert calls.pop() == (*grid3, 7, u.data_ptr(), u, 4)


def test_anything_but_the_exact_key_is_declined_without_launching(monkeypatch):
    t = torch.zeros(16)
    args = (t, 3, 8)
    calls, quick = _quick(args)
    others = [(t[:8], 3, 8), (t[::2], 3, 8), (t[1:9].clone()[:0], 3, 8), (t[1:], 3, 8), (t.double(), 3, 8),
              (torch.zeros(16, device="meta"), 3, 8), (t, 3.0, 8), (t, True, 8), (t, 2**40, 8), (t, 3, 9),
              (t, 3, 8.0), (t, 3, True), (t.numpy(), 3, 8), [t, 3, 8], (t, 3), (t, 3, 8, 1)]
    assert fast_key((False, False, True), (t[1:], 3, 8))[0][4] != 0  # a misaligned view: its own key
    for other in others:
        assert not quick(0, (1,), other), other
    for grid in ((0,), (1, 0), (), (1, 1, 1, 1), (-1,), (LIMIT + 1,), (np.int64(2),), (True,), (2.0,), 2, [2], None):
        assert not quick(0, grid, args), grid
    assert not quick(None, (1,), args)
    monkeypatch.setenv(knobs.BACKEND.name, "interpreter")  # the knob it was made under changed
    assert not quick(0, (1,), args)
    monkeypatch.delenv(knobs.BACKEND.name)
    assert not calls and quick(0, (1,), args) and len(calls) == 1


def test_a_declining_backend_launch_is_passed_on():
    calls, quick = _quick((torch.zeros(4), 1, 2), result=False)
    assert not quick(0, (1,), (torch.zeros(4), 1, 2)) and len(calls) == 1


def scale_fn(a, b, F: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(8,), padding_mode=ct.PaddingMode.ZERO) * F)


class _Fused:
    """The interpreter's kernel with a fused launch that counts its launches (`ran`) and runs
    them as `launch` would, or declines (`accept` False)."""

    def __init__(self, kernel: InterpretedKernel) -> None:
        self.kernel, self.ran, self.accept, self.launches = kernel, 0, True, 0

    def launch(self, grid, args, stream=None, *, dependent=False):
        self.launches += 1
        self.kernel.launch(grid, args, stream, dependent=dependent)

    def run(self, gx, gy, gz, *args):
        if not self.accept:
            return False
        self.ran += 1
        self.kernel.launch((gx, gy, gz), args, None)
        return True

    def fused_launch(self) -> FusedLaunch:
        return FusedLaunch("_run(gx, gy, gz, a0, a1)", {"_run": self.run})


@pytest.fixture
def fused(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(knobs.BACKEND.name, raising=False)
    made: list[_Fused] = []
    monkeypatch.setattr(InterpretedKernel, "specialize", lambda self, args: made.append(_Fused(self)) or made[-1])
    return made


def _check(k, a, factor=3, grid=(3,), **kw):
    b = np.full(a.shape, np.nan, np.float32)
    ct.launch(0, grid, k, (a, b, factor), **kw)
    np.testing.assert_allclose(b, a * factor, rtol=1e-6)


def test_ct_launch_takes_the_quick_path_for_the_last_specialization_only(fused, monkeypatch):
    k = ct.kernel(scale_fn)
    a = np.random.default_rng(0).standard_normal(20).astype(np.float32)
    _check(k, a)
    (first,) = fused
    assert k.quick is not None and first.ran == 0
    with monkeypatch.context() as m:
        m.setattr(type(k), "fast_key", lambda *x: pytest.fail("the quick path declined"))
        _check(k, a.copy())
        _check(k, a.copy(), grid=(3, 1))
    assert first.ran == 2 and first.launches == 0
    b = np.random.default_rng(1).standard_normal(12).astype(np.float32)
    _check(k, b, grid=(2,))  # another shape: the full path, then its own quick path
    _check(k, b, grid=(2,))
    _check(k, a, factor=4)  # another Constant likewise
    _check(k, a, factor=4)
    assert [f.ran for f in fused] == [2, 1, 1] and not any(f.launches for f in fused)
    _check(k, a)  # the first specialization again: the fast path, then its quick path again
    _check(k, a)
    assert first.launches == 1 and first.ran == 3


def test_what_the_quick_path_declines_takes_the_existing_path(fused):
    k = ct.kernel(scale_fn)
    a = np.random.default_rng(1).standard_normal(20).astype(np.float32)
    _check(k, a)
    f = fused[0]
    _check(k, a, programmatic_dependent_launch=True)  # the full path
    _check(k, a, backend="interpreter")  # its own fast entry, without a quick path
    assert k.quick is None
    _check(k, a, grid=(np.int64(3),))  # the fast path's grid check; the quick path is the last's again
    assert f.launches == 1 and k.quick is not None
    f.accept = False  # e.g. the native launcher without a CUDA context
    _check(k, a)
    assert f.ran == 0 and f.launches == 2
    f.accept = True
    with pytest.raises(ValueError, match="negative"):
        ct.launch(0, (-1,), k, (a, a.copy(), 3))
    with pytest.raises(TypeError, match="grid must be a tuple"):
        ct.launch(0, 3, k, (a, a.copy(), 3))
    with pytest.raises(TileArgumentError, match="read-only"):
        ct.launch(0, (3,), k, (a, _readonly(), 3))
    assert f.ran == 0
    _check(k, a)
    assert f.ran == 1


def _readonly():
    b = np.zeros(20, np.float32)
    b.setflags(write=False)
    return b


def test_a_backend_knob_change_takes_effect_on_the_next_launch(fused, monkeypatch):
    pytest.importorskip("triton")
    k = ct.kernel(scale_fn)
    a = np.random.default_rng(2).standard_normal(20).astype(np.float32)
    _check(k, a)
    monkeypatch.setenv(knobs.BACKEND.name, "triton-interpret")
    _check(k, a)
    assert fused[0].ran == 0 and {key.backend for key in k.variants} == {"interpreter", "triton-interpret"}
