"""The Triton backend's side of split-K, tile-split and stream-K launches (backends/splitting.py,
backends/tile_splitting.py, backends/stream_k.py): how many splits or programs a launch gets,
from the SM count of the GPU holding its tensors, and the workspaces, torch tensors allocated on
the launch's stream (the caching allocator reuses one only after the stream's later work, so
the kernels always see it alive)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import torch

from ...language.dtypes import DType
from ...passes.block_merge import Merge
from ..splitting import Grid, Split, auto_split, forced_split
from ..stream_k import auto_programs
from ..tile_splitting import MergeFinder, TilePieces, auto_count
from .launching import is_current, stream_context

_sms: dict[int, int] = {}
_assumed: list[int] = []  # `assumed_sms`'s count, innermost last


@contextlib.contextmanager
def assumed_sms(count: int) -> Iterator[None]:
    """Choose launches' splits and merges inside as on a GPU of `count` SMs, whatever holds the
    tensors (`tilecraft inspect --grid`, which compiles for a GPU that is not here)."""
    _assumed.append(count)
    try:
        yield
    finally:
        _assumed.pop()


def _device(args: Sequence[Any]) -> torch.device | None:
    """The device of a launch's tensors (None when it passes none directly)."""
    return next((a.device for a in args if isinstance(a, torch.Tensor)), None)


def sm_count(index: int) -> int:
    """The SM count of CUDA device `index` (asked once)."""
    if index not in _sms:
        _sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sms[index]


def launch_sms(args: Sequence[Any]) -> int | None:
    """The SM count of the GPU holding a launch's tensors (None off CUDA), or `assumed_sms`'s."""
    if _assumed:
        return _assumed[-1]
    device = _device(args)
    if device is None or device.type != "cuda":
        return None
    return sm_count(device.index if device.index is not None else torch.cuda.current_device())


def choose(grid: Grid, args: Sequence[Any], forced: int | None, k_extent: int | None,
           pieces: TilePieces) -> Split | None:
    """A launch's split: `forced` splits on any 1-D grid, of tiles cut as `pieces` forces (else
    whole), else `auto_split` (for a K loop reaching `k_extent`; tiles whole or cut into one of
    `pieces`' counts) on a CUDA device."""
    if forced is not None:
        return forced_split(grid, forced, pieces.forced or 1)
    sms = launch_sms(args)
    if sms is None:
        return None
    counts = (pieces.forced,) if pieces.forced else (1, *pieces.counts)
    return auto_split(grid, sms, k_extent, counts, pieces.elements)


def choose_tile_split(grid: Grid, args: Sequence[Any], pieces: TilePieces) -> int | None:
    """A launch's tile-split count: `pieces`' forced one on any grid, else `auto_count` of
    `pieces`' counts on a CUDA device."""
    if pieces.forced is not None:
        return pieces.forced
    sms = launch_sms(args)
    return None if sms is None else auto_count(grid, sms, pieces.counts, pieces.elements)


def choose_block_merge(grid: Grid, args: Sequence[Any], finder: MergeFinder, shapes: Sequence[tuple[int, int]],
                       automatic: bool) -> Merge | None:
    """A launch's merge: of `shapes` (one, forced) on any grid, or (`automatic`) of the first of
    those `auto_merge` ranks (counting the programs each merge found runs) whose programs all
    line up, on a CUDA device."""
    if not automatic:
        return finder.first(grid, args, shapes, everywhere=False)
    sms = launch_sms(args)
    ranked = [] if sms is None else finder.ranked(grid, args, shapes, sms)
    return ranked[0] if ranked else None


def choose_stream_k(grid: Grid, args: Sequence[Any], forced: int | None, tile_elements: int) -> int | None:
    """A launch's stream-K program count: `forced` on any grid, else `auto_programs` on a CUDA device."""
    if forced is not None:
        return forced
    sms = launch_sms(args)
    return None if sms is None else auto_programs(grid, sms, tile_elements)


def stream_k_workspace(shape: tuple[int, ...], counter_rows: int, dtype: DType, args: Sequence[Any],
                       stream: Any) -> torch.Tensor:
    """`workspace` with its last `counter_rows` rows zeroed on the launch's stream."""
    with _on_stream(args, stream):
        work = torch.empty(shape, dtype=getattr(torch, dtype.name), device=_device(args))
        work[-counter_rows:].zero_()
    return work


def workspace(shape: tuple[int, ...], dtype: DType, args: Sequence[Any], stream: Any) -> torch.Tensor:
    """An uninitialized tensor of `shape` and `dtype` on the launch's device, allocated on its stream."""
    with _on_stream(args, stream):
        return torch.empty(shape, dtype=getattr(torch, dtype.name), device=_device(args))


def quick_workspace(shape: tuple[int, ...], dtype: DType, args: Sequence[Any], stream: Any) -> torch.Tensor | None:
    """`workspace` for the runtime's quick path: None, having allocated nothing, unless the
    launch's tensors are on the current CUDA device and `stream` is its current stream (where
    the allocation needs no stream made current, and the specialized launchers' device is the
    one they were made on: the quick path compares neither)."""
    device = _device(args)
    if device is None or device.type != "cuda" or device.index != torch._C._cuda_getDevice() or not is_current(stream):
        return None
    return torch.empty(shape, dtype=getattr(torch, dtype.name), device=device)


def _on_stream(args: Sequence[Any], stream: Any) -> Any:
    """A context making `stream` current where the launch's tensors are on a CUDA device."""
    device = _device(args)
    return stream_context(stream) if device is not None and device.type == "cuda" else contextlib.nullcontext()
