"""Launches from several Python threads at once, first (compiling) and cached, on every backend.

Triton's CPU interpreter rebinds triton.language's functions while a kernel runs, so two threads
interpreting at once broke each other's kernels, and a GPU compile beside an interpreted run
failed; tilecraft makes interpreted launches and calls into Triton's compiler take turns
(backends/triton/compile.py `TRITON_LANGUAGE`). The NumPy interpreter and the GPU's cached
launches run as they come.
"""

from __future__ import annotations

import threading

import numpy as np

import tilecraft as ct

THREADS = 6


@ct.kernel
def scaled_sum(x, y, out, s: float, T: ct.Constant[int]):
    b = ct.bid(0)
    ct.store(out, (b,), ct.load(x, (b,), (T,)) * s + ct.load(y, (b,), (T,)))


def test_launches_from_threads_at_once(dev) -> None:
    """Six threads each launch the kernel with tiles of 8 to 64 (so some compile while others
    run), on sizes that are not multiples of the tiles, and check every result exactly."""
    start = threading.Barrier(THREADS)
    failures: list[str] = []

    def work(i: int) -> None:
        rng = np.random.default_rng(i)
        start.wait()
        for j in range(4):
            tile, n = (8, 16, 32, 64)[(i + j) % 4], 29 + 7 * i + j
            x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
            out = dev.poison((n,), np.float32)
            try:
                dev.launch((-(-n // tile),), scaled_sum, (dev.put(x), dev.put(y), out, 0.5, tile))
                got = dev.get(out)
            except Exception as exc:  # noqa: BLE001 - reported below with the thread's case
                failures.append(f"thread {i}, tile {tile}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                continue
            want = (x.astype(np.float64) * 0.5 + y).astype(np.float32)  # x * 0.5 is exact: one rounding
            if not np.array_equal(got, want):
                failures.append(f"thread {i}, tile {tile}: wrong result {got[:4]} against {want[:4]}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, "\n".join(failures)


def test_a_gpu_compile_beside_an_interpreted_run(monkeypatch, tmp_path) -> None:
    """While one thread launches a kernel under Triton's interpreter again and again, another
    compiles kernels for sm_90 (what `tilecraft inspect` does, and a GPU's first launch): every
    compile succeeds, and every interpreted result is right. Each compile failed before, as
    "Triton rejected the code generated" (the interpreter's triton.language functions in its
    code), and the interpreted runs could fail too."""
    import pytest
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.tools.inspection import inspect_kernel
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # Triton compiles, not a cache hit
    stop = threading.Event()
    failures: list[str] = []

    def interpret() -> None:
        rng = np.random.default_rng(0)
        while not stop.is_set():
            x, y = (torch.from_numpy(rng.standard_normal(4000, dtype=np.float32)) for _ in range(2))
            out = torch.full((4000,), float("nan"))
            try:  # 63 blocks: the interpreter's functions are bound most of the time
                ct.launch(None, (63,), scaled_sum, (x, y, out, 2.0, 64), backend="triton-interpret")
                np.testing.assert_array_equal(out.numpy(), x.numpy() * np.float32(2.0) + y.numpy())
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                failures.append(f"interpreted: {type(exc).__name__}: {exc}"[:300])
                return

    thread = threading.Thread(target=interpret)
    thread.start()
    try:
        for tile in (16, 32):  # a new compile each: its own kernel object and tile
            kernel = scaled_sum.replace_hints()
            try:
                inspect_kernel(kernel, (torch.empty(300), torch.empty(300), torch.empty(300), 1.5, tile), capability=90)
            except Exception as exc:  # noqa: BLE001 - collected, asserted below
                failures.append(f"compile: {type(exc).__name__}: {exc}"[:300])
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
