"""Time a kernel against PyTorch, side by side in one process: `bench_kernel` (and the
`tilecraft bench` command, tools/bench_command.py).

Both sides run on the same arguments with the tuner's clocks (tune/timing.py): on a GPU, CUDA
events on one stream with L2 flushed before every run; on the CPU backends, the wall clock. They
are timed in alternating rounds, so that a drift in the machine's speed (clocks, other work)
touches both, and compared by their medians. Before anything is timed, the kernel's output is
checked against what the PyTorch expression returns: the output array is filled with NaN (or
-1 for integers) first, so an element the kernel does not write fails the check.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from ..runtime.kernel import Kernel
from ..runtime.launch import launch
from ..tune.timing import Clock, CudaClock, WallClock, cuda_device_of

WARMUP_RUNS = 3
ROUNDS = 4  # the timed runs are split into this many rounds per side, sides alternating

TOLERANCE = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2,
             "float8_e4m3fn": 1e-1, "float8_e5m2": 2e-1}
"""Largest error accepted by default, relative to the largest magnitude of the expected output,
per output dtype (integers and bool: exact)."""


@dataclass(frozen=True)
class Check:
    """The kernel's output `name` against the PyTorch expression's result."""

    name: str
    error: float      # the largest |difference|, relative to the largest |expected value|
    tolerance: float
    unwritten: int    # elements still holding the fill (NaN / -1) where the expected value does not

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.error <= self.tolerance


@dataclass(frozen=True)
class BenchResult:
    """Medians and minima in microseconds (`torch_*` None without an expression)."""

    kernel: str
    backend: str
    device: str
    grid: tuple[int, ...]
    runs: int
    kernel_median_us: float
    kernel_min_us: float
    torch_expression: str | None = None
    torch_median_us: float | None = None
    torch_min_us: float | None = None
    check: Check | None = None

    @property
    def ratio(self) -> float | None:
        """torch's median over the kernel's: above 1, the kernel is faster."""
        return None if self.torch_median_us is None else self.torch_median_us / self.kernel_median_us

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "check_ok": None if self.check is None else self.check.ok}

    def report(self) -> str:
        where = f"{self.backend} ({self.device})" if self.device != "cpu" else f"{self.backend} (CPU)"
        clock = "CUDA events, L2 flushed before each run" if self.device != "cpu" else "wall clock"
        lines = [f"{self.kernel} on {where}, grid {self.grid}: {self.runs} timed runs each after {WARMUP_RUNS} "
                 f"warm-up, {clock}",
                 f"  tilecraft  median {self.kernel_median_us:10.1f} us  (min {self.kernel_min_us:.1f})"]
        if self.torch_median_us is not None:
            lines.append(f"  torch      median {self.torch_median_us:10.1f} us  (min {self.torch_min_us:.1f})  "
                         f"`{self.torch_expression}`")
            lines.append(f"  torch / tilecraft = {self.ratio:.2f}x (above 1: tilecraft is faster)")
        if self.check is not None:
            c = self.check
            verdict = "ok" if c.ok else "FAILED" if c.unwritten or c.error == math.inf else \
                "FAILED (a kernel that computes in lower precision, tf32 for one, needs a looser bound: --rtol)"
            unwritten = f", {c.unwritten} elements not written" if c.unwritten else ""
            lines.append(f"  check: `{c.name}` against the expression's result: largest error {c.error:.2e} of the "
                         f"largest |value| (bound {c.tolerance:.0e}){unwritten}: {verdict}")
        return "\n".join(lines)


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _poison(t: torch.Tensor) -> None:
    """Fill an output with what a kernel would not write: NaN for floats, all ones for integers."""
    t.fill_(math.nan if t.dtype.is_floating_point else True if t.dtype == torch.bool else -1)


def _unwritten(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Where `got` still holds `_poison`'s fill and `want` does not (nowhere for bool)."""
    if got.dtype.is_floating_point:
        return torch.isnan(got) & ~torch.isnan(want)
    if got.dtype == torch.bool:
        return torch.zeros_like(got)
    fill = torch.full((), -1, dtype=got.dtype, device=got.device)
    return (got == fill) & (want.to(got.dtype) != fill)


def check_output(name: str, got: torch.Tensor, want: Any, tolerance: float | None = None) -> Check:
    """`got` (the kernel's output) against `want` (the expression's result, broadcast to it): the
    largest difference of finite values relative to the largest finite |expected value|;
    infinities and NaN must match (infinite error otherwise)."""
    want = torch.as_tensor(want, device=got.device).expand_as(got)
    unwritten = _unwritten(got, want)
    have, expected = got.double(), want.double()
    finite = torch.isfinite(have) & torch.isfinite(expected)
    special_ok = (torch.isnan(have) & torch.isnan(expected)) | (torch.isinf(expected) & (have == expected))
    bad = ~(finite | special_ok | unwritten)
    scale = expected[torch.isfinite(expected)].abs().max() if bool(torch.isfinite(expected).any()) else None
    diff = float((have[finite] - expected[finite]).abs().max()) if bool(finite.any()) else 0.0
    error = math.inf if bool(bad.any()) else diff / (float(scale) if scale is not None and float(scale) else 1.0)
    bound = tolerance if tolerance is not None else TOLERANCE.get(_dtype_name(got), 0.0)
    return Check(name, error, bound, int(unwritten.sum()))


def _clock(kernel: Kernel, args: Sequence[Any], stream: Any) -> tuple[Clock, str, Any]:
    """The clock for launches on the arguments' device (`cuda_device_of`), that device's name,
    and the stream to launch on (on a GPU: `stream`, else the device's current stream)."""
    index = cuda_device_of(kernel, tuple(args), stream)
    if index is None:
        return WallClock(), "cpu", stream
    stream = stream if stream is not None else torch.cuda.current_stream(index)
    return CudaClock(stream, index), torch.cuda.get_device_name(index), stream


def bench_kernel(kernel: Kernel, grid: tuple[int, ...], args: Sequence[Any], *, backend: str | None = None,
                 torch_expression: str | None = None, names: dict[str, Any] | None = None,
                 out: int | None = None, runs: int = 20, tolerance: float | None = None,
                 stream: Any = None) -> BenchResult:
    """Time `kernel` launched on `grid` with `args` (torch tensors), and `torch_expression`
    evaluated with `names` (and `torch`, `F` = torch.nn.functional) on the same arguments, over
    `runs` timed runs each; first check argument `out` (an index into `args`, default the last
    tensor) against the expression's result where it returns a tensor."""
    clock, device, stream = _clock(kernel, args, stream)
    env = {"torch": torch, "F": F, **(names or {})}
    code = compile(torch_expression, "<torch expression>", "eval") if torch_expression else None
    sides: list[tuple[str, Callable[[], Any]]] = [
        ("kernel", lambda: launch(stream, grid, kernel, tuple(args), backend=backend))]
    if code is not None:
        sides.append(("torch", lambda: eval(code, env)))  # noqa: S307 - the user's own expression
    check = None
    if code is not None:
        expected = eval(code, env)  # noqa: S307
        if isinstance(expected, torch.Tensor):
            expected = expected.detach().clone()
            index = out if out is not None else max(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
            _poison(args[index])
            sides[0][1]()
            clock.finish()
            check = check_output(_param_name(kernel, index), args[index], expected, tolerance)
    samples: dict[str, list[float]] = {name: [] for name, _ in sides}
    for _, run in sides:
        clock.time_us([run] * WARMUP_RUNS)
    per_round = max(1, math.ceil(runs / ROUNDS))
    while len(samples["kernel"]) < runs:
        for name, run in sides:
            samples[name] += clock.time_us([run] * min(per_round, runs - len(samples[name])))
    k, t = samples["kernel"], samples.get("torch")
    return BenchResult(kernel.__name__, backend or "default", device, tuple(grid), runs,
                       statistics.median(k), min(k), torch_expression,
                       statistics.median(t) if t else None, min(t) if t else None, check)


def _param_name(kernel: Kernel, index: int) -> str:
    params = kernel.params
    return params[index].name if index < len(params) else f"argument {index}"
