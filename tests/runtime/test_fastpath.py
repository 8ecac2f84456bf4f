"""The generated fast-path key (`fastpath.typed_keyer`) is `fast_key` written out for one list of
argument types: equal keys and runtime arguments for those types, None (the caller falls back)
for anything else."""

from __future__ import annotations

import numpy as np
import pytest

from tilecraft.runtime.fastpath import fast_key, typed_keyer

torch = pytest.importorskip("torch")


def _strided():
    t = torch.randn(8, 6)[:, 1:]
    return (t, t.T, 3, 64)


CASES = [((False, False, False, True), _strided),
         ((False, True, False, True, True), lambda: (np.zeros((3, 5), np.float32), -0.0, 2.5, True, (1, 2.0))),
         ((False,), lambda: (torch.zeros(0, dtype=torch.int8),)),
         ((True, False), lambda: (float("nan"), False))]


@pytest.mark.parametrize("plan, make", CASES)
def test_same_key_and_arguments_as_fast_key(plan, make):
    args = make()
    keyer = typed_keyer(plan, args)
    assert keyer(args) == fast_key(plan, args)
    twin = make()  # other objects of the same kinds: the same key, their own arguments
    key, flat = keyer(twin)
    assert key == fast_key(plan, args)[0] and all(x is y for x, y in zip(flat, fast_key(plan, twin)[1]))


def test_other_types_and_out_of_range_ints_are_refused():
    t = torch.randn(4)
    keyer = typed_keyer((False, False, True), (t, 5, 7))
    assert keyer((t, 5, 7)) is not None
    for other in ((t, 5.0, 7), (t.numpy(), 5, 7), (t, 5, 7.0), (t, 2**40, 7), (t, 5), [t, 5, 7]):
        assert keyer(other) is None
    assert keyer((t, 5, 8)) != keyer((t, 5, 7))  # constants are part of the key
    assert typed_keyer((False,), ([t],)) is None and typed_keyer((), ()) is None  # the full path's


def test_keys_tell_apart_everything_that_decides_a_variant():
    """One key per argument list that differs in dtype, device (CPU and meta tensors both have
    get_device() -1), shape, strides, alignment, negative bit, scalar type, Constant or argument kind, also
    across argument lists of different types (the key is one flat tuple)."""
    plan = (False, False, True)
    t = torch.zeros(8)
    lists = [(t[:4], 3, 8), (t[:4].double(), 3, 8), (torch.zeros(4, device="meta"), 3, 8), (t[:5], 3, 8),
             (t[::2], 3, 8), (t[1:5], 3, 8), (t[:4], 3.0, 8), (t[:4], True, 8), (t[:4], 3, 9), (t[:4], 3, 8.0),
             (t[:4].numpy(), 3, 8), (3, t[:4], 8), (3, 3, (torch.float32, torch.device("cpu"), (1,), (4,), 0, False)),
             (torch._neg_view(t[:4]), 3, 8)]
    keys = [fast_key(plan, args)[0] for args in lists]
    assert len(set(keys)) == len(keys)
    assert fast_key(plan, (torch.ones(8)[:4], 7, 8))[0] == keys[0]  # other values, same layout: one key
    for args, key in zip(lists, keys):
        assert typed_keyer(plan, args)(args)[0] == key


def test_parameters_take_the_fast_path():
    """A module's weights (torch.nn.Parameter) have the fast key of a plain tensor of their
    layout (the same variant) and pass as themselves; the generated keyer tells the types apart
    (its guards check each argument's type), so each type gets its own entry."""
    w = torch.nn.Parameter(torch.randn(4, 3))
    key, flat = fast_key((False, True), (w, 5))
    assert key == fast_key((False, True), (w.detach(), 5))[0] and flat[0] is w
    keyer = typed_keyer((False, True), (w, 5))
    assert keyer((w, 5))[0] == key and keyer((w.detach(), 5)) is None


def test_int_keys_split_where_triton_specializes_ints():
    """A fast-path entry reuses the kernel Triton compiled for its first launch, so two int
    arguments may share a key only where Triton would compile one kernel for both: it marks an
    int parameter divisible by 16 (0 included) and nothing else for a non-constexpr `tl.int32`
    (tilecraft annotates every scalar). Before, 32 and 33 shared a key: a float32 gather at
    offset n compiled for n = 32 loads 8-byte vectors (sm_90 PTX ld.global.v2), which n = 33
    then ran misaligned."""
    triton_c = pytest.importorskip("triton._C.libtriton")
    from triton.backends.compiler import BaseBackend
    t = torch.zeros(4)

    def triton_attrs(v: int) -> list:
        spec = triton_c.native_specialize_impl(BaseBackend, v, False, True, True)[1]
        return BaseBackend.parse_attr(spec) if isinstance(spec, str) else []  # annotated: no constexpr

    values = [0, 1, 2, 7, 15, 16, 17, 32, 33, 48, -16, -17, 2**31 - 16, 2**31 - 1, -2**31]
    for a in values:
        for b in values:
            same_key = fast_key((False, False), (t, a))[0] == fast_key((False, False), (t, b))[0]
            assert same_key == (triton_attrs(a) == triton_attrs(b)), (a, b)
            assert typed_keyer((False, False), (t, a))((t, b))[0] == fast_key((False, False), (t, b))[0]
