"""Subscripts in tile code: `x[key]` of a tuple (constant indices and slices), a tile (new unit
axes only: `t[None, :]`), a list of arrays (a runtime index), a record with `__getitem__`, and
constant containers (dicts, strings; a runtime index into one is an error). Arrays are not
subscriptable: they are read with load() or gather()."""

from __future__ import annotations

import ast
from typing import Any

from ..ir import Value, ops
from . import records
from .array_choice import ArrayChoice
from .semantics import hashable, is_array, is_list, is_tile, type_name


def subscript(fc: Any, obj: Any, index_node: ast.expr, node: ast.AST) -> Any:
    if is_array(obj) or isinstance(obj, ArrayChoice):
        raise fc.type_error("Arrays are not directly subscriptable. Use load() or gather()", node)
    if is_list(obj):
        key = fc.expr(index_node)
        if isinstance(key, int) and not -obj.type.length <= key < obj.type.length:
            raise fc.type_error(f"List index {key} is out of range for a list of {obj.type.length} arrays", node)
        if isinstance(key, int):
            key %= obj.type.length
        index = fc.sema.index_scalar(key, "List index")
        item = fc.b.value(ops.ListGet, list=obj, index=index)
        if obj.id in fc.ctx.static_dims:  # ListAnnotation's static dims hold for every array of the list
            fc.ctx.static_dims[item.id] = fc.ctx.static_dims[obj.id]
        return item
    if is_tile(obj):
        return _tile_new_axes(fc, obj, fc.expr(index_node), node)
    key = fc.expr(index_node)
    getitem = records.special_method(obj, "__getitem__")
    if getitem is not None:
        return fc.inline(getitem, [obj, key], {}, node)
    if isinstance(obj, tuple):
        return _tuple_item(fc, obj, key, node)
    if isinstance(key, Value):
        raise fc.type_error(f"A constant {type(obj).__name__} cannot be indexed by a runtime value "
                            f"({type_name(key)}): its index must be a compile-time constant", node)
    if isinstance(obj, dict) and hashable(key) and key not in obj:
        raise fc.type_error(f"Key {key!r} not found in dictionary", node)
    return fc.host(lambda: obj[key], (), node)


def _tile_new_axes(fc: Any, t: Value, key: Any, node: ast.AST) -> Value:
    """`t[None, :, ...]`: new unit axes where the key has None (np.newaxis); `:` and `...`
    stand for the tile's axes. Any other subscript of a tile is an error (cuTile's rules)."""
    if key is None:
        key = (None,)
    if not isinstance(key, tuple):
        raise fc.type_error("Directly indexing a tile is not supported; use `extract()` or `item()` instead.", node)
    if any(isinstance(k, Value) for k in key):
        raise fc.type_error("Tile subscript must be a constant tuple", node)
    for k in key:
        if k is not None and k is not Ellipsis and k != slice(None):
            raise fc.type_error(f"Expected `None|np.newaxis` or `ellipsis` or full slice (`:`), but got {k}. "
                                f"Hint: Directly indexing a tile is not supported, use `extract` or `item`.", node)
    ndim = t.tile.ndim
    slices = sum(1 for k in key if isinstance(k, slice))
    if slices > ndim:
        raise fc.type_error(f"Tile is {ndim}-dimensional, but {slices} were indexed", node)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise fc.type_error("Only one ellipsis is allowed", node)
    dots = key.index(Ellipsis) if Ellipsis in key else None
    axes = [i - len(key) if dots is not None and i > dots else i for i, k in enumerate(key) if k is None]
    shape = list(t.tile.shape)
    for a in axes:
        shape.insert(a + ndim + len(axes) if a < 0 else a, 1)
    return fc.sema.reshape(t, tuple(shape))


def _tuple_item(fc: Any, tup: tuple[Any, ...], key: Any, node: ast.AST) -> Any:
    """`tup[key]`: a constant integer index or a slice (cuTile's wording for the others)."""
    integral = is_tile(key) and key.tile.shape == () and key.tile.dtype.is_integral
    if isinstance(key, slice):
        bounds = (key.start, key.stop, key.step)
        if any(is_tile(b) for b in bounds):
            raise fc.type_error("Tuple indices must be constant", node)
        if not all(b is None or isinstance(b, int) for b in bounds) or key.step == 0:
            raise fc.type_error(f"Tuple slice bounds must be integers or None (step not 0), got {key}", node)
    if isinstance(key, slice) or (isinstance(key, int) and not isinstance(key, bool)):
        if isinstance(key, int) and not -len(tup) <= key < len(tup):
            raise fc.type_error(f"Index {key} is out of range for a tuple of length {len(tup)}", node)
        return tup[key]
    if integral:
        raise fc.type_error("Tuple indices must be constant", node)
    raise fc.type_error(f"Tuple indices must be integers or slices, not {type_name(key)}", node)
