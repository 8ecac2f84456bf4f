"""Imports follow the layers of docs/DESIGN: the IR knows no front end or backend, the front end
knows no backend and never imports Triton, backends never read Python AST."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "tilecraft"

FORBIDDEN = {
    "ir": ("tilecraft.frontend", "tilecraft.passes", "tilecraft.backends", "tilecraft.runtime", "triton", "torch"),
    "language": ("tilecraft.frontend", "tilecraft.ir", "tilecraft.backends", "tilecraft.runtime", "triton"),
    "frontend": ("tilecraft.backends", "tilecraft.runtime", "tilecraft.passes", "triton", "torch"),
    "passes": ("tilecraft.frontend", "tilecraft.backends", "tilecraft.runtime", "triton"),
    "backends": ("tilecraft.frontend", "tilecraft.runtime", "ast"),
}


def _imports(path: Path) -> list[str]:
    """Absolute names of every module `path` imports (relative imports resolved)."""
    pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(pkg[: len(pkg) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            names.append(mod)
            names += [f"{mod}.{a.name}" for a in node.names]
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports(layer):
    bad = []
    for path in (ROOT / layer).rglob("*.py"):
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_modules_stay_small():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in ROOT.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 850]
    assert not big, big
