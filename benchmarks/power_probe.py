"""Are the large GEMMs and attention held by the GPU's power limit? (GPU probe for the closing
notes of issue 10; not a product benchmark.)

The 16-bit GEMMs of the side-by-side reach ~695 TFLOP/s under tilecraft and cuBLAS alike, at
4096^3 and 8192^3, and attention ~605 under tilecraft and cuDNN. If a kernel runs into the
board's power limit the SM clock drops until the power fits, and the rate it reaches is set by
the energy it spends per FLOP, not by its schedule. Here each case runs back to back for a few
seconds under torch and under tilecraft (cuTile's samples through the shim, as
benchmarks/side_by_side.py launches them; each output checked against float64 or cuDNN first),
while `nvidia-smi` samples the SM clock, the power drawn and the clock-event reasons. Rows:
TFLOP/s over the sustained run, median SM clock and power, the share of samples with the
software power cap active, TFLOP/s per GHz of SM clock (the schedule's work per cycle) and
joules per PFLOP (the energy per unit of work).

    PYTHONPATH=.conformance/shim:$PWD python3 benchmarks/power_probe.py --out $OUT/power.json
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from _results import claim
from side_by_side import SAMPLES, rel_err

FIELDS = ("clocks.sm", "power.draw.instant", "temperature.gpu", "clocks_event_reasons.sw_power_cap",
          "clocks_event_reasons.hw_slowdown", "clocks_event_reasons.sw_thermal_slowdown")
"""What `nvidia-smi` samples (SM clock in MHz, instantaneous power in W, temperature in C, and
whether the power cap or a slowdown was holding the clock)."""
SETTLE_S, MEASURE_S, ROUNDS = 1.0, 2.5, 2


def _smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30).stdout


class Sampler:
    """`nvidia-smi` sampling `FIELDS` every 50 ms from `start()` to `stop()` (its rows)."""

    def start(self) -> None:
        self.proc = subprocess.Popen(["nvidia-smi", "-i", "0", f"--query-gpu={','.join(FIELDS)}",
                                      "--format=csv,noheader,nounits", "-lms", "50"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self) -> list[dict]:
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=10)
        rows = []
        for line in out.splitlines():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) == len(FIELDS) and cells[0].replace(".", "").isdigit():
                rows.append(dict(zip(FIELDS, cells)))
        if len(rows) < 5:
            raise SystemExit(f"nvidia-smi gave {len(rows)} samples: {(out + err)[-500:]}")
        return rows


def sustained(fn: Callable[[], object], flop: float) -> dict:
    """Run `fn` back to back: `SETTLE_S` to reach a steady clock, then `MEASURE_S` timed and
    sampled; the rate and what the samples say."""
    import torch
    start = time.perf_counter()
    batch = 1
    while time.perf_counter() - start < SETTLE_S:  # also sizes a batch to ~20 ms
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        torch.cuda.synchronize()
        if time.perf_counter() - t < 0.02:
            batch *= 2
    sampler = Sampler()
    sampler.start()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < MEASURE_S:
        for _ in range(batch):
            fn()
        torch.cuda.synchronize()
        calls += batch
    elapsed = time.perf_counter() - t0
    samples = sampler.stop()[2:]  # the first ones may predate the sampler's first full interval
    mhz = statistics.median(float(s["clocks.sm"]) for s in samples)
    watts = statistics.median(float(s["power.draw.instant"]) for s in samples)
    tflops = flop * calls / elapsed / 1e12
    return {"tflops": round(tflops, 1), "sm_mhz": mhz, "watts": round(watts, 1),
            "power_capped": round(sum(s["clocks_event_reasons.sw_power_cap"] == "Active" for s in samples)
                                  / len(samples), 2),
            "slowdown": any("Active" in (s["clocks_event_reasons.hw_slowdown"],
                                         s["clocks_event_reasons.sw_thermal_slowdown"]) for s in samples),
            "max_temp_c": max(float(s["temperature.gpu"]) for s in samples),
            "tflops_per_ghz": round(tflops / (mhz / 1000), 1),
            "joules_per_pflop": round(watts / tflops * 1000, 2), "samples": len(samples)}


def cases() -> list[tuple[str, float, Callable, Callable]]:
    """(case, FLOP per call, tilecraft's call, torch's call), each tilecraft output checked first."""
    import torch
    sys.path.insert(0, str(SAMPLES))
    import cuda.tile as ct
    import AttentionFMHA
    import MatMul
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    stream = torch.cuda.current_stream()
    out = []
    for name, dt, (m, n, k) in (("fp16 4096^3", torch.float16, (4096, 4096, 4096)),
                                ("bf16 8192^3", torch.bfloat16, (8192, 8192, 8192)),
                                ("bf16 4000x3000x2000", torch.bfloat16, (4000, 3000, 2000))):
        a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        grid = (math.ceil(m / 128) * math.ceil(n / 256), 1, 1)

        def ours(a=a, b=b, c=c, grid=grid):
            ct.launch(stream, grid, MatMul.matmul_kernel, (a, b, c, 128, 256, 64))
        ours()
        err = rel_err(c, a.double() @ b.double())
        if not err < 1e-2:
            raise SystemExit(f"{name}: tilecraft's result is off (relative error {err:.2e})")
        out.append((name, 2 * m * n * k, ours, lambda a=a, b=b: a @ b))
    q, k_, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        def theirs(causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return scaled_dot_product_attention(q, k_, v, is_causal=causal)

        def ours(causal=causal):
            return AttentionFMHA.cutile_fmha(q, k_, v, tile_m=128, tile_n=128, causal=causal)
        err = rel_err(ours(), theirs())
        if not err < 1e-2:
            raise SystemExit(f"attention: tilecraft's result is off (relative error {err:.2e})")
        out.append(("attention 128x128" + (" causal" if causal else ""),
                    4 * 4 * 32 * 4096 * 4096 * 128 / (2 if causal else 1), ours, theirs))
    return out


def out_path(description: str, argv: list[str] | None) -> Path:
    """A probe's `--out` (to `claim` before anything else runs)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args(argv).out


def head() -> dict:
    """A probe's result document as it starts: date, command, GPU, torch."""
    import torch
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}


def alternating(ours: Callable, theirs: Callable, rounds: int) -> Iterator[tuple[int, str, Callable]]:
    """(round, system, call): tilecraft's and torch's calls in `rounds` rounds, the one first
    changing from round to round (the GPU's clock drifts; a fixed order would favour one)."""
    for r in range(rounds):
        for system, fn in (("tilecraft", ours), ("torch", theirs))[:: 1 if r % 2 == 0 else -1]:
            yield r, system, fn


def main(argv: list[str] | None = None) -> int:
    out = claim(out_path(__doc__.split("\n\n")[0], argv))
    doc = head()
    doc["limits"] = _smi("-i", "0", "--query-gpu=power.limit,enforced.power.limit,power.max_limit,clocks.max.sm,"
                         "clocks.applications.graphics", "--format=csv")
    doc["rows"] = []
    for name, flop, ours, theirs in cases():
        for r, system, fn in alternating(ours, theirs, ROUNDS):
            row = {"case": name, "system": system, "round": r, **sustained(fn, flop)}
            doc["rows"].append(row)
            print(row, flush=True)
            out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
