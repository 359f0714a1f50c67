"""The torch integration: the only package in jitguard that imports torch.

May import: anything in jitguard._src, and torch.

# [Note: Layering]  (of the torch package; the core's is in jitguard/_src/__init__.py)
# Two layers, enforced by tests/test_layering.py:
#   * the integration, below the cache's users: kinds, states, sources and rules
#     (aliasing, ambient, batched, delegated, dynamic, fake, module, module_kinds, rules,
#     state, symbolic, tensor_match, tensor_meta, and conversion kinds/sources); it never
#     imports the frontend;
#   * the compiler on TorchDynamo, above the cache: ``adapter``, ``adapter_stored`` and
#     ``adapter_runtime`` (every torch internal the frontend uses), ``compile`` (the
#     public function), ``dynamo_cache`` and ``compiled`` (the cache over Dynamo captures),
#     ``api`` (what ``jitguard.torch`` re-exports), and the guard conversion.

``install()`` runs once, the first time jitguard needs an integration while torch is
imported (see [Note: Lazy integrations]), or when ``jitguard.torch`` is imported. It plugs
torch into jitguard's registries:
  * global states (``state``): grad mode, autocast, determinism, default dtype/device,
    inference mode, the torch-function mode stack, thread count, matmul precision flags,
    and the "torch" group that checks them all in one C++ call;
  * guard kinds: TORCH_GUARD_TREE (``delegated``: the guards of a Dynamo capture that
    jitguard hands to torch's own guard tree), TENSOR_MATCH (``tensor_match``),
    TENSORS_MATCH (``batched``: many tensors in one call of torch's C++ checker), NO_TENSOR_ALIASING and STORAGE_OVERLAP
    (``aliasing``, with the ``StorageOverlap`` environment handler), NN_MODULE_STATE and
    NN_MODULE_GLOBAL_HOOKS (``module_kinds``), the kinds guard conversion from TorchDynamo
    needs (``dynamo_kinds``: DIMENSION_DYNAMIC_MARKING, DICT_VERSION, DEFAULT_DEVICE, ...), so ``GuardBuilder.TENSOR_MATCH`` and the rest
    exist, and TORCH_GLOBAL_STATE as an alias of GLOBAL_STATE (``ambient``);
  * EQUALS_MATCH constants: ``torch.dtype``, ``torch.device``, ``torch.Size``,
    ``torch.layout``, ``torch.memory_format``;
  * the sympy functions of torch's shape guards (``symbolic``);
  * the guard-set document codecs of torch values and specs (``portable``);
  * fake-mode detection and the ``invoke_subgraph`` cache (``fake``);
  * argument rules for the specializing cache (``rules``), when the cache is present;
  * jitguard's logs and structured trace in torch's ``TORCH_LOGS``/``TORCH_TRACE``
    (``logging_bridge``, see [Note: jitguard in torch's logging]).
"""

from __future__ import annotations

import threading

__all__ = ["install"]

_installed = False
_lock = threading.RLock()


def install() -> None:
    """Plug the torch integration into jitguard's registries (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        import os

        import torch

        from ..cache.reasons import hide_frames_under
        from ..compiler import builder as _builder
        from ..compiler import builtin_kinds, kinds
        from ..guards import StorageOverlap
        from ..sources import install_property_reader
        from . import (
            adapter_runtime,
            advice_rules,
            aliasing,
            ambient,
            batched,
            delegated,
            dynamo_kinds,
            fake,
            logging_bridge,
            module_coverage,  # noqa: F401  (registers its snapshot rule on import)
            module_kinds,
            portable,
            rules,
            state,
            symbolic,
            tensor_match,
            transformers_coverage,  # noqa: F401  (registers its snapshot model on import)
        )

        state.register_states()
        fake.install_hooks()
        for kind in (
            tensor_match.TensorMatch(),
            batched.TensorsMatch(),
            aliasing.NoTensorAliasing(),
            aliasing.STORAGE_OVERLAP,
            module_kinds.ModuleState(),
            module_kinds.ModuleGlobalHooks(),
            delegated.TorchGuardTree(),
            *dynamo_kinds.dynamo_kinds(),
        ):
            kinds.register_guard_kind(kind, replace=True)
        ambient.register_alias()
        _builder.register_env_expr_handler(StorageOverlap, aliasing.storage_overlap_handler)
        for tp in (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format):
            builtin_kinds.register_constant_type(tp)
        symbolic.register_sympy_functions()
        portable.register_codecs()
        rules.register_rules()
        advice_rules.register_advice_rules()
        logging_bridge.install()
        # torch's own frames (nn.Module.__call__, container.py, linear.py) are not the
        # user's: left out of recompile logs' user stacks ([Note: Recompile reasons]).
        hide_frames_under(os.path.dirname(torch.__file__))
        install_property_reader(adapter_runtime.mode_stack_len,
                                adapter_runtime.read_past_modes,
                                adapter_runtime.read_attr_past_modes,
                                adapter_runtime.ATTRS_PAST_MODES)
        _installed = True
