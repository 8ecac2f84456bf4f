"""The KernelWriter the Gluon lowering emits with, and Gluon's spelling of Triton's text.

Gluon runs Triton's element-wise, reduction and shape builtins as they are, so the Triton
backend's rules lower every such op; `GluonWriter` adds what Gluon needs around them: operands
converted where two accumulator layouts meet (layouts.py), broadcasts left to the ops that use
them, and scalars splat with `full`. `as_gluon` spells the three builtins that make tiles from
nothing (`full`, `arange`, `zeros`) as Gluon's, whose omitted layout is AutoLayout.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from ...ir import Op, Value, ops
from ..triton.emitter import KernelWriter, Target
from ..triton.plan import LoweringPlan
from ..triton.spelling import tl_dtype
from .layouts import Classes


class GluonWriter(KernelWriter):
    """A KernelWriter converting operands between accumulator layouts (layouts.py) and leaving
    elided broadcasts to the ops that use them."""

    index_expands = False

    def __init__(self, target: Target, plan: LoweringPlan, layouts: Classes) -> None:
        super().__init__(target, plan)
        self.layouts = layouts

    @contextmanager
    def rebinding(self, values: list[Value]) -> Iterator[None]:
        """Whatever the `with` body makes `values` stand for, they stand for what they did before
        once it is done (a slice lowered a second time, for another partition's piece)."""
        saved = [(v, self._exprs.get(v.id), self.is_literal(v)) for v in values]
        try:
            yield
        finally:
            for v, text, literal in saved:
                if text is None:
                    self._exprs.pop(v.id, None)
                else:
                    self.alias(v, text, literal)

    def lower_op(self, op: Op) -> None:
        if isinstance(op, ops.Broadcast) and op.result.id in self.layouts.elided:
            self.alias(op.result, self.expr(op.x), self.is_literal(op.x))
            return
        if isinstance(op, (ops.Broadcast, ops.Reshape)) and not op.x.tile.shape and not self.is_literal(op.x):
            # Gluon splats a scalar with `full` (its broadcast_to takes tensors only)
            shape = ", ".join(str(d) for d in op.result.tile.shape)
            self.assign(op.result, f"gl.full([{shape}], {self.expr(op.x)}, {tl_dtype(op.x.tile.dtype)})", "t")
            return
        saved = {}
        for vid, cls in self.layouts.converts.get(op, {}).items():
            v = next(o for o in op.operands if o.id == vid)
            saved[vid] = (v, self.expr(v), self.is_literal(v))
            name = self.fresh("cvt")
            self.emit(f"{name} = gl.convert_layout({self.tensor(v)}, {layout_name(cls)})")
            self.alias(v, name)
        try:
            super().lower_op(op)
        finally:
            for v, text, literal in saved.values():
                self.alias(v, text, literal)


def layout_name(cls: int) -> str:
    """The constexpr name the compute partition gives accumulator layout `cls` (compute.py)."""
    return f"ACC{cls}"


def new_writer(plan: LoweringPlan, layouts: Classes) -> GluonWriter:
    """A writer for one function of the module (`plan`: the Triton lowering plan of the kernel)."""
    return GluonWriter(Target(interpret=False, descriptors=False), plan, layouts)


_CREATION = re.compile(r"\btl\.(full|arange|zeros)\(")


def as_gluon(source: str) -> str:
    """Triton helpers and creation builtins as Gluon spells them (module docstring)."""
    return _CREATION.sub(r"gl.\1(", source).replace("@triton.jit\n", "@gluon.jit\n")

