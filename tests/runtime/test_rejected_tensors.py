"""Torch tensors no backend can read as a dense array (a meta tensor, a sparse one, one with its
lazy negative bit set) are refused at launch, naming the argument, before anything is written:
before, a meta tensor failed inside Triton's interpreter, a sparse one inside torch, and a
negative-bit view (`x.conj().imag`) was read without its negation (a silently wrong result)."""

from __future__ import annotations

import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")


@ct.kernel
def copy(a, b):
    ct.store(b, (ct.bid(0),), ct.load(a, (ct.bid(0),), (4,)))


def _negated_imag() -> "torch.Tensor":
    t = torch.complex(torch.zeros(8), torch.arange(8.0)).conj().imag
    assert t.is_neg()
    return t


@pytest.mark.only_backends("interpreter", "triton-interpret")
@pytest.mark.parametrize("make,exc,message", [
    (lambda: torch.zeros(8, device="meta"), ValueError, "Argument `a` is a tensor on device 'meta'"),
    (lambda: torch.arange(8.0).to_sparse(), TypeError, "Argument `a` is a tensor of layout torch.sparse_coo"),
    (_negated_imag, ValueError, r"Argument `a` is a tensor with its negative bit set .*resolve_neg"),
])
def test_tensor_without_dense_values_is_refused(backend, make, exc, message):
    b = torch.full((8,), -1.0)
    with pytest.raises(exc, match=message):
        ct.launch(None, (2,), copy, (make(), b), backend=backend)
    assert (b == -1.0).all()


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_sparse_tensor_refused_after_a_dense_launch(backend):
    """The repeat-launch key reads every tensor's address; a sparse tensor has none, and must
    still reach the check that names it."""
    b = torch.full((8,), -1.0)
    ct.launch(None, (2,), copy, (torch.arange(8.0), b), backend=backend)
    assert (b == torch.arange(8.0)).all()
    with pytest.raises(TypeError, match="Argument `a` is a tensor of layout torch.sparse_coo"):
        ct.launch(None, (2,), copy, (torch.arange(8.0).to_sparse(), b), backend=backend)
    ct.launch(None, (2,), copy, (torch.arange(8.0), b))   # the default backend: its quick launcher too
    with pytest.raises(TypeError, match="Argument `a` is a tensor of layout torch.sparse_coo"):
        ct.launch(None, (2,), copy, (torch.arange(8.0).to_sparse(), b))


@pytest.mark.only_backends("interpreter", "triton-interpret")
def test_negated_view_refused_after_a_launch_of_its_layout(backend):
    """A negative-bit view of the same dtype, layout and alignment as a launched tensor must not
    find its fast entry (before, the fast path launched it: its values read without negation)."""
    b = torch.full((8,), -1.0)
    for _ in range(2):  # the second launch takes the fast path
        ct.launch(None, (2,), copy, (torch.arange(8.0), b), backend=backend)
    b.fill_(-1.0)
    with pytest.raises(ValueError, match="negative bit set"):
        ct.launch(None, (2,), copy, (torch._neg_view(torch.arange(8.0)), b), backend=backend)
    for _ in range(2):  # the default backend: its quick launcher too
        ct.launch(None, (2,), copy, (torch.arange(8.0), b))
    b.fill_(-1.0)
    with pytest.raises(ValueError, match="negative bit set"):
        ct.launch(None, (2,), copy, (torch._neg_view(torch.arange(8.0)), b))
    assert (b == -1.0).all()


def test_resolved_negation_is_read_as_its_values():
    b = torch.full((8,), -1.0)
    ct.launch(None, (2,), copy, (_negated_imag().resolve_neg(), b), backend="interpreter")
    assert (b == -torch.arange(8.0)).all()
