"""jitguard's private implementation. Nothing here is public API; see ``jitguard``.

# [Note: Layering]
# Modules import one way, lowest first:
#   errors, _util, stacks, weak, config, integrations  <-  ids  <-  guards  <-  sources, more_sources
#   <-  global_state  <-  checkpoints  <-  contexts  <-  compiler  <-  cache  <-  torch
# A module may import only modules to its left or in its own group (and the standard
# library); the public package ``jitguard`` sits above all of them. The base
# ``Source`` lives in ``guards`` beside ``Guard`` because ``Source.make_guard`` builds
# a ``Guard``; the concrete source library sits above it. ``torch`` is the only
# package that imports torch. tests/test_layering.py enforces this.
"""
