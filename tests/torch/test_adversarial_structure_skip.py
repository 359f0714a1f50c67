"""Adversarial: the structure snapshot ([Note: Skipping structure guards by version tags])
never lets a change through. A module tree large enough to get a front check is compiled
(verify mode on, both dispatcher modes), hit, changed by one route, and called again: the
call must give eager's result (a correct hit, or a miss and a recompile), with jitguard and
torch's guard tree agreeing. Then a seeded fuzz of 1,200 calls mixing the changes."""

from __future__ import annotations

import collections
import collections.abc
import functools
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.compiler import snapshot  # noqa: E402

nn = torch.nn
pytestmark = [
    pytest.mark.usefixtures("restore_grad_mode", "fresh_dynamo"),
    pytest.mark.skipif(not snapshot.available(),
                       reason="no structure snapshot here (Python 3.12+ or no C extension)"),
]


class Cfg:
    """A plain object whose attributes are set before any ``__dict__`` was asked for."""

    def __init__(self) -> None:
        self.k = 2.0
        self.tag = 1.0
        self._flag = True

    @property
    def flag(self) -> Any:
        """A property that reads an attribute (transformers' ``output_attentions``)."""
        return self._flag


class Table(dict):  # type: ignore[type-arg]
    """A dict subclass with a ``__setitem__`` of its own."""

    writes = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        Table.writes += 1
        dict.__setitem__(self, key, value)


def _act(x: Any, k: float = 2.0) -> Any:
    return x * k


def _act_other(x: Any, k: float = 2.0) -> Any:
    return x * k - 1.0


def _closure_pair() -> tuple[Callable[[Any], Any], Callable[[float], None]]:
    """A function reading a free variable, and a setter that rebinds that variable."""
    v = 0.5

    def shift(x: Any) -> Any:
        return x + v

    def set_v(new: float) -> None:
        nonlocal v
        v = new

    return shift, set_v


_shift, _set_shift = _closure_pair()


class Interface(collections.abc.MutableMapping):  # type: ignore[type-arg]
    """A registry as transformers writes them: a class-level mapping, looked up by key."""

    _global_mapping: dict[str, Any] = {"relu": torch.relu}

    def __init__(self) -> None:
        self._local_mapping: dict[str, Any] = {}

    def __getitem__(self, k: str) -> Any:
        if k in self._local_mapping:
            return self._local_mapping[k]
        return self._global_mapping[k]

    def __setitem__(self, k: str, v: Any) -> None:
        self._local_mapping[k] = v

    def __delitem__(self, k: str) -> None:
        del self._local_mapping[k]

    def __iter__(self) -> Any:
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self) -> int:
        return len(set(self._global_mapping) | set(self._local_mapping))


ACTS = Interface()


class Block(nn.Module):
    FACTOR = 1.0

    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = nn.Linear(width, width)
        self.b = nn.Linear(width, width)
        self.scale = 1.0
        # an activation held as a partial, as transformers' GELUTanh holds one per layer
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def helper(self, x: Any) -> Any:
        return x + 0.0

    def forward(self, x: Any) -> Any:
        out = self.helper(self.b(self.act(self.a(x)))) * self.scale * self.FACTOR
        if hasattr(self, "bonus"):  # NOT_HASATTR through nn.Module.__getattr__
            out = out * self.bonus
        return out


class Net(nn.Module):
    def __init__(self, depth: int = 4, width: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(width) for _ in range(depth))
        self.cfg = Cfg()
        self.table = Table(w=1.0)

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        if hasattr(self.cfg, "tag"):  # HASATTR, decided by the instance dict
            x = x + 1.0
        if hasattr(self.cfg, "flag"):  # HASATTR, through a property that reads _flag
            x = x * 1.5
        if hasattr(self.cfg, "bonus"):  # NOT_HASATTR, decided by the dicts (no __getattr__)
            x = x - 1.0
        # a global function's code and default, a closure cell, a class-level registry
        x = ACTS["relu"](_shift(_act(x)))
        return x * self.cfg.k + self.table["w"]


class Other(Net):
    def forward(self, x: Any) -> Any:
        return super().forward(x) - 1.0


def _fresh(isolate: bool = True) -> tuple[Net, Any, Any]:
    """A new model, an input, and the model compiled (a cache of its own by default)."""
    torch.manual_seed(0)
    m = Net()
    x = torch.randn(2, 4)
    return m, x, jgt.compile(m, backend="eager", verify=True, isolate_recompiles=isolate)


def _front_check(compiled: Any) -> Any:
    (entry,) = [e for e in jitguard.cache_of(compiled).entries() if e.valid]
    return getattr(entry.check, "structure_skip", None)


def _snapshot_holds(compiled: Any, m: Any, x: Any) -> bool:
    """Whether the entry's front check would skip its covered guards for ``m(x)`` now."""
    (entry,) = [e for e in jitguard.cache_of(compiled).entries() if e.valid]
    assert entry.check.arg_names == ("self", "x")
    return bool(entry.check.fn.__globals__["___snap"][0]((m, x)))


def _same(compiled: Any, m: Any, x: Any) -> None:
    """The compiled call gives eager's result, or raises what eager raises."""
    try:
        want = m(x)
    except RuntimeError as e:
        with pytest.raises(type(e)):
            compiled(x)
        return
    got = compiled(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want)


def _grow(m: Net) -> None:
    m.layers.append(Block(4))


def _set_data(m: Net) -> None:
    w = m.layers[0].a.weight
    w.data = torch.randn(4, 4, dtype=torch.float64).float().t().contiguous().t()


def _resize(m: Net) -> None:
    b = m.layers[0].a.bias.requires_grad_(False)
    b.resize_(4, 1)


def _t_(m: Net) -> None:
    m.layers[1].a.weight.requires_grad_(False).t_()


def _set_(m: Net) -> None:
    w = m.layers[0].b.weight.requires_grad_(False)
    w.set_(torch.randn(4, 4).t())


def _assign_state(m: Net) -> None:
    sd = {k: v.clone() * 2 for k, v in m.state_dict().items()}
    m.load_state_dict(sd, assign=True)


def _parametrize(m: Net) -> None:
    class Double(nn.Module):
        def forward(self, w: Any) -> Any:
            return w * 2

    torch.nn.utils.parametrize.register_parametrization(m.layers[2].a, "weight", Double())


def _class_attr(m: Net) -> None:
    Block.FACTOR = 3.0


def _method(m: Net) -> None:
    Block.helper = lambda self, x: x + 5.0  # type: ignore[method-assign]


def _base_attr(m: Net) -> None:
    nn.Module.extra_flag = True  # a base class changed: every module type's tag goes


def _setattr_type(m: Net) -> None:
    setattr(type(m.layers[3]), "FACTOR", 0.5)


class Sub(Block):
    def forward(self, x: Any) -> Any:
        return super().forward(x) + 1.0


def _set_class_of_child(m: Net) -> None:
    m.layers[1].__class__ = Sub


def _global_hook(m: Net) -> Any:
    return torch.nn.modules.module.register_module_forward_hook(lambda mod, i, o: o)


def _property(m: Net) -> None:
    Block.scale_p = property(lambda self: 4.0)  # type: ignore[attr-defined]
    m.layers[0].__dict__.pop("scale")
    Block.scale = property(lambda self: 4.0)  # type: ignore[assignment]


def _code(m: Net) -> None:
    _act.__code__ = _act_other.__code__


def _defaults(m: Net) -> None:
    _act.__defaults__ = (3.0,)


def _registry_item(m: Net) -> None:
    Interface._global_mapping["relu"] = torch.tanh


def _registry_class(m: Net) -> None:
    Interface._global_mapping = {"relu": torch.sigmoid}


def _registry_contains(m: Net) -> None:
    Interface.__contains__ = lambda self, k: False  # type: ignore[method-assign,assignment]


def _module_getattr(m: Net) -> None:
    torch_getattr = nn.Module.__getattr__

    def getattr_with_bonus(self: Any, name: str) -> Any:
        return 1.5 if name == "bonus" else torch_getattr(self, name)

    nn.Module.__getattr__ = getattr_with_bonus  # type: ignore[method-assign]


def _bonus_module(m: Net) -> None:
    class Bonus(nn.Module):
        def __rmul__(self, other: Any) -> Any:
            return other * 3.0

    m.layers[2].add_module("bonus", Bonus())


MUTATIONS: dict[str, Callable[[Net], Any]] = {
    "module hasattr: attribute set": lambda m: setattr(m.layers[0], "bonus", 2.0),
    "module hasattr: buffer registered": lambda m: m.layers[1].register_buffer(
        "bonus", torch.tensor(2.0)),
    "module hasattr: parameter registered": lambda m: m.layers[3].register_parameter(
        "bonus", nn.Parameter(torch.tensor(0.5), requires_grad=False)),
    "module hasattr: buffer dict written": lambda m: m.layers[0]._buffers.__setitem__(
        "bonus", torch.tensor(4.0)),
    "module hasattr: submodule added": _bonus_module,
    "module hasattr: __getattr__ replaced": _module_getattr,
    "function __code__ replaced": _code,
    "function __defaults__ replaced": _defaults,
    "closure cell rebound": lambda m: _set_shift(1.5),
    "registry: class-level mapping item replaced": _registry_item,
    "registry: class attribute replaced": _registry_class,
    "registry: __contains__ defined on the class": _registry_contains,
    "object.__setattr__": lambda m: object.__setattr__(m.layers[0], "scale", 2.0),
    "__dict__[k] = v": lambda m: m.layers[1].__dict__.__setitem__("scale", 3.0),
    "vars(m).update": lambda m: vars(m.layers[2]).update(scale=0.5),
    "__dict__ = {...}": lambda m: setattr(m.layers[3], "__dict__",
                                          {**m.layers[3].__dict__, "scale": 2.5}),
    "inline values": lambda m: setattr(m.cfg, "k", 7.0),
    "inline values, __dict__ replaced": lambda m: setattr(m.cfg, "__dict__", {"k": 1.5}),
    "__class__ = Other": lambda m: setattr(m, "__class__", Other),
    "child __class__ = Sub": _set_class_of_child,
    "class attribute": _class_attr,
    "method replaced": _method,
    "property replaces an attribute": _property,
    "base class attribute": _base_attr,
    "setattr(type(m), ...)": _setattr_type,
    "_modules['0'] = ...": lambda m: m.layers._modules.__setitem__("0", Block(4)),
    "del m.layers[1]": lambda m: m.layers.__delitem__(1),
    "append a layer": _grow,
    "training flag": lambda m: m.layers[2].train(False),
    "forward hook on a child": lambda m: m.layers[1].register_forward_hook(lambda *a: None),
    "global module hook": _global_hook,
    "p.data = t": lambda m: setattr(m.layers[0].a.weight, "data",
                                    torch.randn(4, 4, dtype=torch.float64)),
    "p.data = t (another shape)": lambda m: setattr(m.layers[0].a, "weight",
                                                    nn.Parameter(torch.randn(4, 4).t())),
    "strided data": _set_data,
    "requires_grad_(False)": lambda m: m.layers[1].b.weight.requires_grad_(False),
    "resize_": _resize,
    "t_": _t_,
    "set_": _set_,
    "to(float64)": lambda m: m.to(torch.float64),
    "half()": lambda m: m.half(),
    "load_state_dict(assign=True)": _assign_state,
    "parametrize": _parametrize,
    "hasattr: attribute deleted": lambda m: delattr(m.cfg, "tag"),
    "hasattr: a property's read attribute deleted": lambda m: delattr(m.cfg, "_flag"),
    "hasattr: property replaced on the class": lambda m: setattr(
        Cfg, "flag", property(lambda self: self._missing)),
    "not hasattr: instance attribute added": lambda m: setattr(m.cfg, "bonus", 1.0),
    "not hasattr: class attribute added": lambda m: setattr(Cfg, "bonus", 1.0),
    "not hasattr: __getattr__ added": lambda m: setattr(Cfg, "__getattr__",
                                                        lambda self, name: 0.0),
    "maybe_mark_dynamic on a weight": lambda m: torch._dynamo.maybe_mark_dynamic(
        m.layers[0].a.weight, 0),
    "mark_static on a bias": lambda m: torch._dynamo.mark_static(m.layers[1].b.bias, 0),
    "partial: a keyword stored": lambda m: m.layers[0].act.keywords.__setitem__(
        "approximate", "none"),
    "partial: __setstate__ with another func": lambda m: m.layers[1].act.__setstate__(
        (torch.relu, (), {}, None)),
    "partial: replaced": lambda m: setattr(m.layers[2], "act",
                                           functools.partial(torch.nn.functional.gelu)),
    "dict subclass __setitem__": lambda m: m.table.__setitem__("w", 9.0),
    "dict subclass dict.__setitem__": lambda m: dict.__setitem__(m.table, "w", -1.0),
}


@pytest.fixture
def restore_classes() -> Any:
    """Put back every class attribute the mutations replace."""
    saved = {cls: dict(cls.__dict__) for cls in (Block, Net, Cfg, nn.Module, Interface)}
    code, defaults, mapping = _act.__code__, _act.__defaults__, dict(Interface._global_mapping)
    hooks: list[Any] = []
    yield hooks
    for h in hooks:
        h.remove()
    _act.__code__, _act.__defaults__ = code, defaults
    _set_shift(0.5)
    saved[Interface]["_global_mapping"].clear()
    saved[Interface]["_global_mapping"].update(mapping)
    for cls, ns in saved.items():
        for k in set(cls.__dict__) - set(ns):
            delattr(cls, k)
        for k, v in ns.items():
            if k not in ("__dict__", "__weakref__", "__doc__") and cls.__dict__.get(k) is not v:
                setattr(cls, k, v)


def test_the_tree_gets_a_front_check(dispatch_mode: str) -> None:
    """The test model is large enough for a front check, and a hit takes it."""
    m, x, compiled = _fresh()
    _same(compiled, m, x)
    plan = _front_check(compiled)
    assert plan is not None and len(plan.covered) >= snapshot.MIN_COVERED
    _same(compiled, m, x)
    assert len(list(jitguard.cache_of(compiled).entries())) == 1


def test_function_slots_and_class_namespaces_are_covered(dispatch_mode: str) -> None:
    """The guards on a global function's code and default, a closure cell, a registry's
    class namespace, each block's partial and ``not hasattr`` on the blocks are skipped while the snapshot holds (so the mutations above test
    the snapshot's function and class slots, not the volatile check)."""
    m, x, compiled = _fresh()
    _same(compiled, m, x)
    plan = _front_check(compiled)
    (entry,) = [e for e in jitguard.cache_of(compiled).entries() if e.valid]
    covered = {" ".join(s.name() for s in entry.check.leaves[i].sources) for i in plan.covered}
    hasattr_leaves = [i for i, leaf in enumerate(entry.check.leaves)
                      if leaf.kind.name == "NOT_HASATTR" and "layers" in leaf.sources[0].name()]
    assert hasattr_leaves and set(hasattr_leaves) <= set(plan.covered)
    for name in ("G['_act'].__code__", "G['_act'].__defaults__[0]",
                 "G['_shift'].__closure__[0].cell_contents",
                 "dict(type(G['ACTS']).__dict__)['_global_mapping']"):
        assert name in covered, (name, sorted(n for n in covered if "G[" in n))
    volatile = {" ".join(s.name() for s in leaf.sources) for leaf in plan.volatile.leaves}
    partial_reads = {n for n in covered if ".act." in n}
    assert any(n.endswith(".act.func") for n in partial_reads), sorted(partial_reads)
    assert any(n.endswith(".act.keywords['approximate']") for n in partial_reads)
    assert not {n for n in volatile if ".act." in n}
    # hasattr through a property that reads an attribute: covered
    flag = [i for i, leaf in enumerate(entry.check.leaves)
            if leaf.kind.name == "HASATTR" and leaf.params == "flag"]
    assert flag and set(flag) <= set(plan.covered)


def test_the_large_guard_set_warning_counts_what_a_hit_runs(
        dispatch_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``large_guard_set``, the warning of a check with a front check says how many
    guards a hit runs while the structure is unchanged, not that it runs them all."""
    monkeypatch.setattr(jitguard.config, "large_guard_set", 50)
    m, x, compiled = _fresh()
    with pytest.warns(jitguard.LargeGuardSetWarning) as caught:
        _same(compiled, m, x)
    text = str(caught[0].message)
    plan = _front_check(compiled)
    assert f"runs only the {len(plan.volatile.leaves):,} the structure snapshot" in text
    assert "Every call that reaches this entry runs them all" not in text


@pytest.mark.parametrize("what", sorted(MUTATIONS))
def test_a_change_is_never_missed(what: str, dispatch_mode: str, restore_classes: Any) -> None:
    """After the change the compiled call equals eager (a correct hit or a recompile), and
    verify mode finds jitguard and torch's tree in agreement."""
    m, x, compiled = _fresh()
    _same(compiled, m, x)
    _same(compiled, m, x)
    assert _front_check(compiled) is not None and _snapshot_holds(compiled, m, x)
    out = MUTATIONS[what](m)
    if what == "global module hook":
        restore_classes.append(out)
    if what in ("to(float64)",):
        x = x.double()
    if what in ("half()",):
        x = x.half()
    with torch.no_grad():
        _same(compiled, m, x)
        _same(compiled, m, x)


def test_a_change_after_a_rearm_is_caught(dispatch_mode: str) -> None:
    """An unrelated attribute write makes the front check fail once; the full check holds,
    the snapshot is taken again, and a later real change is still caught."""
    m, x, compiled = _fresh()
    _same(compiled, m, x)
    m.layers[0].unrelated = 1  # the instance dict changes, no guard cares
    _same(compiled, m, x)
    assert len(list(jitguard.cache_of(compiled).entries())) == 1
    m.layers[0].scale = 4.0
    _same(compiled, m, x)


def test_another_instance_is_checked_in_full(dispatch_mode: str) -> None:
    """A second model of the same structure (compiled with the same options: one shared
    cache) is not the recorded root: its call runs the full check and hits the same entry,
    and a change to either model is caught."""
    m, x, compiled = _fresh(isolate=False)
    _same(compiled, m, x)
    torch.manual_seed(1)
    m2 = Net()
    compiled2 = jgt.compile(m2, backend="eager", verify=True)
    assert not _snapshot_holds(compiled, m2, x)
    _same(compiled2, m2, x)
    assert len(list(jitguard.cache_of(compiled).entries())) == 1
    m2.layers[0].scale = 5.0
    _same(compiled2, m2, x)
    _same(compiled, m, x)
    m.layers[1].scale = 6.0
    _same(compiled, m, x)
    _same(compiled2, m2, x)


SEED = 20261204


def test_seeded_fuzz_of_module_mutations(dispatch_mode: str, restore_classes: Any) -> None:
    """1,200 calls over models that are mutated between calls by the routes above (every
    mutation on a fresh model now and then): each call equals eager, and verify mode
    raises no disagreement."""
    rng = random.Random(SEED)
    safe = [k for k in MUTATIONS if k not in (
        "to(float64)", "half()", "global module hook", "class attribute", "method replaced",
        "base class attribute", "setattr(type(m), ...)", "property replaces an attribute",
        "not hasattr: class attribute added", "not hasattr: __getattr__ added",
        "hasattr: property replaced on the class",
        "module hasattr: __getattr__ replaced")]
    calls = mismatches = 0
    seen: collections.Counter[str] = collections.Counter()
    fronts = 0
    while calls < 1200:
        m, x, compiled = _fresh()
        _same(compiled, m, x)
        fronts += _front_check(compiled) is not None
        with torch.no_grad():
            for _ in range(rng.randint(5, 40)):
                if rng.random() < 0.3:
                    what = rng.choice(safe)
                    try:
                        MUTATIONS[what](m)
                    except (AttributeError, IndexError, KeyError, RuntimeError, TypeError,
                            ValueError):
                        continue  # a mutation that does not apply to this model any more
                    seen[what] += 1
                try:
                    _same(compiled, m, x)
                except jitguard.GuardMismatchError:
                    mismatches += 1
                calls += 1
    assert mismatches == 0 and fronts > 20
    assert calls >= 1200 and len(seen) >= len(safe) - 2, seen
    assert sys.version_info < (3, 12)
