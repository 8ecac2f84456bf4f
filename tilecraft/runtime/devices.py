"""Which GPU a CUDA launch runs on: the one holding its arrays, never merely the current one.

Triton's `JITFunction.run` launches on torch's current device whatever device the tensors are
on; cuTile's `ct.launch` takes a stream, whose device is fixed. tilecraft runs a CUDA launch on
the device of its arrays (all on one; with no arrays, the stream's device where the stream says,
else the current one), made current for the launch where it is not (`torch.cuda.device`), so the
kernel is compiled for that device's capability, loaded into its context and given its scratch.
A stream that says it belongs to another device is refused, naming the argument, before
anything runs (torch streams say by `device_index`, CuPy streams by `device_id`); a raw handle
or a `__cuda_stream__` object does not say, and CUDA itself refuses a launch on a stream of
another device than the current one.

Cached launches keep their cost where the arrays are on the current device: the fast-path key
holds each tensor's device, a fast entry the device it was made on (one comparison with the
current device per launch), and the native quick launcher the CUDA context its kernel was
loaded in (compared in C with the current context, which it read anyway). A cached launch on
another device than the current one takes `_launch_on` in launch.py: the stream checked, then
the launch again with the arrays' device current.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterator, Sequence

from .args import ArrayArg, ListArg


def _flat(arrays: Sequence[ArrayArg | ListArg]) -> Iterator[ArrayArg]:
    for a in arrays:
        if isinstance(a, ListArg):
            yield from _flat(a.items)
        else:
            yield a


def array_device(arrays: Sequence[ArrayArg | ListArg]) -> int | None:
    """The index of the CUDA device holding `arrays` (CUDA tensors); None when none says. A
    ValueError naming two arrays on different devices."""
    import torch
    found: tuple[int, ArrayArg] | None = None
    for a in _flat(arrays):
        device = getattr(a.data, "device", None)
        if not isinstance(device, torch.device) or device.index is None:
            continue
        if found is None:
            found = (device.index, a)
        elif device.index != found[0]:
            raise ValueError(f"Arrays are on different devices (`{found[1].name}` on cuda:{found[0]}, `{a.name}` "
                             f"on cuda:{device.index}); all arrays of a launch must be on one device")
    return None if found is None else found[0]


def stream_device(stream: Any) -> int | None:
    """The index of the device `stream` belongs to, where it says (a torch stream's
    `device_index`, a CuPy stream's `device_id`); None for handles and other streams."""
    for attr in ("device_index", "device_id"):
        index = getattr(stream, attr, None)
        if type(index) is int:
            return index
    return None


def check_stream(stream: Any, device: int) -> None:
    """A ValueError, before anything runs, when `stream` says it belongs to another device than
    `device` (the arrays')."""
    own = stream_device(stream)
    if own is not None and own != device:
        raise ValueError(f"Argument `stream` is a stream of cuda:{own}, but the launch's arrays are on cuda:{device}; "
                         f"pass a stream of cuda:{device} (e.g. torch.cuda.current_stream({device})), or 0 for its "
                         f"default stream")


def launch_device(arrays: Sequence[ArrayArg | ListArg], stream: Any) -> int:
    """The device a CUDA launch of `arrays` on `stream` runs on (module docstring), its stream
    checked against it."""
    device = array_device(arrays)
    if device is None:
        own = stream_device(stream)
        return own if own is not None else current_device()
    check_stream(stream, device)
    return device


def current_device() -> int:
    """The current CUDA device's index, read as `launching.current_stream` reads it (torch's own,
    without `torch.cuda.current_device`'s lazy-initialization check: a cached launch calls it).
    The first call binds this module's name to that function itself."""
    global current_device
    import torch
    current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    return current_device()


def using(device: int | None) -> ContextManager[Any]:
    """A context with CUDA device `device` current (None, or the current one: nothing changes)."""
    if device is None or device == current_device():
        return contextlib.nullcontext()
    import torch
    return torch.cuda.device(device)
