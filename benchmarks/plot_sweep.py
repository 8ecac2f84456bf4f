"""The size-sweep plot of docs/performance.md: tilecraft's speed as a ratio to torch (torch ms /
tilecraft ms; the 1.0 line is parity) against problem size on a log axis, from a result file of
benchmarks/size_sweep.py. Matmul on the left (x: FLOPs = 2MNK; one line per dtype through the
square sizes, labelled with the size, the odd shapes as open markers), row-wise kernels on the right (x: bytes of one
read and one write of the matrix; one line per kernel). Cases that failed their reference check
are left out and counted in the caption.

A CPU step, apart from the GPU run (which may lack matplotlib): `pip install matplotlib`, then

    python benchmarks/plot_sweep.py benchmarks/results/size-sweep-h200-DATE.json [--png FILE]

The PNG defaults to docs/images/size-sweep-<date of the run>.png; an existing PNG is never
overwritten (benchmarks/_results.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from _results import refuse_existing  # noqa: E402  (benchmarks/ is sys.path[0] when this file is run)

ROOT = Path(__file__).resolve().parent.parent
Point = tuple[float, float, str]  # (size, ratio to torch, label)


def matmul_series(records: list[dict[str, Any]]) -> tuple[dict[str, list[Point]], dict[str, list[Point]]]:
    """Per dtype: the square sizes (a line) and the other shapes (markers), checked cases only."""
    squares: dict[str, list[Point]] = {}
    odd: dict[str, list[Point]] = {}
    for r in records:
        if r["impl"] != "tilecraft" or not r.get("ok") or "ratio_torch" not in r:
            continue
        dtype = "float32 (tf32)" if r["dtype"] == "float32" else r["dtype"]
        label = f"{r['M']}x{r['N']}x{r['K']}" if r["odd_shape"] else str(r["M"])
        (odd if r["odd_shape"] else squares).setdefault(dtype, []).append((r["flops"], r["ratio_torch"], label))
    return squares, odd


def rowwise_series(records: list[dict[str, Any]]) -> dict[str, list[Point]]:
    """Per kernel: (bytes moved, ratio to torch, row length) of its checked tilecraft cases."""
    series: dict[str, list[Point]] = {}
    for r in records:
        if r["impl"] == "tilecraft" and r.get("ok") and "x_torch" in r:
            series.setdefault(r["kind"], []).append((r["bytes"], r["x_torch"], str(r["cols"])))
    return series


def failed(doc: dict[str, Any]) -> list[str]:
    """The tilecraft cases the plot leaves out: an error, or over tolerance."""
    rows = doc.get("matmul", []) + doc.get("rowwise", [])
    return [f"{r.get('kind', 'matmul')} {r['case']}" for r in rows
            if r["impl"] == "tilecraft" and ("error" in r or not r.get("ok"))]


def draw(ax: Any, lines: dict[str, list[Point]], markers: dict[str, list[Point]], xlabel: str) -> None:
    """Lines through `lines`, open markers at `markers` (same colour per key), each marker labelled;
    the lines share their sizes, so only the first is labelled."""
    for i, key in enumerate(sorted(set(lines) | set(markers))):
        colour = f"C{i}"
        pts = sorted(lines.get(key, []))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour, label=key)
        for x, y, text in pts if i == 0 else []:
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=6)
        extra = markers.get(key, [])
        if extra:
            ax.plot([p[0] for p in extra], [p[1] for p in extra], "D", mfc="none", color=colour,
                    label=f"{key}, other shapes")
        for x, y, text in extra:
            ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, -10), fontsize=6, color=colour)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.text(1.0, 1.0, " torch", transform=ax.get_yaxis_transform(), va="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("× torch (torch time / tilecraft time)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def plot(doc: dict[str, Any], png: Path) -> None:
    """Write the sweep of `doc` (a size_sweep.py result) to `png`."""
    squares, odd = matmul_series(doc.get("matmul", []))
    rows = rowwise_series(doc.get("rowwise", []))
    panels = [p for p in (("matmul (labels: M = N = K)", squares, odd, "FLOPs (2·M·N·K)"),
                          ("row-wise, fp32 (labels: row length)", rows, {}, "bytes moved (matrix read + written once)"))
              if p[1] or p[2]]
    if not panels:
        raise SystemExit("no checked, timed tilecraft case in this file: nothing to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    for ax, (title, lines, markers, xlabel) in zip(axes[0], panels):
        draw(ax, lines, markers, xlabel)
        ax.set_title(title, fontsize=10)
    meta = doc["meta"]
    left_out = failed(doc)
    fig.suptitle(f"tilecraft vs torch by problem size — {meta['device']}, {meta['date'][:10]}, "
                 f"torch {meta['torch']}, Triton {meta['triton']}", fontsize=10)
    note = f"left out (failed their check): {', '.join(left_out)}" if left_out else "every case passed its check"
    if doc.get("skipped"):
        note += f"; not run (time budget): {len(doc['skipped'])}"
    fig.text(0.01, 0.01, note, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep", type=Path, help="a result file of benchmarks/size_sweep.py")
    p.add_argument("--png", type=Path, help="the image (default docs/images/size-sweep-<date of the run>.png)")
    args = p.parse_args(argv)
    doc = json.loads(args.sweep.read_text())
    png = args.png or ROOT / "docs" / "images" / f"size-sweep-{doc['meta']['date'][:10]}.png"
    refuse_existing(png)
    plot(doc, png)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
