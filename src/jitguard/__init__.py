"""jitguard: the guard layer of a JIT, standing on its own.

Re-exports only; the code lives in ``jitguard._src``. Torch-only names are reached lazily
(see [Note: Lazy integrations]).

May import: jitguard._src, and jitguard's public submodules.

# [Note: Public submodules]
# ``jitguard.__all__`` holds the specification's names (the data model of torch/_guards.py)
# and the entry points (``specialize``, ``explain``, ``compile_guards``, ...). The names of
# four topics live in public submodules, each re-exporting with a sorted ``__all__``:
# ``jitguard.sources``, ``jitguard.errors``, ``jitguard.kinds`` (guard kinds and global
# states) and ``jitguard.schema`` (guard sets as JSON). Every one of them is also importable
# from ``jitguard``, the same object, as before they moved: ``_MOVED`` lists the names not
# in ``__all__`` (what the star imports bring), one place; tests/test_public_api.py holds
# it. Exceptions say ``jitguard`` as their ``__module__`` (``jitguard.GuardCompileError`` in
# a traceback), which is where they are found by that name (pickle too).
"""

from . import errors, kinds, schema, sources
from ._src.cache.advice import NO_ADVICE as NO_ADVICE
from ._src.cache.advice import Advice as Advice
from ._src.cache.advice import AdviceContext as AdviceContext
from ._src.cache.advice import Churn as Churn
from ._src.cache.advice import Evidence as Evidence
from ._src.cache.advice import register_advice_rule as register_advice_rule
from ._src.cache.decorators import cache_of as cache_of
from ._src.cache.decorators import specialize as specialize
from ._src.cache.explain import Explanation as Explanation
from ._src.cache.explain import explain as explain
from ._src.cache.observe import CompileInfo as CompileInfo
from ._src.cache.persist import StoreEvent as StoreEvent
from ._src.cache.policy import ArgContext as ArgContext
from ._src.cache.policy import ArgPolicy as ArgPolicy
from ._src.cache.policy import ArgRule as ArgRule
from ._src.cache.policy import register_arg_rule as register_arg_rule
from ._src.cache.reasons import RecompileRecord as RecompileRecord
from ._src.cache.request import CompileRequest as CompileRequest
from ._src.cache.specialize import FunctionCache as FunctionCache
from ._src.cache.stance import no_recompiles as no_recompiles
from ._src.cache.stats import CacheStats as CacheStats
from ._src.cache.stats import cache_counters as cache_counters
from ._src.checkpoints import Checkpointable as Checkpointable
from ._src.checkpoints import GlobalContext as GlobalContext
from ._src.checkpoints import GlobalContextCheckpointState as GlobalContextCheckpointState
from ._src.checkpoints import GuardsCheckpointState as GuardsCheckpointState
from ._src.checkpoints import ModuleContext as ModuleContext
from ._src.checkpoints import ModuleContextCheckpointState as ModuleContextCheckpointState
from ._src.compiler.builder import GuardBuilder as GuardBuilder
from ._src.compiler.builder import Leaf as Leaf
from ._src.compiler.check import CheckFunction as CheckFunction
from ._src.compiler.check import CheckResult as CheckResult
from ._src.compiler.check import compile_guards as compile_guards
from ._src.compiler.reference import GuardFailure as GuardFailure
from ._src.config import config as config
from ._src.contexts import CompileContext as CompileContext
from ._src.contexts import GuardsContext as GuardsContext
from ._src.contexts import GuardsSet as GuardsSet
from ._src.contexts import HopDispatchSetCache as HopDispatchSetCache
from ._src.contexts import HopSubgraphCache as HopSubgraphCache
from ._src.contexts import InvokeSubgraphCache as InvokeSubgraphCache
from ._src.contexts import TracingContext as TracingContext
from ._src.contexts import active_fake_mode as active_fake_mode
from ._src.contexts import compile_context as compile_context
from ._src.contexts import detect_fake_mode as detect_fake_mode
from ._src.contexts import tracing as tracing
from ._src.dispatch.entry import CacheEntry as CacheEntry
from ._src.dispatch.entry import register_specificity as register_specificity
from ._src.dispatch.fast import speedups_enabled as speedups_enabled
from ._src.errors import JitGuardError as JitGuardError
from ._src.guards import ChainedSource as ChainedSource
from ._src.guards import DuplicateInputs as DuplicateInputs
from ._src.guards import Guard as Guard
from ._src.guards import GuardBuilderBase as GuardBuilderBase
from ._src.guards import GuardEnvExpr as GuardEnvExpr
from ._src.guards import GuardSource as GuardSource
from ._src.guards import ShapeGuard as ShapeGuard
from ._src.guards import SLoc as SLoc
from ._src.guards import Source as Source
from ._src.guards import StorageOverlap as StorageOverlap
from ._src.ids import CA_COMPILE_ID_PATTERN as CA_COMPILE_ID_PATTERN
from ._src.ids import COMPILE_ID_PATTERN as COMPILE_ID_PATTERN
from ._src.ids import CompileId as CompileId
from ._src.ids import TraceId as TraceId
from ._src.integrations import register_loader as _register_loader
from ._src.logs import set_logs as set_logs
from ._src.stacks import CapturedStack as CapturedStack
from ._src.store.tiers import Store as Store
from ._src.structured import set_trace as set_trace
from ._src.weak import WeakIdKeyDictionary as WeakIdKeyDictionary
from .errors import *  # noqa: F403  (see [Note: Public submodules])
from .kinds import *  # noqa: F403
from .schema import *  # noqa: F403
from .sources import *  # noqa: F403


def _load_torch_integration() -> None:
    from ._src import torch as _torch_integration

    _torch_integration.install()


_register_loader("torch", _load_torch_integration)

__all__ = [
    "Advice",
    "AdviceContext",
    "ArgContext",
    "ArgPolicy",
    "ArgRule",
    "CA_COMPILE_ID_PATTERN",
    "COMPILE_ID_PATTERN",
    "CacheEntry",
    "CacheStats",
    "CapturedStack",
    "ChainedSource",
    "CheckFunction",
    "CheckResult",
    "Checkpointable",
    "Churn",
    "CompileContext",
    "CompileId",
    "CompileInfo",
    "CompileRequest",
    "DuplicateInputs",
    "Evidence",
    "Explanation",
    "FunctionCache",
    "GlobalContext",
    "GlobalContextCheckpointState",
    "Guard",
    "GuardBuilder",
    "GuardBuilderBase",
    "GuardEnvExpr",
    "GuardFailure",
    "GuardSource",
    "GuardsCheckpointState",
    "GuardsContext",
    "GuardsSet",
    "HopDispatchSetCache",
    "HopSubgraphCache",
    "InvokeSubgraphCache",
    "JitGuardError",
    "Leaf",
    "ModuleContext",
    "ModuleContextCheckpointState",
    "NO_ADVICE",
    "RecompileRecord",
    "SLoc",
    "ShapeGuard",
    "Source",
    "StorageOverlap",
    "Store",
    "StoreEvent",
    "TraceId",
    "TracingContext",
    "WeakIdKeyDictionary",
    "active_fake_mode",
    "cache_counters",
    "cache_of",
    "compile_context",
    "compile_guards",
    "config",
    "detect_fake_mode",
    "explain",
    "no_recompiles",
    "register_advice_rule",
    "register_arg_rule",
    "register_specificity",
    "set_logs",
    "set_trace",
    "specialize",
    "speedups_enabled",
    "tracing",
]

# [Note: Public submodules]: the names importable from here that ``__all__`` leaves to a
# topic submodule, by submodule.
_MOVED: dict[str, tuple[str, ...]] = {
    module.__name__: tuple(n for n in module.__all__ if n not in __all__)
    for module in (errors, kinds, schema, sources)
}
