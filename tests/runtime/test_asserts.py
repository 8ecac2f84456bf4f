"""A failed `ct.assert_` raises TileAssertionError (also an AssertionError) with the message
and the assert's location and caret, on every backend; what a failed launch wrote and what
state the process is left in (docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.errors import TileAssertionError, TileError

HERE = os.path.abspath(__file__)


@ct.kernel
def checked_kernel(x, out):
    t = ct.load(x, (ct.bid(0),), (4,))
    ct.store(out, (ct.bid(0),), t + 1.0)
    ct.assert_(t >= 0.0, "negative input")  # ASSERT LINE
    ct.store(out, (ct.bid(0),), t + 2.0)


def _line(marker: str) -> int:
    with open(HERE) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "_line(" not in text)


def nonnegative(t):
    ct.assert_(t >= 0.0, "helper saw a negative")  # HELPER ASSERT
    return t


@ct.kernel
def helper_kernel(x, out):
    t = ct.load(x, (ct.bid(0),), (4,))
    ct.store(out, (ct.bid(0),), nonnegative(t) * 2.0)  # HELPER CALL


@ct.kernel
def two_asserts_kernel(x, out):
    t = ct.load(x, (ct.bid(0),), (4,))
    ct.assert_(t < 100.0, "too large")
    ct.assert_(t >= 0.0, "too small")  # SECOND ASSERT
    ct.store(out, (ct.bid(0),), t)


def inputs(bad_block: int | None = 2) -> np.ndarray:
    x = np.arange(16, dtype=np.float32)
    if bad_block is not None:
        x[4 * bad_block + 1] = -1.0
    return x


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_failed_assert_raises_tile_assertion_error_with_location(dev):
    out = dev.poison(16, np.float32)
    with pytest.raises(TileAssertionError) as info:
        dev.launch((4,), checked_kernel, (dev.put(inputs()), out))
    err = info.value
    assert ct.TileAssertionError is TileAssertionError
    assert isinstance(err, TileError) and isinstance(err, AssertionError)
    line = _line("# ASSERT LINE")
    assert err.loc is not None and (err.loc.file, err.loc.line) == (HERE, line)
    text = str(err).splitlines()
    assert text[0].startswith("Assertion failed") and text[0].rstrip().endswith(
        "negative input" if dev.name == "triton-interpret" else "negative input (block (2, 0, 0))")
    assert text[1] == f'  File "{HERE}", line {line}, column 5, in checked_kernel'
    assert text[2].strip() == 'ct.assert_(t >= 0.0, "negative input")  # ASSERT LINE'
    assert text[3] == "    ^"  # under `ct.assert_`


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_failed_launch_wrote_the_blocks_before_and_the_process_stays_usable(dev):
    """The CPU backends run blocks in order: blocks before the failing one finished, the failing
    block ran up to its assert, later blocks did not run; the next launch works normally."""
    x = inputs(bad_block=2)
    out = dev.poison(16, np.float32)
    with pytest.raises(TileAssertionError):
        dev.launch((4,), checked_kernel, (dev.put(x), out))
    got = dev.get(out)
    np.testing.assert_array_equal(got[:8], x[:8] + 2)  # blocks 0, 1: finished
    np.testing.assert_array_equal(got[8:12], x[8:12] + 1)  # block 2: stopped at the assert
    assert np.isnan(got[12:]).all()  # block 3: never ran
    good = dev.poison(16, np.float32)
    dev.launch((4,), checked_kernel, (dev.put(inputs(None)), good))
    np.testing.assert_array_equal(dev.get(good), inputs(None) + 2)


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_assert_in_a_helper_points_at_the_helper_and_its_call(dev):
    out = dev.poison(16, np.float32)
    with pytest.raises(TileAssertionError, match="helper saw a negative") as info:
        dev.launch((4,), helper_kernel, (dev.put(inputs(1)), out))
    loc = info.value.loc
    assert (loc.file, loc.line) == (HERE, _line("# HELPER ASSERT"))
    assert loc.caller is not None and loc.caller.line == _line("# HELPER CALL")
    assert f"line {_line('# HELPER CALL')}" in str(info.value)


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_the_failing_assert_of_several_is_named(dev):
    out = dev.poison(16, np.float32)
    with pytest.raises(TileAssertionError, match="too small") as info:
        dev.launch((4,), two_asserts_kernel, (dev.put(inputs(3)), out))
    assert "too large" not in str(info.value) and info.value.loc.line == _line("# SECOND ASSERT")


def _gpu_variant(kernel, args):
    """`kernel` lowered for an sm_90 GPU (no GPU needed: Triton compiles at the first launch)."""
    from tilecraft.backends.base import BackendKind
    from tilecraft.backends.triton import TritonBackend
    specs, _, _ = kernel.describe(args)
    ir = kernel.lower(specs, "sm_90")
    return TritonBackend(BackendKind.TRITON, descriptors=False, capability=90).compile(ir, [None] * len(ir.params))


class _Stream:
    """A stand-in CUDA stream whose synchronize() raises the queued errors in turn."""

    def __init__(self, errors):
        self.errors = list(errors)

    def synchronize(self):
        error = self.errors.pop(0)
        if error is not None:
            raise error


@pytest.mark.parametrize("case", ["assert-fails", "earlier-work-failed", "other-error", "capturing"])
def test_gpu_launch_path_raises_at_the_launch(monkeypatch, case):
    """The GPU path without a GPU (CUDA calls replaced): a kernel with asserts synchronizes its
    stream before and after the launch and turns CUDA's device-side assert error into
    TileAssertionError; errors of earlier work pass unchanged; no sync during graph capture."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    args = (torch.zeros(16), torch.zeros(16))
    kernel = _gpu_variant(checked_kernel, args)
    assert kernel.lowered.asserts and kernel.lowered.asserts[0][0] == "negative input"
    cuda_assert = RuntimeError("CUDA error: device-side assert triggered\nCompile with TORCH_USE_CUDA_DSA ...")
    errors = {"assert-fails": [None, cuda_assert], "earlier-work-failed": [cuda_assert],
              "other-error": [None, RuntimeError("CUDA error: an illegal memory access was encountered")],
              "capturing": []}[case]
    stream = _Stream(errors)
    launched = []
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: stream)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: case == "capturing")
    monkeypatch.setattr(kernel, "_fn", type("Fn", (), {"run": lambda self, *a, **k: launched.append(k)})())
    if case == "capturing":
        kernel.launch((4, 1, 1), args)
        assert len(launched) == 1
        return
    with pytest.raises(Exception) as info:
        kernel.launch((4, 1, 1), args)
    err = info.value
    assert stream.errors == []  # every synchronize happened
    if case == "assert-fails":
        assert type(err) is TileAssertionError and err.__cause__ is cuda_assert and len(launched) == 1
        assert str(err).splitlines()[0] == f"Device-side assertion failed in kernel `{kernel.lowered.name}`: " \
                                           "negative input"
        assert err.loc.line == _line("# ASSERT LINE") and "    ^" in str(err)
        assert any("CUDA context of this process is now unusable" in n for n in err.__notes__)
    elif case == "earlier-work-failed":
        assert err is cuda_assert and not launched and "earlier work" in err.__notes__[0]
    else:
        assert not isinstance(err, TileAssertionError) and len(launched) == 1


def test_gpu_error_lists_the_asserts_when_several_may_have_failed():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    kernel = _gpu_variant(two_asserts_kernel, (torch.zeros(16), torch.zeros(16)))
    err = kernel._device_assert_error()
    assert isinstance(err, TileAssertionError)
    first = str(err).splitlines()[0]
    assert "one of its 2 asserts" in first and "'too large' at" in first and "'too small' at" in first
    assert f"test_asserts.py:{_line('# SECOND ASSERT')}" in first


GPU_SCRIPT = """
import sys
import torch
import tilecraft as ct
sys.path.insert(0, {here!r})
from test_asserts import checked_kernel

x = torch.arange(16, dtype=torch.float32, device="cuda")
x[9] = -1.0
out = torch.zeros(16, device="cuda")
try:
    ct.launch(torch.cuda.current_stream(), (4,), checked_kernel, (x, out), backend="triton")
except Exception as exc:
    print("RAISED", type(exc).__name__, isinstance(exc, ct.TileAssertionError))
    print("MESSAGE", str(exc).replace("\\n", " | "))
    print("NOTES", getattr(exc, "__notes__", None))
else:
    print("NOTHING RAISED AT THE LAUNCH")
try:
    torch.ones(1, device="cuda").sum().item()
    print("CONTEXT usable")
except Exception as exc:
    print("CONTEXT lost:", str(exc).splitlines()[0])
"""


@pytest.mark.only_backends("triton")
def test_device_side_assert_on_the_gpu(dev):
    """On the GPU the failed assert traps; the launch synchronizes and raises TileAssertionError
    itself, and the process's CUDA context is lost (a sticky CUDA error): run in a child."""
    code = textwrap.dedent(GPU_SCRIPT.format(here=os.path.dirname(HERE)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "RAISED TileAssertionError True" in proc.stdout, out
    assert "Device-side assertion failed in kernel `checked_kernel`: negative input" in proc.stdout, out
    assert f'File "{HERE}", line {_line("# ASSERT LINE")}' in proc.stdout, out
    assert "CUDA context of this process is now unusable" in proc.stdout, out
    assert "CONTEXT lost" in proc.stdout, out  # as documented in docs/testing.md
