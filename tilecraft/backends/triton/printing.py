"""`ct.print` / `ct.printf` on the Triton backend: records in a buffer, printed by the host.

Triton has no formatted device print, so a kernel with Print ops takes two hidden parameters
after the IR's: `print_buf`, an int64 buffer the launch allocates, and `print_cap`, the number of
record words it holds. Each Print appends one record at a cursor (`print_buf[0]`, advanced by
an atomic add, so records of one block keep their order): its number + 1, the block's linear id
(x fastest), then each tile's elements in row-major order as int64 words (integers extended,
floats as their raw bits). A record that does not fit is dropped whole. After the launch the
host (`Records.show`) waits for the kernel, sorts the records by block, stably, and prints each
with the formatter every backend shares (language/formatting.py): the same text, in the same
order, as the interpreter.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...ir import Function, ops
from ...language import dtypes as D
from ...language import formatting
from ...language.dtypes import DType
from .emitter import KernelWriter, rule, shape_of
from .spelling import tl_dtype

HEADER_WORDS = 2  # print number + 1, linear block id
MAX_WORDS = 1 << 24  # the largest buffer a launch allocates (128 MiB)
LOOP_WORDS = 1 << 20  # the smallest buffer of a kernel that prints inside a loop


@dataclass(frozen=True)
class PrintRecord:
    """What one Print op stores: its format, and per tile the dtype and shape."""

    format: str
    dtypes: tuple[DType, ...]
    shapes: tuple[tuple[int, ...], ...]

    @property
    def words(self) -> int:
        return HEADER_WORDS + sum(math.prod(s) for s in self.shapes)


@dataclass(frozen=True)
class PrintPlan:
    """A kernel's Print ops in walk order (a record holds its index here), and how many words
    one block writes if each runs once; `in_loop`: some Print may run more often."""

    records: tuple[PrintRecord, ...]
    block_words: int
    in_loop: bool


@dataclass(frozen=True)
class PrintParams:
    """The kernel's names of the hidden parameters and each Print op's record number."""

    buffer: str
    capacity: str
    numbers: dict[int, int]  # id(op) -> index in PrintPlan.records


def _print_ops(fn: Function) -> list[tuple[ops.Print, bool]]:
    """The Print ops of `fn` in program order, each with whether a loop holds it."""
    found: list[tuple[ops.Print, bool]] = []

    def visit(block: Any, in_loop: bool) -> None:
        for op in block.ops:
            if isinstance(op, ops.Print):
                found.append((op, in_loop))
            for inner in op.blocks:
                visit(inner, in_loop or isinstance(op, (ops.For, ops.While)))
    visit(fn.body, False)
    return found


def plan_prints(fn: Function) -> PrintPlan | None:
    """The print plan of `fn`; None when it does not print."""
    found = _print_ops(fn)
    if not found:
        return None
    records = tuple(PrintRecord(op.format, tuple(v.tile.dtype for v in op.tiles), tuple(shape_of(v) for v in op.tiles))
                    for op, _ in found)
    return PrintPlan(records, sum(r.words for r in records), any(in_loop for _, in_loop in found))


def add_params(w: KernelWriter, fn: Function, params: list[str], signature: dict[str, str]) -> None:
    """Declare the hidden print parameters (when `fn` prints) and number its Print ops as
    `plan_prints` does."""
    found = _print_ops(fn)
    if not found:
        return
    buffer, capacity = w.fresh("print_buf"), w.fresh("print_cap")
    params += [buffer, f"{capacity}: tl.int64"]
    signature[buffer], signature[capacity] = "*i64", "i64"
    w.printing = PrintParams(buffer, capacity, {id(op): k for k, (op, _) in enumerate(found)})


def _words(w: KernelWriter, text: str, dtype: DType) -> str:
    """A tile as int64 words: integers and bools extended, floats as their raw bits."""
    if dtype.is_integral or dtype is D.float8_e8m0fnu:  # e8m0 tiles are raw uint8 already
        return f"tl.cast({text}, tl.int64)"
    bits = tl_dtype(D.dtype_by_name(f"uint{dtype.bitwidth}"))
    return f"tl.cast(tl.cast({text}, {bits}, bitcast=True), tl.int64)"


def _block_id(w: KernelWriter) -> str:
    if w.grid_loop is not None:
        return f"tl.cast({w.grid_loop.tile}, tl.int64)"
    pid = [f"tl.cast(tl.program_id({a}), tl.int64)" for a in range(3)]
    return f"{pid[0]} + tl.num_programs(0) * ({pid[1]} + tl.num_programs(1) * {pid[2]})"


@rule(ops.Print)
def _print(w: KernelWriter, op: ops.Print) -> None:
    params: PrintParams | None = w.printing
    if params is None:
        raise w.unsupported("printing inside a combine function")
    size = HEADER_WORDS + sum(math.prod(shape_of(v)) for v in op.tiles)
    at, ok, base = w.fresh("print_at"), w.fresh("print_ok"), w.fresh("print_ptr")
    w.emit(f"{at} = tl.atomic_add({params.buffer}, {size})")
    w.emit(f"{ok} = {at} + {size} <= {params.capacity}")
    w.emit(f"{base} = {params.buffer} + 1 + {at}")
    w.emit(f"tl.store({base}, tl.full([], {params.numbers[id(op)] + 1}, tl.int64), mask={ok})")
    w.emit(f"tl.store({base} + 1, {_block_id(w)}, mask={ok})")
    offset = HEADER_WORDS
    for v in op.tiles:
        shape = shape_of(v)
        n = math.prod(shape)
        words = _words(w, w.tensor(v), v.tile.dtype)
        if not shape:
            w.emit(f"tl.store({base} + {offset}, {words}, mask={ok})")
        else:
            flat = words if len(shape) == 1 else f"tl.reshape({words}, [{n}])"
            w.emit(f"tl.store({base} + {offset} + tl.arange(0, {n}), {flat}, mask={ok})")
        offset += n


class Records:
    """The record buffer of one launch of a printing kernel (`arguments` go after the IR's)."""

    def __init__(self, plan: PrintPlan, name: str, grid: tuple[int, int, int], device: Any) -> None:
        import torch
        need = plan.block_words * math.prod(grid)
        self.capacity = min(MAX_WORDS, max(need, LOOP_WORDS) if plan.in_loop else need)
        self.plan, self.name = plan, name
        self.buffer = torch.zeros(1 + self.capacity, dtype=torch.int64, device=device)

    @property
    def arguments(self) -> tuple[Any, int]:
        return self.buffer, self.capacity

    def show(self) -> None:
        """Print the records (waits for the kernel: the copy to the host follows it on the
        current stream)."""
        words = self.buffer.cpu().numpy()
        used = int(words[0])
        texts = _texts(self.plan.records, words[1:1 + min(used, self.capacity)])
        formatting.emit("".join(texts))
        if used > self.capacity:
            sys.stderr.write(f"tilecraft: kernel `{self.name}` printed more than its print buffer holds "
                             f"({used} of {self.capacity} words); the prints that did not fit were dropped\n")


def _texts(records: Sequence[PrintRecord], words: np.ndarray) -> list[str]:
    """The text of each record in `words`, ordered by block (stable: a block's in its order)."""
    found: list[tuple[int, str]] = []
    offset = 0
    while offset < len(words) and words[offset] > 0:
        record = records[int(words[offset]) - 1]
        block, at = int(words[offset + 1]), offset + HEADER_WORDS
        values = []
        for dtype, shape in zip(record.dtypes, record.shapes):
            n = math.prod(shape)
            values.append(decode(words[at:at + n], dtype).reshape(shape))
            at += n
        found.append((block, formatting.render(record.format, values, record.dtypes)))
        offset += record.words
    found.sort(key=lambda item: item[0])
    return [text for _, text in found]


def decode(words: np.ndarray, dtype: DType) -> np.ndarray:
    """int64 words (see `_words`) back as values of `dtype`."""
    if dtype is D.bool_:
        return words != 0
    if dtype.is_integral:
        return words.astype(dtype.np_dtype)
    raw = words.astype(np.dtype(f"uint{dtype.bitwidth}"))
    return raw.view(dtype.np_dtype)
