"""Adversarial module attribute reads under ``jitguard.torch.compile``: the hooks dicts and
instance dicts the generated check reads in one C call (``bulk.attrs_falsy``,
``bulk.dicts_exclude``), made unusual after compiling: a class property or a class
``__getattribute__`` of a hooks dict's name, a hooks dict replaced by a dict subclass, a class
attribute shadowed by the instance's, an instance ``forward``. Each case compares with
eager after the mutation; the module runs in both modes (C and ``JITGUARD_PURE_PYTHON=1``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard as jg  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("restore_grad_mode", "fresh_dynamo")

X = torch.randn(2, 4)


def _plus_one(mod: Any, args: Any, out: Any) -> Any:
    return out + 1


class Net(torch.nn.Module):
    def __init__(self, lin: type) -> None:
        super().__init__()
        self.a = lin(4, 4)
        self.b = lin(4, 4)

    def forward(self, x: Any) -> Any:
        return self.b(torch.relu(self.a(x)))


def compiled_net(lin: type) -> tuple[Any, Callable[[Any, Any], Any]]:
    """A two-layer net of ``lin`` layers and a compiled call of it, run once (one entry)."""
    net = Net(lin)

    def f(m: Any, x: Any) -> Any:
        return m(x)

    c = jgt.compile(f)
    torch.testing.assert_close(c(net, X), net(X))
    return net, c


def same_as_eager(c: Any, net: Any) -> None:
    torch.testing.assert_close(c(net, X), net(X))


def test_class_property_of_a_hooks_name_after_compiling() -> None:
    """A property ``_forward_hooks`` set on the layer class after compiling (a data
    descriptor: it wins over the instance dict) that holds a hook: the result is eager's."""

    class Lin(torch.nn.Linear):
        pass

    net, c = compiled_net(Lin)
    Lin._forward_hooks = property(lambda self: OrderedDict({0: _plus_one}))  # type: ignore[assignment]
    same_as_eager(c, net)
    assert jg.cache_of(c).stats().misses == 2
    del Lin._forward_hooks
    same_as_eager(c, net)


def test_class_getattribute_after_compiling() -> None:
    """A ``__getattribute__`` set on the layer class after compiling that gives a hook for
    ``_forward_hooks``: the result is eager's."""

    class Lin(torch.nn.Linear):
        pass

    net, c = compiled_net(Lin)

    def getattribute(self: Any, name: str) -> Any:
        if name == "_forward_hooks":
            return OrderedDict({0: _plus_one})
        return torch.nn.Module.__getattribute__(self, name)

    Lin.__getattribute__ = getattribute  # type: ignore[method-assign,assignment]
    same_as_eager(c, net)
    assert jg.cache_of(c).stats().misses == 2


def test_hooks_dict_replaced_by_a_dict_subclass() -> None:
    """A layer's hooks dict replaced by an OrderedDict subclass holding a hook, and by one
    that is empty but true (its own ``__len__``): each is a miss, the result eager's."""

    class Lin(torch.nn.Linear):
        pass

    class Hooks(OrderedDict):  # type: ignore[type-arg]
        pass

    class Truthy(OrderedDict):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 1

    net, c = compiled_net(Lin)
    net.b._forward_hooks = Hooks({0: _plus_one})
    same_as_eager(c, net)
    net.b._forward_hooks = Truthy()
    same_as_eager(c, net)
    assert jg.cache_of(c).stats().misses >= 2


def test_class_attribute_shadowed_by_the_instance() -> None:
    """A plain class attribute ``_forward_hooks`` (holding a hook) set after compiling: the
    instance's empty dict still wins, as in eager; a hit, same result."""

    class Lin(torch.nn.Linear):
        pass

    net, c = compiled_net(Lin)
    Lin._forward_hooks = OrderedDict({0: _plus_one})  # type: ignore[assignment]
    same_as_eager(c, net)
    assert jg.cache_of(c).stats().misses == 1


def test_instance_forward_after_compiling() -> None:
    """An instance ``forward`` set on a layer after compiling (in its instance dict): the
    result is eager's."""
    net, c = compiled_net(torch.nn.Linear)
    inner = net.a.forward
    net.a.forward = lambda x: inner(x) * 3  # type: ignore[method-assign]
    same_as_eager(c, net)
    assert jg.cache_of(c).stats().misses == 2
