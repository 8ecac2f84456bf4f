"""Result files are written once. A benchmark claims its output file before it measures anything
and refuses to start when that file exists, so no run overwrites an earlier one — in particular
not the committed files under benchmarks/results/ that README.md and docs/ cite. A run rewrites
only the file it claimed (the benchmarks save after every case, so a cut-short run keeps what it
measured).

    from _results import claim          # benchmarks/ is sys.path[0] when a benchmark is run
    out = claim(args.out)               # SystemExit (status 1) if the file exists
    out.write_json(doc)                 # as often as the run likes

    python3 benchmarks/_results.py FILE...   # status 1 if any FILE exists (scripts/gpu_check)
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def refuse_existing(*paths: Path) -> None:
    """SystemExit naming the files of `paths` that exist, if any."""
    existing = [str(p) for p in paths if Path(p).exists()]
    if existing:
        raise SystemExit(f"refusing to overwrite {', '.join(existing)}: result files are never overwritten "
                         f"(README.md and docs/ cite them); write to a new file name instead")


@dataclass(frozen=True)
class ResultFile:
    """An output file this run claimed: it did not exist when the run started."""

    path: Path

    def write_json(self, doc: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(doc, indent=1))

    def __str__(self) -> str:
        return str(self.path)


def claim(path: str | Path) -> ResultFile:
    """The result file `path` for this run; SystemExit if it already exists."""
    refuse_existing(Path(path))
    return ResultFile(Path(path))


if __name__ == "__main__":
    refuse_existing(*map(Path, sys.argv[1:]))
