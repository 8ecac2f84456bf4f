"""IR to JSON and back: the same function (printed identically), and malformed data is an error,
never wrong IR."""

from __future__ import annotations

import json
import random

import pytest

import tilecraft as ct
from tilecraft.errors import TileInternalError
from tilecraft.frontend import ArraySpec, ConstSpec, compile_kernel
from tilecraft.ir import format_function
from tilecraft.ir.serialize import from_data, to_data
from tilecraft.language import dtypes as dt


def busy(a, b, c, T: ct.Constant[int]):
    i = ct.bid(0)
    acc = ct.zeros((T,), ct.float32)
    for k in range(ct.num_tiles(a, axis=0, shape=(T,))):
        x = ct.load(a, index=(k,), shape=(T,), padding_mode=ct.PaddingMode.NEG_INF)
        acc = ct.maximum(acc, x) if k % 2 == 0 else acc + ct.exp(x)
    s = ct.sum(acc, rounding_mode=ct.RoundingMode.RZ)
    ct.atomic_add(c, (i,), s)
    n = 0
    while n < 3:
        n += 1
    ct.store(b, index=(i,), tile=acc * n - 0.0)
    ct.printf("%f\n", s)


def _fn():
    return compile_kernel(busy, [ArraySpec(dt.float32, 1)] * 3 + [ConstSpec.of(16)], {"num_warps": 4})


def test_round_trip_through_json_keeps_the_function():
    fn = _fn()
    back = from_data(json.loads(json.dumps(to_data(fn))))
    assert format_function(back) == format_function(fn)
    assert back.options == fn.options and back.loc == fn.loc
    assert [op.loc for op in back.walk()] == [op.loc for op in fn.walk()]


def test_negative_zero_and_infinities_survive():
    text = json.dumps(to_data(_fn()))
    assert "-0.0" in text
    assert "-0.0" in format_function(from_data(json.loads(text)))


@pytest.mark.parametrize("seed", range(40))
def test_mutated_data_is_rejected_or_still_well_formed(seed):
    """Random edits of the JSON never give unverified IR: decoding fails cleanly or verifies."""
    rng = random.Random(seed)
    text = json.dumps(to_data(_fn()))
    pos = rng.randrange(len(text))
    mutated = text[:pos] + rng.choice("0123456789[]{}\",:aZ-") + text[pos + 1:]
    try:
        data = json.loads(mutated)
    except json.JSONDecodeError:
        return
    try:
        from_data(data)
    except (ValueError, TileInternalError):
        pass
