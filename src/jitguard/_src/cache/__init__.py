"""The specializing cache: ``specialize(fn, compiler=...)`` keeps guarded compiled entries for
``fn`` and dispatches each call to the most specialized entry whose guards hold.

May import: everything in ``jitguard._src`` except ``jitguard._src.torch``.

Modules, lowest first (each imports only modules to its left, and the layers below
``cache``): ``signature`` (fn's signature; generated binders and forwarders), ``stats``
(counters) <- ``entry`` (CacheEntry, its facts and specificity, slots) <- ``keys`` (the key
layout and the generated dispatcher) <- ``dispatch`` (choosing dims, immutable snapshots)
<- ``policy`` (argument rules: the default guards) <- ``request`` (CompileRequest,
RestartCompile) <- ``reasons`` (recompile reasons, the ``jitguard.recompiles`` logger) <-
``stance`` (limits, ``no_recompiles``) <- ``compile`` (compiling one entry) <-
``observe`` (compile records, the compile/guards/dispatch logs, trace events; imports only
``entry`` and ``reasons`` of these) <- ``inspection`` (FunctionCache's inspection API) <-
``specialize`` (FunctionCache, ``specialize``) <- ``explain`` (``jitguard.explain``).
"""
