"""`tilecraft inspect` as a user meets it: it loads the kernel without running the file's
launches, and a mistake in the kernel or its arguments prints the compile error (file, line,
caret) and exits with status 1, without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from tilecraft.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = '''\
from pathlib import Path

import numpy as np
import tilecraft as ct


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(c, index=(i,), tile=x + y)


Path(__file__).with_suffix(".ran").write_text("the top level ran")  # no __main__ guard
a = np.ones(1000, np.float32)
ct.launch(None, (4,), vector_add, (a, a, a, 256))
'''
ARRAY = "float32[1000]"


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "user_kernel.py"
    path.write_text(SCRIPT)
    return path


def test_inspect_does_not_run_the_files_launches(script, capsys):
    assert main(["inspect", f"{script}:vector_add", ARRAY, ARRAY, ARRAY, "256", "--stage", "ir"]) == 0
    out = capsys.readouterr().out
    assert "==== ir ====" in out and "registers/thread" in out
    assert not script.with_suffix(".ran").exists()


@pytest.mark.parametrize("args, message, line", [
    ((ARRAY, ARRAY), "TileArgumentError: Kernel expects 4 arguments but 2 were given",
     "def vector_add(a, b, c, TILE: ct.Constant[int]):"),
    ((ARRAY, ARRAY, ARRAY, "100"),
     'TileTypeError: Invalid argument "shape" of load(): Dimension #0 of shape (100,) is not a power of two',
     "x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)"),
])
def test_a_users_mistake_prints_the_compile_error_and_exits_1(script, capsys, args, message, line):
    assert main(["inspect", f"{script}:vector_add", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and f'{script.name}", line' in err and line in err and "^" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, status, message", [
    (["{script}:nope"], 1, "has no tile kernel named 'nope' (its kernels: vector_add)"),
    (["{script}:a"], 1, "`a` is set by a top-level statement that is not run when kernels are loaded"),
    (["{script}"], 2, "expected FILE.py:KERNEL"),
    (["{script}:vector_add", "flaot32[4]"], 2, "unknown dtype 'flaot32'"),
    (["{script}:vector_add", "[1,"], 2, "cannot read argument '[1,'"),
])
def test_command_line_mistakes(script, capsys, argv, status, message):
    assert main(["inspect", *(a.format(script=script) for a in argv)]) == status
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_python_m_tilecraft_inspect_exits_1_without_a_traceback(script):
    run = subprocess.run([sys.executable, "-m", "tilecraft", "inspect", f"{script}:vector_add", ARRAY, ARRAY],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 1
    assert run.stderr.startswith("python -m tilecraft inspect: TileArgumentError: Kernel expects 4 arguments")
    assert "Traceback" not in run.stderr and not script.with_suffix(".ran").exists()
