"""Loading the optional C extension ``jitguard._src._speedups.ext``, once, for every user of it
(the dispatcher's hot path in ``dispatch.fast``, the batch helpers of generated checks in
``compiler.bulk``).

May import: _speedups (its extension ``ext``), env (the standard library otherwise).

# [Note: Loading the extension]
# The extension is used only when it is built, importable, of this package's ABI (a build
# of another version, left in place by an older install, is refused: it could lack a
# function or give one another meaning), and ``JITGUARD_PURE_PYTHON`` is not on (a
# switch: [Note: Environment variables] in env). Any
# other case is pure Python, said once on the ``jitguard.dispatch`` log (WARNING) with the
# reason (``why_not``) and the fix. Every user reads ``module`` from here, so the C hot path
# and the C batch helpers are on or off together.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from . import env

__all__ = ["ABI", "ENV_VAR", "module", "why_not"]

ENV_VAR = "JITGUARD_PURE_PYTHON"
ABI = 15  # the extension's SPEEDUPS_ABI this package expects (_speedups/speedups.h)
log = logging.getLogger("jitguard.dispatch")

module: Any = None
why_not: Optional[str] = None
if env.flag(ENV_VAR):
    why_not = f"{ENV_VAR}={env.raw(ENV_VAR)}"
else:
    try:
        from ._speedups import ext as module  # type: ignore[attr-defined,no-redef]
    except ImportError as e:
        why_not = f"the extension jitguard._src._speedups.ext is not built or not importable ({e})"
    else:
        if getattr(module, "ABI", None) != ABI:
            why_not = (f"the extension jitguard._src._speedups.ext is a stale build (ABI "
                       f"{getattr(module, 'ABI', None)}, expected {ABI}): rebuild it with "
                       f"`python setup.py build_ext --inplace`")
            module = None
    if why_not is not None:
        log.warning("jitguard: %s; the specializing cache runs in pure Python", why_not)
