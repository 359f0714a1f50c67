"""The torch integration: the only package in jitguard that imports torch.

May import: anything in jitguard._src, and torch.

``install()`` runs once, the first time jitguard needs an integration while torch is
imported (see [Note: Lazy integrations]): it registers torch's ambient states, the fake-mode
detector and the ``invoke_subgraph`` cache.
"""

from __future__ import annotations

import threading

__all__ = ["install"]

_installed = False
_lock = threading.Lock()


def install() -> None:
    """Plug the torch integration into jitguard's registries (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        from . import fake, state

        state.register_states()
        fake.install_hooks()
        _installed = True
