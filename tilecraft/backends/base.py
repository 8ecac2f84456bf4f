"""What every backend provides: compile a verified IR function for given array facts, launch it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

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
    index64: the array has 2**31 or more elements (offsets must be 64-bit).
    contiguous: the array is dense row-major (no gaps between rows: strides follow the shape).
    divisible16: every dim size and every stride but the last is a multiple of 16 elements, so
      masked pointer accesses vectorize fully (Triton specializes those integers itself).
    dim_pow2: per dim, the largest power of two in 16..256 dividing its size (1 if none). Along
      a dim that a tile's extent divides, a tile is either inside the array or entirely outside,
      which cuTile leaves undefined: such tiles need no bounds mask on that dim.
    """

    aligned16: bool
    unit_last: bool
    strides16: bool
    index64: bool = False
    contiguous: bool = False
    divisible16: bool = False
    dim_pow2: tuple[int, ...] = ()

    def tiles_evenly(self, axis: int, extent: int) -> bool:
        """Whether tiles of `extent` elements along `axis` never straddle the array's end."""
        return axis < len(self.dim_pow2) and self.dim_pow2[axis] % extent == 0

    @property
    def tma_ok(self) -> bool:
        """Whether a tensor descriptor (TMA) may address this array."""
        return self.aligned16 and self.unit_last and self.strides16

    @property
    def tma_store_ok(self) -> bool:
        """Whether tile stores may go through a tensor descriptor: on the H200 (Triton 3.6) a
        descriptor store into a view with gaps after its last dim wrote its padding lanes into
        the gap, so stores use descriptors only on dense arrays."""
        return self.tma_ok and self.contiguous


class CompiledKernel(Protocol):
    def specialize(self, args: Sequence[Any]) -> "CompiledKernel":
        """A kernel for later launches whose arguments match `args` in dtype, device, shape,
        strides and alignment (it may skip per-launch checks); `self` where nothing is gained."""

    def launch(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any) -> None:
        """Run the kernel on `grid` blocks; `args` follow `Function.params` order (arrays as
        the backend's `BackendSpec.to_array` gives them: NumPy arrays for the interpreter, torch
        tensors for Triton; scalars as Python numbers)."""


class Backend(Protocol):
    """What a BackendSpec builds: a compiler from verified IR to launchable kernels."""

    def compile(self, fn: Function, facts: Sequence[ArrayFacts | None]) -> CompiledKernel:
        """Compile `fn`; `facts[i]` describes param i when it is an array, else None."""
