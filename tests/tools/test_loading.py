"""Loading a file's kernels for `tilecraft inspect`: the defining statements run, the file's own
work (launches, prints, loops, `if __name__ == "__main__":`) does not, and a kernel that needs a
skipped statement is explained."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.errors import TileError
from tilecraft.tools import CommandError
from tilecraft.tools.loading import load_file

SCRIPT = '''\
"""A user's script: kernels, then work at the top level without a __main__ guard."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import tilecraft as ct

try:
    import no_such_optional_module
except ImportError:
    no_such_optional_module = None
if TYPE_CHECKING:
    from collections.abc import Sequence

TILE = 2 ** 3
ConstInt = ct.Constant[int]
MARKER = Path(__file__).with_suffix(".ran")


@dataclasses.dataclass(frozen=True)
class Options:
    scale: float = 2.0


@ct.kernel
def scale(a, b, T: ConstInt):
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(T,)) * 2)


def _copy(a, b):
    ct.store(b, index=(0,), tile=ct.load(a, index=(0,), shape=(TILE,)))


copy = ct.kernel(_copy)


@ct.kernel
def uses_runtime_value(a):
    ct.store(a, index=(0,), tile=ct.load(a, index=(0,), shape=(SIZE,)))


MARKER.write_text("the top level ran")
SIZE = int("8")
data = np.ones(64, np.float32)
for row in range(3):
    ct.launch(None, (8,), scale, (data, data, 8))
if __name__ == "__main__":
    MARKER.write_text("the main block ran")
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "user_script.py"
    path.write_text(SCRIPT)
    return path


def test_definitions_run_and_the_files_own_work_does_not(script):
    loaded = load_file(script)
    assert not script.with_suffix(".ran").exists()
    assert loaded.namespace["__name__"] != "__main__"
    assert loaded.namespace["TILE"] == 8 and loaded.namespace["no_such_optional_module"] is None
    assert loaded.namespace["Options"]().scale == 2.0
    a, b = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    ct.launch(None, (2,), loaded.kernel("scale"), (a, b, 8))  # the kernels work
    np.testing.assert_array_equal(b, a * 2)
    ct.launch(None, (1,), loaded.kernel("copy"), (a, b))
    assert {"SIZE", "data", "row"} <= set(loaded.skipped)


def test_a_kernel_needing_a_skipped_statement_is_explained(script):
    loaded = load_file(script)
    with pytest.raises(CommandError, match=r"user_script\.py:\d+: `data` is set by a top-level statement that is "
                                           r"not run when kernels are loaded"):
        loaded.kernel("data")
    with pytest.raises(CommandError, match=r"has no tile kernel named 'nope' \(its kernels: copy, scale, "
                                           r"uses_runtime_value\)"):
        loaded.kernel("nope")
    with pytest.raises(TileError, match="name `SIZE` is not defined") as info:
        ct.launch(None, (1,), loaded.kernel("uses_runtime_value"), (np.zeros(8, np.float32),))
    line = SCRIPT.splitlines().index('SIZE = int("8")') + 1
    assert loaded.note_for(str(info.value)).startswith(f"note: `SIZE` is set on line {line} of {script}")


@pytest.mark.parametrize("source, message", [
    ("def broken(:\n", r"bad\.py:1: "),
    ("import no_such_module_anywhere\n", r"bad\.py:1: loading the file failed: ModuleNotFoundError"),
])
def test_a_file_that_cannot_load_is_a_command_error(tmp_path, source, message):
    (tmp_path / "bad.py").write_text(textwrap.dedent(source))
    with pytest.raises(CommandError, match=message):
        load_file(tmp_path / "bad.py")
    with pytest.raises(CommandError, match="cannot read"):
        load_file(tmp_path / "missing.py")
