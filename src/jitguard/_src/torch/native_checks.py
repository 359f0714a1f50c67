"""Loading TENSORS_MATCH's native checker (the C++ extension ``jitguard._src._torchext.ext``)
and building it for a batch of tensors. The extension (``_torchext/tensor_checks.cpp``) is
the one place jitguard reads torch's C++ tensor internals; tests/torch/test_native_checks.py
holds each field it reads to torch's own checker.

May import: jitguard._src.env, jitguard._src.native, jitguard._src._torchext (its extension
``ext``), torch.

# [Note: A native tensor checker]
# TENSORS_MATCH asks, for each of a batch of tensors, what torch's C++ ``TensorGuards``
# checks ([Note: Batched tensor checks]): the exact Python type, the dispatch keys with the
# thread's included and excluded sets applied, dtype, device index, requires_grad, rank,
# and each size and stride that is not dynamic; and that no two of the tensors are one
# object. That checker costs ~45 ns a tensor (measured here on 1-D to 2-D CPU tensors:
# 1.1 us for 20, 17.7 us for 400); most of it is generic work per tensor (symbolic-int
# comparisons, a vector allocated per check for the strides). On a deep model it was
# half of a hit: 400-600 parameters, every call.
#
# The extension reads the same fields straight from each tensor's ``TensorImpl`` (through
# torch's own inline accessors, compiled against the torch it loads with) and compares
# them with expectations packed in one array: ~7-9 ns a tensor (0.18 us for 20, 2.7 us for
# 400; Qwen3 x36's 401 parameters and input: 3.6 us, against 17.2 us for torch's). Its
# verdict is torch's checker's:
#   * it reads only tensors whose sizes and strides are plain integers: no symbolic sizes,
#     the strided layout, not nested. Any other tensor, or one whose keys (after the
#     thread-local sets) include a Python dispatch key (torch masks those in some modes and
#     not in others), or an accessor that throws, hands the whole call to torch's checker,
#     built for the same tensors and dims: its verdict is the answer;
#   * otherwise it compares exactly the fields torch's does, each as torch reads it, and
#     the expectations are read from the same build-time tensors by the same accessors,
#     under the same thread-local sets (the checker is built where torch's is);
#   * a repeated object fails the call, as in torch's checker;
#   * a build is checked at once: both checkers must accept the build-time tensors, or the
#     batch keeps torch's checker alone (said on the ``jitguard.torch`` log);
#   * ``tests/torch/test_native_checks.py`` holds each field to torch's verdict, both
#     ways, and a property test compares the two on random tensors and mutations.
# The extension is built against one torch: it carries that torch's version and its own
# ABI, and is used only when both match the torch imported and this module (a stale build
# could read another layout). It is off under ``JITGUARD_PURE_PYTHON`` (every native part
# of jitguard is, [Note: Loading the extension]), and where it is not built (pip's isolated
# build has no torch: ``make venv`` builds it in place); then tensor guards run on torch's
# checker, said once on the ``jitguard.torch`` log (WARNING) with the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch

from .. import env, native

__all__ = ["ABI", "describe", "enabled", "module", "tensor_checker", "why_not"]

ABI = 1  # the extension's TORCHEXT_ABI this module expects (_torchext/tensor_checks.cpp)
log = logging.getLogger("jitguard.torch")

module: Any = None
why_not: Optional[str] = None


def _load() -> tuple[Any, Optional[str]]:
    if env.flag(native.ENV_VAR):
        return None, f"{native.ENV_VAR}={env.raw(native.ENV_VAR)}"
    fix = ("build it with `python setup.py build_ext --inplace` in this environment "
           "(setuptools>=77; make venv does)")
    try:
        from .._torchext import ext  # type: ignore[attr-defined]
    except ImportError as e:
        return None, (f"the extension jitguard._src._torchext.ext is not built or not "
                      f"importable ({e}); {fix}")
    built_for = getattr(ext, "TORCH_VERSION", None)
    if getattr(ext, "ABI", None) != ABI or built_for != torch.__version__:
        return None, (f"the extension jitguard._src._torchext.ext is a stale build (ABI "
                      f"{getattr(ext, 'ABI', None)}, torch {built_for}; expected ABI {ABI}, "
                      f"torch {torch.__version__}); re{fix}")
    return ext, None


module, why_not = _load()
if why_not is not None and not env.flag(native.ENV_VAR):
    log.warning("jitguard: %s; tensor guards run on torch's TensorGuards (slower)", why_not)


def enabled() -> bool:
    """Whether TENSORS_MATCH checks built from now on use the native checker."""
    return module is not None


def describe() -> str:
    """Which checker TENSORS_MATCH uses, in words (with the reason where it is torch's)."""
    if module is not None:
        return f"jitguard's native checker (built for torch {module.TORCH_VERSION})"
    return f"torch's TensorGuards ({why_not})"


def tensor_checker(tensors: Sequence[Any], sizes: list[list[Any]], strides: list[list[Any]],
                   torch_check: Callable[..., bool]) -> Callable[..., bool]:
    """The check for ``tensors`` ([Note: A native tensor checker]): the native checker over
    them, handing odd calls to ``torch_check`` (torch's checker for the same tensors and
    dims), or ``torch_check`` itself where the native one is off or cannot take them."""
    if module is None:
        return torch_check
    values = tuple(tensors)
    try:
        checker = module.Checker(values, sizes, strides, torch_check)
    except ValueError:  # a tensor it does not read (symbolic, sparse, nested, Python keys)
        return torch_check
    if torch_check(*values) and not checker(*values):
        log.warning("jitguard: the native tensor checker rejects the tensors it was built "
                    "from while torch's accepts them; this batch uses torch's checker")
        return torch_check
    return checker
