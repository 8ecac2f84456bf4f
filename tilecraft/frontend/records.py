"""Frozen dataclasses in tile code: instances whose fields hold tiles or arrays.

An instance is a real Python object of the user's class whose fields are front-end values, built
without running `__init__` on the host; `__post_init__`, methods, properties, `__call__`,
`__getitem__` and `__setitem__` are compiled (inlined) like helper functions, whether the fields
are constants or not. As in cuTile: only frozen dataclasses, no custom `__init__`/`__new__`, no
`init=False` fields or `default_factory`, no plain subclasses of a dataclass.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from ..ir import Value
from ..language import ops as L
from .array_choice import ArrayChoice


def is_record(x: Any) -> bool:
    """An instance (not the class) of a user's dataclass; tilecraft's own front-end values
    (bound methods, tiled views, ...) are dataclasses too, but not records."""
    return dataclasses.is_dataclass(x) and not isinstance(x, type) and not type(x).__module__.startswith("tilecraft.")


def has_runtime(x: Any) -> bool:
    """Whether `x` holds a runtime value (a tile or array), directly or in tuples / records."""
    if isinstance(x, (Value, ArrayChoice)):
        return True
    if isinstance(x, tuple):
        return any(has_runtime(v) for v in x)
    if is_record(x):  # (a record being built has fields not set yet)
        return any(has_runtime(getattr(x, f.name, None)) for f in dataclasses.fields(x))
    return False


def class_problem(cls: type) -> str | None:
    """Why tile code cannot use instances of the dataclass `cls` (cuTile's wording), or None."""
    name = cls.__qualname__
    if "__dataclass_fields__" not in cls.__dict__:
        return f"Non-dataclass subclasses of a dataclass are not supported ({name})"
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return f"Only frozen dataclasses are supported ({name} is not frozen)"
    if any("__new__" in k.__dict__ for k in cls.__mro__[:-1]):
        return f"Dataclasses with custom __new__ are not supported ({name})"
    return None


def _check_class(fc: Any, cls: type) -> None:
    problem = class_problem(cls)
    code = getattr(cls.__init__, "__code__", None)
    generated = code is not None and code.co_filename == "<string>"
    if problem is None and not L.is_static_def(cls.__init__) and (
            not cls.__dataclass_params__.init or not generated):  # type: ignore[attr-defined]
        problem = ("Dataclass instance creation is only supported for dataclasses with a default generated "
                   f"__init__() method ({cls.__qualname__})")
    for f in dataclasses.fields(cls) if problem is None else ():
        if not f.init:
            problem = f"Dataclasses with init=False fields are not supported ({cls.__qualname__}.{f.name})"
        elif f.default_factory is not dataclasses.MISSING:
            problem = f"Dataclasses with default_factory fields are not supported ({cls.__qualname__}.{f.name})"
    if problem is not None:
        raise fc.sema.type_error(problem)


def construct(fc: Any, cls: type, args: list[Any], kwargs: dict[str, Any], node: Any) -> Any:
    """`cls(*args, **kwargs)` in tile code."""
    _check_class(fc, cls)
    if L.is_static_def(cls.__init__):  # runs as Python; sets the fields itself
        obj = object.__new__(cls)
        fc.inline(cls.__init__, [obj, *args], kwargs, node)
        return obj
    try:
        bound = inspect.signature(cls).bind(*args, **kwargs)
    except TypeError as exc:
        raise fc.type_error(f"Calling {cls.__qualname__}(): {exc}", node) from None
    bound.apply_defaults()
    obj = object.__new__(cls)
    for name, value in bound.arguments.items():
        object.__setattr__(obj, name, value)
    post_init = getattr(cls, "__post_init__", None)
    if post_init is not None:
        fc.inline(post_init, [obj], {}, node)
    return obj


def replace(fc: Any, obj: Any, changes: dict[str, Any], node: Any) -> Any:
    """`dataclasses.replace(obj, **changes)` in tile code."""
    fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    unknown = next((k for k in changes if k not in fields), None)
    if unknown is not None:
        raise fc.type_error(f"Dataclass '{type(obj).__qualname__}' has no such field '{unknown}'", node)
    return construct(fc, type(obj), [], {**fields, **changes}, node)


def special_method(obj: Any, name: str) -> Any:
    """The function `name` the record's class defines (to inline with `obj` first; `object`'s
    own, e.g. `type.__call__`, do not count), or None."""
    if not is_record(obj) or not any(name in k.__dict__ for k in type(obj).__mro__[:-1]):
        return None
    return getattr(type(obj), name)


def fields_of(obj: Any) -> tuple[Any, ...]:
    """The field values of a record, in field order (control flow treats them like a tuple)."""
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def rebuild(template: Any, values: tuple[Any, ...]) -> Any:
    """A record of `template`'s class with these field values (no `__post_init__`: the values
    already passed it)."""
    obj = object.__new__(type(template))
    for f, value in zip(dataclasses.fields(template), values):
        object.__setattr__(obj, f.name, value)
    return obj
