"""The specializing cache: ``specialize(fn, compiler=...)`` keeps guarded compiled entries for
``fn`` and dispatches each call to the most specialized entry whose guards hold.

May import: everything in ``jitguard._src`` except ``jitguard._src.torch``.

The hit path (entries, key layouts, the generated dispatcher, snapshots, the LRU) is
``jitguard._src.dispatch``, one layer below; this package is the miss path and its policy.

Modules, lowest first (each imports only modules to its left, ``dispatch`` and the layers
below ``cache``): ``stats`` (counters) <- ``policy`` (argument rules: the default guards) <-
``request`` (CompileRequest, RestartCompile) <- ``reasons`` (recompile reasons, the
``jitguard.recompiles`` logger) <- ``stance`` (limits, ``no_recompiles``) <- ``job``
(compiling one entry) <- ``observe`` (compile records, the compile/guards/dispatch logs,
trace events; imports only ``reasons`` of these) <- ``persist`` (stored entries) <-
``inspection`` (FunctionCache's inspection API) <- ``miss`` (serving a miss) <-
``specialize`` (FunctionCache, ``specialize``) <- ``decorators`` <- ``explain``
(``jitguard.explain``).
"""
