"""First contact, tried as a new user would: the `tilecraft` command that pyproject.toml declares
and `python -m tilecraft`, clear errors when torch or Triton is missing, Triton's CPU interpreter
under NumPy 2.4, and a hint when a tile size is not a compile-time constant."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.environment import TRITON_BACKENDS, MissingDependencyError, require
from tilecraft.errors import TileError, TileTypeError

ROOT = Path(__file__).resolve().parents[1]


def entry_point():
    """The function pyproject.toml's [project.scripts] runs as `tilecraft`."""
    tomllib = pytest.importorskip("tomllib")
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["tilecraft"]
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


# ---- the command line ---------------------------------------------------------------------------

def test_the_declared_entry_point_lists_its_commands(capsys):
    main = entry_point()
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tilecraft") and "inspect" in out
    assert main([]) == 2 and "inspect" in capsys.readouterr().out
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"tilecraft {ct.__version__}"
    assert main(["no-such-command"]) == 2 and "invalid choice" in capsys.readouterr().err


def test_python_m_tilecraft_help():
    run = python("-m", "tilecraft", "--help")
    assert run.returncode == 0 and run.stdout.startswith("usage: python -m tilecraft") and "inspect" in run.stdout
    run = python("-m", "tilecraft", "inspect", "--help")
    assert run.returncode == 0 and "FILE.py:KERNEL" in run.stdout and "ct.launch(...)" in run.stdout


def test_help_needs_neither_torch_nor_triton():
    run = python("-c", "import sys; sys.modules['torch'] = sys.modules['triton'] = None; "
                       "from tilecraft.cli import main; sys.exit(main(['inspect', '--help']))")
    assert run.returncode == 0, run.stderr
    assert "FILE.py:KERNEL" in run.stdout


# ---- missing optional packages -------------------------------------------------------------------

def test_a_missing_package_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` meets when torch is not installed
    with pytest.raises(MissingDependencyError, match=r"torch is required by the triton and triton-interpret "
                                                     r"backends .*pip install torch==2\.13\.0") as info:
        require("torch", TRITON_BACKENDS)
    assert isinstance(info.value, ImportError) and "CUDA build" in str(info.value)
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(MissingDependencyError, match=r'pip install "triton==3\.6\.0"'):
        require("triton", TRITON_BACKENDS)


def test_an_import_error_inside_an_installed_package_is_left_alone(monkeypatch, tmp_path):
    (tmp_path / "half_installed").mkdir()
    (tmp_path / "half_installed" / "__init__.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as info:
        require("half_installed", "this test")
    assert not isinstance(info.value, MissingDependencyError)


def test_a_triton_interpret_launch_without_torch_says_what_to_install(tmp_path):
    pytest.importorskip("triton")
    script = tmp_path / "launch_without_torch.py"
    script.write_text(textwrap.dedent("""\
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        import numpy as np
        import tilecraft as ct

        @ct.kernel
        def copy(a, b):
            ct.store(b, index=(0,), tile=ct.load(a, index=(0,), shape=(8,)))

        ct.launch(None, (1,), copy, (np.ones(8, np.float32), np.zeros(8, np.float32)), backend="triton-interpret")
        """))
    run = python(str(script))
    assert run.returncode == 1
    assert ("MissingDependencyError: torch is required by the triton and triton-interpret backends"
            in run.stderr), run.stderr
    assert "pip install torch==2.13.0" in run.stderr


@pytest.mark.parametrize("command", ["inspect", "bench"])
def test_the_commands_without_torch_say_what_to_install(monkeypatch, capsys, command):
    monkeypatch.setitem(sys.modules, "torch", None)
    library = ROOT / "tilecraft" / "library" / "matmul.py"
    grid = ["--grid", "1"] if command == "bench" else []
    assert entry_point()([command, f"{library}:matmul_kernel", "float16[64,64]", *grid]) == 1
    err = capsys.readouterr().err
    assert f"torch is required by `tilecraft {command}`" in err and "pip install torch==2.13.0" in err
    assert "Traceback" not in err


# ---- Triton's interpreter under NumPy 2.4 ---------------------------------------------------------

@ct.kernel
def block_sums(a, out, blocks):
    acc = ct.zeros((8,), dtype=ct.float32)
    for i in range(blocks):  # a run-time loop bound: the interpreter makes it a Python int
        acc = acc + ct.load(a, index=(i,), shape=(8,))
    ct.store(out, index=(0,), tile=acc)


def test_triton_interpreter_runs_loops_under_numpy_2_4(monkeypatch):
    """NumPy 2.4 refuses `int()` of a one-element 1-D array, which NumPy 2.3 only warns about:
    turning that warning into an error reproduces NumPy 2.4 on any NumPy."""
    pytest.importorskip("torch")
    interpreter = pytest.importorskip("triton.runtime.interpreter")
    pytest.importorskip("tilecraft.backends.triton")  # importing it installs the fix

    a, out = np.arange(32, dtype=np.float32), np.zeros(8, np.float32)

    def launch() -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", "Conversion of an array with ndim > 0", DeprecationWarning)
            ct.launch(None, (1,), block_sums, (a, out, 4), backend="triton-interpret")

    with monkeypatch.context() as m:  # Triton's own patching: the failure users saw
        m.setattr(interpreter, "_patch_lang_tensor", interpreter._patch_lang_tensor.wrapped)
        with pytest.raises(TileError, match="Conversion of an array with ndim > 0|only 0-dimensional arrays"):
            launch()
    launch()
    np.testing.assert_array_equal(out, a.reshape(4, 8).sum(axis=0))


# ---- tile sizes that are not constants ------------------------------------------------------------

@ct.kernel
def tile_from_parameter(a, TILE):
    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(TILE,)))


@ct.kernel
def float_tile(a, TILE: ct.Constant[int]):
    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(TILE * 0.5,)))


def test_a_tile_size_parameter_without_constant_gets_a_hint():
    with pytest.raises(TileTypeError, match=r"not constant; `TILE` is only known at run time: annotate the "
                                            r"tile-size parameter as ct\.Constant\[int\] "
                                            r"\(e\.g\. `TILE: ct\.Constant\[int\]`\) so its value is known "
                                            r"at compile time"):
        ct.launch(None, (1,), tile_from_parameter, (np.zeros(8, np.float32), 8))
    with pytest.raises(TileTypeError, match=r"element #0 has type Tile\[float32,\(\)\]\n"):
        ct.launch(None, (1,), float_tile, (np.zeros(8, np.float32), 8))  # a constant: no hint
