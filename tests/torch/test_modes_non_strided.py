"""[Note: Tensor properties past function modes] for tensors of another layout than strided
(sparse COO and CSR): their TENSOR_MATCH is never batched into torch's C++ checker, and its
generated check reads their metadata past an active torch function mode, in both modes."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch  # noqa: E402  (the torch rules: TENSOR_MATCH on tensors)
from _helpers import counting_mode  # noqa: E402

pytestmark = pytest.mark.usefixtures("dispatch_mode")


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_non_strided_tensor_guard_reads_past_modes(layout: str) -> None:
    """Under a counting mode, a hit on a sparse tensor's entry is no call of the mode, and
    a sparse tensor of another shape still misses."""
    def make(rows: int) -> Any:
        dense = torch.ones(rows, 4)
        return dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()

    f = jitguard.specialize(lambda x: x, automatic_dynamic=False)
    x = make(3)
    counting = counting_mode()
    with counting():
        f(x)
        counting.calls = 0
        f(x)
        assert counting.calls == 0
        f(make(5))
    cache = jitguard.cache_of(f)
    assert cache.stats().hits == 1 and cache.stats().compiles == 2


def test_jagged_tensor_is_a_clear_guard_error() -> None:
    """A jagged nested tensor (a ragged dim that is a nested int) is refused with a
    GuardKindError naming the source and what to pass instead, not an AttributeError from
    int() of its size."""
    njt = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3)], layout=torch.jagged)
    f = jitguard.specialize(lambda x: x.values().sum(), automatic_dynamic=False)
    with pytest.raises(jitguard.GuardKindError, match=r"TENSOR_MATCH on L\['x'\].*x\.offsets\(\)"):
        f(njt)
