"""Lazy hooks for optional integrations (torch).

May import: nothing from jitguard.

# [Note: Lazy integrations]
# jitguard never imports torch itself. The public package registers a loader per
# integration, keyed by the module that triggers it ("torch"). Code that could need the
# integration (the global-state registry, fake-mode detection, the hop caches) calls
# ``ensure_loaded()``, which runs each pending loader whose trigger module is already in
# ``sys.modules``, exactly once. So torch's states join the guards as soon as the user has
# imported torch, and a process that never imports torch never pays for it.
# ``sys.modules['torch'] = None`` (the usual way to make a module unimportable) counts as
# absent.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

__all__ = ["ensure_loaded", "register_loader"]

_pending: dict[str, list[Callable[[], None]]] = {}
_lock = threading.RLock()


def register_loader(trigger: str, loader: Callable[[], None]) -> None:
    """Run ``loader`` the first time ``ensure_loaded`` sees ``trigger`` imported."""
    with _lock:
        _pending.setdefault(trigger, []).append(loader)


def ensure_loaded() -> None:
    """Run the loaders of every integration whose trigger module has been imported."""
    if not _pending:
        return
    with _lock:
        for trigger in [t for t in _pending if sys.modules.get(t) is not None]:
            for loader in _pending.pop(trigger):
                loader()
