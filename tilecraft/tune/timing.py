"""Clocks for the tuner: how long one launch takes where its arrays live.

CUDA launches are timed with CUDA events on the launch's stream, with the L2 cache flushed
before every timed launch (so a configuration is not favoured by data an earlier run left in
L2). Launches on the CPU (the interpreter and Triton's CPU interpreter) are timed by the wall
clock: there is no device to time, and CI tests the tuner there.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol, Sequence

from ..backends.registry import CUDA
from ..runtime import devices
from ..runtime.launch import choose_backend
from ..runtime.kernel import Kernel

Run = Callable[[], None]


class Clock(Protocol):
    def time_us(self, runs: Sequence[Run]) -> list[float]:
        """Run each of `runs` once, in order; return how long each took, in microseconds."""

    def finish(self) -> None:
        """Wait until everything started so far has run (a failure surfaces here)."""


class WallClock:
    """Wall-clock time of each run (CPU backends run synchronously)."""

    def time_us(self, runs: Sequence[Run]) -> list[float]:
        out = []
        for run in runs:
            start = time.perf_counter()
            run()
            out.append((time.perf_counter() - start) * 1e6)
        return out

    def finish(self) -> None:
        pass


class CudaClock:
    """CUDA-event time of each run on `stream` of CUDA device `device` (the arrays', where the
    launches run: runtime/devices.py, whichever device is current), each after a write of twice
    the L2 cache size.

    The runs are queued back to back and read after one synchronization, so the host's launch
    overhead overlaps the GPU's work instead of being timed."""

    def __init__(self, stream: Any, device: int) -> None:
        import torch

        self.torch = torch
        self.device = device
        self.stream = torch_stream(stream, device)
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.flush = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device=f"cuda:{device}")

    def time_us(self, runs: Sequence[Run]) -> list[float]:
        event = self.torch.cuda.Event
        pairs = []
        self.stream.wait_stream(self.torch.cuda.current_stream(self.device))  # arguments made on its current stream
        with self.torch.cuda.stream(self.stream):
            for run in runs:
                start, end = event(enable_timing=True), event(enable_timing=True)
                self.flush.zero_()
                start.record(self.stream)
                run()
                end.record(self.stream)
                pairs.append((start, end))
        self.stream.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in pairs]

    def finish(self) -> None:
        self.stream.synchronize()


def torch_stream(stream: Any, device: int) -> Any:
    """`stream` of CUDA device `device` (None: torch's current stream there, a torch stream, a
    raw handle, a CuPy stream or an object with `__cuda_stream__`) as a torch stream, for
    recording events on it (a handle is taken as `device`'s: torch would take it as the
    current device's)."""
    import torch

    if stream is None:
        return torch.cuda.current_stream(device)
    if isinstance(stream, torch.cuda.Stream):
        return stream
    from ..backends.triton.launching import stream_handle
    return torch.cuda.ExternalStream(stream_handle(stream), device=device)


def cuda_device_of(kernel: Kernel, args: Any, stream: Any) -> int | None:
    """The CUDA device a launch of `kernel` with `args` on `stream` runs on, as `ct.launch` picks
    its backend and device; None for a launch on the CPU."""
    _, arrays, _ = kernel.describe(args)
    if choose_backend(arrays, None).device != CUDA:
        return None
    return devices.launch_device(arrays, stream)


def clock_for(kernel: Kernel, args: Any, stream: Any, clocks: dict[Any, Clock]) -> Clock:
    """The clock for launching `kernel` with `args` on `stream`: by the device its arrays live on
    (`cuda_device_of`), one per device and stream, kept in `clocks`."""
    device = cuda_device_of(kernel, args, stream)
    if device is None:
        return clocks.setdefault("cpu", WallClock())
    key = (device, id(stream))
    if key not in clocks:
        clocks[key] = CudaClock(stream, device)
    return clocks[key]
