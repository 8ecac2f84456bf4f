"""The inspection tool: every stage of a kernel compiled for a GPU that is not here."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import tilecraft  # noqa: E402
from tilecraft.__main__ import main as cli  # noqa: E402
from tilecraft.library import matmul_kernel  # noqa: E402
from tilecraft.tools import STAGES, inspect_kernel  # noqa: E402

LIBRARY = Path(tilecraft.__file__).parent / "library" / "matmul.py"


@pytest.mark.parametrize("capability, mma", [(90, "HGMMA"), (80, "HMMA")])
def test_every_stage_for_a_gpu_that_is_not_here(capability, mma):
    a = torch.empty(1000, 520, dtype=torch.float16)  # 1000 rows: not 16-aligned -> descriptors on sm_90
    b, c = torch.empty(520, 384, dtype=torch.float16), torch.empty(1000, 384, dtype=torch.float16)
    info = inspect_kernel(matmul_kernel, (a, b, c, 64, 64, 32), capability=capability)
    assert "mma" in info.stage("ir") and "tl.dot(" in info.stage("triton")
    assert ("make_tensor_descriptor" in info.stage("triton")) == (capability >= 90)
    assert "tt.dot" in info.stage("ttir") and "ttg." in info.stage("ttgir") and ".version" in info.stage("ptx")
    assert mma in info.stage("sass") and info.stage("llir")
    assert info.registers and info.registers > 0 and info.spill_bytes == 0 and info.shared_bytes > 0
    assert info.summary().startswith(f"sm_{capability}: 4 warps")
    with pytest.raises(ValueError, match="unknown stage"):
        info.stage("cubin-text")
    assert set(STAGES) == {"ir", "triton", "ttir", "ttgir", "llir", "ptx", "sass"}


def test_command_line(capsys):
    assert cli(["inspect", f"{LIBRARY}:matmul_kernel", "float32[64,96]", "float32[96,64]", "float32[64,64]",
                "32", "32", "32", "--stage", "triton"]) == 0
    out = capsys.readouterr().out
    assert "==== triton ====" in out and 'input_precision="tf32"' in out and "registers/thread" in out
    assert cli([]) == 2 and "inspect" in capsys.readouterr().out
