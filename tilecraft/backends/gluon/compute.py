"""The compute partitions of the warp-specialized schedule (see lower.py's docstring).

A compute partition runs the kernel but for its streamed loads: resident loads are TMA copies
made once before the loop; MMAs are async wgmma reading the rings' slots (B) and shared memory
or registers (A), each streamed slot released once the MMA reading it is done. With a deferred
MMA (passes/warp_specialize.py), iteration t issues its first MMA, then iteration t - 1's
deferred one, waits for the first only and runs the math in between while the deferred MMA
runs; the accumulator is waited for where the rescale ops read it. Two partitions take turns
issuing their MMAs (ping-pong); where their loops end at different iterations (`Schedule.uneven`)
the one done first drains the remaining slots. Epilogue stores go through shared memory and a
TMA store.
"""

from __future__ import annotations

from ...ir import Value, ops
from ..triton.control import assign_all
from .layouts import OPAQUE
from .schedule import Schedule
from .writer import GluonWriter, layout_name


class ComputePartition:
    """Emits one compute partition's function body for schedule `s` (module docstring)."""

    def __init__(self, s: Schedule) -> None:
        self.s = s
        self.defs = {r.id: op for op in (*s.found.prologue, *s.found.loop.body.ops) for r in op.results}

    def body(self, w: GluonWriter) -> None:
        """The partition function's body: prologue (resident copies), loop, epilogue (stores)."""
        f = self.s.found
        for cls in sorted({c for c in self.s.layouts.of.values() if c is not None and c != OPAQUE}):
            w.emit(f"{layout_name(cls)}: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], "
                   f"warps_per_cta=[{self.s.warps}, 1], instr_shape=[16, {cls}, 16])")
        views = {v.id for s in (*f.resident, *f.streamed) for v in s.views}
        for op in f.prologue:
            if isinstance(op, ops.Load):
                r = f.resident.index(next(s for s in f.resident if s.load is op))
                if r == 0:  # the prologue's first load: every resident copy arrives on one barrier
                    total = " + ".join(f"{self.s.desc(s.load.array, self.s.block(s))}.block_type.nbytes"
                                       for s in f.resident)
                    w.emit(f"mbarrier.expect({self.s.bar()}, {total})")
                d = self.s.desc(op.array, self.s.block(f.resident[r]))
                w.emit(f"tma.async_copy_global_to_shared({d}, {self.s.coords(w, op)}, {self.s.bar()}, {self.s.own(f'res{r}')})")
            elif not (isinstance(op, ops.Reshape) and op.result.id in views):
                w.lower_op(op)
        if f.resident:
            w.emit(f"mbarrier.wait({self.s.bar()}, 0)")
        self._loop(w)
        reused = self.s.reused
        for op in f.epilogue:
            if isinstance(op, ops.Store):
                i = self.s.stores.index(op)
                buf = self.s.own(f"res{reused[i]}" if i in reused else f"out{i}")
                d = self.s.desc(op.array, op.tile.tile.shape)
                w.emit(f"{buf}.store({w.tensor(op.tile)})")
                w.emit("fence_async_shared()")
                w.emit(f"tma.async_copy_shared_to_global({d}, {self.s.coords(w, op)}, {buf})")
            else:
                w.lower_op(op)
        if self.s.stores:
            w.emit("tma.store_wait(0)")

    def _operand(self, w: GluonWriter, v: Value, slot: str | None, parent: int) -> str:
        """An MMA operand: a view of a resident buffer or ring slot, else the register tile in
        the dot-operand layout of the `parent` accumulator layout."""
        f = self.s.found
        s = f.tile_of(v)
        if s is None:
            return (f"gl.convert_layout({w.tensor(v)}, gl.DotOperandLayout(operand_index=0, "
                    f"parent={layout_name(parent)}, k_width=2))")
        if s in f.resident:
            buf = self.s.own(f"res{f.resident.index(s)}")
        else:
            buf = f"ring{f.streamed.index(s)}.index({slot})"
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

    def _issue(self, w: GluonWriter, mma: ops.Mma, slot: str, phase: str) -> str:
        """Wait for the B operand's slot and issue `mma` async; returns its token's name."""
        f = self.s.found
        cls = mma.result.tile.shape[-1]
        s = f.tile_of(mma.b)
        i = f.streamed.index(s)
        w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
        acc, zero = self._acc(w, mma.acc, cls)
        a = self._operand(w, mma.a, slot, cls)
        b = self._operand(w, mma.b, slot, cls)
        tok = w.fresh("tok")
        w.emit(f"{tok} = warpgroup_mma({a}, {b}, {acc}{', use_acc=False' if zero else ''}, is_async=True)")
        return tok

    def _release(self, w: GluonWriter, mma: ops.Mma, slot: str) -> None:
        i = self.s.found.streamed.index(self.s.found.tile_of(mma.b))
        w.emit(self.s.arrive(f"empty{i}.index({slot})"))

    def _loop(self, w: GluonWriter) -> None:
        f = self.s.found
        loop = f.loop
        body = loop.body
        carried = body.args[1:]
        names = [w.define(arg, "acc") for arg in carried]
        for name, arg, init in zip(names, carried, loop.init):
            cls = self.s.layouts.get(arg)
            w.emit(f"{name} = {w.tensor(init) if cls is None else self._in_layout(w, init, cls)}")
        lo, hi, step = (w.expr(v) for v in (loop.lower, loop.upper, loop.step))
        if f.deferred is None:
            iv = w.define(body.args[0], "j")
            w.emit(f"for {iv} in range({lo}, {hi}, {step}):")
            with w.indented():
                _, slot, phase = self.s.slot(w, iv, lo, step)
                self._iteration(w, names, "", slot, phase, None)
        else:
            self._rotated(w, names, lo, hi, step)
        if self.s.uneven:
            self._drain(w, lo, hi, step)
        for result, name in zip(loop.results, names):
            w.alias(result, name)

    def _rotated(self, w: GluonWriter, names: list[str], lo: str, hi: str, step: str) -> None:
        f = self.s.found
        body = f.loop.body
        iv = w.define(body.args[0], "j")
        w.emit(f"if {lo} < {hi}:")
        with w.indented():
            w.emit(f"{iv} = {lo}")
            t, slot, phase = self.s.slot(w, iv, lo, step)
            state = self._iteration(w, names, t, slot, phase, None)
            w.emit(f"for {iv} in range({lo} + {step}, {hi}, {step}):")
            with w.indented():
                t, slot, phase = self.s.slot(w, iv, lo, step)
                self._iteration(w, names, t, slot, phase, state)
            p, c, pslot, pphase, pt = state
            self._my_turn(w, f"{pt} + 1")
            tok = self._issue_deferred(w, p, c, pslot, pphase)
            self._your_turn(w)
            w.emit(f"{names[f.deferred_slot]} = warpgroup_mma_wait(0, deps=({tok}, ))")
            self._release(w, f.deferred, pslot)

    def _my_turn(self, w: GluonWriter, turn: str) -> None:
        """Ping-pong (two compute partitions): wait until this partition may issue its MMAs of
        iteration `turn` (partition 0's first turn at once, every other after the other
        partition's matching `_your_turn`), so one's softmax runs while the other's MMAs do."""
        if self.s.turns:
            w.emit(f"mbarrier.wait(turn_mine.index(0), (({turn}) & 1) ^ (1 - {self.s.piece}))")

    def _your_turn(self, w: GluonWriter) -> None:
        if self.s.turns:
            w.emit(self.s.arrive("turn_theirs.index(0)"))

    def _issue_deferred(self, w: GluonWriter, p: str, c: str, slot: str, phase: str) -> str:
        f = self.s.found
        i = f.streamed.index(f.tile_of(f.deferred.b))
        w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
        b = self._operand(w, f.deferred.b, slot, 0)
        tok = w.fresh("tok_late")
        w.emit(f"{tok} = warpgroup_mma({p}, {b}, {c}, is_async=True)")
        return tok

    def _iteration(self, w: GluonWriter, names: list[str], t: str, slot: str, phase: str,
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
            if isinstance(op, ops.Load) or (isinstance(op, ops.Reshape) and op.result.id in views):
                continue
            if isinstance(op, ops.Yield):  # at once, as Triton's loops do (`m_prev, m = m, m_new`)
                kept = [k for k in range(len(names)) if deferred is None or k != f.deferred_slot]
                assign_all(w, [names[k] for k in kept], tuple(op.values[k] for k in kept))
                continue
            if deferred is not None and (op in rescale or op is deferred) and pending_late is not None:
                # the previous deferred MMA's result is the carried accumulator from here on
                acc = w.fresh("acc_now")
                w.emit(f"{acc} = warpgroup_mma_wait(0, deps=({pending_late}, ))")
                self._release(w, deferred, state[2])
                w.alias(body.args[1 + f.deferred_slot], acc)
                pending_late = None
            if isinstance(op, ops.Mma) and op is not deferred:
                if deferred is not None:
                    self._my_turn(w, t)
                tok = self._issue(w, op, slot, phase)
                if state is not None and deferred is not None:
                    pending_late = self._issue_deferred(w, *state[:4])
                if deferred is not None:
                    self._your_turn(w)
                if pending_late is not None:
                    w.assign(op.result, f"warpgroup_mma_wait(1, deps=({tok}, ))", "mma")
                else:
                    w.assign(op.result, f"warpgroup_mma_wait(0, deps=({tok}, ))", "mma")
                self._release(w, op, slot)
                continue
            if op is deferred:
                cls = op.result.tile.shape[-1]
                if state is None and out_state is None:
                    out_state = tuple(w.fresh(n) for n in ("p_late", "c_late", "slot_late", "phase_late", "t_late"))
                p, c, pslot, pphase, pt = out_state
                w.emit(f"{p} = {self._operand(w, op.a, None, cls)}")
                w.emit(f"{c} = {self._in_layout(w, op.acc, cls)}")
                w.emit(f"{pslot} = {slot}")
                w.emit(f"{pphase} = {phase}")
                w.emit(f"{pt} = {t}")
                continue
            w.lower_op(op)
        return out_state  # None without a deferred MMA (`state` is None then)

    def _drain(self, w: GluonWriter, lo: str, hi: str, step: str) -> None:
        """Uneven partitions: after this partition's last iteration, release the slots of the
        iterations up to the later end (`Schedule.latest_end`) and take their ping-pong turns; one
        whose loop ran no iteration takes turn 0 (the first iteration's) as well."""
        f = self.s.found
        latest = self.s.latest_end(w, f"(1 - {self.s.piece})")
        rotated = f.deferred is not None
        if rotated:
            w.emit(f"if {lo} >= {hi}:")
            with w.indented():
                self._my_turn(w, "0")
                self._your_turn(w)
        start = w.fresh("j_drain")
        w.emit(f"{start} = {lo} + tl.maximum(({hi} - {lo} + {step} - 1) // {step}, 0) * {step}")
        iv = w.fresh("j")
        w.emit(f"for {iv} in range({start}, {latest}, {step}):")
        with w.indented():
            t, slot, phase = self.s.slot(w, iv, lo, step)
            if rotated:
                self._my_turn(w, f"{t} + 1")
            for i in range(len(f.streamed)):
                w.emit(f"mbarrier.wait(ready{i}.index({slot}), {phase})")
                w.emit(self.s.arrive(f"empty{i}.index({slot})"))
            if rotated:
                self._your_turn(w)

