"""`tilecraft bench`: a kernel timed against a PyTorch expression on the same arguments, after
its output is checked against the expression's result (unwritten elements and wrong values
fail, with status 1); on the CPU backends, timed by the wall clock."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tilecraft.cli import main  # noqa: E402
from tilecraft.tools.benchmarking import check_output  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KERNEL = f"{ROOT / 'examples' / 'vector_add.py'}:vector_add"
ARRAYS = ["float32[1000]"] * 3


def bench(*argv: str, backend: str = "interpreter") -> int:
    return main(["bench", KERNEL, *ARRAYS, "256", "--runs", "3", "--backend", backend, *argv])


def test_times_the_kernel_against_torch_after_checking_it(capsys, tmp_path):
    out = tmp_path / "bench.json"
    assert bench("--grid", "4", "--torch", "a + b", "--json", str(out)) == 0
    report = capsys.readouterr().out
    assert "vector_add on interpreter (CPU), grid (4,): 3 timed runs each" in report
    assert "torch / tilecraft = " in report and "check: `c` against the expression's result" in report
    assert report.rstrip().endswith(": ok")
    data = json.loads(out.read_text())
    assert data["check_ok"] is True and data["check"]["unwritten"] == 0 and data["check"]["error"] == 0.0
    assert data["ratio"] == pytest.approx(data["torch_median_us"] / data["kernel_median_us"])
    assert data["kernel_median_us"] > 0 and data["runs"] == 3 and data["grid"] == [4]


@pytest.mark.parametrize("argv, verdict", [
    (("--grid", "3", "--torch", "a + b"), "232 elements not written: FAILED"),  # a block short
    (("--grid", "4", "--torch", "a - b"), "(bound 1e-05): FAILED (a kernel that computes in lower precision, "
                                          "tf32 for one, needs a looser bound: --rtol)"),
])
def test_a_wrong_result_fails_with_status_1(capsys, argv, verdict):
    assert bench(*argv) == 1
    assert capsys.readouterr().out.rstrip().endswith(verdict)


def test_without_an_expression_only_the_kernel_is_timed(capsys):
    assert bench("--grid", "4") == 0
    report = capsys.readouterr().out
    assert "tilecraft  median" in report and "torch" not in report and "check" not in report


@pytest.mark.parametrize("argv, status, message", [
    (("--grid", "4", "--torch", "a + nope"), 1, "--torch 'a + nope' failed: NameError: name 'nope' is not defined"),
    (("--grid", "4", "--torch", "a + b", "--out", "d"), 2, "--out 'd' is not a parameter of vector_add"),
    (("--grid", "0"), 2, "a grid is 1 to 3 positive ints"),
])
def test_mistakes_are_reported_without_a_traceback(capsys, argv, status, message):
    assert bench(*argv) == status
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_check_output_compares_special_values_and_finds_unwritten_elements():
    want = torch.tensor([1.0, -math.inf, math.nan, 4.0])
    assert check_output("x", want.clone(), want).error == 0.0
    assert check_output("x", torch.tensor([1.0, math.inf, math.nan, 4.0]), want).error == math.inf
    close = check_output("x", torch.tensor([1.0, -math.inf, math.nan, 4.004]), want)
    assert close.error == pytest.approx(1e-3, rel=1e-3) and not close.ok and close.tolerance == 1e-5
    assert check_output("x", torch.tensor([1.0, -math.inf, math.nan, 4.004]), want, 2e-3).ok
    missing = check_output("x", torch.tensor([math.nan, -math.inf, math.nan, 4.0]), want)
    assert missing.unwritten == 1 and not missing.ok
    ints = check_output("k", torch.tensor([3, -1, 5], dtype=torch.int32), torch.tensor([3, 2, 5]))
    assert (ints.unwritten, ints.tolerance) == (1, 0.0) and not ints.ok


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_the_gpu_with_cuda_events(capsys):
    assert bench("--grid", "4", "--torch", "torch.add(a, b)", backend="triton") == 0
    report = capsys.readouterr().out
    assert f"vector_add on triton ({torch.cuda.get_device_name()})" in report and "CUDA events" in report
    assert report.rstrip().endswith(": ok")
