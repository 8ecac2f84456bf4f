"""Program order of memory accesses within a block, on the GPU.

cuTile's memory model keeps the memory ops of a block that may touch the same array in program
order (a store, then a gather of that array, sees the store; separate array arguments are
assumed disjoint). A Triton program's lanes are spread over the block's threads, and the thread
that stores an element need not be the one that later reads it, so between two accesses of one
array where either writes (read after write, write after read, write after write) the block
must synchronize: `barriers` finds the accesses that need a `tl.debug_barrier()` before them.

Arrays are told apart by their root: the kernel parameter a slice was cut from, or the list an
element was taken from (a list's arrays may share memory). The walk follows program order; a
loop body is walked twice, so an access meets the ones of the previous iteration; an `if`
joins what either branch left pending. Kernels that only read what they do not write (matmul,
attention, normalizations) get no barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import Block, Function, Op, Value, ops

_READS = (ops.Load, ops.Gather, ops.AtomicRMW, ops.AtomicCAS)
_WRITES = (ops.Store, ops.Scatter, ops.AtomicRMW, ops.AtomicCAS)
_UNKNOWN = -1  # the root of an array whose origin is not known (it may be any array)


@dataclass
class _Pending:
    """Roots read and written since the last barrier."""

    reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)

    def copy(self) -> "_Pending":
        return _Pending(set(self.reads), set(self.writes))

    def join(self, other: "_Pending") -> None:
        self.reads |= other.reads
        self.writes |= other.writes


def _overlaps(root: int, roots: set[int]) -> bool:
    return bool(roots) and (root in roots or root == _UNKNOWN or _UNKNOWN in roots)


def barriers(fn: Function) -> frozenset[Op]:
    """The memory ops that need a block-wide barrier before them (see the module docstring)."""
    roots: dict[int, int] = {p.id: p.id for p in fn.params}
    for op in fn.walk():
        if isinstance(op, ops.ArraySlice):
            roots[op.result.id] = roots.get(op.array.id, _UNKNOWN)
        elif isinstance(op, ops.ListGet):
            roots[op.result.id] = roots.get(op.list.id, _UNKNOWN)
    found: set[Op] = set()

    def root(array: Value) -> int:
        return roots.get(array.id, _UNKNOWN)

    def access(op: Op, pending: _Pending) -> None:
        r = root(op.array)
        reads, writes = isinstance(op, _READS), isinstance(op, _WRITES)
        if (reads and _overlaps(r, pending.writes)) or (writes and _overlaps(r, pending.reads | pending.writes)):
            found.add(op)
            pending.reads.clear()
            pending.writes.clear()
        if reads:
            pending.reads.add(r)
        if writes:
            pending.writes.add(r)

    def walk(block: Block, pending: _Pending) -> None:
        for op in block.ops:
            if isinstance(op, _READS + _WRITES):
                access(op, pending)
            elif isinstance(op, ops.If):
                other = pending.copy()
                walk(op.then, pending)
                walk(op.orelse, other)
                pending.join(other)
            elif isinstance(op, (ops.For, ops.While)):
                skipped = pending.copy()  # a loop may run no iteration
                for _ in range(2):  # the second round meets the previous iteration's accesses
                    for blk in op.blocks:
                        walk(blk, pending)
                pending.join(skipped)
            else:
                for blk in op.blocks:  # combine regions of reductions and scans: no memory ops
                    walk(blk, pending)

    walk(fn.body, _Pending())
    return frozenset(found)
