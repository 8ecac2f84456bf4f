"""Launches from several Python threads at once, first (compiling) and cached, on every backend.

Triton's CPU interpreter rebinds triton.language's functions while a kernel runs, so two threads
interpreting at once broke each other's kernels; tilecraft makes interpreted launches take turns
(backends/triton/compile.py `_interpreting`). The NumPy interpreter and the GPU run them as they
come.
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
