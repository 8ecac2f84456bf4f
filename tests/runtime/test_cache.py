"""The on-disk IR cache: hits across kernel objects, distinct keys per specialization, and safe
concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.runtime.kernel import Kernel


def scale_fn(a, b, F: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(8,), padding_mode=ct.PaddingMode.ZERO) * F)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(root))
    return root


def run(kernel: Kernel, factor: int) -> np.ndarray:
    a = np.random.default_rng(0).standard_normal(20).astype(np.float32)
    b = np.full(20, np.nan, np.float32)
    ct.launch(None, (3,), kernel, (a, b, factor))
    np.testing.assert_allclose(b, a * factor, rtol=1e-6)
    return b


def test_second_kernel_object_loads_ir_from_disk(cache_dir, monkeypatch):
    run(ct.kernel(scale_fn), 3)
    entries = list(cache_dir.rglob("*.pkl"))
    assert len(entries) == 1
    fresh = ct.kernel(scale_fn)
    monkeypatch.setattr(Kernel, "lower", lambda *a, **k: pytest.fail("front end ran despite a disk hit"))
    run(fresh, 3)


def test_each_constant_value_is_its_own_entry(cache_dir):
    k = ct.kernel(scale_fn)
    run(k, 2)
    run(k, 5)
    assert len(list(cache_dir.rglob("*.pkl"))) == 2


def test_cache_disabled(monkeypatch):
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", "off")
    run(ct.kernel(scale_fn), 4)


def test_concurrent_processes_share_one_valid_entry(cache_dir, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import tilecraft as ct

        @ct.kernel
        def twice(a, b):
            i = ct.bid(0)
            ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(4,)) * 2)

        a = np.arange(8, dtype=np.float32)
        b = np.zeros(8, np.float32)
        ct.launch(None, (2,), twice, (a, b))
        assert (b == 2 * a).all()
        print("ok")
    """))
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and all("ok" in o for o in outs)
    entries = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert len(entries) == 1 and entries[0].suffix == ".pkl"
    again = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr


def reduce_factory(op, kw):
    """Kernels of one source that differ only in closure values (a public op, a kwargs dict)."""
    @ct.kernel
    def k(a, b):
        ct.store(b, index=(0,), tile=op(ct.load(a, index=(0, 0), shape=(4, 8)), **kw))
    return k


def test_closure_functions_and_dicts_are_part_of_the_key(cache_dir):
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    for op, kw, want in ((ct.sum, {"axis": 1}, a.sum(1)), (ct.max, {"axis": 1}, a.max(1)),
                         (ct.sum, {"axis": 0}, a.sum(0)), (ct.min, {"axis": 0}, a.min(0))):
        b = np.full(want.shape, np.nan, np.float32)
        ct.launch(None, (1,), reduce_factory(op, kw), (a, b))
        np.testing.assert_allclose(b, want, rtol=1e-5, err_msg=f"{op.__name__} {kw}")
    assert len(list(cache_dir.rglob("*.pkl"))) == 4


def test_repeat_launches_take_the_fast_path_and_respecialize(cache_dir, monkeypatch):
    k = ct.kernel(scale_fn)
    run(k, 3)
    assert len(k.fast) == 1 and len(k.variants) == 1
    monkeypatch.setattr(Kernel, "describe", lambda *a: pytest.fail("slow path taken on a repeat launch"))
    run(k, 3)
    monkeypatch.undo()
    run(k, 4)                                   # a new Constant value: a new variant
    b = np.zeros(40, np.float32)[::2]           # strided output: new facts, new fast key
    a = np.arange(20, dtype=np.float32)
    ct.launch(None, (3,), k, (a, b, 3))
    np.testing.assert_allclose(b, a * 3)
    assert len(k.variants) == 3 and len(k.fast) == 3


def test_fast_path_keeps_argument_errors(cache_dir):
    k = ct.kernel(scale_fn)
    run(k, 3)
    with pytest.raises(TypeError, match="Constant parameter"):
        ct.launch(None, (3,), k, (np.zeros(20, np.float32), np.zeros(20, np.float32), np.zeros(2)))
