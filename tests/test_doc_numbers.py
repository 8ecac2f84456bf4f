"""Every number in README.md and docs/ comes from a committed result file named next to it, and
result files are never overwritten.

- Every result file the docs cite (a `...json`, `...jsonl`, `...xml`, `...txt`, `...log`, `...md`
  or `...png` in backquotes, or one of those gzipped) exists, and every file under benchmarks/results/ has its provenance in
  benchmarks/results/README.md.
- The tables of docs/performance.md and docs/gpu-check.md, and the README's speed tables,
  are recomputed from the files they cite.
- Every benchmark that writes a result file (benchmarks/*.py with `--out`, scripts/gpu_check)
  refuses to start when its output file exists (benchmarks/_results.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import gzip
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = ROOT.parent / "shared"  # the project's shared folder, beside the repository
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(r"`([^`\s<>]+\.(?:json|jsonl|xml|txt|log|md|png)(?:\.gz)?)`")  # <name>-<date>.json is a pattern, not a file


def cited_files() -> list[tuple[str, str]]:
    """(document, cited path) for every result file named in README.md and docs/."""
    return [(doc.name, m.group(1)) for doc in DOCS for m in CITED.finditer(doc.read_text())]


def resolve(cited: str) -> Path:
    """A cited path: relative to the repository root, or a bare name in benchmarks/results/ (or
    at the root, as requirements-test.txt)."""
    if "/" in cited or not (RESULTS / cited).exists():
        return ROOT / cited
    return RESULTS / cited


def load(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def table_rows(doc: str, header_start: str) -> list[list[str]]:
    """The cells of the markdown table in docs/`doc` whose header row starts with `header_start`."""
    lines = (ROOT / "docs" / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


# ---- cited files ----------------------------------------------------------------------------------

def test_the_docs_cite_result_files():
    cited = {path for _, path in cited_files()}
    assert "benchmarks/results/matmul-h200-2026-11-29.json" in cited and len(cited) >= 15


@pytest.mark.parametrize("doc, cited", cited_files())
def test_every_cited_result_file_exists(doc, cited):
    path = resolve(cited)
    if cited.startswith("../shared/") and not SHARED.is_dir():
        pytest.skip("the shared folder is not beside this checkout")
    assert path.is_file(), f"{doc} cites {cited}, which is not committed"


def test_every_result_file_says_where_it_came_from():
    index = (RESULTS / "README.md").read_text()
    named = set(re.findall(r"`([^`]+)`", index))
    for path in RESULTS.iterdir():
        if path.name != "README.md":
            assert path.name in named or re.sub(r"-\d{4}\.xml\.gz$", "-HHMM.xml.gz", path.name) in named, path.name


# ---- the numbers -----------------------------------------------------------------------------------

def test_the_matmul_table_is_the_committed_run():
    records = load("matmul-h200-2026-11-29.json")["matmul"]
    by = {(r["case"], r["impl"]): r for r in records}
    rows = table_rows("performance.md", "| case | tilecraft ms")
    assert len(rows) == len({r["case"] for r in records}) == 12
    for case, ms, tflops, x_torch, x_triton, ptr, desc, torch, relerr in rows:
        full = next(c for c, _ in by if c.endswith(case.replace(" (tf32)", "")))
        tc = by[full, "tilecraft"]
        assert [ms, tflops, x_torch, x_triton, relerr] == [
            f"{tc['ms']:.4f}", f"{tc['tflops']:.0f}", f"{tc['ratio_torch']:.3f}", f"{tc['ratio_triton']:.3f}",
            f"{tc['relerr']:.1e}"], case
        others = ("triton-ptr", "triton-desc", "torch")
        assert [ptr, desc, torch] == [f"{by[full, impl]['tflops']:.0f}" for impl in others], case


def test_the_rowwise_table_is_the_committed_run():
    rows = load("rowwise-h200-2026-11-29.json")["rows"]
    mine = {(r["kind"], r["case"]): r for r in rows if r["impl"] == "tilecraft"}
    table = table_rows("performance.md", "| kernel | case |")
    assert len(table) == len(mine) == 6
    for kind, case, us, gbps, x_torch, x_triton, relerr in table:
        r = mine[kind, case]
        assert [us, gbps, x_torch, x_triton, relerr] == [
            f"{r['ms'] * 1e3:.1f}", f"{r['gbps']:.0f}", f"{r['x_torch']:.2f}",
            f"{r['x_triton']:.2f}" if "x_triton" in r else "", f"{r['relerr']:.1e}"], (kind, case)


def test_the_launch_overhead_table_is_the_committed_run():
    runs = {r["impl"]: r["host_us_median"] for r in load("matmul-h200-2026-11-29.json")["launch_overhead"]}
    table = {row[0].split()[0]: row[1:] for row in table_rows("performance.md", "| | µs per launch")}
    assert table["tilecraft"] == [f"{runs['tilecraft']:.1f}", f"{runs['tilecraft'] / runs['triton']:.2f}"]
    assert table["plain"] == [f"{runs['triton']:.1f}", "1.00"]
    assert table["torch"] == [f"{runs['torch']:.1f}", ""]


def test_the_gpu_check_counts_are_their_reports():
    rows = table_rows("gpu-check.md", "| date | machine |")
    assert rows
    for *_, result in rows:
        report = RESULTS / re.search(r"benchmarks/results/([\w.-]+\.xml\.gz)", result).group(1)
        with gzip.open(report) as xml:
            suite = ET.parse(xml).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        n = {k: int(suite.get(k)) for k in ("tests", "skipped", "failures", "errors")}
        passed = n["tests"] - n["skipped"] - n["failures"] - n["errors"]
        assert f"{passed} passed, {n['skipped']} skipped" in result, report.name
        assert f"({float(suite.get('time')):.1f} s)" in result, report.name


def span(values: list[float], digits: int) -> str:
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


README_SAMPLES = [  # (the README's row label, the side-by-side case, its tiles)
    ("MatMul fp16 4096³, 128x256x64", "fp16 4096^3", "128x256x64"),
    ("MatMul bf16 8192³, 128x256x64", "bf16 8192^3", "128x256x64"),
    ("MatMul bf16 4000x3000x2000, 128x256x64", "bf16 4000x3000x2000", "128x256x64"),
    ("MatMul fp32 as tf32 8192³, 32x32x32", "fp32 as tf32 8192^3", "32x32x32"),
    ("AttentionFMHA bf16 B4 H32 S4096 D128, 128x128", "attention bf16 B4 H32 S4096 D128", "128x128"),
    ("AttentionFMHA, 64x128", "attention bf16 B4 H32 S4096 D128", "64x128"),
    ("AttentionFMHA causal, 128x128", "attention bf16 B4 H32 S4096 D128 causal", "128x128"),
    ("AttentionFMHA causal, 64x128", "attention bf16 B4 H32 S4096 D128 causal", "64x128"),
    ("LayerNorm bf16 8192x4096, 1024", "layernorm bf16 8192x4096", "1024"),
    ("LayerNorm fp32 32768x1024, 1024", "layernorm fp32 32768x1024", "1024"),
]


def test_the_readme_tables_are_the_committed_runs():
    """The README's two speed tables, cell by cell, from the files they cite: tilecraft's column
    from the side-by-side JSON, cuTile's from the table its run printed, the launch rows from
    the launch and fresh-output probes."""
    readme = (ROOT / "README.md").read_text()
    ours = {(r["case"], r["tiles"]): r["ratio"] for r in load("side-by-side-h200-2026-12-03.json")["rows"]}
    theirs = {}
    for line in (RESULTS / "side-by-side-h200-2026-12-01.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[3] not in ("cutile (× torch)", "---"):
            theirs[cells[0], cells[1]] = cells[3]
    for label, case, tiles in README_SAMPLES:
        assert f"| {label} | {ours[case, tiles]:.2f}× | {theirs[case, tiles]}× |" in readme
    launch = {f: load(f"launch-side-by-side-h200-{f}.json")["median_us"] for f in ("2026-12-02-e", "2026-12-01-l")}
    assert f"| cached vector add, host µs | {launch['2026-12-02-e']['ct.launch']:.2f} | " \
           f"{launch['2026-12-02-e']['torch.add(out=)']:.2f} (" in readme
    assert f"| the same under cuTile 1.7 | {launch['2026-12-01-l']['ct.launch']:.2f} | " \
           f"{launch['2026-12-01-l']['torch.add(out=)']:.2f} |" in readme
    loop = {r["case"]: r for r in load("fresh-output-probe-h200-2026-12-03-d.json")["rows"]}
    r = loop["matmul fp16 1024^3 128x256x64"]
    assert f"| fp16 1024³ matmul in a loop, µs per launch | {r['stream same']:.2f} | {r['stream torch']:.2f} (" in readme
    r = loop["matmul fp16 512^3 128x256x64"]
    assert f"| fp16 512³ matmul in a loop, µs per launch | {r['stream same']:.2f} | {r['stream torch']:.2f} |" in readme


# ---- result files are never overwritten -------------------------------------------------------------

WRITERS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if "--out" in p.read_text() and p.name != "_results.py")


def test_every_benchmark_writing_results_claims_its_file():
    assert {p.name for p in WRITERS} == {"attention_probe.py", "compile_time.py", "cutile_samples.py", "gluon_attention_probe.py",
                                        "gluon_matmul_probe.py", "attention_lengths.py", "launch_side_by_side.py",
                                        "matmul.py", "matmul_probe.py", "merge_probe.py", "merge_side_by_side.py", "power_probe.py", "row_l2_probe.py",
                                        "row_probe.py", "fresh_output_probe.py", "split_k_probe.py",
                                        "rowwise.py", "schedule_sweep.py", "timing_modes.py",
                                        "side_by_side.py", "size_sweep.py", "staging_probe.py", "tail_split_probe.py", "tc3_probe.py",
                                        "tf32_probe.py"}
    for path in WRITERS:
        assert "claim(" in path.read_text(), f"{path.name} writes results without benchmarks/_results.claim"


def test_claim_refuses_an_existing_file_and_writes_a_new_one(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from _results import claim
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    with pytest.raises(SystemExit, match="refusing to overwrite .*old.json"):
        claim(existing)
    out = claim(tmp_path / "new" / "run.json")
    out.write_json({"a": 1})
    out.write_json({"a": 2})  # the run that claimed a file rewrites it as it goes
    assert json.loads(out.path.read_text()) == {"a": 2}


def run_refusing(command: list[str], existing: Path, env: dict[str, str] | None = None) -> None:
    before = existing.read_bytes()
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "refusing to overwrite" in run.stderr and str(existing) in run.stderr
    assert existing.read_bytes() == before


@pytest.mark.parametrize("script", WRITERS, ids=lambda p: p.name)
def test_each_benchmark_refuses_to_overwrite_a_result_file(script, tmp_path):
    if script.name != "compile_time.py":
        pytest.importorskip("torch")
        pytest.importorskip("triton")
    existing = tmp_path / "earlier-run.json"
    existing.write_text('{"meta": "an earlier run"}')
    run_refusing([sys.executable, str(script), "--out", str(existing)], existing)


def test_gpu_check_refuses_to_overwrite_a_result_file(tmp_path):
    existing = tmp_path / "gpu-tests.xml"
    existing.write_text("<testsuites/>")
    # tiny limits: were the refusal missing, the suite and the benchmark would stop at once
    run_refusing(["bash", "scripts/gpu_check"], existing,
                 env={"OUT": str(tmp_path), "TEST_TIMEOUT_S": "1", "BENCH_TIMEOUT_S": "1"})
