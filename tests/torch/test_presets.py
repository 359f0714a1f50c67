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


def test_triton_preset_on_tensors() -> None:
    """policy="triton": a tensor by type, dtype, device and 16-byte alignment of its data
    pointer, not its shape; an int by its class."""
    f = specialize(lambda x, n: None, policy="triton", global_state=False,
                   recompile_limit=None)
    base = torch.zeros(64)
    f(base, 32), f(torch.zeros(3, 3), 16)       # aligned float32 on the CPU: one entry
    f(base[1:], 32)                             # 4 bytes off: not aligned
    f(base.double(), 32)                        # another dtype
    cache = cache_of(f)
    assert cache.stats().compiles == 3 and cache.stats().hits == 1
    assert sorted(["type(L['x']) is Tensor", "L['x'].dtype == torch.float32",
                   "L['x'].device == device(type='cpu')", "data_ptr(L['x']) % 16 == 0",
                   "int_class(L['n']) == ('i32', 16)"]) in [
        sorted(e.code) for e in cache.entries()]


def test_array_match_on_a_tensor_through_dlpack() -> None:
    """ARRAY_MATCH takes a CPU tensor through DLPack: dtype, ndim and layout as numpy sees
    them; a tensor that cannot be exported (requires grad) fails, saying why."""
    from jitguard import GuardBuilder, LocalSource, compile_guards

    check = compile_guards([LocalSource("x").make_guard(GuardBuilder.ARRAY_MATCH)],
                           f_locals={"x": torch.zeros(2, 3)}, arg_names=("x",))
    assert check.leaves[0].code() == (
        "check_array(L['x'], Tensor, float32, ndim=2, layout='C', writeable=True)")
    assert check.fn(torch.ones(4, 4)) is True
    for other in (torch.ones(4, 4).t(), torch.ones(4, 4, dtype=torch.float64)):
        assert check.fn(other) is False and check.reference(other) is False
    grad = torch.ones(4, 4, requires_grad=True)
    assert check.fn(grad) is False
    assert [f.reason for f in check.explain(grad)] == [
        "check_array(L['x'], Tensor, float32, ndim=2, layout='C', writeable=True) failed: "
        "BufferError: Can't export tensors that require gradient, use tensor.detach()"]
