"""The structure snapshot's rule for ``not hasattr(m, name)`` on an ``nn.Module``
([Note: Skipping structure guards by version tags]): the core rule refuses any object
whose class has a ``__getattr__``, and every module has torch's.

May import: jitguard._src.compiler.coverage, jitguard._src.compiler.builtin_kinds, torch.

# [Note: hasattr on a module]
# ``hasattr(m, name)`` on a module whose class keeps object's ``__getattribute__`` and has
# no attribute ``name`` in its MRO, and whose instance dict lacks ``name``, falls to
# ``nn.Module.__getattr__``, which looks ``name`` up in the instance dict's ``_parameters``,
# ``_buffers`` and ``_modules`` (each only if present) and raises AttributeError when none
# has it. So the verdict is False (the guard holds) exactly while: the class's namespaces
# along its MRO are unchanged (the type's tag), the instance dict is (its tag), each of the
# three dicts present is an exact dict or OrderedDict whose contents are unchanged (their
# tags), and the ``__getattr__`` found is torch's own function with the code read here
# (its slots pinned) over an unchanged module namespace (the globals it reads, e.g.
# ``AttributeError``: that dict's tag). The rule records all of these.
"""

from __future__ import annotations

import collections
from typing import Any

import torch.nn.modules.module as _torch_module

from ..compiler import coverage
from ..compiler.builtin_kinds import NotHasAttr

__all__: list[str] = []

_MODULE_GETATTR = _torch_module.Module.__getattr__
_MODULE_GETATTR_CODE = _MODULE_GETATTR.__code__
_REGISTRIES = ("_parameters", "_buffers", "_modules")
_DICTS = (dict, collections.OrderedDict)


def _module_lacks_attr(v: Any, member: Any, rec: Any) -> bool:
    """[Note: hasattr on a module]."""
    tp = type(v)
    if type(member) is not str or not coverage.generic_lookup(tp):
        return False
    if coverage.mro_lookup(tp, member) is not coverage.UNSTABLE:
        return False
    getattr_fn = coverage.mro_lookup(tp, "__getattr__")
    if getattr_fn is not _MODULE_GETATTR or getattr_fn.__code__ is not _MODULE_GETATTR_CODE:
        return False
    if not (rec.pin_slots(getattr_fn) and rec.node(getattr_fn.__globals__)):
        return False
    d = rec.instance_dict(v)
    if d is None or member in d or "__getattr__" in d:
        return False
    for key in _REGISTRIES:
        registry = d.get(key)
        if registry is None and key not in d:
            continue  # not looked at; a later store into the instance dict changes its tag
        if type(registry) not in _DICTS or not rec.node(registry) or member in registry:
            return False
    return True


coverage.extend(NotHasAttr, _module_lacks_attr)
