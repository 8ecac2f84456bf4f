"""`ct.launch(stream, grid, kernel, args)`: validate, pick a backend, compile once, run (a
CUDA launch on the device holding its arrays: devices.py).

Every check happens before anything runs, so a bad launch writes nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import knobs
from ..backends import registry
from ..backends.base import BackendKind
from ..backends.registry import CPU, CUDA, BackendSpec
from . import devices
from .args import ArrayArg, ListArg, backend_args
from .fastpath import Quick, quick_launcher
from .kernel import Kernel, VariantKey

_GRID_LIMIT = 2**24 - 1
_NO_STREAM = "Stream is required for CUDA launches (pass 0 for the default stream)"


def check_grid(grid: Any) -> tuple[int, int, int]:
    """`grid` as three block counts, missing ones 1 (so () is one block, as in cuTile):
    TypeError for anything but a tuple of ints, ValueError for a 4-d grid and for counts below 0
    or above the 24-bit limit."""
    if not isinstance(grid, tuple):
        raise TypeError(f"grid must be a tuple of 1 to 3 ints, got {type(grid).__name__}")
    if len(grid) > 3:
        raise ValueError(f"grid has {len(grid)} dimensions; at most 3 are allowed")
    for i, g in enumerate(grid):
        if not isinstance(g, (int, np.integer)) or isinstance(g, (bool, np.bool_)):
            raise TypeError(f"grid[{i}] = {g!r} must be a non-negative int, got {type(g).__name__}")
        if g < 0:
            raise ValueError(f"grid[{i}] = {g} is negative; block counts must be >= 0")
        if g > _GRID_LIMIT:
            raise ValueError(f"Grid[{i}] exceeds 24-bit limit: max={_GRID_LIMIT}, got={g}. "
                             f"Use multiple kernel launches for larger workloads.")
    padded = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
    return padded  # type: ignore[return-value]


def _parse_backend(value: Any, source: str) -> BackendSpec | None:
    """The registered backend `value` names (a name or a BackendKind); None when it is empty."""
    if value in (None, ""):
        return None
    name = value.value if isinstance(value, BackendKind) else value
    spec = registry.get(name) if isinstance(name, str) else None
    if spec is None:
        choices = ", ".join(s.name for s in registry.all())
        raise ValueError(f"{source} = {value!r} is not a backend; choose one of {choices}")
    return spec


def choose_backend(arrays: list[ArrayArg | ListArg], requested: Any) -> BackendSpec:
    """From the launch option, else TILECRAFT_BACKEND, else the default for where the arrays live."""
    kinds = {a.device for a in arrays}
    if len(kinds) > 1:
        where = ", ".join(f"an array on {a.device}" for a in arrays[:4])
        raise ValueError(f"Arrays are on different devices ({where}); all arrays of a launch must be on "
                         f"one device")
    spec = _parse_backend(requested, "backend") or _parse_backend(knobs.BACKEND.get(), knobs.BACKEND.name)
    if not kinds:  # no arrays to say where: the backend asked for, else the CPU's default
        return spec or registry.default_for(CPU)
    kind = kinds.pop()
    if spec is None:
        return registry.default_for(kind)
    if spec.device != kind:
        others = ", ".join(s.name for s in registry.all() if s.device == kind)
        raise ValueError(f"The {spec.name} backend needs {spec.device.upper()} arrays; these arrays are on "
                         f"{kind.upper()} (backends for {kind.upper()} arrays: {others})")
    return spec


def device_arch(device: int) -> str:
    """`sm_<major><minor>` of CUDA device `device`."""
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def launch(stream: Any, grid: Any, kernel: Kernel, kernel_args: Any, /, *,
           programmatic_dependent_launch: bool = False, backend: Any = None) -> None:
    """Run `kernel` on `grid` blocks with `kernel_args` on `stream`.

    `programmatic_dependent_launch`: the kernel may start before the stream's previous kernel
    has finished (CUDA's PDL attribute, sm_90+); it must call `grid_dependency_control_wait()`
    before it reads what that kernel wrote. `backend` (a tilecraft extension) forces a
    registered backend by name: 'interpreter', 'triton', 'triton-interpret' or one added in
    tilecraft/backends.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"launch() expects a kernel made by @tilecraft.kernel, got {type(kernel).__name__}")
    quick = kernel.quick  # the last variant's launch, when these arguments have its key exactly
    if quick is not None and backend is None and not programmatic_dependent_launch \
            and quick(stream, grid, kernel_args):
        return
    # a dependent launch takes the full path: the fast path's launchers are compiled without PDL
    fast = None if programmatic_dependent_launch else kernel.fast_key(kernel_args)
    if fast is not None:
        fast_entry = (fast[0], backend, knobs.BACKEND.raw())  # a TILECRAFT_BACKEND change misses
        hit = kernel.fast.get(fast_entry)
        if hit is not None:
            compiled, spec, as_given, kernel.quick, device = hit
            if spec.device == CUDA and stream is None:
                raise TypeError(_NO_STREAM)
            if device is not None and device != devices.current_device():
                return _launch_on(device, stream, grid, kernel, kernel_args, backend)
            flat = fast[1] if as_given else _converted(fast[1], spec)
            if flat is not None:  # else the full path below says which argument the backend refuses
                g = grid
                if type(g) is tuple and len(g) == 1 and type(g[0]) is int and 0 < g[0] <= _GRID_LIMIT:
                    compiled.launch((g[0], 1, 1), flat, stream)
                else:
                    grid3 = check_grid(grid)
                    if 0 not in grid3:
                        compiled.launch(grid3, flat, stream)
                return
    grid3 = check_grid(grid)
    specs, arrays, flat = kernel.describe(kernel_args)
    spec = choose_backend(arrays, backend)
    device = None
    if spec.device == CUDA:
        if stream is None:
            raise TypeError(_NO_STREAM)
        device = devices.launch_device(arrays, stream)
    with devices.using(device):  # the arrays' device: compiled for, loaded in, launched on
        key = VariantKey(specs, tuple(a.facts for a in arrays), spec.name,
                         device_arch(device) if device is not None else None)
        variant = kernel.variant(key, spec)
        runtime_args = kernel.runtime_args(variant, flat, spec.to_array)
        if 0 in grid3:
            return
        variant.compiled.launch(grid3, runtime_args, stream, dependent=programmatic_dependent_launch)
        if fast is not None and (arrays or device is None):  # a CUDA launch without arrays runs where it is
            as_given = all(r is x for r, x in zip(runtime_args, fast[1]))  # the backend takes them unconverted
            specialized = variant.compiled.specialize(runtime_args)
            kernel.remember_fast(fast_entry, (specialized, spec, as_given,
                                              _quick_for(kernel, kernel_args, fast_entry, specialized, as_given),
                                              device))


def _converted(values: list[Any], spec: BackendSpec) -> list[Any] | None:
    """The fast path's arguments as backend `spec` takes them; None when it refuses one (a
    tensor that requires grad on the interpreter): its key does not see such properties."""
    try:
        return backend_args(values, spec.to_array)
    except (TypeError, ValueError, RuntimeError):
        return None


def _launch_on(device: int, stream: Any, grid: Any, kernel: Kernel, kernel_args: Any, backend: Any) -> None:
    """A cached launch of arrays on CUDA device `device`, not the current one: its stream
    checked, then launched as before with `device` current (devices.py)."""
    devices.check_stream(stream, device)
    with devices.using(device):
        launch(stream, grid, kernel, kernel_args, backend=backend)


def _quick_for(kernel: Kernel, kernel_args: tuple, fast_entry: tuple, specialized: Any, as_given: bool) -> Quick | None:
    """The quick launcher (`fastpath.quick_launcher`) of a fast-path entry (`fast_entry`: key,
    `backend` option, raw TILECRAFT_BACKEND): for launches without a `backend` option whose
    backend takes the arguments unconverted and whose specialized kernel has a `fused_launch`."""
    fused = getattr(specialized, "fused_launch", None)
    launch = fused() if fused is not None and as_given and fast_entry[1] is None else None
    if launch is None or kernel.plan is None:
        return None
    return quick_launcher(kernel.plan, kernel_args, knobs.BACKEND, fast_entry[2], launch, _GRID_LIMIT)
