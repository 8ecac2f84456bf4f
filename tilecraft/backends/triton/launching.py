"""GPU launch plumbing of the Triton backend: streams, scratch memory, how many programs a
grid-loop kernel runs, and the direct launcher of the runtime's fast path.

The direct launcher (`DirectLauncher`) is what a cached `ct.launch` calls. It is made for one
argument specialization (the runtime's fast-path key fixes every array's dtype, device, shape,
strides and alignment), so its argument list is a lambda with those shapes and strides written
in as constants and each array passed as its address (`baked_flatten`): Triton's C launcher
then neither calls `data_ptr()` nor asks the driver about each pointer. When the compiled kernel
needs no scratch memory, it calls that C launcher itself, skipping Triton's Python wrapper, or
where it can, tilecraft's own smaller one (native_launch.py); `DirectLauncher.fused_launch` is
that native call as one expression, for the runtime's quick path, which with it runs in C.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from typing import Any, Callable, NamedTuple, Sequence

import torch
import triton
from triton.runtime import driver
from triton.tools.tensor_descriptor import TensorDescriptor

from ..base import FusedLaunch
from . import native_launch
from .descriptor_args import ExpandedLauncher
from .lower import LoweredKernel
from .native_launch import Grid

_thread = threading.local()


def _torch_alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_allocator() -> None:
    """Tensor descriptors built in a kernel need global scratch memory: give Triton a torch
    allocator, once per thread (Triton keeps the allocator in a context variable)."""
    if not getattr(_thread, "allocator", False):
        triton.set_allocator(_torch_alloc)
        _thread.allocator = True


_TORCH_STREAM = (torch.cuda.Stream, "cuda_stream")
"""`stream_handle`'s first case as data: the common stream type and the attribute holding its
handle, which the native quick launcher reads without calling `stream_handle`."""


def stream_handle(stream: Any) -> int:
    """The raw CUDA handle of `stream`: a handle (0 = the default stream), a torch stream
    (`.cuda_stream`), a CuPy stream (`.ptr`) or any object with the `__cuda_stream__` protocol."""
    if type(stream) is torch.cuda.Stream:  # the common case first: one attribute read (_TORCH_STREAM)
        return stream.cuda_stream
    if isinstance(stream, int):
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int((protocol() if callable(protocol) else protocol)[1])
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(f"Unsupported stream type {type(stream).__name__}: pass a torch or CuPy stream, an object "
                    f"with __cuda_stream__, a raw CUstream handle, or 0 for the default stream")


def current_stream() -> int:
    """The stream Triton launches on (the current torch stream of the current device)."""
    return torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())


def is_current(stream: Any) -> bool:
    """Whether launching on `stream` is launching on the current stream (None stands for it)."""
    return stream is None or stream_handle(stream) == current_stream()


def stream_context(stream: Any) -> Any:
    """Make `stream` current for the duration of a `with`: nothing to do where it is
    (`is_current`; making a stream current costs tens of microseconds of host time)."""
    if is_current(stream):
        return contextlib.nullcontext()
    if not isinstance(stream, torch.cuda.Stream):
        stream = torch.cuda.ExternalStream(stream_handle(stream))
    return torch.cuda.stream(stream)


_MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 65536  # every NVIDIA GPU from sm_80 on


def programs_per_sm(shared: int, registers: int, warps: int, shared_limit: int,
                    register_limit: int = REGISTERS_PER_SM) -> int:
    """How many programs of a kernel using `shared` bytes of shared memory and `registers` per
    thread on `warps` warps an SM runs at once (at least 1), by its shared memory, registers and
    threads."""
    threads = 32 * warps
    return max(1, min(shared_limit // max(shared, 1), register_limit // max(registers * threads, 1),
                      _MAX_THREADS_PER_SM // threads))


def sm_slots(compiled: Any) -> int:
    """How many programs of `compiled` the current GPU runs at once: SMs times the blocks per SM
    that its shared memory, registers and threads allow."""
    props = driver.active.utils.get_device_properties(torch.cuda.current_device())
    # loading the module fills in n_regs; _init_handles (not the `run` property) raises
    # OutOfResources again for a kernel an earlier load found too big (Triton caches that
    # CompiledKernel and its `run` then returns a raiser, leaving n_regs unset)
    compiled._init_handles()
    per_sm = programs_per_sm(compiled.metadata.shared, compiled.n_regs, compiled.metadata.num_warps,
                             props["max_shared_mem"], props["max_num_regs"])
    return props["multiprocessor_count"] * per_sm


def grid_loop_launch(grid: tuple[int, int, int], flat: tuple, slots: int) -> tuple[tuple[int, int, int], tuple] | None:
    """(launch grid, Triton args) of a grid-loop kernel asked to run `grid` blocks on a GPU that
    runs `slots` programs at once; None when its one-program-per-block variant should run them
    instead (all blocks fit at once anyway, or their count overflows the loop's int32)."""
    blocks = grid[0] * grid[1] * grid[2]
    if blocks <= slots or blocks >= 2**31:
        return None
    return (slots, 1, 1), (*flat, *grid)


def host_descriptors_allowed(args: Sequence[Any], arrays: Sequence[int]) -> bool:
    """Whether the arrays at positions `arrays` of `args` can have host descriptors: a host
    descriptor needs every extent positive."""
    return all(args[i].numel() for i in arrays)


def launch_lambda(text: str, **names: Any) -> Callable[..., tuple]:
    """The launch-argument lambda `text` (generated by lower.py), with the names it may use."""
    return eval(text, {"torch": torch, "TensorDescriptor": TensorDescriptor, **names})  # noqa: S307 - our own code


_ARRAY = re.compile(r"a(\d+)(?:\.view\(torch\.uint8\))?")
_SIZE = re.compile(r"a\d+\.(?:shape\[\d+\]|stride\(\d+\))")


def baked_exprs(lowered: LoweredKernel, args: Sequence[Any], flat: tuple, address: str = "a{}.data_ptr()") -> list[str] | None:
    """The launch-argument expressions of one specialization (`flat`: `args` flattened the
    general way), over `a<i>` (argument i): each torch tensor as its address, written
    `address.format(i)`, and shapes and strides as the constants they are for every call with
    the same key. None for kernels with list arguments (their tables are made at each launch)."""
    if not lowered.launch or any(expr.startswith("*") for expr in lowered.launch):
        return None
    exprs = []
    for expr, value in zip(lowered.launch, flat):
        array = _ARRAY.fullmatch(expr)
        if array and isinstance(args[int(array[1])], torch.Tensor):
            exprs.append(address.format(array[1]))
        elif _SIZE.fullmatch(expr) and type(value) is int:
            exprs.append(repr(value))
        else:
            exprs.append(expr)
    return exprs


def baked_flatten(lowered: LoweredKernel, args: Sequence[Any], flat: tuple) -> Callable[..., tuple]:
    """`baked_exprs` as the launch-argument lambda (the general lambda for kernels with list
    arguments)."""
    exprs = baked_exprs(lowered, args, flat)
    if exprs is None:
        return launch_lambda(lowered.flatten)
    params = ", ".join(f"a{i}" for i in range(len(args)))
    return launch_lambda(f"lambda {params}: ({''.join(e + ', ' for e in exprs)})")


_MAP = re.compile(r"m(\d+)\.(\d+)")
"""A fused launch's tensor map of descriptor d of argument j (`native_launch.quick`'s `m<d>.<j>`)."""
_PLAIN = re.compile(rf"[ap]\d+|-?\d+|{_MAP.pattern}")
"""A fused launch's argument: an argument, an address, a constant int (nothing to evaluate), or
a descriptor's tensor map (`_MAP`)."""


class Expanded(NamedTuple):
    """A host-descriptor kernel's launch through `ExpandedLauncher` (descriptor_args.py): its
    arguments flattened by `flatten` (`baked_flatten`'s with None for each descriptor), the
    descriptors being those `start` to `start + count`, made from the kernel arguments at
    `arrays`. `fused_args`: per packing letter of its native launcher, as `native_launch.quick`
    takes them (None without that launcher)."""

    launcher: ExpandedLauncher
    flatten: Callable[..., tuple]
    start: int
    count: int
    arrays: tuple[int, ...]
    fused_args: tuple[str, ...] | None


def expanded_launch(compiled: Any, lowered: LoweredKernel, args: Sequence[Any], flat: tuple) -> Expanded | None:
    """For a kernel taking host descriptors (`LoweredKernel.host_descriptors`), specialized for
    `args` (`flat`: flattened the general way): its `Expanded` launch; None where it has no
    descriptors, list arguments, or a launcher ExpandedLauncher cannot call."""
    made = lowered.host_descriptors
    exprs = baked_exprs(lowered, args, flat) if made else None
    if exprs is None:
        return None
    start, count = made[0][0], len(made)
    if [m[0] for m in made] != list(range(start, start + count)):
        return None
    launcher = ExpandedLauncher.of(compiled, [launch_lambda(m[2]) for m in made])
    if launcher is None:
        return None
    arrays = tuple(m[1] for m in made)
    exprs[start:start + count] = ["None"] * count
    params = ", ".join(f"a{i}" for i in range(len(args)))
    flatten = launch_lambda(f"lambda {params}: ({''.join(e + ', ' for e in exprs)})")
    fused = None
    if launcher.native is not None:
        plain = baked_exprs(lowered, args, flat, address="p{}")
        fused = (*plain[:start], *fused_maps(launcher, arrays, args), *plain[start + count:])
    return Expanded(launcher, flatten, start, count, arrays, fused)


def fused_maps(launcher: ExpandedLauncher, arrays: Sequence[int], args: Sequence[Any]) -> list[str]:
    """The fused-launch arguments of `launcher`'s descriptors, made from the kernel arguments
    `args` at `arrays`: each descriptor's map (`m<d>.<j>`), then its shape and strides, constants
    for every call with the same key (only with `launcher.native`)."""
    return [x for d, j in enumerate(arrays) for x in (f"m{d}.{j}", *map(str, launcher.expansion(d, args[j])[1:]))]


class DirectLauncher:
    """`launch(grid, args, stream)` through a Triton `CompiledKernel`'s launcher, for one argument
    specialization (see the module's docstring; made by `TritonKernel.specialize`). A grid-loop
    kernel's launcher has `slots` (the programs the GPU runs at once) and `small_grid`, which
    makes the launcher of its one-program-per-block variant (see `grid_loop_launch`), and where
    it has a host-descriptor variant, `host_variant`, which makes that variant's launcher, for
    the grids that run the loop. `fused_args`: `baked_exprs` with addresses written `p<i>`, for
    `fused_launch` (None: no fused launch).
    `expanded`: a host-descriptor kernel's launch with each array's descriptors made once
    (`expanded_launch`; its flattening replaces `flatten`). `shared`: the dynamic shared memory
    its native launches ask for, where more than the kernel uses (occupancy.py).
    It is made, and launched, with its arrays' device current (`ct.launch` sees to that:
    runtime/devices.py); its native launches decline where another device's context is."""

    def __init__(self, compiled: Any, flatten: Callable[..., tuple], descriptors: bool, slots: int | None = None,
                 small_grid: Callable[[], Any] | None = None, host_variant: Callable[[], Any] | None = None,
                 fused_args: Sequence[str] | None = None, expanded: Expanded | None = None,
                 shared: int | None = None, grid: Grid | None = None) -> None:
        launcher = compiled.run  # loads the module on first access
        self._flatten = expanded.flatten if expanded is not None else flatten
        self._expanded = expanded
        self._fused_args = fused_args
        self._slots = slots
        self._grid = grid
        self._small_grid = small_grid
        self._small: Any = None
        self._host_variant = host_variant
        self._host: Any = None
        if descriptors or launcher.global_scratch_size or launcher.profile_scratch_size:
            self._descriptors = descriptors
            self._call = launcher
            self._head = (compiled.function, compiled.packed_metadata, None, None, None)
        else:  # Triton's C launcher itself, with the arguments its Python wrapper would add
            self._descriptors = False
            self._call = launcher.launch
            self._head = (compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                          compiled.packed_metadata, None, None, None)
        self._launcher = None if self._descriptors else native_launch.launcher_for(compiled, shared=shared)
        self._native, self._native_head = self._launcher[:2] if self._launcher is not None else (None, ())

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None) -> None:
        flat = self._flatten(*args)
        if self._slots is not None:
            looped = grid_loop_launch(grid, flat, self._slots)
            if looped is None:
                return self._small_launcher().launch(grid, args, stream)
            if self._host_variant is not None:
                return self._host_launcher().launch(grid, args, stream)
            grid, flat = looped
        handle = current_stream() if stream is None else stream_handle(stream)
        if self._expanded is not None:
            ex = self._expanded
            ex.launcher.launch(grid, handle, flat[:ex.start], [args[i] for i in ex.arrays], flat[ex.start + ex.count:])
            return
        if self._native is not None and self._native(grid[0], grid[1], grid[2], handle, *self._native_head, *flat):
            return
        if self._descriptors:
            ensure_allocator()
        self._call(grid[0], grid[1], grid[2], handle, *self._head, *flat)

    def _small_launcher(self) -> Any:
        """The one-program-per-block variant's launcher (made on first use)."""
        if self._small is None:
            self._small = self._small_grid()
        return self._small

    def _host_launcher(self) -> Any:
        """The host-descriptor variant's launcher (made on first use)."""
        if self._host is None:
            self._host = self._host_variant()
        return self._host

    def fused_launch(self, grid: tuple[Grid, Grid] | None = None) -> FusedLaunch | None:
        """`launch` as one expression for the runtime's quick path (`fused_launch`): the native
        launcher's call, with each host descriptor's map kept per address. `grid`: (the user's
        one grid, the grid this kernel runs for it: another where it is launched in place of
        another kernel, backends/tile_splitting.py), for a launcher specialized for one grid.
        A grid-loop kernel has one only for one grid: what `launch` runs for it, the
        one-program-per-block variant's, the host-descriptor variant's or the loop's (its launch
        grid the programs the GPU runs at once, the grid's sizes constant arguments). None
        otherwise (`fused_launch` says what else declines)."""
        if self._slots is not None:
            grid = grid or (None if self._grid is None else (self._grid, self._grid))
            return None if grid is None else self._grid_loop_fused(grid)
        return self._native_fused(grid)

    def _grid_loop_fused(self, grid: tuple[Grid, Grid]) -> FusedLaunch | None:
        """A grid-loop kernel's `fused_launch` for the one grid `grid` (as there)."""
        user, blocks = grid
        if grid_loop_launch(blocks, (), self._slots) is None:
            return self._small_launcher().fused_launch(grid=grid)
        if self._host_variant is not None:
            return self._host_launcher().fused_launch(grid=grid)
        return self._native_fused((user, (self._slots, 1, 1)), tuple(map(str, blocks)))

    def _native_fused(self, grid: tuple[Grid, Grid] | None, trailing: tuple[str, ...] = ()) -> FusedLaunch | None:
        """The native launcher's fused launch, with `trailing` after the kernel's arguments."""
        ex = self._expanded
        native, args, encode = ((self._launcher, self._fused_args, None) if ex is None
                                else (ex.launcher.native, ex.fused_args, ex.launcher.map_bytes))
        return fused_launch(native, None if args is None else (*args, *trailing), encode, grid=grid)


def fused_launch(launcher: native_launch.Native | None, fused_args: Sequence[str] | None,
                 encode: Callable[[int, Any], bytes] | None = None,
                 grid: tuple[Grid, Grid] | None = None) -> FusedLaunch | None:
    """A launch through `launcher` with `fused_args` (per packing letter, as `native_launch.quick`
    takes them; `encode(d, array)`: the map of descriptor d of an array) as one expression for
    the runtime's quick path (see `FusedLaunch`); its `native` makes the whole quick launcher in
    C instead, and the expression stays what the C one is tested against. `grid`: (the one grid
    it launches, the grid it launches that on), for a kernel specialized for one grid (it
    declines any other). None without the launcher or with an argument that is more than an
    address, a scalar, a constant or a descriptor's map."""
    if launcher is None or fused_args is None or not all(_PLAIN.fullmatch(e) for e in fused_args):
        return None
    env: dict[str, Any] = {"_native": launcher.launch, "_stream": stream_handle, "_map": encode}
    env.update((f"_h{i}", v) for i, v in enumerate(launcher.head))
    args = [f"_h{i}" for i in range(len(launcher.head))] + [_MAP.sub(r"_map(\1, a\2)", e) for e in fused_args]
    dims = "gx, gy, gz" if grid is None else ", ".join(map(str, grid[1]))
    call = f"_native({dims}, stream if type(stream) is int else _stream(stream), {', '.join(args)})"
    if grid is not None:
        call = f"(gx, gy, gz) == {grid[0]} and {call}"
    native = functools.partial(native_launch.quick, launcher, fused_args, stream=(*_TORCH_STREAM, stream_handle),
                               encode=encode, grid=grid)
    return FusedLaunch(call, env, native, None if grid is None else grid[0])
