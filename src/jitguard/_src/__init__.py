"""jitguard's private implementation. Nothing here is public API; see ``jitguard``.

# [Note: Layering]
# Modules import one way, lowest first:
#   errors, _util, stacks, weak, config, integrations  <-  ids  <-  guard_source
#   <-  guards, guard_exprs  <-  root_sources  <-  sources, more_sources  <-  global_state
#   <-  checkpoints  <-  contexts  <-  compiler  <-  cache  <-  torch
# A module may import only modules to its left or in its own group (and the standard
# library); the public package ``jitguard`` sits above all of them. The base
# ``Source`` lives in ``guards`` beside ``Guard`` because ``Source.make_guard`` builds
# a ``Guard``; ``guards`` re-exports ``GuardSource`` and the after-tracing guards of
# ``guard_exprs`` (which names ``Source`` only for types). The concrete source library
# sits above it: the roots in ``root_sources``, re-exported by ``sources``, which holds
# the chained ones. ``torch`` is the only package that imports torch.
# tests/test_layering.py enforces this.
"""
