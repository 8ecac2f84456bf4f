"""Run NVIDIA cuTile's sample programs unchanged under tilecraft, each with its own
`--correctness-check`, and record what each did (needs a CUDA GPU).

    python3 benchmarks/cutile_samples.py --samples .conformance/samples --out $OUT/samples.json

`import cuda.tile as ct` in a sample resolves to tilecraft through the conformance harness's shim
(`.conformance/shim`, put first on PYTHONPATH with this repository), so the sample files are run
exactly as published. A sample passes when it exits with status 0 and prints no failure; the
JSON keeps each sample's status, seconds, the correctness lines it printed and its output's tail.
NVLink multicast stays off in every child (the GPU host's rule: NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from _results import claim

ROOT = Path(__file__).resolve().parent.parent
HOPPER_SAMPLES = ("VectorAddition", "MatMul", "BatchMatMul", "Transpose", "LayerNorm", "FFT", "MoE",
                  "AttentionFMHA", "AllGatherMatmul")
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def run_sample(path: Path, shim: Path, timeout_s: float) -> dict:
    """Run one sample with `--correctness-check`; its outcome as a JSON-able dict."""
    env = dict(os.environ, **NO_MULTICAST, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, (str(shim), str(ROOT), os.environ.get("PYTHONPATH")))))
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-u", path.name, "--correctness-check"], cwd=path.parent, env=env,
                              capture_output=True, text=True, timeout=timeout_s)
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        rc, output = 124, f"{exc.stdout or ''}{exc.stderr or ''}\n[timed out after {timeout_s:.0f} s]"
    seconds = time.perf_counter() - start
    lines = output.splitlines()
    checks = [line.strip() for line in lines if "orrectness check" in line or "Skipped" in line]
    failed = rc != 0 or any("fail" in c.lower() for c in checks) or "An unexpected error occurred" in output
    return {"sample": path.stem, "passed": not failed, "rc": rc, "seconds": round(seconds, 1),
            "checks": checks, "tail": "\n".join(lines[-40:])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=Path, default=ROOT / ".conformance" / "samples")
    parser.add_argument("--shim", type=Path, default=ROOT / ".conformance" / "shim")
    parser.add_argument("--only", default=",".join(HOPPER_SAMPLES), help="comma-separated sample names")
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    out = claim(args.out)
    import torch
    doc = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv),
           "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
           "torch": torch.__version__, "results": []}
    for name in args.only.split(","):
        result = run_sample(args.samples / f"{name}.py", args.shim, args.timeout_s)
        doc["results"].append(result)
        out.write_json(doc)
        print(f"{name:18s} {'PASS' if result['passed'] else 'FAIL'}  rc={result['rc']}  {result['seconds']} s  "
              + " | ".join(result["checks"][:4]), flush=True)
        if not result["passed"]:
            print("    " + result["tail"].replace("\n", "\n    ")[-3000:], flush=True)
    passed = sum(r["passed"] for r in doc["results"])
    print(f"{passed} of {len(doc['results'])} samples passed on {len(doc['gpus'])} GPU(s)")
    return 0 if passed == len(doc["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
