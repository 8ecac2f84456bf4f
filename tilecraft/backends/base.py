"""What every backend provides: compile a verified IR function for given array facts, launch it."""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

INDEX32_LIMIT = 2**31
"""Sizes, strides and element offsets below this fit int32 (`needs_index64`)."""

from ..ir import Function


class BackendKind(enum.Enum):
    """The built-in backends' names (registered in backends/__init__.py): TritonBackend's two
    modes; `launch(backend=...)` takes these members as well as any registered name."""

    INTERPRETER = "interpreter"            # NumPy execution of the IR (CPU)
    TRITON = "triton"                      # generated Triton code on a GPU
    TRITON_INTERPRET = "triton-interpret"  # generated Triton code under TRITON_INTERPRET=1 (CPU)


@dataclass(frozen=True)
class ArrayFacts:
    """Specialization facts of one array argument; part of the compile key.

    aligned16: base pointer is 16-byte aligned. unit_last: last stride is 1.
    strides16: every other stride times the item size is a multiple of 16 bytes.
    index64: offsets must be 64-bit (`needs_index64`: a size or stride, or the largest element
      offset the array reaches, is 2**31 or more; the element count does not matter).
    contiguous: the array is dense row-major (no gaps between rows: strides follow the shape).
    divisible16: every dim size and every stride but the last is a multiple of 16 elements, so
      masked pointer accesses vectorize fully (Triton specializes those integers itself).
    dim_pow2: per dim, the largest power of two up to 256 dividing its size (1 for an odd size;
      0 for a dim of size 0, which no tile divides). Along a dim that a tile's extent divides, a
      tile is either inside the array or entirely outside, which cuTile leaves undefined: such
      tiles need no per-lane bounds mask on that dim.
    stride_pow2: per dim, the largest power of two up to 256 dividing its stride (256 for a
      stride of 0). With `dim_pow2` it tells the Triton backend what Triton's own specialization
      (multiples of 16 only) does not: rows of 700 halves are 8-byte aligned, so their loads can
      be vectorized.
    empty: the array has no elements (no tensor descriptor can describe it).
    """

    aligned16: bool
    unit_last: bool
    strides16: bool
    index64: bool = False
    contiguous: bool = False
    divisible16: bool = False
    dim_pow2: tuple[int, ...] = ()
    stride_pow2: tuple[int, ...] = ()
    empty: bool = False

    def tiles_evenly(self, axis: int, extent: int) -> bool:
        """Whether tiles of `extent` elements along `axis` never straddle the array's end
        (never along a dim of size 0: a tile there is all padding, so every lane is masked)."""
        return axis < len(self.dim_pow2) and self.dim_pow2[axis] > 0 and self.dim_pow2[axis] % extent == 0

    @property
    def tma_ok(self) -> bool:
        """Whether a tensor descriptor (TMA) may address this array: not an empty one (a
        descriptor's dims must be at least 1), nor one needing 64-bit offsets (descriptor
        coordinates are int32)."""
        return self.aligned16 and self.unit_last and self.strides16 and not self.empty and not self.index64

    @property
    def tma_by_copy(self) -> bool:
        """Whether only this array's layout rules out tensor descriptors: it is not `tma_ok`,
        but a dense copy with rows padded to 16 bytes on a 16-byte aligned base would be (operand
        staging's align reason, backends/triton/operand_staging.py)."""
        return not self.tma_ok and replace(self, aligned16=True, unit_last=True, strides16=True).tma_ok

    @property
    def tma_store_ok(self) -> bool:
        """Whether tile stores may go through a tensor descriptor: on the H200 (Triton 3.6) a
        descriptor store into a view with gaps after its last dim wrote its padding lanes into
        the gap, so stores use descriptors only on dense arrays."""
        return self.tma_ok and self.contiguous


def needs_index64(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether an array of `shape` and `strides` (in elements) needs 64-bit shapes, strides and
    offsets: when a size or a stride does not fit int32 (both are passed to kernels), or the
    largest element offset it reaches, sum((size - 1) * |stride|), does not.

    Reach, not the element count, decides: a (3, 16) view with stride 2**30 has 48 elements but
    reaches offset 2**31 + 15, while 2**31 elements broadcast with stride 0 reach offset 0. Tile
    padding needs no margin: backends mask lanes beyond the end (their offsets, which may wrap,
    are never dereferenced) and compute a tile's start only for tile indices inside the array,
    so every offset they use is at most the reach. An empty array reaches nothing."""
    if any(d >= INDEX32_LIMIT for d in shape) or any(abs(s) >= INDEX32_LIMIT for s in strides):
        return True
    if 0 in shape:
        return False
    return sum((d - 1) * abs(s) for d, s in zip(shape, strides)) >= INDEX32_LIMIT


def array_facts(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                index64: bool) -> ArrayFacts:
    """The facts of an array at address `ptr` of `shape` and `strides` (in elements) whose
    elements are `itemsize` bytes; `index64` as `needs_index64` (or the parameter) decides."""
    n = 1
    dense = True
    for size, stride in zip(reversed(shape), reversed(strides)):
        dense = dense and (size == 1 or stride == n)
        n *= size
    return ArrayFacts(
        aligned16=ptr % 16 == 0,
        unit_last=not strides or strides[-1] == 1 or shape[-1] == 1,
        strides16=all(s * itemsize % 16 == 0 for s in strides[:-1]),
        index64=index64,
        contiguous=dense,
        divisible16=all(s % 16 == 0 for s in strides[:-1]) and all(d % 16 == 0 for d in shape),
        dim_pow2=tuple(_pow2(d, 0) for d in shape),
        stride_pow2=tuple(_pow2(s, 256) for s in strides),
        empty=n == 0,
    )


def _pow2(n: int, zero: int) -> int:
    """The largest power of two up to 256 dividing `n` (1 when `n` is odd); `zero` for 0 (0 for
    a size: an empty dim has no tile inside it, so none may skip its bounds mask)."""
    if n == 0:
        return zero
    return min(256, n & -n)


@dataclass(frozen=True)
class FusedLaunch:
    """A specialized kernel's launch as one Python expression, which the runtime writes into the
    function it generates per specialization (runtime/fastpath.py `quick_launcher`), after its
    checks that a launch's arguments have that specialization. The expression may use `gx, gy,
    gz` (the grid, each in 1..2**24-1), `stream` (not None), `a<j>` (the j-th runtime argument,
    in `Function.params` order), `p<j>` (the address of array `a<j>`, read once) and the names in
    `env` (each starting with `_`). Its value is true when it launched, false when the caller
    must launch the normal way (having done nothing), as it must where the current CUDA device
    is not the one it was made on (runtime/devices.py). `native`, when given, makes the whole
    quick launcher in native code instead, from the runtime's checks (`QuickChecks`), or returns
    None to leave it to `expr`. `grid`: the one grid it launches (declining every other), None
    for any."""

    expr: str
    env: dict[str, Any]
    native: Callable[["QuickChecks"], Any] | None = None
    grid: tuple[int, int, int] | None = None


CHECK_VALUE, CHECK_RANGE, CHECK_CALL, CHECK_PATH, CHECK_ALIGN = range(5)
"""The kinds of a `QuickChecks` check."""

Path = tuple[tuple[str, bool], ...]
"""A path read from an object: attribute names in turn, each called without arguments when flagged."""


@dataclass(frozen=True)
class QuickChecks:
    """What the runtime's quick path checks before a `FusedLaunch` runs (runtime/fastpath.py
    `quick_launcher`), as data for a backend that runs the checks in native code. A call
    `quick(stream, grid, args)` launches only when, in this order: `env.get(knob) == raw` (the
    backend knob as it was); `stream is not None`; `grid` is a tuple; `args` is a tuple of
    `len(types)` items with `type(args[i]) is types[i]`; with `p<j>`, the address of runtime
    argument `a<j>` (`args[runtime[j]]`), read along `addresses[j]` (None: not an array), every
    check passes; `grid` holds 1 to 3 ints (type int) in 1..`grid_limit`. Anything else returns
    False, having done nothing (an address that is not an int in 0..2**64-1 also may).

    A check is (kind, i, detail, expected), refusing when: CHECK_VALUE `args[i] != expected`;
    CHECK_RANGE `not -detail <= args[i] < detail`; CHECK_CALL `detail(args[i]) != expected`;
    CHECK_PATH `args[i]` read along the `Path` `detail` `!= expected`; CHECK_ALIGN
    `p<i> & detail != expected`."""

    env: dict[Any, Any] = field(repr=False)
    knob: Any
    raw: Any
    types: tuple[type, ...]
    runtime: tuple[int, ...]
    addresses: tuple[Path | None, ...]
    checks: tuple[tuple[int, int, Any, Any], ...]
    grid_limit: int


class CompiledKernel(Protocol):
    """A compiled kernel. A specialized one (`specialize`'s result) may also have
    `fused_launch() -> FusedLaunch | None`, its launch for the runtime's quick path; one that
    can make it for any one grid takes `grid=(the user's grid, the grid it launches)`."""

    def specialize(self, args: Sequence[Any]) -> "CompiledKernel":
        """A kernel for later launches whose arguments match `args` in dtype, device, shape,
        strides and alignment (it may skip per-launch checks); `self` where nothing is gained."""

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any, *,
               dependent: bool = False) -> None:
        """Run the kernel on `grid` blocks; `args` follow `Function.params` order (arrays as
        the backend's `BackendSpec.to_array` gives them: NumPy arrays for the interpreter, torch
        tensors for Triton; scalars as Python numbers). `dependent`: a programmatic dependent
        launch (it may start before the stream's previous kernel ends; see
        `grid_dependency_control_wait`)."""


class Backend(Protocol):
    """What a BackendSpec builds: a compiler from verified IR to launchable kernels."""

    def compile(self, fn: Function, facts: Sequence[ArrayFacts | None]) -> CompiledKernel:
        """Compile `fn`; `facts[i]` describes param i when it is an array, else None."""


class WrappedKernel:
    """Base of a compiled kernel that launches in place of `main` (split-K parts, tile-split
    variants, a staged copy) and is `main` in every other respect: every attribute a subclass
    does not set (source, lowered, compile_for...) is `main`'s."""

    main: CompiledKernel

    @property
    def compiled_variants(self) -> tuple[Any, ...]:
        """The kernels it compiled so far to launch in place of `main` (none here)."""
        return ()

    def __getattr__(self, name: str) -> Any:
        if name == "main":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.main, name)


def kernels_within(kernel: Any) -> list[Any]:
    """`kernel`, the kernels it wraps and the variants each compiled so far (`compiled_variants`:
    split-K parts, merged or split blocks, a staged kernel's...), depth first: what its launches
    may have run (benchmarks report which, tests look for one)."""
    found, todo = [], [kernel]
    while todo:
        k = todo.pop()
        found.append(k)
        if isinstance(k, WrappedKernel):
            todo += [*reversed(k.compiled_variants), k.main]
    return found


class ChosenPerGrid:
    """A specialized launcher's choice for each grid (a split count, a program count), made once
    per grid by `choose(grid, args)`: its arguments' device is fixed, so the choice depends on
    the grid alone. A programmatic dependent launch chooses nothing (None)."""

    def __init__(self, choose: Callable[[tuple[int, int, int], Sequence[Any]], Any]) -> None:
        self._choose = choose
        self._chosen: dict[tuple[int, int, int], Any] = {}

    def get(self, grid: tuple[int, int, int], args: Sequence[Any], dependent: bool) -> Any:
        if dependent:
            return None
        chosen = self._chosen.get(grid, _UNCHOSEN)  # one lookup on the cached launch path
        if chosen is _UNCHOSEN:
            if len(self._chosen) >= SpecializedLaunchers.LIMIT:
                self._chosen.clear()
            chosen = self._chosen[grid] = self._choose(grid, args)
        return chosen


_UNCHOSEN = object()


def wrapped_as(kernel: Any, cls: type) -> Any:
    """The first of `kernel` and the kernels it wraps (`WrappedKernel.main`, in turn) that is a
    `cls`, or None (a staged kernel wraps a stream-K one, which wraps a tile-split one...)."""
    while not isinstance(kernel, cls):
        if not isinstance(kernel, WrappedKernel):
            return None
        kernel = kernel.main
    return kernel


class LastLaunch:
    """What a wrapper kernel's last launch ran: its grid and what ran it (a variant, a count,
    whether it staged), for the `specialize` the runtime calls right after a launch. Handed out
    once, and only to a specialize of those very arguments (compared by identity)."""

    def __init__(self) -> None:
        self._last: tuple[tuple[int, int, int], Any, tuple[int, ...]] | None = None

    def record(self, grid: tuple[int, int, int], ran: Any, args: Sequence[Any]) -> None:
        self._last = (grid, ran, tuple(map(id, args)))

    def forget(self) -> None:
        self._last = None

    def take(self, args: Sequence[Any]) -> tuple[tuple[int, int, int], Any] | None:
        """(grid, what ran) of the last launch where it launched `args`; None otherwise. Either
        way it is then forgotten."""
        last, self._last = self._last, None
        return last[:2] if last is not None and last[2] == tuple(map(id, args)) else None


class SpecializedLaunchers:
    """The specialized launchers (`CompiledKernel.specialize`) of the kernels a wrapper launches
    (the kernel as compiled, split-K parts, tile-split variants), one per key: the first launch of
    a key goes the full way, which surfaces compile errors, and makes the launcher later ones take."""

    LIMIT = 64
    """Keys kept before the cache starts over (a wrapper launched on ever new grids)."""

    def __init__(self) -> None:
        self._fast: dict[Any, Any] = {}

    def run(self, key: Any, kernel: CompiledKernel, grid: tuple[int, int, int], args: Sequence[Any],
            stream: Any) -> None:
        """Launch `kernel` through the launcher of `key` (made by this launch where there is none)."""
        fast = self._fast.get(key)
        if fast is not None:
            return fast.launch(grid, args, stream)
        kernel.launch(grid, args, stream)
        self.remember(key, kernel, args)

    def made(self, key: Any) -> Any:
        """The launcher of `key`, None where none is made."""
        return self._fast.get(key)

    def remember(self, key: Any, kernel: CompiledKernel, args: Sequence[Any]) -> Any:
        """The launcher of `key`, made now from `kernel`, which has just launched `args`."""
        if len(self._fast) >= self.LIMIT:
            self._fast.clear()
        fast = self._fast[key] = kernel.specialize(args)
        return fast

    MAIN = "main"
    """The key of the wrapped kernel as compiled (`run_main`, `remember_main`)."""

    def run_main(self, kernel: CompiledKernel, grid: tuple[int, int, int], args: Sequence[Any], stream: Any,
                 dependent: bool) -> None:
        """Launch the wrapped kernel as compiled, `kernel`: a programmatic dependent launch the
        full way (specialized launchers launch plainly), any other as `run` with key MAIN."""
        if dependent:
            return kernel.launch(grid, args, stream, dependent=True)
        self.run(self.MAIN, kernel, grid, args, stream)

    def remember_main(self, kernel: CompiledKernel, args: Sequence[Any]) -> Any:
        """`remember` for the wrapped kernel as compiled, which has just launched `args`."""
        return self.remember(self.MAIN, kernel, args)


def fused_on_grid(launcher: Any, grid: tuple[int, int, int]) -> FusedLaunch | None:
    """The fused launch of specialized launcher `launcher` for the one user grid `grid`, for a
    wrapper that runs other grids on other kernels: made for that grid where its `fused_launch`
    takes one (a grid-loop kernel's has one only so); else its own where it launches that grid
    only (made for the grid of the launch before it), or, one for any grid without native code,
    restricted here. None where there is none (a wrapped kernel has none of its own: its
    attributes are its main's)."""
    fused = None if isinstance(launcher, WrappedKernel) else getattr(launcher, "fused_launch", None)
    if _takes_grid(fused):
        return fused(grid=(grid, grid))
    made = None if fused is None else fused()
    if made is None or made.grid == grid:
        return made
    if made.grid is None and made.native is None:
        return FusedLaunch(f"(gx, gy, gz) == {grid} and ({made.expr})", made.env, None, grid)
    return None


def fused_on_variant_grid(launcher: Any, grid: tuple[int, int, int],
                          launched: tuple[int, int, int]) -> FusedLaunch | None:
    """The fused launch of a variant's specialized launcher `launcher` for the user's `grid`,
    which the variant launches on `launched` (merged blocks, split tiles): made for that pair
    where its `fused_launch` takes a grid; None otherwise (one made for the grid it ran would be
    handed the user's grid: a warp-specialized launcher's)."""
    fused = getattr(launcher, "fused_launch", None)
    return fused(grid=(grid, launched)) if _takes_grid(fused) else None


def _takes_grid(fused: Any) -> bool:
    """Whether `fused` is a `fused_launch` that makes its launch for a grid it is given."""
    return fused is not None and "grid" in inspect.signature(fused).parameters
