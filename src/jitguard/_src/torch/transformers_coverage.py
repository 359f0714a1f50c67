"""The structure snapshot's model of transformers' config ``__getattribute__``
([Note: A modelled __getattribute__], [Note: transformers' config reads]). transformers is
never imported here: its functions are recognized by their bytecode.

May import: jitguard._src.compiler.coverage, the standard library.

# [Note: transformers' config reads]
# Every transformers model reads its config on each call (Dynamo guards ``return_dict``,
# ``num_hidden_layers``, ``hasattr(config, 'is_causal')``, ...), and ``PreTrainedConfig``
# reads attributes through two Python ``__getattribute__`` methods: its own, which renames
# a key found in ``attribute_map`` (``hidden_size`` -> ``n_embd`` on GPT-2), then
# ``HeterogeneousConfigMixin``'s, which checks a per-layer spec in the instance dict and
# otherwise defers to object's. On Qwen3 x36 those reads cost ~18 us of a ~96 us hit, in
# guards no version tag covered. For a config whose class's ``__getattribute__`` chain is
# exactly those two functions, then object's (``model``):
#   * each function's code is the one read here (its bytecode, names and constants hash to
#     a fingerprint of transformers 5.x on CPython 3.11; any other code, or another
#     Python, and the model does not vouch), held by the snapshot with the function's other
#     slots, and its ``__class__`` cell holds the class that defines it (so ``super()``
#     finds the next one along the MRO, which the type's tag pins);
#   * ``super`` is the builtin: absent from each function's globals, which the snapshot
#     pins by tag, and the builtin in its builtins dict, pinned likewise;
#   * the instance dict (pinned by tag) has no per-layer spec (``_heterogeneity_spec``
#     absent or None), so the mixin reads generically; the class's ``__dict__`` is the
#     standard descriptor (the type's tag);
#   * ``attribute_map``, read generically (the instance dict, then a plain class value), is
#     an exact dict pinned by its tag, and ``member`` maps through it to a str, or is not
#     in it.
# Then ``config.member`` is exactly object's generic lookup of the mapped name, a function
# of what the snapshot pins, and the core rules (a plain value in the instance dict or
# the MRO, no data descriptor) decide the rest. Properties on the config
# (``output_attentions``) stay volatile: they are data descriptors.
"""

from __future__ import annotations

import hashlib
import sys
import types
from typing import Any, Optional

from ..compiler import coverage

__all__: list[str] = []

# The two functions, in MRO order: (module, qualname, the fingerprint of the code the
# model was written against)
_KNOWN = (
    ("transformers.configuration_utils", "PreTrainedConfig.__getattribute__",
     "3c023be25a4d097a"),
    ("transformers.integrations.heterogeneity.configuration_utils",
     "HeterogeneousConfigMixin.__getattribute__", "f2ad78770d96bff1"),
)
_fingerprints: dict[types.CodeType, str] = {}


def _fingerprint(code: types.CodeType) -> str:
    got = _fingerprints.get(code)
    if got is None:
        text = repr((code.co_names, code.co_consts, code.co_freevars, code.co_varnames,
                     code.co_argcount)).encode()
        got = _fingerprints[code] = hashlib.sha256(code.co_code + text).hexdigest()[:16]
    return got


def _pinned_function(fn: Any, owner: type, known: tuple[str, str, str], rec: Any) -> bool:
    """``fn`` is the ``known`` function with the known code, its ``__class__`` cell holds
    ``owner``, ``super`` is the builtin; everything it relies on recorded in ``rec``."""
    if (type(fn) is not types.FunctionType or (fn.__module__, fn.__qualname__) != known[:2]
            or _fingerprint(fn.__code__) != known[2]):
        return False
    closure = fn.__closure__
    if (fn.__code__.co_freevars != ("__class__",) or closure is None
            or closure[0].cell_contents is not owner):
        return False
    g, b = fn.__globals__, getattr(fn, "__builtins__", None)
    if type(g) is not dict or type(b) is not dict or "super" in g or b.get("super") is not super:
        return False
    return bool(rec.pin_slots(fn) and rec.pin_slots(closure[0]) and rec.node(g) and rec.node(b))


def _config_member(v: Any, member: str, rec: Any) -> Optional[str]:
    """[Note: transformers' config reads]."""
    tp = type(v)
    chain = [k for k in tp.__mro__ if "__getattribute__" in k.__dict__]
    if len(chain) != 3 or chain[2] is not object:
        return None
    if not all(_pinned_function(k.__dict__["__getattribute__"], k, known, rec)
               for k, known in zip(chain, _KNOWN, strict=False)):
        return None
    dict_slot = coverage.mro_lookup(tp, "__dict__")
    if type(dict_slot) is not types.GetSetDescriptorType or dict_slot.__name__ != "__dict__":
        return None
    d = rec.instance_dict(v)
    if d is None or d.get("_heterogeneity_spec") is not None:
        return None
    if member == "attribute_map":
        return member
    found = coverage.mro_lookup(tp, "attribute_map")
    if found is not coverage.UNSTABLE and coverage.is_data_descriptor(found):
        return None
    amap = d["attribute_map"] if "attribute_map" in d else found
    if type(amap) is not dict or not rec.node(amap):
        return None
    mapped = dict.get(amap, member, member)
    return mapped if type(mapped) is str else None


if sys.version_info[:2] == (3, 11):  # the fingerprints are CPython 3.11's bytecode
    coverage.model_getattribute(_config_member)

