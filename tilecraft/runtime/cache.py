"""The on-disk compile cache: optimized Tile IR per specialization, shared between processes.

Entries live under `TILECRAFT_CACHE_DIR` (default `~/.cache/tilecraft`), named by the SHA-256 of
everything the IR depends on (`entry_key`): tilecraft's version and sources, the source and file
position of the kernel and of every function it reaches, the constants it reads — through
globals, closures and attribute chains into modules, classes and objects (`helpers.fn`,
`Cfg.SCALE`), recursively — the argument specs and array facts, the backend, the GPU architecture
and the kernel options. A value whose text differs per process (an object printed with its
address) makes a key no other process computes, so such a kernel is simply compiled again.

An entry is JSON (`ir.serialize`: loading runs no code) after a header line holding the SHA-256 of
the entry's key and content. A truncated, garbage, foreign or edited entry fails that check and is
rebuilt, with a one-line warning. Writes go to a temporary file renamed into place, so processes
compiling the same kernel at once never see a partial entry. Triton keeps its own binary cache;
the backend points it under this directory too.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import inspect
import json
import os
import tempfile
import types
import warnings
from pathlib import Path
from typing import Any, Callable

from .. import knobs
from ..errors import TileError
from ..ir.serialize import from_data, to_data

FORMAT = 2


def _chains(code: types.CodeType) -> list[tuple[str, ...]]:
    """Every `name.attr.attr...` the code reads, rooted at a global or closure variable (nested
    functions, lambdas and comprehensions included); a plain name is a chain of one."""
    out: list[tuple[str, ...]] = []
    chain: list[str] = []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_CLASSDEREF"):
            if chain:
                out.append(tuple(chain))
            chain = [ins.argval]
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain:
            chain.append(ins.argval)
        elif chain:
            out.append(tuple(chain))
            chain = []
    if chain:
        out.append(tuple(chain))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out += _chains(const)
    return out


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _attribute(obj: Any, name: str) -> Any:
    """`obj.name` as stored (no descriptors run); raises AttributeError if absent."""
    v = inspect.getattr_static(obj, name)
    if isinstance(v, (staticmethod, classmethod)):
        return v.__func__
    if isinstance(v, property):
        return v.fget
    return v


_PACKAGE = __name__.split(".")[0] + "."


def _reachable_sources(fn: Callable[..., Any]) -> list[str]:
    """Text of everything `fn` can depend on: the source and position of fn and of every function
    it reaches, and every value it reads through its globals, closures and attribute chains."""
    seen: set[int] = set()
    out: list[str] = []

    def visit(f: Any) -> None:
        target = getattr(f, "__tile_function__", f)
        if id(target) in seen or not isinstance(target, types.FunctionType):
            return
        seen.add(id(target))
        code = target.__code__
        out.append(f"{code.co_filename}:{code.co_firstlineno}")  # errors point at these lines
        try:
            out.append(inspect.getsource(target))
        except (OSError, TypeError):
            out.append(code.co_code.hex())
        cells = dict(zip(code.co_freevars, target.__closure__ or ()))
        for chain in sorted(set(_chains(code))):
            root = chain[0]
            if root in cells and _has_contents(cells[root]):
                v = cells[root].cell_contents
            elif root in target.__globals__:
                v = target.__globals__[root]
            else:
                continue  # a builtin or a local
            out.append(".".join(chain))
            for name in chain[1:]:  # follow modules and classes; stop at anything else
                if not isinstance(v, (types.ModuleType, type)):
                    break
                try:
                    v = _attribute(v, name)
                except AttributeError:
                    break
            constant(v)
        for v in target.__defaults__ or ():
            constant(v)

    def constant(v: Any) -> None:
        """Every value a kernel can see counts, including functions and containers in closures:
        kernels made by one factory share their source and differ only in these."""
        if isinstance(v, types.FunctionType) or hasattr(v, "__tile_function__"):
            out.append(f"{v.__module__}.{v.__qualname__}")  # the public stubs share one source
            if not (getattr(v, "__tile_function__", v).__module__ or "").startswith(_PACKAGE):
                visit(v)  # (tilecraft's own functions count through package_digest)
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
        elif isinstance(v, types.ModuleType):
            out.append(f"module {v.__name__}")
        else:  # an object printed with its address gives a key no other process computes
            out.append(f"{type(v).__qualname__}:{v!r}")

    visit(fn)
    return out


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


def _checksum(key: str, payload: bytes) -> str:
    return hashlib.sha256(key.encode() + b"\0" + payload).hexdigest()


class DiskCache:
    """Entries by key as checksummed JSON under `root/folder` (`encode` makes an entry's JSON data,
    `decode` takes it back, raising ValueError or TileError for data it cannot take); disabled
    when the cache directory knob is off."""

    def __init__(self, root: Path | None, folder: str = "ir", encode: Callable[[Any], Any] = to_data,
                 decode: Callable[[Any], Any] = from_data) -> None:
        self.root = root / folder if root is not None else None
        self.encode, self.decode = encode, decode

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def path(self, key: str) -> Path | None:
        """Where the entry for `key` lives (None: the cache is off)."""
        return self._path(key) if self.root is not None else None

    def get(self, key: str) -> Any:
        """The entry for `key`, or None when there is none or it is damaged (then it is deleted
        with a warning, and the caller computes it again)."""
        if self.root is None:
            return None
        path = self._path(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        header, _, payload = raw.partition(b"\n")
        try:
            if header.decode("ascii") != _checksum(key, payload):
                raise ValueError("checksum mismatch")
            return self.decode(json.loads(payload))
        except (ValueError, UnicodeDecodeError, RecursionError, TileError) as exc:
            warnings.warn(f"tilecraft: discarding damaged cache entry {path} ({str(exc).splitlines()[0][:80]}); "
                          f"computing it again", RuntimeWarning, stacklevel=2)
            try:
                path.unlink()
            except OSError:
                pass
            return None

    def put(self, key: str, entry: Any) -> None:
        if self.root is None:
            return
        path = self._path(key)
        try:
            payload = json.dumps(self.encode(entry), separators=(",", ":")).encode()
        except (TypeError, ValueError):
            return  # data JSON cannot hold (options of a kernel variant): not cached
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(_checksum(key, payload).encode() + b"\n" + payload)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs the work again


def default_cache() -> DiskCache:
    """The compile cache: optimized Tile IR."""
    return DiskCache(knobs.cache_dir())
