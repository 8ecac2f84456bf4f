"""Frozen dataclasses in tile code: instances whose fields hold tiles or arrays.

An instance is a real Python object of the user's class whose fields are front-end values, built
without running `__init__` on the host; `__post_init__`, methods, properties, `__call__` and
`__getitem__` are compiled (inlined) like helper functions. Instances made only of constants keep
plain Python behaviour. As in cuTile: only frozen dataclasses, no custom `__init__`/`__new__`,
no `init=False` fields or `default_factory`.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from ..ir import Value


def is_record(x: Any) -> bool:
    """A dataclass instance (not the class)."""
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def has_runtime(x: Any) -> bool:
    """Whether `x` holds a runtime value (a tile or array), directly or in tuples / records."""
    if isinstance(x, Value):
        return True
    if isinstance(x, tuple):
        return any(has_runtime(v) for v in x)
    if is_record(x):
        return any(has_runtime(getattr(x, f.name)) for f in dataclasses.fields(x))
    return False


def _check_class(fc: Any, cls: type) -> None:
    name = cls.__qualname__
    if not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise fc.sema.type_error(f"Only frozen dataclasses can be built in tile code; {name} is not frozen")
    init = cls.__dict__.get("__init__")
    if "__new__" in cls.__dict__ or (init is not None and init.__code__.co_filename != "<string>"):
        raise fc.sema.type_error(f"Dataclass {name} defines its own __init__ or __new__, which tile code cannot run")
    for f in dataclasses.fields(cls):
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise fc.sema.type_error(f"Dataclass {name} field `{f.name}` uses init=False or default_factory, "
                                     f"which tile code does not support")


def construct(fc: Any, cls: type, args: list[Any], kwargs: dict[str, Any], node: Any) -> Any:
    """`cls(*args, **kwargs)` in tile code."""
    _check_class(fc, cls)
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
    return construct(fc, type(obj), [], {**fields, **changes}, node)


def special_method(obj: Any, name: str) -> Any:
    """The class's `name` function for a runtime record (to inline with `obj` first), or None."""
    if not is_record(obj) or not has_runtime(obj):
        return None
    return getattr(type(obj), name, None)


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
