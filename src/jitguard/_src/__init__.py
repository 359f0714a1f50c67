"""jitguard's private implementation. Nothing here is public API; see ``jitguard``.

# [Note: Layering]
# Modules import one way, lowest first:
#   errors, _util, stacks, weak  <-  ids  <-  guards  <-  sources  <-  global_state
#   <-  contexts  <-  compiler  <-  cache  <-  torch
# A module may import only modules to its left (and the standard library). The base
# ``Source`` lives in ``guards`` beside ``Guard`` because ``Source.make_guard`` builds
# a ``Guard``; the concrete source library sits above it. ``torch`` is the only
# package that imports torch. tests/test_layering.py enforces this.
"""
