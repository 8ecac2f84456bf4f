"""Runs the warp-specialized Gluon variant's generated source on the CPU, to test its schedule.

Gluon has no interpreter, so without this the variant's barriers, ring slots and phases are
checked only on an H200. `emulate` launches a `GluonKernel` through its own `launch` (same
arguments, grid division and persistent grid), with its JIT function replaced by this emulator,
which executes the generated Python source as it is, with stand-ins for the Gluon names:

- each program runs after the one before; within one, each partition of `gl.warp_specialize` is
  a thread, but only one runs at a time: at every operation other partitions can observe (a
  barrier wait or arrive, a TMA copy, a wgmma, a shared-memory store, a wait on async work) a
  scheduler seeded by the caller picks which partition runs next or which TMA load lands. A
  seed gives one interleaving, the same on every machine however slow;
- mbarriers keep PTX's state (pending arrivals, transaction bytes, phase); `wait(bar, parity)`
  blocks while the current phase has that parity; a partition arrives with all of its threads;
- TMA loads land when the scheduler picks them (zero-filling outside the array), completing
  their bytes on the barrier; TMA stores clip to the array; wgmma computes in float64 and
  rounds to float32; register tiles are NumPy arrays in their dtype;
- errors, raised as `EmulationError` with the generated line: a deadlock (every partition
  waits on a barrier that nothing pending can complete), a shared buffer written while an
  in-flight wgmma or TMA store reads it or a TMA load writes it, an async read of a buffer
  whose TMA load has not landed or that registers wrote without `fence_async_shared`, an
  over-arrival, and, at a program's end, wgmma or TMA work in flight or a barrier mid-phase.

Not emulated: timing inside a partition (its warps run as one, in program order), layouts
(`convert_layout` is the identity), wgmma's summation order and the GPU's exp2 and max rounding,
programs running at the same time, and Triton's compilation (tests compile it for sm_90 apart).
"""

from __future__ import annotations

import ast
import itertools
import math
import random
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from unittest import mock

import numpy as np
import torch
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

import tilecraft.backends.gluon.kernel as gluon_kernel
from tilecraft.backends.base import wrapped_as
from tilecraft.backends.gluon import GluonKernel, WarpSpecializedKernel
from tilecraft.backends.interpreter.numerics import fused_multiply_add
from tilecraft.backends.interpreter.rounding import flush_subnormals
from tilecraft.backends.triton.operand_staging import StagedKernel, stage_copy
from tilecraft.language import dtypes
from tilecraft.language.dtypes import DType
from tilecraft.tools.inspection import compiled_as_launched

TIMEOUT_S = 300.0
"""A program's wall-clock limit: a last resort (deadlocks are found from the barriers' state)."""


SPEEDS = (1, 4, 16)
"""Relative odds of running next: each partition, and the TMA loads, draw one per program."""


class EmulationError(AssertionError):
    """The generated schedule did something the GPU would run wrongly (module docstring)."""


class _Aborted(Exception):
    """Unwinds a partition's thread once another partition has failed."""


# ---- the Gluon kernel's variant and its emulated launch ----------------------------------------
def gluon_variant(kernel: Any, args: tuple) -> tuple[GluonKernel, list[Any]]:
    """The Gluon variant the Triton backend builds for `kernel` launched with `args` (CPU torch
    tensors) on an sm_90 GPU, and the arguments its launch takes (for a staged kernel, the
    operands' copies as its prologue makes them)."""
    _, compiled, launch_args = compiled_as_launched(kernel, args)
    staged = wrapped_as(compiled, StagedKernel)
    if staged is not None:  # tf32 operands: the variant reads the prologue's copies
        compiled = staged.staged_kernel(launch_args)
        for i, copy in staged.staged.params.items():
            launch_args[i] = stage_copy(launch_args[i], copy, None, True)
    wrapper = wrapped_as(compiled, WarpSpecializedKernel)
    variant = None if wrapper is None else wrapper.variant()
    if variant is None:
        raise EmulationError(f"no Gluon variant ({wrapper.gave_up if wrapper else 'not warp-specialized'})")
    return variant, launch_args


def emulate(kernel: GluonKernel, grid: tuple[int, int, int], args: Sequence[Any], programs: int, seed: int) -> None:
    """Launch `kernel` over the user's `grid` as on a GPU of `programs` SMs (a persistent kernel
    runs that many programs), its programs emulated; arrays are written in place."""
    fn = _EmulatedJit(kernel.source, kernel.lowered.name, seed)
    with mock.patch.object(kernel, "_fn", fn), mock.patch.object(gluon_kernel, "_multiprocessors", lambda a: programs):
        kernel.launch(grid, args)


class _EmulatedJit:
    """Stands in for the GluonKernel's JIT function: `fn[grid](*args, num_warps=..., ...)`."""

    def __init__(self, source: str, name: str, seed: int) -> None:
        self.lines = source.splitlines()
        self.code = compile(_as_python(source), "<gluon>", "exec")
        self.name = name
        self.rng = random.Random(seed)

    def __getitem__(self, grid: tuple[int, int, int]) -> Callable[..., None]:
        def launch(*args: Any, num_warps: int, **options: Any) -> None:
            args = [TensorMap(a) if isinstance(a, TensorDescriptor) else a for a in args]
            for z, y, x in itertools.product(*(range(n) for n in reversed(grid))):
                program = Program((x, y, z), grid, num_warps, self.rng, self.lines)
                namespace = program.namespace()
                exec(self.code, namespace)  # noqa: S102 - the generated module, its imports taken out
                namespace[self.name](*args)
                program.finish()
        return launch


class _Imports(ast.NodeTransformer):
    """The generated module as plain Python: no imports or decorators (the emulator provides
    the names), `x.to(dtype)` as `tl.cast(x, dtype)` (Python's ints and bools have no `to`)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = [s for s in node.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.decorator_list = []
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            cast = ast.Attribute(ast.Name("tl", ast.Load()), "cast", ast.Load())
            return ast.copy_location(ast.Call(cast, [node.func.value, *node.args], []), node)
        return node


def _as_python(source: str) -> ast.Module:
    return ast.fix_missing_locations(_Imports().visit(ast.parse(source)))


# ---- barriers, shared and global memory --------------------------------------------------------
class Barrier:
    """An mbarrier (of `group`, at `index`): `count` arrivals and `tx` bytes complete phase `phase`."""

    def __init__(self, group: "Barriers", index: int) -> None:
        self.group, self.index = group, index
        self.count: int | None = None
        self.pending = 0
        self.tx = 0
        self.phase = 0

    @property
    def name(self) -> str:
        return f"{self.group.name}[{self.index}]"

    def __str__(self) -> str:
        return f"{self.name} (phase {self.phase}, {self.pending} arrivals and {self.tx} bytes pending)"

    def init(self, count: int) -> None:
        self.count = self.pending = count

    def arrive(self, n: int) -> None:
        if self.count is None:
            raise EmulationError(f"arrive on {self.name} before its init")
        self.pending -= n
        if self.pending < 0:
            raise EmulationError(f"over-arrival on {self}")
        self._advance()

    def expect(self, nbytes: int) -> None:
        """arrive.expect_tx: `nbytes` more to land in this phase, and one arrival."""
        self.tx += nbytes
        self.arrive(1)

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._advance()

    def passed(self, parity: int) -> bool:
        """Whether `wait(parity)` returns: the current phase's parity is not `parity`."""
        return self.phase % 2 != parity

    def _advance(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count


class Barriers:
    """`gl.allocate_shared_memory(gl.int64, [n, 1], ...)`: n mbarriers."""

    def __init__(self, n: int) -> None:
        self.name = "barriers"  # named by `Program.warp_specialize`
        self.bars = [Barrier(self, i) for i in range(n)]

    def index(self, i: int) -> Barrier:
        return self.bars[int(i)]


class SharedBuffer:
    """A shared-memory allocation of slots (its first axis), NaN until written; counts per slot
    the async ops reading it (wgmma, TMA stores) and the TMA loads writing it."""

    def __init__(self, program: "Program", shape: Sequence[int], dtype: DType) -> None:
        self.program = program
        self.name = "smem"  # named by `Program.warp_specialize`
        self.data = np.full(tuple(shape), np.nan, dtype.np_dtype)
        self.readers = [0] * shape[0]
        self.writers = [0] * shape[0]

    def index(self, i: int) -> "SharedView":
        return SharedView(self, int(i), ())

    def put(self, slot: int, tile: Any) -> None:
        """Write `tile`, reshaped to a slot and cast to the buffer's dtype, into slot `slot`."""
        self.data[slot] = np.asarray(tile).astype(self.data.dtype).reshape(self.data.shape[1:])


@dataclass(frozen=True)
class SharedView:
    """Slot `slot` of a shared buffer, seen through `reshape` and `permute` (`ops`)."""

    buffer: SharedBuffer
    slot: int
    ops: tuple[tuple[str, tuple[int, ...]], ...]

    def __str__(self) -> str:
        return f"{self.buffer.name}[{self.slot}]"

    @property
    def key(self) -> tuple[SharedBuffer, int]:
        return self.buffer, self.slot

    def reshape(self, shape: Sequence[int]) -> "SharedView":
        return SharedView(self.buffer, self.slot, self.ops + (("reshape", tuple(shape)),))

    def permute(self, order: Sequence[int]) -> "SharedView":
        return SharedView(self.buffer, self.slot, self.ops + (("permute", tuple(order)),))

    def value(self) -> np.ndarray:
        a = self.buffer.data[self.slot]
        for op, arg in self.ops:
            a = a.reshape(arg) if op == "reshape" else a.transpose(arg)
        return a

    def store(self, tile: Any) -> None:
        """A store from registers (not an async op: `fence_async_shared` orders it before one)."""
        program = self.buffer.program
        program.sync()
        program.check_unread(self, "registers write")
        self.buffer.put(self.slot, tile)
        program.partition().unfenced.add(self.key)


class TensorMap:
    """A TMA descriptor's array, read and written by the box (`block`) at element coordinates."""

    def __init__(self, desc: TensorDescriptor) -> None:
        self.array = desc.base.as_strided(desc.shape, desc.strides)
        self.block = tuple(desc.block_shape)
        self.dtype = dtypes.to_dtype(desc.base.dtype)
        self.layout = desc.layout
        self.block_type = types.SimpleNamespace(shape=list(self.block),
                                                nbytes=math.prod(self.block) * self.dtype.bitwidth // 8)

    def _clip(self, coords: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]] | None:
        """(the array's part of the box at `coords`, the box's part of it), or None if empty."""
        inside, box = [], []
        for c, b, n in zip((int(c) for c in coords), self.block, self.array.shape):
            lo, hi = max(c, 0), min(c + b, n)
            if hi <= lo:
                return None
            inside.append(slice(lo, hi))
            box.append(slice(lo - c, hi - c))
        return tuple(inside), tuple(box)

    def read(self, coords: Sequence[int]) -> np.ndarray:
        """The box at `coords`, zero outside the array."""
        out = np.zeros(self.block, self.dtype.np_dtype)
        clipped = self._clip(coords)
        if clipped is not None:
            out[clipped[1]] = self.array[clipped[0]].float().numpy()
        return out

    def write(self, coords: Sequence[int], tile: np.ndarray) -> None:
        """Store the box at `coords`, clipped to the array."""
        clipped = self._clip(coords)
        if clipped is not None:
            part = np.asarray(tile[clipped[1]], np.float32)
            self.array[clipped[0]] = torch.from_numpy(part).to(self.array.dtype)


# ---- async work in flight, partitions and their scheduler -------------------------------------
@dataclass
class Token:
    """An async wgmma: computed at issue (its operands cannot change while it is in flight
    without an error), handed out by `warpgroup_mma_wait`."""

    reads: list[SharedView]
    value: np.ndarray
    done: bool = False


@dataclass
class Partition:
    """One partition of `gl.warp_specialize`: its threads, what it waits for, its async work
    in flight and the shared slots it wrote from registers since its last fence."""

    name: str
    threads: int
    waiting: tuple[Barrier, int, int] | None = None  # the barrier, the parity, the generated line
    done: bool = False
    mmas: list[Token] = field(default_factory=list)
    stores: list[SharedView] = field(default_factory=list)
    unfenced: set[tuple[SharedBuffer, int]] = field(default_factory=set)
    turn: threading.Event = field(default_factory=threading.Event)  # set: this partition runs next

    def runnable(self) -> bool:
        return not self.done and (self.waiting is None or self.waiting[0].passed(self.waiting[1]))


class Scheduler:
    """Runs partitions as threads one at a time, handing the turn on at every synchronization
    point (`switch`) to a runnable partition or a TMA load landing, chosen by `rng`. Only the
    thread holding the turn touches the emulated state; it sets the next one's `turn` event
    (waking that thread alone) before waiting on its own."""

    def __init__(self, rng: random.Random, lines: list[str]) -> None:
        self.rng = rng
        self.lines = lines
        self.partitions: list[Partition] = []
        self.current: Partition | None = None
        self.landings: list[Callable[[], None]] = []
        self.speed: dict[str, int] = {}  # partition name (or "tma": a landing) -> its odds (SPEEDS)
        self.failure: str | None = None

    def run(self, bodies: list[tuple[Partition, Callable[[], None]]]) -> None:
        """Run the partitions to their ends; raise EmulationError on the first failure."""
        self.partitions = [p for p, _ in bodies]
        self.speed = {name: self.rng.choice(SPEEDS) for name in [p.name for p in self.partitions] + ["tma"]}
        threads = [threading.Thread(target=self._thread, args=pb, daemon=True) for pb in bodies]
        for t in threads:
            t.start()
        self._pass_on()
        deadline = time.monotonic() + TIMEOUT_S
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                self._fail(f"still running after {TIMEOUT_S} s")
                break
        if self.failure is not None:
            raise EmulationError(self.failure)

    def switch(self) -> None:
        """At a synchronization point of the running partition: let the scheduler choose who
        runs next (this partition again, perhaps), and wait for this partition's next turn."""
        me = self.current
        self._pass_on()
        self._wait_turn(me)

    def wait(self, bar: Barrier, parity: int, line: int) -> None:
        """Block the running partition (at generated line `line`) until `bar.passed(parity)`."""
        me = self.current
        me.waiting = (bar, parity, line)
        self.switch()
        me.waiting = None

    def _thread(self, me: Partition, body: Callable[[], None]) -> None:
        try:
            self._wait_turn(me)
            with np.errstate(all="ignore"):  # -inf - -inf in masked rows, as on the GPU
                body()
            if me.mmas or me.stores:
                raise EmulationError(f"ends with {len(me.mmas)} wgmma and {len(me.stores)} TMA stores in flight")
        except _Aborted:
            return
        except Exception as exc:  # noqa: BLE001 - reported by `run`
            self._fail(f"{me.name}: {type(exc).__name__}: {exc}{self._where(exc)}")
            return
        me.done = True
        self._pass_on()

    def _where(self, exc: Exception) -> str:
        """Where in the generated source `exc` was raised."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<gluon>"]
        return f"\n  at {self._line(frames[-1].lineno)}" if frames else ""

    def _line(self, n: int) -> str:
        return f"generated line {n}: {self.lines[n - 1].strip()}"

    def _wait_turn(self, me: Partition) -> None:
        me.turn.wait()
        me.turn.clear()
        if self.failure is not None:
            raise _Aborted

    def _pass_on(self) -> None:
        """Choose the next to run (landing TMA loads on the way); with none: all done, or a deadlock."""
        while True:
            ready = [p for p in self.partitions if p.runnable()]
            if not ready and (not self.landings or all(p.done for p in self.partitions)):
                if not all(p.done for p in self.partitions):
                    self._fail("deadlock:" + "".join(
                        f"\n  {p.name} waits on {p.waiting[0]} for parity {p.waiting[1]} at {self._line(p.waiting[2])}"
                        for p in self.partitions if p.waiting))
                self.current = None
                return
            weights = [self.speed[p.name] for p in ready] + [self.speed["tma"]] * len(self.landings)
            k = self.rng.choices(range(len(weights)), weights)[0]
            if k < len(ready):
                self.current = ready[k]
                self.current.turn.set()
                return
            self.landings.pop(k - len(ready))()

    def _fail(self, message: str) -> None:
        """Record the first failure and wake every partition to unwind."""
        if self.failure is None:
            self.failure = message
        self.current = None
        for p in self.partitions:
            p.turn.set()


# ---- one program: the Gluon names the generated source calls ---------------------------------
class Program:
    """One program of a launch: its shared memory, its partitions and the emulated Gluon ops."""

    def __init__(self, pid: tuple[int, int, int], grid: tuple[int, int, int], num_warps: int,
                 rng: random.Random, lines: list[str]) -> None:
        self.pid, self.grid, self.num_warps = pid, grid, num_warps
        self.scheduler = Scheduler(rng, lines)
        self.barriers: list[Barriers] = []

    def partition(self) -> Partition:
        return self.scheduler.current

    def sync(self) -> None:
        self.scheduler.switch()

    def finish(self) -> None:
        """A program's end: no TMA load in flight, no barrier mid-phase."""
        if self.scheduler.landings:
            raise EmulationError(f"program {self.pid} ends with {len(self.scheduler.landings)} TMA loads in flight")
        for bar in (b for group in self.barriers for b in group.bars):
            if bar.count is not None and (bar.pending != bar.count or bar.tx):
                raise EmulationError(f"program {self.pid} ends with {bar} mid-phase")

    def check_unread(self, view: SharedView, what: str) -> None:
        """A write of `view` (by `what`) races with no async op reading or writing it."""
        if view.buffer.readers[view.slot]:
            raise EmulationError(f"{what} {view} while an async op reads it")
        if view.buffer.writers[view.slot]:
            raise EmulationError(f"{what} {view} while a TMA load writes it")

    def check_readable(self, view: SharedView, what: str) -> None:
        """An async read of `view` (by `what`) sees its TMA load landed and its register stores fenced."""
        if view.buffer.writers[view.slot]:
            raise EmulationError(f"{what} reads {view} before its TMA load landed")
        if view.key in self.partition().unfenced:
            raise EmulationError(f"{what} reads {view}, written from registers with no fence_async_shared since")

    # ---- the kernel function's own ops: allocation and the fork
    def allocate(self, dtype: DType, shape: Sequence[int], layout: Any) -> SharedBuffer | Barriers:
        if dtype is dtypes.int64:
            self.barriers.append(Barriers(shape[0]))
            return self.barriers[-1]
        return SharedBuffer(self, shape, dtype)

    def warp_specialize(self, parts: list[tuple[Callable[..., None], tuple]], warps: list[int],
                        regs: list[int]) -> None:
        """Run the partitions (the first with the kernel's warps; registers are not emulated),
        naming the shared buffers after the first partition's parameters."""
        first, args = parts[0]
        for name, arg in zip(first.__code__.co_varnames, args):
            if isinstance(arg, (SharedBuffer, Barriers)):
                arg.name = name
        bodies = []
        for k, ((fn, args), nw) in enumerate(zip(parts, [self.num_warps, *warps])):
            bodies.append((Partition(f"program {self.pid} {fn.__name__}[{k}]", nw * 32),
                           lambda fn=fn, args=args: fn(*args)))
        self.scheduler.run(bodies)

    # ---- mbarriers
    def wait(self, bar: Barrier, parity: Any) -> None:
        if bar.count is None:
            raise EmulationError(f"wait on {bar.name} before its init")
        self.scheduler.wait(bar, int(parity), sys._getframe(1).f_lineno)

    def arrive(self, bar: Barrier, increment_count: bool) -> None:
        """Every thread of the partition arrives (`increment_count=False`; the kernels have no
        cp.async pending, so each thread's arrival is at once)."""
        if increment_count:
            raise NotImplementedError("cp.async arrivals that increment the pending count")
        self.sync()
        bar.arrive(self.partition().threads)

    def expect(self, bar: Barrier, nbytes: Any) -> None:
        self.sync()
        bar.expect(int(nbytes))

    # ---- TMA
    def tma_load(self, desc: TensorMap, coords: Sequence[Any], bar: Barrier, dst: SharedView) -> None:
        """Issue a copy of the box at `coords` into `dst`; it lands when the scheduler picks it."""
        self.sync()
        self.check_unread(dst, "a TMA load writes")
        dst.buffer.writers[dst.slot] += 1
        box = [int(c) for c in coords]

        def land() -> None:
            dst.buffer.put(dst.slot, desc.read(box))
            dst.buffer.writers[dst.slot] -= 1
            bar.complete_tx(desc.block_type.nbytes)
        self.scheduler.landings.append(land)

    def tma_store(self, desc: TensorMap, coords: Sequence[Any], src: SharedView) -> None:
        """Store `src` at `coords`; it reads `src` until `store_wait` retires it."""
        self.sync()
        self.check_readable(src, "a TMA store")
        desc.write([int(c) for c in coords], src.value())
        src.buffer.readers[src.slot] += 1
        self.partition().stores.append(src)

    def store_wait(self, n: Any) -> None:
        self.sync()
        stores = self.partition().stores
        while len(stores) > int(n):
            view = stores.pop(0)
            view.buffer.readers[view.slot] -= 1

    def fence(self) -> None:
        self.sync()
        self.partition().unfenced.clear()

    # ---- wgmma
    def wgmma(self, a: Any, b: Any, acc: Any, use_acc: bool = True, is_async: bool = True) -> Token:
        """acc + a @ b (a: registers or shared memory, b: shared memory; acc: registers or the
        token of the partition's wgmma before, chained)."""
        self.sync()
        reads = [v for v in (a, b) if isinstance(v, SharedView)]
        for view in reads:
            self.check_readable(view, "a wgmma")
            view.buffer.readers[view.slot] += 1
        a, b = (v.value() if isinstance(v, SharedView) else np.asarray(v) for v in (a, b))
        # einsum, not BLAS: OpenBLAS's threads spin between calls, slowing two test workers on
        # two cores tenfold
        out = np.einsum("ik,kj->ij", a.astype(np.float64), b.astype(np.float64))
        if use_acc:
            out += (acc.value if isinstance(acc, Token) else np.asarray(acc)).astype(np.float64)
        token = Token(reads, out.astype(np.float32))
        self.partition().mmas.append(token)
        return token

    def wgmma_wait(self, n: Any, deps: Sequence[Any]) -> Any:
        """Retire all but the `n` newest wgmma; deps[0]'s value if it is retired (else itself)."""
        self.sync()
        mmas = self.partition().mmas
        while len(mmas) > int(n):
            token = mmas.pop(0)
            token.done = True
            for view in token.reads:
                view.buffer.readers[view.slot] -= 1
        dep = deps[0]
        return dep.value if isinstance(dep, Token) and dep.done else dep

    def namespace(self) -> dict[str, Any]:
        """The names the generated module imports, as this program's emulation of them."""
        tl = types.SimpleNamespace(
            int32=dtypes.int32, float16=dtypes.float16, bfloat16=dtypes.bfloat16, float32=dtypes.float32,
            program_id=lambda axis: self.pid[axis], num_programs=lambda axis: self.grid[axis],
            minimum=np.minimum, maximum=np.maximum, where=np.where, exp2=np.exp2, reduce=_reduce,
            reshape=np.reshape, broadcast_to=np.broadcast_to,
            cast=lambda x, dtype: np.asarray(x).astype(dtype.np_dtype), inline_asm_elementwise=_inline_asm, fma=_fma,
            math=types.SimpleNamespace(div_rn=np.divide))
        gl = types.SimpleNamespace(
            int64=dtypes.int64, float32=dtypes.float32,
            full=lambda shape, value, dtype: np.full(shape, value, dtype.np_dtype),
            arange=lambda lo, hi: np.arange(lo, hi, dtype=np.int32),
            zeros=lambda shape, dtype, layout=None: np.zeros(shape, dtype.np_dtype),
            convert_layout=lambda x, layout: x, set_auto_layout=lambda x, layout: x,
            reshape=np.reshape, permute=np.transpose, split=lambda x: (x[..., 0], x[..., 1]),
            NVMMADistributedLayout=_layout, DotOperandLayout=_layout,
            allocate_shared_memory=self.allocate, warp_specialize=self.warp_specialize)
        return dict(
            tl=tl, gl=gl, fence_async_shared=self.fence, warpgroup_mma=self.wgmma, warpgroup_mma_wait=self.wgmma_wait,
            async_copy=types.SimpleNamespace(mbarrier_arrive=self.arrive),
            mbarrier=types.SimpleNamespace(MBarrierLayout=_layout, init=lambda bar, count: bar.init(count),
                                           expect=self.expect, wait=self.wait),
            tma=types.SimpleNamespace(async_copy_global_to_shared=self.tma_load,
                                      async_copy_shared_to_global=self.tma_store, store_wait=self.store_wait))


def _layout(**kwargs: Any) -> None:
    """Layouts are not emulated (module docstring)."""
    return None


def _inline_asm(asm: str, constraints: str, args: Sequence[Any], dtype: Any, is_pure: bool, pack: int) -> np.ndarray:
    """tl.inline_asm_elementwise of triton/helpers.py EXP2_FTZ (exp2 with flush_to_zero, PTX
    ex2.approx.ftz.f32), as NumPy computes it: operand and result flushed."""
    assert asm == "ex2.approx.ftz.f32 $0, $1;", asm
    return flush_subnormals(np.exp2(flush_subnormals(np.asarray(args[0], np.float32))))


def _fma(a: Any, b: Any, c: Any) -> np.ndarray:
    """tl.fma as the GPU's fma.rn computes it, rounded once (in the dtype of the tiles; literal
    operands take it)."""
    tiles = [np.asarray(v) for v in (a, b, c) if np.ndim(v)]
    dtype = dtypes.to_dtype(tiles[0].dtype)
    return fused_multiply_add(*np.broadcast_arrays(*(np.asarray(v, tiles[0].dtype) for v in (a, b, c))), dtype)


def _reduce(x: Any, axis: int, combine: Callable[[Any, Any], Any], keep_dims: bool = False) -> np.ndarray:
    """tl.reduce: `combine` over `axis`, halving it pairwise as a tree."""
    x = np.moveaxis(np.asarray(x), axis, 0)
    while len(x) > 1:
        half = len(x) // 2
        x = np.concatenate([combine(x[:half], x[half:2 * half]), x[2 * half:]])
    return np.moveaxis(x, 0, axis) if keep_dims else x[0]
