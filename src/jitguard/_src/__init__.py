"""jitguard's private implementation. Nothing here is public API; see ``jitguard``.

May import: nothing (the modules below import each other, as [Note: Layering] says).

# [Note: Layering]
# Modules import one way, lowest first:
#   errors, _util, stacks, weak, config, integrations, logs, structured, _speedups,
#   _torchext, native
#   <-  ids
#   <-  guard_source  <-  guards, guard_exprs  <-  root_sources  <-  sources, more_sources
#   <-  global_state  <-  checkpoints  <-  contexts  <-  compiler  <-  dispatch  <-  store
#   <-  cache  <-  torch
# A module may import only modules to its left or in its own group (and the standard
# library); the public package ``jitguard`` sits above all of them. The base
# ``Source`` lives in ``guards`` beside ``Guard`` because ``Source.make_guard`` builds
# a ``Guard``; ``guards`` re-exports ``GuardSource`` and the after-tracing guards of
# ``guard_exprs`` (which names ``Source`` only for types). The concrete source library
# sits above it: the roots in ``root_sources``, re-exported by ``sources``, which holds
# the chained ones. ``logs`` (the log switch) and ``structured`` (the trace writer) are
# standard-library only, so every layer can log and trace; what a compile reports is
# built in ``cache`` ([Note: Compile events]), and the torch integration plugs both into
# torch's logging ([Note: jitguard in torch's logging]). ``torch`` is the only package
# that imports torch. ``store`` (the persistent store) knows guard-set documents and
# bytes, never a cache entry; ``cache.persist`` joins the two. ``dispatch`` is the hit
# path of the specializing cache (entries, key layouts, the generated dispatcher, snapshots,
# the LRU); ``cache`` above it is the miss path and its policy, and ``dispatch`` imports
# nothing of it. ``_speedups`` holds the C sources of the optional extension
# ``_speedups.ext`` (which imports nothing of jitguard; ``native`` loads it, for
# ``dispatch.fast`` and ``compiler.bulk``); ``_torchext`` the C++ source of the optional
# tensor checker ``_torchext.ext``, built against torch and loaded by
# ``torch.native_checks``.
# tests/test_layering.py enforces this.
"""
