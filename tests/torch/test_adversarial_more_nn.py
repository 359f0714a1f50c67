"""More adversarial soundness cases for ``jitguard.torch.compile`` on module state changed
between calls (tensor attributes, None buffers, ``_parameters`` entries, pruning, ``apply``,
shared submodules, optimizer steps); each compares with eager."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from eager_compare import same, wmc  # noqa: E402

import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode")



X = torch.ones(3)


class TL(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ts = [torch.ones(3)]
        self.t = torch.ones(3)
        self.register_buffer("b", None)
    def forward(self, x):
        out = x + self.ts[0] + self.t
        return out if self.b is None else out + self.b


def test_list_of_tensors_attr_mutated():
    """A module's list-of-tensors attribute item replaced."""
    m = TL()
    wmc(m, lambda: (X,), lambda: m.ts.__setitem__(0, torch.full((3,), 4.0)))


def test_plain_tensor_attr_replaced():
    """A module's plain tensor attribute replaced."""
    m = TL()
    wmc(m, lambda: (X,), lambda: setattr(m, "t", torch.full((3,), 4.0)))


def test_plain_tensor_attr_resized():
    """A module's plain tensor attribute resized in place."""
    m = TL()
    wmc(m, lambda: (X,), lambda: m.t.resize_(1).fill_(5))


def test_none_buffer_set():
    """A buffer registered as None, then set."""
    m = TL()
    wmc(m, lambda: (X,), lambda: setattr(m, "b", torch.full((3,), 2.0)))


def test_parameters_dict_entry_replaced():
    """A Parameter replaced through m._parameters directly."""
    m = torch.nn.Linear(3, 3)
    wmc(m, lambda: (X,), lambda: m._parameters.__setitem__("weight", torch.nn.Parameter(torch.zeros(3, 3))))


def test_weight_deleted_then_plain_tensor():
    """A weight deleted and set again as a plain tensor."""
    m = torch.nn.Linear(3, 3)
    def mut():
        del m.weight
        m.weight = torch.zeros(3, 3)
    wmc(m, lambda: (X,), mut)


def test_prune():
    """torch.nn.utils.prune applied after compiling (a pre-hook, weight recomputed)."""
    import torch.nn.utils.prune as prune
    m = torch.nn.Linear(3, 3)
    wmc(m, lambda: (X,), lambda: prune.l1_unstructured(m, "weight", amount=0.5))


def test_apply_fill():
    """m.apply replacing every Linear's weight."""
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    def init(mod):
        if isinstance(mod, torch.nn.Linear):
            mod.weight = torch.nn.Parameter(torch.full((3, 3), 0.1))
    wmc(m, lambda: (X,), lambda: m.apply(init))


def test_deep_eval():
    """eval() on a Dropout two levels down."""
    m = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.9)))
    cf = jgt.compile(m)
    torch.manual_seed(0)
    a = cf(X)
    torch.manual_seed(0)
    b = m(X)
    same(a, b)
    m[0][1].eval()
    same(cf(X), m(X))


def test_shared_module_two_parents():
    """One module under two names, one name rebound."""
    shared = torch.nn.Linear(3, 3)
    class P(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = shared
            self.b = shared
        def forward(self, x):
            return self.b(self.a(x))
    m = P()
    wmc(m, lambda: (X,), lambda: setattr(m, "b", torch.nn.Identity()))


def test_sequential_slice():
    """A Sequential sliced by a module int attribute that changes."""
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3))
    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.s = m
            self.n = 2
        def forward(self, x):
            return self.s[: self.n](x)
    w = W()
    wmc(w, lambda: (X,), lambda: setattr(w, "n", 3))


def test_forward_star_args():
    """A forward with *args and a keyword, called with various counts."""
    class M(torch.nn.Module):
        def forward(self, *xs, scale=1):
            return sum(xs) * scale
    m = M()
    cf = jgt.compile(m)
    same(cf(X, X), m(X, X))
    same(cf(X, X, X), m(X, X, X))
    same(cf(X, scale=3), m(X, scale=3))


def test_zero_grad_then_grad_read():
    """zero_grad() (grads set to None) between calls, grad read."""
    m = torch.nn.Linear(3, 3)
    m(X).sum().backward()
    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m
        def forward(self, x):
            g = self.m.weight.grad
            return x if g is None else x + g.sum()
    w = W()
    wmc(w, lambda: (X,), lambda: m.zero_grad())


def test_module_state_dict_loaded():
    """load_state_dict with other values."""
    m = torch.nn.Linear(3, 3)
    other = torch.nn.Linear(3, 3)
    wmc(m, lambda: (X,), lambda: m.load_state_dict(other.state_dict()))


def test_optimizer_step_between():
    """An optimizer step between calls."""
    m = torch.nn.Linear(3, 3)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    def mut():
        m(X).sum().backward()
        opt.step()
    wmc(m, lambda: (X,), mut)
