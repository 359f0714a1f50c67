"""jitguard: the guard layer of a JIT, standing on its own.

Re-exports only; the code lives in ``jitguard._src``. Torch-only names are reached lazily
(see [Note: Lazy integrations]).
"""

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
from ._src.compiler.builder import register_env_expr_handler as register_env_expr_handler
from ._src.compiler.builtin_kinds import register_constant_type as register_constant_type
from ._src.compiler.check import CheckFunction as CheckFunction
from ._src.compiler.check import CheckResult as CheckResult
from ._src.compiler.check import compile_guards as compile_guards
from ._src.compiler.kinds import EmitContext as EmitContext
from ._src.compiler.kinds import GuardKind as GuardKind
from ._src.compiler.kinds import RelationalKind as RelationalKind
from ._src.compiler.kinds import guard_kinds as guard_kinds
from ._src.compiler.kinds import register_guard_kind as register_guard_kind
from ._src.compiler.reference import GuardFailure as GuardFailure
from ._src.compiler.schema import GUARD_SCHEMA_VERSION as GUARD_SCHEMA_VERSION
from ._src.compiler.schema import GuardRecord as GuardRecord
from ._src.compiler.schema import NotPortable as NotPortable
from ._src.compiler.schema import compile_guard_records as compile_guard_records
from ._src.compiler.schema import export_guards as export_guards
from ._src.compiler.schema import guard_schema as guard_schema
from ._src.compiler.schema import guards_to_json as guards_to_json
from ._src.compiler.schema import import_guards as import_guards
from ._src.compiler.schema import register_schema_type as register_schema_type
from ._src.compiler.shape import register_sympy_function as register_sympy_function
from ._src.compiler.triton_kinds import data_ptr_kind as data_ptr_kind
from ._src.compiler.triton_kinds import int_class_kind as int_class_kind
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
from ._src.errors import ArtifactError as ArtifactError
from ._src.errors import CaptureError as CaptureError
from ._src.errors import EnvironmentVariableWarning as EnvironmentVariableWarning
from ._src.errors import GuardCompileError as GuardCompileError
from ._src.errors import GuardKindError as GuardKindError
from ._src.errors import GuardMismatchError as GuardMismatchError
from ._src.errors import GuardSchemaError as GuardSchemaError
from ._src.errors import InvalidCompileIdError as InvalidCompileIdError
from ._src.errors import JitGuardError as JitGuardError
from ._src.errors import LargeGuardSetWarning as LargeGuardSetWarning
from ._src.errors import NoCompileContextError as NoCompileContextError
from ._src.errors import NoTracingContextError as NoTracingContextError
from ._src.errors import RecompileError as RecompileError
from ._src.errors import RecompileLimitError as RecompileLimitError
from ._src.errors import RecompileLimitWarning as RecompileLimitWarning
from ._src.errors import RestartCompile as RestartCompile
from ._src.errors import SourceError as SourceError
from ._src.errors import StoreError as StoreError
from ._src.errors import StoreWarning as StoreWarning
from ._src.errors import UnreadableSourceError as UnreadableSourceError
from ._src.global_state import GlobalState as GlobalState
from ._src.global_state import GlobalStateGroup as GlobalStateGroup
from ._src.global_state import global_states as global_states
from ._src.global_state import register_global_state as register_global_state
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
from ._src.sources import AttrSource as AttrSource
from ._src.sources import BackwardStateSource as BackwardStateSource
from ._src.sources import CellContentsSource as CellContentsSource
from ._src.sources import ClosureSource as ClosureSource
from ._src.sources import CodeSource as CodeSource
from ._src.sources import ConstantSource as ConstantSource
from ._src.sources import ConstDictKeySource as ConstDictKeySource
from ._src.sources import DefaultsSource as DefaultsSource
from ._src.sources import EphemeralSource as EphemeralSource
from ._src.sources import FSDPNNModuleSource as FSDPNNModuleSource
from ._src.sources import GetItemSource as GetItemSource
from ._src.sources import GlobalSource as GlobalSource
from ._src.sources import GlobalStateSource as GlobalStateSource
from ._src.sources import LocalSource as LocalSource
from ._src.sources import NNModuleSource as NNModuleSource
from ._src.sources import RandomValueSource as RandomValueSource
from ._src.sources import ShapeEnvSource as ShapeEnvSource
from ._src.sources import SyntheticLocalSource as SyntheticLocalSource
from ._src.sources import TensorProperty as TensorProperty
from ._src.sources import TensorPropertySource as TensorPropertySource
from ._src.sources import TypeSource as TypeSource
from ._src.sources import UnspecializedBuiltinNNModuleSource as UnspecializedBuiltinNNModuleSource
from ._src.sources import UnspecializedNNModuleSource as UnspecializedNNModuleSource
from ._src.sources import WeakRefCallSource as WeakRefCallSource
from ._src.stacks import CapturedStack as CapturedStack
from ._src.store.tiers import Store as Store
from ._src.structured import set_trace as set_trace
from ._src.weak import WeakIdKeyDictionary as WeakIdKeyDictionary


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
    "ArtifactError",
    "AttrSource",
    "BackwardStateSource",
    "CA_COMPILE_ID_PATTERN",
    "COMPILE_ID_PATTERN",
    "CacheEntry",
    "CacheStats",
    "CaptureError",
    "CapturedStack",
    "CellContentsSource",
    "ChainedSource",
    "CheckFunction",
    "CheckResult",
    "Checkpointable",
    "Churn",
    "ClosureSource",
    "CodeSource",
    "CompileContext",
    "CompileId",
    "CompileInfo",
    "CompileRequest",
    "ConstDictKeySource",
    "ConstantSource",
    "DefaultsSource",
    "DuplicateInputs",
    "EmitContext",
    "EnvironmentVariableWarning",
    "EphemeralSource",
    "Evidence",
    "Explanation",
    "FSDPNNModuleSource",
    "FunctionCache",
    "GUARD_SCHEMA_VERSION",
    "GetItemSource",
    "GlobalContext",
    "GlobalContextCheckpointState",
    "GlobalSource",
    "GlobalState",
    "GlobalStateGroup",
    "GlobalStateSource",
    "Guard",
    "GuardBuilder",
    "GuardBuilderBase",
    "GuardCompileError",
    "GuardEnvExpr",
    "GuardFailure",
    "GuardKind",
    "GuardKindError",
    "GuardMismatchError",
    "GuardRecord",
    "GuardSchemaError",
    "GuardSource",
    "GuardsCheckpointState",
    "GuardsContext",
    "GuardsSet",
    "HopDispatchSetCache",
    "HopSubgraphCache",
    "InvalidCompileIdError",
    "InvokeSubgraphCache",
    "JitGuardError",
    "LargeGuardSetWarning",
    "Leaf",
    "LocalSource",
    "ModuleContext",
    "ModuleContextCheckpointState",
    "NNModuleSource",
    "NO_ADVICE",
    "NoCompileContextError",
    "NoTracingContextError",
    "NotPortable",
    "RandomValueSource",
    "RecompileError",
    "RecompileLimitError",
    "RecompileLimitWarning",
    "RecompileRecord",
    "RelationalKind",
    "RestartCompile",
    "SLoc",
    "ShapeEnvSource",
    "ShapeGuard",
    "Source",
    "SourceError",
    "StorageOverlap",
    "Store",
    "StoreError",
    "StoreEvent",
    "StoreWarning",
    "SyntheticLocalSource",
    "TensorProperty",
    "TensorPropertySource",
    "TraceId",
    "TracingContext",
    "TypeSource",
    "UnreadableSourceError",
    "UnspecializedBuiltinNNModuleSource",
    "UnspecializedNNModuleSource",
    "WeakIdKeyDictionary",
    "WeakRefCallSource",
    "active_fake_mode",
    "cache_counters",
    "cache_of",
    "compile_context",
    "compile_guard_records",
    "compile_guards",
    "config",
    "data_ptr_kind",
    "detect_fake_mode",
    "explain",
    "export_guards",
    "global_states",
    "guard_kinds",
    "guard_schema",
    "guards_to_json",
    "import_guards",
    "int_class_kind",
    "no_recompiles",
    "register_advice_rule",
    "register_arg_rule",
    "register_constant_type",
    "register_env_expr_handler",
    "register_global_state",
    "register_guard_kind",
    "register_schema_type",
    "register_specificity",
    "register_sympy_function",
    "set_logs",
    "set_trace",
    "specialize",
    "speedups_enabled",
    "tracing",
]
