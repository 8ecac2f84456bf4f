"""The samples in examples/ run as tests (full size on the interpreter, scaled down elsewhere)."""

from __future__ import annotations

import sys
from pathlib import Path


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import layernorm as layernorm_sample  # noqa: E402
import matmul as matmul_sample  # noqa: E402
import softmax as softmax_sample  # noqa: E402
import vector_add as vector_add_sample  # noqa: E402


def test_matmul_sample(backend):
    scale = "1.0" if backend == "interpreter" else "0.125"
    results = matmul_sample.main(["--backend", backend, "--scale", scale])
    assert [r["case"] for r in results] == ["TC1", "TC2", "TC3", "TC4"]
    assert all(r["ok"] for r in results)


def test_vector_add_sample(backend):
    n = "100003" if backend == "interpreter" else "1003"
    assert vector_add_sample.main(["--backend", backend, "--n", n]) == 0.0


def test_softmax_sample(backend):
    assert softmax_sample.main(["--backend", backend, "--rows", "5", "--cols", "100"]) < 1e-6


def test_layernorm_sample(backend):
    assert layernorm_sample.main(["--backend", backend, "--rows", "5", "--cols", "300", "--tile", "64"]) < 1e-6
