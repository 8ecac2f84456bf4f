"""The compute partitions of the warp-specialized schedule (see lower.py's docstring).

A compute partition runs the kernel but for its streamed loads: resident loads are TMA copies
made once before the loop (by the load partition in persistent kernels); MMAs are async wgmma
reading the rings' slots (B, and A where it is streamed) and shared memory or registers (A),
each streamed slot released once the MMA reading it is done. A chained loop (a matmul's) keeps
one MMA in flight and releases each iteration's slots one iteration late. With a deferred
MMA (passes/warp_specialize.py), iteration t issues its first MMA, then iteration t - 1's
deferred one, waits for the first only and runs the math in between while the deferred MMA
runs; the accumulator is waited for where the rescale ops read it. Two partitions take turns
issuing their MMAs (ping-pong); where their loops end at different iterations (`Schedule.uneven`)
the one done first drains the remaining slots. Epilogue stores go through shared memory and a
TMA store; a persistent kernel whose stores have buffers of their own leaves each in flight
until the next block's store.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ...ir import Op, Value, ops
from ..triton.control import assign_all
from .layouts import OPAQUE
from .schedule import Schedule
from .writer import GluonWriter, layout_name


Slots = Mapping[int, str] | Sequence[str]
"""Ring index -> the name of a slot in it (all rings of an iteration, or the few an MMA reads)."""


def _is_view(op: Op, views: set[int]) -> bool:
    """Whether `op` makes one of `views`: another view of a loaded tile (a reshape dropping unit
    dims, a float32 tile read as tfloat32), which the MMAs read from the buffer itself."""
    return isinstance(op, (ops.Reshape, ops.Bitcast)) and op.result.id in views


class ComputePartition:
    """Emits one compute partition's function body for schedule `s` (module docstring)."""

    def __init__(self, s: Schedule) -> None:
        self.s = s
        self.defs = {r.id: op for op in (*s.found.prologue, *s.found.loop.body.ops) for r in op.results}

    def head(self, w: GluonWriter) -> None:
        """The partition function's constants: the accumulator layouts."""
        for cls in sorted({c for c in self.s.layouts.of.values() if c is not None and c != OPAQUE}):
            w.emit(f"{layout_name(cls)}: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], "
                   f"warps_per_cta=[{self.s.warps}, 1], instr_shape=[16, {cls}, {self.s.instr_k}])")

    def body(self, w: GluonWriter) -> None:
        """The body for one user block: prologue (resident copies), loop, epilogue (stores)."""
        f = self.s.found
        views = {v.id for s in (*f.resident, *f.streamed) for v in s.views}
        persistent = self.s.counters is not None  # the load partition copies the resident tiles
        for op in f.prologue:
            if isinstance(op, ops.Load):
                if persistent:
                    continue
                r = f.resident.index(next(s for s in f.resident if s.load is op))
                if r == 0:  # the prologue's first load: every resident copy arrives on one barrier
                    total = " + ".join(f"{self.s.desc(s.load.array, self.s.block(s))}.block_type.nbytes"
                                       for s in f.resident)
                    w.emit(f"mbarrier.expect({self.s.bar()}, {total})")
                d = self.s.desc(op.array, self.s.block(f.resident[r]))
                w.emit(f"tma.async_copy_global_to_shared({d}, {self.s.coords(w, op)}, {self.s.bar()}, {self.s.res(r)})")
            elif not _is_view(op, views):
                w.lower_op(op)
        if f.resident:
            w.emit(f"mbarrier.wait({self.s.bar()}, {self.s.resident_phase()})")
        trips = self._loop(w)
        reused = self.s.reused
        for op in f.epilogue:
            if isinstance(op, ops.Store):
                self._store(w, op, reused)
            else:
                w.lower_op(op)
        if self.s.stores and not self._in_flight():
            w.emit("tma.store_wait(0)")  # before the resident copy of a later block reuses the buffer
        if persistent and f.resident:
            w.emit(self.s.arrive(f"res_free.index({self.s.resident_buffer()})"))
        self.s.next_tile(w, trips, compute=True)

    def _store(self, w: GluonWriter, op: ops.Store, reused: Mapping[int, int]) -> None:
        """An epilogue store: the tile into its shared buffer, then a TMA store; a tile stored in
        two column halves (`Schedule.store_pieces`) goes through the buffer one half after the
        other, the second waiting for the first's TMA store to have read it."""
        i = self.s.stores.index(op)
        buf = self.s.res(reused[i]) if i in reused else self.s.own(f"out{i}")
        block = self.s.store_block(op)
        d = self.s.desc(op.array, block)
        tile = w.tensor(op.tile)
        coords = self.s.coords(w, op)
        pieces = [(tile, coords)]
        if block != op.tile.tile.shape:
            rows, half = op.tile.tile.shape[0], block[-1]
            lo, hi = w.fresh("lo"), w.fresh("hi")
            w.emit(f"{lo}, {hi} = gl.split(gl.permute(gl.reshape({tile}, [{rows}, 2, {half}]), (0, 2, 1)))")
            pieces = [(lo, coords), (hi, f"{coords[:-1]} + {half}]")]
        for k, (part, at) in enumerate(pieces):
            if k or self._in_flight():
                w.emit("tma.store_wait(0)")  # the store before (this block's or the last one's) has read the buffer
            w.emit(f"{buf}.store({part})")
            w.emit("fence_async_shared()")
            w.emit(f"tma.async_copy_shared_to_global({d}, {at}, {buf})")

    def _in_flight(self) -> bool:
        """Whether a block's stores are left in flight while the next block runs (persistent
        kernels whose stores have buffers of their own): each waits for the one before it
        reads its buffer, and the last for all (`tail`)."""
        return self.s.counters is not None and len(self.s.reused) == 0

    def tail(self, w: GluonWriter) -> None:
        """After the partition's last block: its stores left in flight complete."""
        if self.s.stores and self._in_flight():
            w.emit("tma.store_wait(0)")

    def _operand(self, w: GluonWriter, v: Value, slots: Slots, parent: int) -> str:
        """An MMA operand: a view of a resident buffer or ring slot (`slots`: ring -> slot),
        else the register tile in the dot-operand layout of the `parent` accumulator layout."""
        f = self.s.found
        s = f.tile_of(v)
        if s is None:
            return (f"gl.convert_layout({w.tensor(v)}, gl.DotOperandLayout(operand_index=0, "
                    f"parent={layout_name(parent)}, k_width=2))")
        if s in f.resident:
            buf = self.s.res(f.resident.index(s))
        else:
            i = f.streamed.index(s)
            buf = f"ring{i}.index({self.s.ring_slot(i, slots[i], self.s.piece)})"
        view = f"{buf}.reshape([{s.rows}, {s.cols}])"
        return view + (".permute((1, 0))" if s.transposed else "")

    def _acc(self, w: GluonWriter, v: Value, cls: int) -> tuple[str, bool]:
        """(the accumulator operand in layout `cls`, whether it is a zero tile to skip)."""
        op = self.defs.get(v.id)
        while isinstance(op, (ops.Broadcast, ops.Reshape)):
            op = self.defs.get(op.x.id)
        if isinstance(op, ops.Const) and op.value == 0:
            shape = ", ".join(str(d) for d in v.tile.shape)
            return f"gl.zeros([{shape}], gl.float32, {layout_name(cls)})", True
        return self._in_layout(w, v, cls), False

    def _in_layout(self, w: GluonWriter, v: Value, cls: int) -> str:
        have = self.s.layouts.get(v)
        if have == cls:
            return w.tensor(v)
        if have is None:
            return f"gl.set_auto_layout({w.tensor(v)}, {layout_name(cls)})"
        return f"gl.convert_layout({w.tensor(v)}, {layout_name(cls)})"

    def _rings(self, mma: ops.Mma) -> list[int]:
        """The rings `mma` reads (its B operand's, and its A operand's where A is streamed)."""
        f = self.s.found
        return [f.streamed.index(s) for s in (f.tile_of(mma.a), f.tile_of(mma.b)) if s in f.streamed]

    def _issue(self, w: GluonWriter, mma: ops.Mma, slots: list[str], phases: list[str]) -> str:
        """Wait for the streamed operands' slots and issue `mma` async; returns its token's name."""
        cls = mma.result.tile.shape[-1]
        for i in self._rings(mma):
            w.emit(f"mbarrier.wait(ready{i}.index({slots[i]}), {phases[i]})")
        acc, zero = self._acc(w, mma.acc, cls)
        a = self._operand(w, mma.a, slots, cls)
        b = self._operand(w, mma.b, slots, cls)
        tok = w.fresh("tok")
        w.emit(f"{tok} = warpgroup_mma({a}, {b}, {acc}{', use_acc=False' if zero else ''}, is_async=True)")
        return tok

    def _release(self, w: GluonWriter, mma: ops.Mma, slots: Slots) -> None:
        for i in self._rings(mma):
            w.emit(self.s.arrive(f"empty{i}.index({slots[i]})"))

    def _loop(self, w: GluonWriter) -> str:
        """The streamed loop; returns the name of its (and the load partition's) trip count
        where the schedule counts them (`Schedule.trips`)."""
        f = self.s.found
        loop = f.loop
        body = loop.body
        carried = body.args[1:]
        names = [w.define(arg, "acc") for arg in carried]
        for name, arg, init in zip(names, carried, loop.init):
            cls = self.s.layouts.get(arg)
            w.emit(f"{name} = {w.tensor(init) if cls is None else self._in_layout(w, init, cls)}")
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        end = self.s.latest_end(w, f"(1 - {self.s.piece})") if self.s.uneven else hi  # of either partition
        trips = self.s.trips(w, lo, end, step)
        if f.chained:
            self._chained(w, names, lo, hi, step)
        elif f.deferred is None:
            iv = w.define(body.args[0], "j")
            w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
            with w.indented():
                _, slots, phases = self.s.slot(w, iv, lo, step)
                self._iteration(w, names, "", slots, phases, None)
        else:
            self._rotated(w, names, lo, hi, step)
        if self.s.uneven:
            self._drain(w, lo, hi, step, end)
        for result, name in zip(loop.results, names):
            w.alias(result, name)
        return trips

    def _chained(self, w: GluonWriter, names: list[str], lo: str, hi: str, step: str) -> None:
        """A chained loop (passes/warp_specialize.py): each iteration issues its MMA onto the
        accumulator and waits only for the previous one, whose slots it then releases; the
        last iteration's MMA is waited for, and its slots released, after the loop."""
        f = self.s.found
        mma = f.mmas[0]
        k = f.loop.body.terminator.values.index(mma.result)
        iv = w.define(f.loop.body.args[0], "j")
        w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
        views = {v.id for s in f.streamed for v in s.views}
        with w.indented():
            t, slots, phases = self.s.slot(w, iv, lo, step)
            for op in f.loop.body.ops:
                if op is mma:
                    tok = self._issue(w, op, slots, phases)
                    w.emit(f"{names[k]} = warpgroup_mma_wait(1, deps=({tok}, ))")
                    w.emit(f"if {t} > 0:")
                    with w.indented():
                        self._release(w, op, self.s.slots_at(w, f"{self.s.count(t)} - 1"))
                elif isinstance(op, ops.Yield):
                    kept = [i for i in range(len(names)) if i != k]
                    assign_all(w, [names[i] for i in kept], tuple(op.values[i] for i in kept))
                elif not (isinstance(op, ops.Load) or _is_view(op, views)):
                    w.lower_op(op)
        w.emit(f"{names[k]} = warpgroup_mma_wait(0, deps=({names[k]}, ))")
        w.emit(f"if {lo} < {hi}:")
        with w.indented():
            last = f"{self.s.trip_count(w, lo, hi, step)} - 1"
            self._release(w, mma, self.s.slots_at(w, self.s.count(last)))

    def _rotated(self, w: GluonWriter, names: list[str], lo: str, hi: str, step: str) -> None:
        f = self.s.found
        body = f.loop.body
        iv = w.define(body.args[0], "j")
        w.emit(f"if {lo} < {hi}:")
        with w.indented():
            w.emit(f"{iv} = {lo}")
            t, slots, phases = self.s.slot(w, iv, lo, step)
            state = self._iteration(w, names, t, slots, phases, None)
            w.emit(f"for {iv} in range({lo} + {step}, {hi}, {step}):")
            with w.indented():
                t, slots, phases = self.s.slot(w, iv, lo, step)
                self._iteration(w, names, t, slots, phases, state)
            p, c, pslot, pphase, pt = state
            self._my_turn(w, f"{pt} + 1")
            tok = self._issue_deferred(w, p, c, pslot, pphase)
            self._your_turn(w)
            w.emit(f"{names[f.deferred_slot]} = warpgroup_mma_wait(0, deps=({tok}, ))")
            self._release(w, f.deferred, {self._deferred_ring(): pslot})

    def _my_turn(self, w: GluonWriter, turn: str) -> None:
        """Ping-pong (two compute partitions): wait until this partition may issue its MMAs of
        iteration `turn` (partition 0's first turn at once, every other after the other
        partition's matching `_your_turn`), so one's softmax runs while the other's MMAs do."""
        if self.s.turns:
            w.emit(f"mbarrier.wait(turn_mine.index(0), (({self.s.turn(turn)}) & 1) ^ (1 - {self.s.piece}))")

    def _your_turn(self, w: GluonWriter) -> None:
        if self.s.turns:
            w.emit(self.s.arrive("turn_theirs.index(0)"))

    def _issue_deferred(self, w: GluonWriter, p: str, c: str, slot: str, phase: str) -> str:
        f = self.s.found
        i = self._deferred_ring()
        w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
        b = self._operand(w, f.deferred.b, {i: slot}, 0)
        tok = w.fresh("tok_late")
        w.emit(f"{tok} = warpgroup_mma({p}, {b}, {c}, is_async=True)")
        return tok

    def _deferred_ring(self) -> int:
        f = self.s.found
        return f.streamed.index(f.tile_of(f.deferred.b))

    def _iteration(self, w: GluonWriter, names: list[str], t: str, slots: list[str], phases: list[str],
                   state: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """One iteration's body. Rotated loops (a deferred MMA): `state` holds the previous
        iteration's deferred operands (P, C, the slot and phase of its B, its iteration number)
        as names, None in the first iteration; returns this iteration's (the same names,
        reassigned)."""
        f = self.s.found
        body = f.loop.body
        views = {v.id for s in f.streamed for v in s.views}
        deferred = f.deferred
        rescale = set(f.rescale)
        pending_late = None
        out_state = state
        for op in body.ops:
            if isinstance(op, ops.Load) or _is_view(op, views):
                continue
            if isinstance(op, ops.Yield):  # at once, as Triton's loops do (`m_prev, m = m, m_new`)
                kept = [k for k in range(len(names)) if deferred is None or k != f.deferred_slot]
                assign_all(w, [names[k] for k in kept], tuple(op.values[k] for k in kept))
                continue
            if deferred is not None and (op in rescale or op is deferred) and pending_late is not None:
                # the previous deferred MMA's result is the carried accumulator from here on
                acc = w.fresh("acc_now")
                w.emit(f"{acc} = warpgroup_mma_wait(0, deps=({pending_late}, ))")
                self._release(w, deferred, {self._deferred_ring(): state[2]})
                w.alias(body.args[1 + f.deferred_slot], acc)
                pending_late = None
            if isinstance(op, ops.Mma) and op is not deferred:
                if deferred is not None:
                    self._my_turn(w, t)
                tok = self._issue(w, op, slots, phases)
                if state is not None and deferred is not None:
                    pending_late = self._issue_deferred(w, *state[:4])
                if deferred is not None:
                    self._your_turn(w)
                if pending_late is not None:
                    w.assign(op.result, f"warpgroup_mma_wait(1, deps=({tok}, ))", "mma")
                else:
                    w.assign(op.result, f"warpgroup_mma_wait(0, deps=({tok}, ))", "mma")
                self._release(w, op, slots)
                continue
            if op is deferred:
                cls = op.result.tile.shape[-1]
                if state is None and out_state is None:
                    out_state = tuple(w.fresh(n) for n in ("p_late", "c_late", "slot_late", "phase_late", "t_late"))
                p, c, pslot, pphase, pt = out_state
                w.emit(f"{p} = {self._operand(w, op.a, {}, cls)}")
                w.emit(f"{c} = {self._in_layout(w, op.acc, cls)}")
                w.emit(f"{pslot} = {slots[self._deferred_ring()]}")
                w.emit(f"{pphase} = {phases[self._deferred_ring()]}")
                w.emit(f"{pt} = {t}")
                continue
            w.lower_op(op)
        return out_state  # None without a deferred MMA (`state` is None then)

    def _drain(self, w: GluonWriter, lo: str, hi: str, step: str, latest: str) -> None:
        """Uneven partitions: after this partition's last iteration, release the slots of the
        iterations up to the later end `latest` (`Schedule.latest_end`) and take their ping-pong
        turns; one whose loop ran no iteration takes turn 0 (the first iteration's) as well."""
        f = self.s.found
        rotated = f.deferred is not None
        if rotated:
            w.emit(f"if {lo} >= {hi}:")
            with w.indented():
                self._my_turn(w, "0")
                self._your_turn(w)
        start = w.fresh("j_drain")
        w.emit(f"{start} = {lo} + {self.s.trip_count(w, lo, hi, step)} * {step}")
        iv = w.fresh("j")
        w.emit(f"for {iv} in range({start}, {latest}, {step}):")
        with w.indented():
            t, slots, phases = self.s.slot(w, iv, lo, step)
            if rotated:
                self._my_turn(w, f"{t} + 1")
            for i in range(len(f.streamed)):
                w.emit(f"mbarrier.wait(ready{i}.index({slots[i]}), {phases[i]})")
                w.emit(self.s.arrive(f"empty{i}.index({slots[i]})"))
            if rotated:
                self._your_turn(w)

