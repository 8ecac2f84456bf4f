"""The on-disk compile cache: optimized Tile IR per specialization, shared between processes.

Entries live under `TILECRAFT_CACHE_DIR` (default `~/.cache/tilecraft`) as pickles named by the
SHA-256 of everything the IR depends on: tilecraft's version and sources, the source of the kernel and of
every function it reaches, closure and global constants, the argument specs and array facts, the
backend, the GPU architecture and the kernel options. Writes go to a temporary file first and are
renamed into place, so processes compiling the same kernel at once never see a partial entry.
Triton keeps its own binary cache; the backend points it under this directory too.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

from .. import knobs
from ..ir import Function

FORMAT = 1


def _reachable_sources(fn: Callable[..., Any]) -> list[str]:
    """Source (or repr) of fn and every global function/constant it names, transitively."""
    seen: set[int] = set()
    out: list[str] = []

    def visit(f: Any) -> None:
        target = getattr(f, "__tile_function__", f)
        if id(target) in seen or not isinstance(target, types.FunctionType):
            return
        seen.add(id(target))
        try:
            out.append(inspect.getsource(target))
        except (OSError, TypeError):
            out.append(target.__code__.co_code.hex())
        names = _code_names(target.__code__)
        values = [target.__globals__[n] for n in names if n in target.__globals__]
        if target.__closure__:
            values += [c.cell_contents for c in target.__closure__ if _has_contents(c)]
        for v in values:
            constant(v)

    def constant(v: Any) -> None:
        """Every value a kernel can see counts, including functions and containers in closures:
        kernels made by one factory share their source and differ only in these."""
        if isinstance(v, types.FunctionType) or hasattr(v, "__tile_function__"):
            out.append(f"{v.__module__}.{v.__qualname__}")  # the public stubs share one source
            visit(v)
        elif isinstance(v, (tuple, list)):
            out.append(type(v).__name__)
            for x in v:
                constant(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(repr(k))
                constant(x)
        elif hasattr(v, "fn") and isinstance(getattr(v, "fn"), types.FunctionType):
            visit(v.fn)
        elif not isinstance(v, types.ModuleType):
            out.append(f"{type(v).__qualname__}:{v!r}")

    visit(fn)
    return out


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """Hash of tilecraft's own sources: a changed compiler never reuses stale cached IR."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def entry_key(fn: Callable[..., Any], variant_key: Any, versions: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (str(FORMAT), package_digest(), *versions, *_reachable_sources(fn), repr(variant_key)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class DiskCache:
    """Pickled IR functions by key; disabled when the cache directory knob is empty/off."""

    def __init__(self, root: Path | None) -> None:
        self.root = root / "ir" if root is not None else None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.pkl"

    def get(self, key: str) -> Function | None:
        if self.root is None:
            return None
        try:
            with open(self._path(key), "rb") as f:
                return pickle.load(f)
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError):
            return None

    def put(self, key: str, fn: Function) -> None:
        if self.root is None:
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(fn, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except (OSError, pickle.PickleError):
            pass  # a cache that cannot be written only costs a recompile


def default_cache() -> DiskCache:
    return DiskCache(knobs.cache_dir())
