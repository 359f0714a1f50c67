"""TORCH_GLOBAL_STATE: a name kept for GLOBAL_STATE, which now checks torch's ambient state
in one C++ call itself.

May import: jitguard._src.compiler.kinds, jitguard._src.global_state,
jitguard._src.torch.state.

# [Note: TORCH_GLOBAL_STATE]
# TORCH_GLOBAL_STATE was a second ambient kind: torch's C++ ``GlobalStateGuard`` plus the
# mode stack, default device and inference mode, ~0.4 us where GLOBAL_STATE's per-state
# Python reads cost ~2 us, but with a meaning of its own (stricter on the thread count and
# the TF32 flags, looser on an autocast dtype changed while autocast is off), so the cache
# could not use it. GLOBAL_STATE now gets the same C++ check through the "torch" group
# ([Note: Global-state groups], [Note: The torch state group]) without changing meaning:
# the states GlobalStateGuard compares are registry states, and the group's checker is
# exactly their conjunction. TORCH_GLOBAL_STATE is an alias of GLOBAL_STATE
# (``GuardBuilder.TORCH_GLOBAL_STATE is GuardBuilder.GLOBAL_STATE``): its guards are
# GLOBAL_STATE guards, with GLOBAL_STATE's failure reasons. Compared with the old kind it is
# stricter in one way: an autocast dtype changed while that device's autocast is off is a miss.
"""

from __future__ import annotations

from ..compiler.kinds import register_guard_kind_alias
from ..global_state import global_states
from .state import GROUP

__all__ = ["available", "register_alias"]


def available() -> bool:
    """Whether GLOBAL_STATE checks torch's states in one C++ call (the "torch" group is
    registered and still covers the registered torch states)."""
    return any(g.name == GROUP and global_states.is_active(g) for g in global_states.groups())


def register_alias() -> None:
    """``GuardBuilder.TORCH_GLOBAL_STATE``: the GLOBAL_STATE create_fn."""
    register_guard_kind_alias("TORCH_GLOBAL_STATE", "GLOBAL_STATE")
