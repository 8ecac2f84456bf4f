"""Launch arguments a backend refuses are named at the kernel's parameter, before anything is
written, also when the launch before had arguments of the same kind (the cached fast path)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error

torch = pytest.importorskip("torch")


@ct.kernel
def copy(a, b):  # ERR
    ct.store(b, (ct.bid(0),), ct.load(a, (ct.bid(0),), (4,)))


def test_a_tensor_that_requires_grad_after_a_plain_one() -> None:
    """The interpreter reads CPU tensors through .numpy(), which a tensor that requires grad
    refuses; after a launch with plain tensors (same fast-path key) that was torch's raw
    RuntimeError from inside tilecraft, not the argument error a first launch gives."""
    b = torch.full((8,), -1.0)
    ct.launch(None, (2,), copy, (torch.arange(8.0), b), backend="interpreter")
    assert b.tolist() == [float(i) for i in range(8)]
    b = torch.full((8,), -1.0)
    with pytest.raises(ct.TileArgumentError, match=r"Argument `a` cannot be passed to this backend: .*requires grad"
                       ) as ei:
        ct.launch(None, (2,), copy, (torch.arange(8.0, requires_grad=True), b), backend="interpreter")
    check_error(ei, copy.fn, "# ERR", col_text="a, b")
    assert (b == -1.0).all()


def test_a_python_list_of_numbers_is_not_an_array() -> None:
    """A list is a list-of-arrays argument; a list of numbers meant as an array gets told how
    to pass one."""
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(TypeError, match=r"Argument `a\[0\]`: a list argument holds arrays only, got float; for an "
                                        r"array of numbers pass np.asarray\(...\)"):
        ct.launch(None, (2,), copy, ([0.5] * 8, b))
    assert (b == -1.0).all()
