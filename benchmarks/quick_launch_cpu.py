"""Host time of a cached launch's quick path on the CPU (no GPU needed): the generated Python
quick launcher against the native one (backends/triton/native_launch.py `quick`), both launching
through tilecraft's C launcher built with a stand-in CUDA driver (tests/backends/cuda_stub.py)
that records each launch instead of running it.

Times per call (the best of 25 rounds of 5000 calls, the rows taking turns) for the
launch-overhead probe `vector_add_kernel(a, b, c, n)` on 1024 floats: each quick launcher alone
(the native one reading the tensors through Python, and through the C++ tensor reader,
backends/triton/tensor_reader.py, which the first run on a machine builds: ~11 s), `ct.launch`
through each, the C launcher alone with pre-baked arguments, and the Python reads of the
tensors' key items (what the tensor reader saves).

    PYTHONPATH=$PWD python benchmarks/quick_launch_cpu.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(ROOT.parent / "tests" / "backends")]
import cuda_stub  # noqa: E402

import tilecraft as ct  # noqa: E402
from matmul import vector_add_kernel  # noqa: E402
from tilecraft import knobs  # noqa: E402
from tilecraft.backends.base import FusedLaunch  # noqa: E402
from tilecraft.backends.triton import tensor_reader  # noqa: E402
from tilecraft.runtime.fastpath import quick_launcher  # noqa: E402

LIMIT = 2**24 - 1
ROUNDS = 25


def per_call_us(fn: Callable[[], Any], calls: int = 5000) -> float:
    """Seconds per call of one round of `calls`, in microseconds."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    missing = cuda_stub.missing()
    if missing:
        sys.exit(f"cannot build the C launcher here: {missing}")
    with tempfile.TemporaryDirectory(prefix="tilecraft-stub-") as directory:  # loaded, the files may go
        module, driver = cuda_stub.build(Path(directory))
    n = 1024
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    args = (a, b, c, n)
    dl = cuda_stub.direct_launcher(vector_add_kernel, args, module)
    fused = dl.fused_launch()
    python = quick_launcher(vector_add_kernel.plan, args, knobs.BACKEND, knobs.BACKEND.raw(),
                            FusedLaunch(fused.expr, fused.env), LIMIT)
    native = quick_launcher(vector_add_kernel.plan, args, knobs.BACKEND, knobs.BACKEND.raw(), fused, LIMIT)
    assert type(native).__name__ == "Quick", "the native quick launcher was not made"
    if not tensor_reader.attach(module, wait=True):
        sys.exit("the tensor reader cannot be built here (TILECRAFT_TENSOR_READER=debug says why)")
    driver.set(types=dl._native_head[3])
    for quick in (python, native):
        assert quick(0, (1,), args)
    baked = dl._flatten(a, b, c)
    reader = module.use_reader  # None: the native launcher reads the tensors through Python
    rows = [("quick, generated Python", python, False, lambda: python(0, (1,), args)),
            ("quick, native, Python reads", native, False, lambda: native(0, (1,), args)),
            ("quick, native, tensor reader", native, True, lambda: native(0, (1,), args)),
            ("ct.launch, generated Python quick", python, False, lambda: ct.launch(0, (1,), vector_add_kernel, args)),
            ("ct.launch, native, Python reads", native, False, lambda: ct.launch(0, (1,), vector_add_kernel, args)),
            ("ct.launch, native, tensor reader", native, True, lambda: ct.launch(0, (1,), vector_add_kernel, args)),
            ("C launcher alone, baked args", None, False, lambda: dl._native(1, 1, 1, 0, *dl._native_head, *baked)),
            ("torch reads alone, as one tuple", None, False, lambda: (
                a.dtype, a.device, a.stride(), a.shape, a.data_ptr(), a.is_neg(), b.dtype, b.device, b.stride(),
                b.shape, b.data_ptr(), b.is_neg(), c.dtype, c.device, c.stride(), c.shape, c.data_ptr(), c.is_neg()))]
    best = {name: float("inf") for name, _, _, _ in rows}
    for _ in range(ROUNDS):  # rows take turns: a busy machine slows them alike; the best round counts
        for name, quick, with_reader, fn in rows:
            if with_reader:
                tensor_reader.attach(module)
            else:
                reader(None)
            vector_add_kernel.quick = quick  # what ct.launch tries first
            launches = driver.launches
            best[name] = min(best[name], per_call_us(fn))
            assert driver.launches > launches or name.startswith("torch"), f"{name} launched nothing"
    for name, us in best.items():
        print(f"{name:34s} {us:6.2f} us")
    print("launches recorded by the stand-in driver:", driver.launches)


if __name__ == "__main__":
    main()
