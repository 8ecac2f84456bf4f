"""The backend registry: a backend registered under a new name launches kernels by that name
(launch option and TILECRAFT_BACKEND), the defaults follow the arrays' device, bad names and
devices are refused, and repeat launches convert arrays for the backend on the fast path too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends import registry
from tilecraft.backends.arrays import as_numpy
from tilecraft.backends.base import BackendKind
from tilecraft.backends.interpreter import InterpreterBackend
from tilecraft.backends.registry import CPU, CUDA, BackendSpec


def double_fn(a, b):
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(8,)) * 2)


class ToyBackend(InterpreterBackend):
    """The interpreter under another name, counting what it compiles."""

    def __init__(self) -> None:
        self.compiled = 0

    def compile(self, fn, facts=()):
        self.compiled += 1
        return super().compile(fn, facts)


@pytest.fixture
def toy():
    spec = registry.register(BackendSpec("toy", CPU, ToyBackend, as_numpy))
    yield spec
    registry.unregister("toy")


def test_a_registered_backend_launches_by_name(toy, monkeypatch):
    k = ct.kernel(double_fn)
    a = np.arange(16, dtype=np.float32)
    for _ in range(2):  # the second launch takes the fast path
        b = np.zeros(16, np.float32)
        ct.launch(None, (2,), k, (a, b), backend="toy")
        np.testing.assert_array_equal(b, a * 2)
    assert toy.backend.compiled == 1 and [key.backend for key in k.variants] == ["toy"]
    monkeypatch.setenv("TILECRAFT_BACKEND", "toy")
    b = np.zeros(16, np.float32)
    ct.launch(None, (2,), ct.kernel(double_fn), (a, b))
    np.testing.assert_array_equal(b, a * 2)
    assert toy.backend.compiled == 2


def test_a_backend_variable_change_takes_effect_on_the_next_launch(toy, monkeypatch):
    """TILECRAFT_BACKEND is part of the fast path's key: changed between launches of the same
    arguments, the next launch follows it (and an unknown name fails there, as on a first launch)."""
    monkeypatch.delenv("TILECRAFT_BACKEND", raising=False)
    k = ct.kernel(double_fn)
    a = np.arange(16, dtype=np.float32)

    def launch() -> None:
        b = np.full(16, np.nan, np.float32)
        ct.launch(None, (2,), k, (a, b))
        np.testing.assert_array_equal(b, a * 2)
    launch()
    launch()
    monkeypatch.setenv("TILECRAFT_BACKEND", "toy")
    launch()
    assert toy.backend.compiled == 1 and [key.backend for key in k.variants] == ["interpreter", "toy"]
    monkeypatch.setenv("TILECRAFT_BACKEND", "tpu")
    with pytest.raises(ValueError, match="TILECRAFT_BACKEND = 'tpu' is not a backend"):
        launch()
    monkeypatch.delenv("TILECRAFT_BACKEND")
    with monkeypatch.context() as m:  # back to the first setting: its fast entry, no describe
        m.setattr(type(k), "describe", lambda *_: pytest.fail("full path taken"))
        launch()
    assert toy.backend.compiled == 1 and len(k.variants) == 2


def test_unknown_backends_are_refused_with_the_registered_names(toy, monkeypatch):
    k = ct.kernel(double_fn)
    args = (np.zeros(16, np.float32), np.zeros(16, np.float32))
    with pytest.raises(ValueError, match=r"backend = 'tpu' is not a backend; choose one of "
                                         r"interpreter, triton, triton-interpret, toy$"):
        ct.launch(None, (2,), k, args, backend="tpu")
    monkeypatch.setenv("TILECRAFT_BACKEND", "tpu")
    with pytest.raises(ValueError, match="TILECRAFT_BACKEND = 'tpu' is not a backend"):
        ct.launch(None, (2,), k, args)


def test_defaults_follow_the_device_and_backend_kinds_still_work():
    assert registry.default_for(CPU).name == "interpreter" and registry.default_for(CUDA).name == "triton"
    k = ct.kernel(double_fn)
    a, b = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    ct.launch(None, (2,), k, (a, b), backend=BackendKind.INTERPRETER)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(ValueError, match=r"The triton backend needs CUDA arrays; these arrays are on CPU "
                                         r"\(backends for CPU arrays: interpreter, triton-interpret\)"):
        ct.launch(None, (2,), k, (a, b), backend="triton")


def test_registration_rejects_a_taken_name_and_a_second_default():
    with pytest.raises(ValueError, match="'interpreter' is already registered"):
        registry.register(BackendSpec("interpreter", CPU, ToyBackend, as_numpy))
    with pytest.raises(ValueError, match=r"cpu arrays already have a default backend \(interpreter\)"):
        registry.register(BackendSpec("toy", CPU, ToyBackend, as_numpy, default=True))
    assert registry.get("toy") is None


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_repeat_launches_convert_arrays_for_the_backend(backend):
    """Arrays of the other kind (torch tensors on the interpreter, NumPy arrays on Triton's
    interpreter) are converted on the fast path as on the first launch."""
    torch = pytest.importorskip("torch")
    k = ct.kernel(double_fn)
    a = np.arange(16, dtype=np.float32)
    for _ in range(2):
        b = np.zeros(16, np.float32)
        args = (torch.from_numpy(a), torch.from_numpy(b)) if backend == "interpreter" else (a, b)
        ct.launch(None, (2,), k, args, backend=backend)
        np.testing.assert_array_equal(b, a * 2)
    assert len(k.fast) == 1


def test_interpreter_launches_do_not_import_triton():
    code = ("import sys, numpy as np, tilecraft as ct\n"
            "from tests.runtime.test_backends import double_fn\n"
            "a, b = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)\n"
            "ct.launch(None, (2,), ct.kernel(double_fn), (a, b))\n"
            "assert (b == 2 * a).all() and 'triton' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
