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
    entries = list(cache_dir.rglob("*.json"))
    assert len(entries) == 1
    fresh = ct.kernel(scale_fn)
    monkeypatch.setattr(Kernel, "lower", lambda *a, **k: pytest.fail("front end ran despite a disk hit"))
    run(fresh, 3)


def test_each_constant_value_is_its_own_entry(cache_dir):
    k = ct.kernel(scale_fn)
    run(k, 2)
    run(k, 5)
    assert len(list(cache_dir.rglob("*.json"))) == 2


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
    assert len(entries) == 1 and entries[0].suffix == ".json"
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
    assert len(list(cache_dir.rglob("*.json"))) == 4


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


def test_an_array_on_another_device_never_takes_a_cached_entry(cache_dir):
    """A meta tensor shaped like a cached CPU launch's (torch's get_device() is -1 for both) gets
    the full path's error naming the argument."""
    torch = pytest.importorskip("torch")
    k = ct.kernel(scale_fn)
    a, b = torch.arange(20, dtype=torch.float32), torch.zeros(20)
    ct.launch(None, (3,), k, (a, b, 3))
    torch.testing.assert_close(b, a * 3)
    with pytest.raises(ValueError, match="Argument `a` is a tensor on device 'meta'"):
        ct.launch(None, (3,), k, (a.to("meta"), b, 3))


_KERNEL_FILE = """
import sys
import numpy as np
import tilecraft as ct
import helpers
from helpers import Cfg

@ct.kernel
def k(a, which: ct.Constant[int]):
    v = helpers.CONST if which == 0 else helpers.fn() if which == 1 else Cfg.SCALE if which == 2 else helpers.sub.DEEP
    ct.store(a, index=(0,), tile=ct.full((4,), v, ct.float32))

out = []
for which in range(4):
    a = np.full(4, np.nan, np.float32)
    ct.launch(None, (1,), k, (a, which))
    out.append(float(a[0]))
print(out)
"""

_HELPERS = """
import types
CONST = {v}
def fn():
    return {v}
class Cfg:
    SCALE = {v}
sub = types.SimpleNamespace()
"""


def test_values_reached_through_modules_and_classes_are_part_of_the_key(cache_dir, tmp_path):
    """A second process sees the helper module's new values (module constants, functions, class
    attributes), not the first process's cached IR."""
    (tmp_path / "kernel_file.py").write_text(_KERNEL_FILE)
    pkg = tmp_path / "sub_pkg.py"

    def run_with(v: float) -> list[float]:
        (tmp_path / "helpers.py").write_text(_HELPERS.format(v=v) + "import sub_pkg as sub\n")
        pkg.write_text(f"DEEP = {v}\n")
        r = subprocess.run([sys.executable, str(tmp_path / "kernel_file.py")], capture_output=True, text=True,
                           timeout=120, cwd=tmp_path, env={**__import__("os").environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert r.returncode == 0, r.stderr
        return eval(r.stdout.strip().splitlines()[-1])

    assert run_with(2.0) == [2.0] * 4
    assert run_with(3.0) == [3.0] * 4
    assert run_with(2.0) == [2.0] * 4  # and the first entry is still good


def test_same_kernel_text_in_another_file_reports_its_own_lines(cache_dir, tmp_path):
    body = "import numpy as np\nimport tilecraft as ct\n{pad}@ct.kernel\ndef k(a):\n    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(3,)))\n" \
           "ct.launch(None, (1,), k, (np.zeros(4, np.float32),))\n"
    for name, pad in (("first.py", ""), ("second.py", "\n\n\n")):
        (tmp_path / name).write_text(body.format(pad=pad))
        r = subprocess.run([sys.executable, str(tmp_path / name)], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and f"{name}\", line {5 + len(pad)}" in r.stderr, r.stderr


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip", "foreign", "empty"])
def test_damaged_entries_are_rebuilt_with_a_warning(cache_dir, damage):
    run(ct.kernel(scale_fn), 3)
    (entry,) = cache_dir.rglob("*.json")
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(bytes(range(256)) * 3)
    elif damage == "flip":
        i = len(raw) * 2 // 3
        entry.write_bytes(raw[:i] + bytes([raw[i] ^ 0x04]) + raw[i + 1:])
    elif damage == "foreign":  # a valid entry of another kernel under this key
        run(ct.kernel(scale_fn), 5)
        other = [p for p in cache_dir.rglob("*.json") if p != entry][0]
        entry.write_bytes(other.read_bytes())
    else:
        entry.write_bytes(b"")
    with pytest.warns(RuntimeWarning, match="discarding damaged cache entry"):
        run(ct.kernel(scale_fn), 3)
    run(ct.kernel(scale_fn), 3)  # rebuilt: loads cleanly now


def test_same_kernel_text_in_two_files_of_one_process_reports_each_file(tmp_path):
    import importlib.util
    body = "import tilecraft as ct\n\ndef k(a):\n    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(3,)))\n"
    for name in ("one_file", "other_file"):
        path = tmp_path / f"{name}.py"
        path.write_text(body)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with pytest.raises(ct.TileError) as info:
            ct.launch(None, (1,), ct.kernel(mod.k), (np.zeros(4, np.float32),))
        assert f"{name}.py" in str(info.value)


def test_a_tile_function_helper_counts_and_tilecraft_internals_do_not():
    """A @ct.function helper's source is part of the key (its wrapper lives in tilecraft, the
    user's function does not); tilecraft's own stubs are not followed, so no process-specific
    object of theirs (printed with its address) makes the key differ between processes."""
    from tilecraft.runtime.cache import _reachable_sources

    @ct.function
    def tripled(x):
        return x * 3

    def k(a):
        ct.store(a, index=(0,), tile=tripled(ct.load(a, index=(0,), shape=(4,))))
    parts = "\n".join(_reachable_sources(k))
    assert "return x * 3" in parts and " at 0x" not in parts
