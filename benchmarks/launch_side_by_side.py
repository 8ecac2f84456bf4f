"""Host time per cached launch of one vector-add kernel source under whichever `cuda.tile` this
process imports, next to torch's `torch.add(out=)` and a plain `@triton.jit` kernel timed in the
same process (GPU only). Run it once per system, on the same machine:

    source .cutile/env.sh   # NVIDIA's cuTile 1.7 (../shared/cutile-anchor), .cutile carried
    PYTHONPATH=$CUTILE_PYTHONPATH python3 benchmarks/launch_side_by_side.py --out A.json
    PYTHONPATH=$PWD:$PWD/.conformance/shim python3 benchmarks/launch_side_by_side.py --out B.json

Each row is the median over rounds of 2000 launches; the rows take turns round by round (in a
rotated order), so a drift of the host's speed during the run touches all of them alike. The
output of each launch is checked before anything is timed; under tilecraft, the rounds start once
its C++ tensor reader is built (`_tensor_reader`). The result names the system by the file
`cuda.tile` came from.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ResultFile, claim  # noqa: E402
from side_by_side import host_us  # noqa: E402


def _arguments() -> tuple[argparse.Namespace, ResultFile]:
    """The command line, and its output file claimed (before the GPU stack is imported: where
    nothing would be measured, nothing more is needed)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="JSON file to write (must not exist)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--launches", type=int, default=2000)
    args = p.parse_args()
    return args, claim(args.out)


if __name__ == "__main__":
    ARGS, OUT = _arguments()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import cuda.tile as ct  # noqa: E402

N = TILE = 1024


@ct.kernel
def vector_add(a, b, c, tile: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(tile,))
    y = ct.load(b, index=(i,), shape=(tile,))
    ct.store(c, index=(i,), tile=x + y)


@triton.jit
def triton_vector_add(a, b, c, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(c + offsets, tl.load(a + offsets, mask=inside) + tl.load(b + offsets, mask=inside), mask=inside)


def _tensor_reader() -> bool | None:
    """Under tilecraft, wait for its C++ tensor reader (built once per machine, in the background
    from the first cached launch on): until then cached launches read tensors through Python, a
    few microseconds more, and on a fresh machine that is what the rounds would time. Whether
    the reader is in use; None under cuTile."""
    if not ct.kernel.__module__.startswith("tilecraft"):
        return None
    from tilecraft.backends.triton import native_launch, tensor_reader
    module = native_launch._module()  # the launcher module the quick launchers come from
    return module is not None and tensor_reader.attach(module, wait=True)


def main(args: argparse.Namespace, out: ResultFile) -> None:
    a, b = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.current_stream()
    rows: dict[str, Callable[[], Any]] = {
        "ct.launch": lambda: ct.launch(stream, (1,), vector_add, (a, b, c, TILE)),
        "torch.add(out=)": lambda: torch.add(a, b, out=c),
        "plain triton [grid]": lambda: triton_vector_add[(1,)](a, b, c, N, BLOCK=TILE),
    }
    for name, fn in rows.items():  # compile, warm up, check
        c.fill_(float("nan"))
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b, msg=f"{name} gave a wrong sum")
    reader = _tensor_reader()
    names = list(rows)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(host_us(rows[name], args.launches))
    result = {
        "cuda.tile is": "tilecraft" if ct.kernel.__module__.startswith("tilecraft") else "cuTile",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cuda.tile": ct.__file__,
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "launches_per_round": args.launches, "tensor reader": reader,
        "median_us": {name: round(statistics.median(ts), 3) for name, ts in times.items()},
        "rounds_us": {name: [round(t, 3) for t in ts] for name, ts in times.items()},
    }
    result["ct_over_torch"] = round(result["median_us"]["ct.launch"] / result["median_us"]["torch.add(out=)"], 3)
    out.write_json(result)
    print(result["cuda.tile is"], json.dumps(result["median_us"]), "ct.launch / torch.add:", result["ct_over_torch"])


if __name__ == "__main__":
    main(ARGS, OUT)
