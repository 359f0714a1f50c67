"""The "types" policy preset with torch: tensors keep the torch rule (TENSOR_MATCH), though
they also speak DLPack, which would make them arrays to it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from jitguard import cache_of, specialize  # noqa: E402


def test_torch_tensors_keep_their_rule() -> None:
    """A torch tensor is guarded by the torch rule under policy="types", not by
    ARRAY_MATCH; a second tensor of the same dtype and shape hits."""
    f = specialize(lambda x: x.sum(), policy="types")
    f(torch.zeros(2)), f(torch.ones(2))
    (entry,) = cache_of(f).entries()
    assert any(c.startswith("check_tensor(") for c in entry.code), entry.code
    assert not any(c.startswith("check_array(") for c in entry.code)
    assert cache_of(f).stats().hits == 1
