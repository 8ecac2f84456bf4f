"""Merge side_by_side.py runs of one GPU call (the same cases under different settings) into one
result file: {"meta": {...}, "runs": {label: rows}}.

    python3 benchmarks/merge_side_by_side.py --out $OUT/attention-ws.json \
        warp-specialized=$OUT/sbs-attention.json triton-kernel=$OUT/sbs-attention-triton.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from _results import claim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--commit", help="the code measured (default: git's HEAD here)")
    parser.add_argument("--note", default="", help="what the run measured, in words")
    parser.add_argument("--command", default="scripts/gpu_warp_specialized (benchmarks/side_by_side.py --system "
                        "tilecraft --only attention, then with TILECRAFT_WARP_SPECIALIZE=0)",
                        help="what produced the runs (default: scripts/gpu_warp_specialized's two side-by-sides)")
    parser.add_argument("runs", nargs="*", help="LABEL=side_by_side.json")
    args = parser.parse_args()
    out = claim(args.out)
    if not args.runs:
        parser.error("name at least one LABEL=side_by_side.json")
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True).stdout.strip()
    doc = {"meta": {"merged": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit or None,
                    "note": args.note,
                    "command": args.command},
           "runs": {}}
    for item in args.runs:
        label, path = item.split("=", 1)
        data = json.loads(Path(path).read_text())
        doc["runs"][label] = data
    out.write_json(doc)


if __name__ == "__main__":
    main()
