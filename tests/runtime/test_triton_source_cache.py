"""Generated Triton sources in the cache (`<cache>/triton-src/<kernel>_<hash>.py`) end with a
checksum line; a file that differs from the freshly generated source in any byte (edited,
truncated, garbage, empty) is rewritten with a one-line warning and never runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import tilecraft as ct  # noqa: E402
from tilecraft.backends.triton import compile as triton_compile  # noqa: E402

pytestmark = pytest.mark.only_backends("triton-interpret", "triton")


def affine_fn(a, b):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(8,), padding_mode=ct.PaddingMode.ZERO) * 3.0 + 1.0)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("TILECRAFT_CACHE_DIR", str(root))
    return root


def run(dev) -> None:
    """Launch a new kernel object (a fresh compile from the cached IR) and check its result."""
    a = np.arange(20, dtype=np.float32)
    b = dev.poison(20, np.float32)
    dev.launch((3,), ct.kernel(affine_fn), (dev.put(a), b))
    np.testing.assert_array_equal(dev.get(b), a * 3 + 1)


def sources(cache_dir) -> list:
    return sorted((cache_dir / "triton-src").glob("affine_fn_*.py"))


def damage(path, how: str) -> None:
    raw = path.read_bytes()
    if how == "edit":  # a constant changed: valid Python computing something else
        assert raw.count(b"3.0, tl.float32") == 1
        path.write_bytes(raw.replace(b"3.0, tl.float32", b"300.0, tl.float32"))
    elif how == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "garbage":
        path.write_bytes(bytes(range(256)) * 3)
    elif how == "no-checksum":  # the bare source, as older tilecraft wrote it
        path.write_bytes(raw[: raw.rindex(b"# tilecraft-checksum: ")])
    elif how == "appended":  # a valid file with code added after its checksum line
        path.write_bytes(raw + b"raise SystemExit('appended code ran')\n")
    else:
        path.write_bytes(b"")
    later = os.stat(path).st_mtime + 5  # no cached bytecode or source line may mask the change
    os.utime(path, (later, later))


def test_source_file_ends_with_its_checksum(dev, cache_dir):
    run(dev)
    files = sources(cache_dir)
    assert files
    for path in files:
        text = path.read_text()
        assert text.splitlines()[-1].startswith("# tilecraft-checksum: ")
        assert triton_compile.source_intact(path)
        path.write_text(text.replace("3.0", "4.0"))
        assert not triton_compile.source_intact(path)
    assert not (cache_dir / "triton-src" / "__pycache__").exists()  # executed from the checked text


@pytest.mark.parametrize("how", ["edit", "truncate", "garbage", "no-checksum", "appended", "empty"])
def test_damaged_source_is_rewritten_with_a_warning(dev, cache_dir, monkeypatch, how):
    run(dev)
    files = sources(cache_dir)
    good = {p: p.read_bytes() for p in files}
    for path in files:
        damage(path, how)
    monkeypatch.setattr(triton_compile, "_modules", {})  # as in a new process: load the files again
    with pytest.warns(RuntimeWarning, match="discarding damaged cache entry .*affine_fn_") as record:
        run(dev)
    assert all(len(str(w.message).splitlines()) == 1 for w in record)
    assert {p: p.read_bytes() for p in files} == good  # rewritten from the generated source
    monkeypatch.setattr(triton_compile, "_modules", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # intact now: no warning
        run(dev)


def test_edited_source_does_not_run_in_a_new_process(cache_dir, tmp_path):
    """This process writes the file, it is edited, a new process launches the same kernel."""
    script = tmp_path / "affine.py"
    script.write_text(textwrap.dedent("""
        import torch
        import tilecraft as ct

        @ct.kernel
        def affine(a, b):
            i = ct.bid(0)
            ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(8,)) * 3.0 + 1.0)

        def main():
            a = torch.arange(16, dtype=torch.float32)
            b = torch.full((16,), float("nan"))
            ct.launch(None, (2,), affine, (a, b), backend="triton-interpret")
            return b.tolist() == (a * 3 + 1).tolist()

        if __name__ == "__main__":
            print("result", main())
    """))
    spec = importlib.util.spec_from_file_location("affine_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main()
    (path,) = (cache_dir / "triton-src").glob("affine_*.py")
    damage(path, "edit")
    child = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "TILECRAFT_CACHE_DIR": str(cache_dir)})
    assert "result True" in child.stdout, child.stdout + child.stderr
    assert "RuntimeWarning: tilecraft: discarding damaged cache entry" in child.stderr, child.stderr
    assert triton_compile.source_intact(path)
