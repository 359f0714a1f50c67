"""Guard kinds and global states: the kind registry (``GuardKind``,
``register_guard_kind``), the kinds made on demand, and the global states one
GLOBAL_STATE guard checks (docs: API, Guard kinds and global states).

Re-exports only; the code lives in ``jitguard._src``. Every name here is also importable
from ``jitguard`` itself, the same object ([Note: Public submodules] in ``jitguard``).

May import: jitguard._src.
"""

from ._src.compiler.builder import register_env_expr_handler as register_env_expr_handler
from ._src.compiler.builtin_kinds import register_constant_type as register_constant_type
from ._src.compiler.kinds import EmitContext as EmitContext
from ._src.compiler.kinds import GuardKind as GuardKind
from ._src.compiler.kinds import RelationalKind as RelationalKind
from ._src.compiler.kinds import guard_kinds as guard_kinds
from ._src.compiler.kinds import register_guard_kind as register_guard_kind
from ._src.compiler.shape import register_sympy_function as register_sympy_function
from ._src.compiler.triton_kinds import data_ptr_kind as data_ptr_kind
from ._src.compiler.triton_kinds import int_class_kind as int_class_kind
from ._src.global_state import GlobalState as GlobalState
from ._src.global_state import GlobalStateGroup as GlobalStateGroup
from ._src.global_state import global_states as global_states
from ._src.global_state import register_global_state as register_global_state

__all__ = [
    "EmitContext",
    "GlobalState",
    "GlobalStateGroup",
    "GuardKind",
    "RelationalKind",
    "data_ptr_kind",
    "global_states",
    "guard_kinds",
    "int_class_kind",
    "register_constant_type",
    "register_env_expr_handler",
    "register_global_state",
    "register_guard_kind",
    "register_sympy_function",
]
