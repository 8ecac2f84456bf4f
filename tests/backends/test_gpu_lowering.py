"""What the GPU lowering leaves to the GPU's own instructions (checked on sm_90 code compiled
here, no GPU needed)."""

from __future__ import annotations

import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.tools import inspect_kernel  # noqa: E402

ConstInt = ct.Constant[int]


@ct.kernel
def softmax_rows(X, Y, TN: ConstInt):
    x = ct.load(X, index=(ct.bid(0), 0), shape=(1, TN))
    p = ct.exp2(x - ct.max(x, axis=1, keepdims=True), flush_to_zero=True)
    ct.store(Y, index=(ct.bid(0), 0), tile=p / ct.sum(p, axis=1, keepdims=True))


def test_the_gpu_instructions_already_ignore_nan_and_flush():
    """On the GPU, max ignoring NaN is one PTX max.f32 and exp2 with flush_to_zero one
    ex2.approx.ftz.f32 (both IEEE-conforming for what tilecraft promises), so the generated code
    has no NaN checks or flush helpers there; Triton's CPU interpreter keeps them (NumPy
    propagates NaN and keeps subnormals). The PTX check pins the Triton lowering relied on."""
    x = torch.empty(4, 256, dtype=torch.float32)
    info = inspect_kernel(softmax_rows, (x, x, 256), capability=90)
    source, ptx = info.stage("triton"), info.stage("ptx")
    assert "_tc_maxnum(" not in source and "_tcr_flush" not in source and "_tc_max(" in source
    assert "ex2.approx.ftz.f32" in ptx and "max.f32" in ptx
