"""The tuner's persistent cache: a search's result kept on disk, so that the same search in a
later process returns it without timing anything (`exhaustive_search(..., cache=True)`, or
TILECRAFT_TUNE_CACHE=1).

Two searches are the same when everything their timings depend on is: tilecraft's sources and
the kernels' (through `runtime.cache.entry_key`, which keys compiled IR the same way), each
configuration (as its text), its grid and hints, the arguments' specs, shapes, strides and
device, and the GPU's name. A configuration or argument whose text differs per process (an
object shown with its address) makes a search uncacheable: it is timed and nothing is written.
Entries live under `<TILECRAFT_CACHE_DIR>/tune`, checksummed as compiled IR is; delete that
folder to time again.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import knobs
from ..runtime.cache import DiskCache, entry_key
from ..runtime.kernel import Kernel
from .result import Measurement, TuningResult
from .timing import cuda_device_of

FORMAT = "tune-1"


def enabled(asked: bool | None) -> bool:
    """Whether a search uses the cache: as asked, else as TILECRAFT_TUNE_CACHE says."""
    return asked if asked is not None else knobs.TUNE_CACHE.get() == "1"


def _device_name(kernel: Kernel, args: tuple[Any, ...], stream: Any) -> str:
    """The device a launch with `args` runs on: 'cpu', or the CUDA GPU's name."""
    device = cuda_device_of(kernel, args, stream)
    if device is None:
        return "cpu"
    import torch
    return torch.cuda.get_device_name(device)


def _arrays_text(arrays: Sequence[Any]) -> list[Any]:
    """Shape and strides of every array (a list's, item by item)."""
    out: list[Any] = []
    for a in arrays:
        if hasattr(a, "items"):
            out.append(_arrays_text(a.items))
            continue
        strides = a.data.stride() if callable(getattr(a.data, "stride", None)) else a.data.strides
        out.append((tuple(a.data.shape), tuple(strides)))
    return out


def search_key(kernels: Sequence[Kernel], configs: Sequence[Any], grids: Sequence[tuple[int, ...]],
               hints: Sequence[dict[str, Any]], args_fn: Callable[[Any], tuple[Any, ...]], stream: Any) -> str | None:
    """The cache key of a search (per configuration: its kernel, text, grid, hints and the
    arguments `args_fn` gives it, one configuration's at a time), or None where some part's text
    would differ in another process, or where some configuration's arguments are not a launch's
    (the search then reports them)."""
    parts = []
    try:
        for kernel, config, grid, hint in zip(kernels, configs, grids, hints):
            args = tuple(args_fn(config))
            specs, arrays, _ = kernel.describe(args)
            parts.append((repr(config), grid, sorted(hint.items()), repr(specs), _arrays_text(arrays)))
            if len(parts) == 1:
                device = _device_name(kernel, args, stream)
        text = repr((parts, device))
    except Exception:  # noqa: BLE001 - a key is best effort: the search itself says what is wrong
        return None
    if " at 0x" in text:
        return None
    sources = [entry_key(fn, (), (FORMAT,)) for fn in dict.fromkeys(k.fn for k in kernels)]  # each kernel's
    return entry_key(kernels[0].fn, (text, sources), (FORMAT,))


def _entries() -> DiskCache:
    return DiskCache(knobs.cache_dir(), "tune", encode=lambda data: data, decode=_checked)


def _checked(data: Any) -> dict[str, Any]:
    """An entry's data, after checking its shape (ValueError: a damaged entry)."""
    if not (isinstance(data, dict) and isinstance(data.get("successes"), list)
            and isinstance(data.get("failures"), list) and isinstance(data.get("best"), int)):
        raise ValueError("not a tuning result")
    return data


def _exception_type(name: str) -> type[BaseException]:
    """The exception class `module:qualname` (Exception where it cannot be found now)."""
    module, _, qualname = name.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return Exception
    return found if isinstance(found, type) and issubclass(found, BaseException) else Exception


def load(key: str, configs: Sequence[Any]) -> tuple[TuningResult[Any], Path] | None:
    """The stored result of the search `key` for these configurations, and its file."""
    entries = _entries()
    data = entries.get(key)
    if data is None:
        return None
    try:
        successes = tuple(Measurement(config=configs[i], mean_us=mean, num_samples=n, error_margin_us=margin)
                          for i, mean, n, margin in data["successes"])
        failures = tuple((configs[i], _exception_type(kind), message) for i, kind, message in data["failures"])
        best = successes[data["best"]]
    except (TypeError, ValueError, IndexError):
        return None
    path = entries.path(key)
    assert path is not None
    return TuningResult(best=best, successes=successes, failures=failures), path


def store(key: str, result: TuningResult[Any], configs: Sequence[Any]) -> None:
    """Keep `result` as the result of the search `key` (configurations by their position)."""
    index = {id(c): i for i, c in enumerate(configs)}
    successes = [[index[id(m.config)], m.mean_us, m.num_samples, m.error_margin_us] for m in result.successes]
    failures = [[index[id(c)], f"{kind.__module__}:{kind.__qualname__}", message] for c, kind, message in result.failures]
    best = next(i for i, m in enumerate(result.successes) if m is result.best)
    _entries().put(key, {"successes": successes, "failures": failures, "best": best})
