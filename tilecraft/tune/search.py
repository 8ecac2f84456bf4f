"""`exhaustive_search`: time every configuration of a kernel and return the fastest, as
`cuda.tile.tune.exhaustive_search` does.

Each configuration is launched a few times untimed (the first launch compiles it; one that fails
to compile or launch is recorded in `failures` and skipped), then timed in small batches until
its mean is known to within 1% (or 0.5 us), or its time budget or sample limit is spent. The
fastest measured configuration is refined first; every other one is timed only while its
confidence interval still reaches below the best converged mean, so clearly slower
configurations stop early.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

from ..errors import TileUnsupportedFeatureError
from ..runtime.kernel import Kernel
from ..runtime.launch import launch
from . import cache as tune_cache
from .progress import Progress
from .result import Measurement, TuningResult
from .timing import Clock, clock_for

T = TypeVar("T")

WARMUP_RUNS = 3          # untimed launches per configuration (the first one compiles)
MIN_SAMPLES = 5          # timed launches before a configuration may count as converged
BATCH = 5                # timed launches per round
MAX_SAMPLES = 1000
MAX_MEASURE_US = 5e6     # time budget of one configuration's timed launches
REL_MARGIN = 0.01        # converged: the 95% interval's half-width is within 1% of the mean ...
ABS_MARGIN_US = 0.5      # ... or within 0.5 us


class _Launcher(Generic[T]):
    """Launches one configuration with fresh arguments from `args_fn` each time; the clock
    follows the device of the arguments (found at the first launch)."""

    def __init__(self, config: T, stream: Any, grid: tuple[int, ...], kernel: Kernel,
                 args_fn: Callable[[T], tuple[Any, ...]], clocks: dict[Any, Clock]) -> None:
        self.config, self.stream, self.grid, self.kernel = config, stream, grid, kernel
        self.args_fn, self.clocks = args_fn, clocks

    def _runs(self, count: int) -> tuple[Clock, list[Callable[[], None]]]:
        argument_sets = [tuple(self.args_fn(self.config)) for _ in range(count)]
        clock = clock_for(self.kernel, argument_sets[0], self.stream, self.clocks)
        return clock, [lambda a=a: launch(self.stream, self.grid, self.kernel, a) for a in argument_sets]

    def warm_up(self, count: int) -> None:
        """`count` untimed launches (the first compiles), waited for."""
        clock, runs = self._runs(count)
        for run in runs:
            run()
        clock.finish()

    def time_us(self, count: int) -> list[float]:
        """The times of `count` launches, in microseconds."""
        clock, runs = self._runs(count)
        return clock.time_us(runs)


@dataclass
class _Candidate(Generic[T]):
    """A configuration being timed and its samples so far."""

    launcher: _Launcher[T]
    samples: list[float] = field(default_factory=list)

    @property
    def config(self) -> T:
        return self.launcher.config

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.samples)

    @property
    def margin_us(self) -> float:
        """Half-width of the 95% confidence interval of the mean (normal approximation)."""
        if len(self.samples) < 2:
            return math.inf
        return 1.96 * statistics.stdev(self.samples) / math.sqrt(len(self.samples))

    def converged(self) -> bool:
        n = len(self.samples)
        if n < MIN_SAMPLES:
            return False
        mean, margin = self.mean_us, self.margin_us
        return (margin <= REL_MARGIN * mean or margin <= ABS_MARGIN_US or n >= MAX_SAMPLES
                or mean * n >= MAX_MEASURE_US)

    def sample(self, count: int) -> None:
        self.samples += self.launcher.time_us(max(1, min(count, MAX_SAMPLES - len(self.samples))))

    def measurement(self) -> Measurement[T]:
        margin = self.margin_us
        return Measurement(config=self.config, mean_us=self.mean_us, num_samples=len(self.samples),
                           error_margin_us=0.0 if math.isinf(margin) else margin)


def exhaustive_search(
    search_space: Sequence[T],
    stream: Any,
    grid_fn: Callable[[T], tuple[int, ...]],
    kernel: Kernel | Callable[[T], Kernel],
    args_fn: Callable[[T], tuple[Any, ...]],
    hints_fn: Callable[[T], dict[str, Any]] | None = None,
    *,
    quiet: bool = False,
    single_run_timeout_sec: float | None = None,
    progress: bool | None = None,
    cache: bool | None = None,
) -> TuningResult[T]:
    """Time `kernel` for every configuration in `search_space` and return the fastest.

    stream: where CUDA launches run and are timed (CPU launches ignore it and use the wall clock).
    grid_fn, args_fn: the grid and the launch arguments for a configuration; args_fn is called
        for every launch, so it can hand each run fresh output buffers.
    kernel: the kernel, or a function from a configuration to its kernel.
    hints_fn: a configuration's kernel options (`num_ctas`, `occupancy`, ...), applied with
        `Kernel.replace_hints`. Default: the kernel's own options.
    quiet: do not print the summary.
    single_run_timeout_sec: must be None: tilecraft times launches in this process and cannot
        stop one that never finishes (cuTile runs them in a child process to do so).
    progress: draw a progress bar on stderr (tilecraft's; default: where stderr is a terminal).
    cache: keep the result on disk and return it, untimed, to the same search in a later
        process (tilecraft's; default: TILECRAFT_TUNE_CACHE=1; see tune/cache.py for what
        makes two searches the same).

    Configurations that fail to compile or launch are skipped and listed in `failures`;
    ValueError if the search space is empty or every configuration fails.
    """
    if single_run_timeout_sec is not None:
        raise TileUnsupportedFeatureError(
            "single_run_timeout_sec is not supported: tilecraft times each launch in this process and "
            "cannot stop a kernel that does not finish; pass None")
    configs = list(search_space)
    if not configs:
        raise ValueError("Search space is empty.")
    made: dict[Any, Kernel] = {}
    hints = [hints_fn(c) if hints_fn is not None else {} for c in configs]
    kernels = [_configured_kernel(kernel, h, c, made) for c, h in zip(configs, hints)]
    grids = [grid_fn(c) for c in configs]
    key = tune_cache.search_key(kernels, configs, grids, hints, args_fn, stream) if tune_cache.enabled(cache) else None
    found = tune_cache.load(key, configs) if key is not None else None
    if found is not None:
        result, path = found
        if not quiet:
            print(f"{result}\n(from the tuning cache, untimed: {path})")
        return result
    result = _search(configs, grids, kernels, stream, args_fn,
                     Progress(f"tuning {kernels[0].__name__}", len(configs), progress))
    if key is not None:
        tune_cache.store(key, result, configs)
    if not quiet:
        print(result)
    return result


def _search(configs: list[T], grids: list[tuple[int, ...]], kernels: list[Kernel], stream: Any,
            args_fn: Callable[[T], tuple[Any, ...]], bar: Progress) -> TuningResult[T]:
    """Time every configuration (its grid and kernel at the same position), drawing `bar`."""
    clocks: dict[Any, Clock] = {}
    candidates: list[_Candidate[T]] = []
    failures: list[tuple[T, type[BaseException], str]] = []
    for done, (config, grid, k) in enumerate(zip(configs, grids, kernels), 1):
        candidate = _Candidate(_Launcher(config, stream, grid, k, args_fn, clocks))
        try:
            candidate.launcher.warm_up(WARMUP_RUNS)
            candidate.sample(MIN_SAMPLES)
            candidates.append(candidate)
        except Exception as exc:  # a configuration that does not compile or launch is skipped
            failures.append((config, type(exc), str(exc)))
        bar.update(done, min((c.mean_us for c in candidates), default=None), len(failures))
    _refine(candidates, failures)
    bar.close()
    if not candidates:
        config, exc_type, message = failures[0]
        raise ValueError(f"No valid config found in search space: all {len(failures)} configs failed."
                         f"\nConfig: {config}\n{exc_type.__name__}: {message}")
    successes = tuple(c.measurement() for c in candidates)
    return TuningResult(best=min(successes, key=lambda m: m.mean_us), successes=successes, failures=tuple(failures))


def _refine(candidates: list[_Candidate[T]], failures: list[tuple[T, type[BaseException], str]]) -> None:
    """Time the most promising unconverged candidate until none could still beat the best
    converged mean (a candidate that starts failing moves to `failures`)."""
    while True:
        settled = [c.mean_us for c in candidates if c.converged()]
        cutoff = min(settled, default=math.inf)
        open_ = [c for c in candidates if not c.converged() and c.mean_us - c.margin_us < cutoff]
        if not open_:
            return
        candidate = min(open_, key=lambda c: c.mean_us)
        try:
            candidate.sample(BATCH)
        except Exception as exc:
            failures.append((candidate.config, type(exc), str(exc)))
            candidates.remove(candidate)


def _configured_kernel(kernel: Kernel | Callable[[T], Kernel], hints: dict[str, Any], config: T,
                       made: dict[Any, Kernel]) -> Kernel:
    """The kernel for `config` with its `hints`; configurations with the same kernel and hints
    share one (and so its compiled variants)."""
    base = kernel if isinstance(kernel, Kernel) else kernel(config)
    if not isinstance(base, Kernel):
        raise TypeError(f"kernel must be a @tilecraft.kernel or a function returning one for a config, "
                        f"got {type(base).__name__} for config {config!r}")
    if not hints:
        return base
    try:
        key: Any = (id(base), tuple(sorted(hints.items())))
        hash(key)
    except TypeError:  # unhashable hint values: no sharing
        return base.replace_hints(**hints)
    if key not in made:
        made[key] = base.replace_hints(**hints)
    return made[key]
