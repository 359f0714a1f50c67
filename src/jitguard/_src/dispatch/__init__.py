"""The hit path of the specializing cache: from a call's parameter values to the entry whose
guards hold, without compiling anything. The miss path and its policy are in
``jitguard._src.cache``, one layer above; nothing here imports it.

May import: _util, native, guards, ids, sources, compiler.*, dispatch.*.

Modules, lowest first (each imports only modules to its left, and the layers below
``dispatch``): ``signature`` (fn's signature; generated binders and forwarders) <- ``facts``
(the hashable facts a guard pins) <- ``entry`` (CacheEntry, its facts and specificity,
slots) <- ``lru`` (``maxsize``) <- ``layout`` (the key layout of a snapshot) <- ``fast``
(the Python side of the optional C hot path) <- ``dispatcher`` (the generated dispatcher)
<- ``snapshot`` (choosing dims, immutable snapshots).

One hit, read in order: ``dispatcher`` (the generated code and its ``Dispatcher``; with the
extension, ``fast`` and ``_speedups/dispatch.c.h``), ``snapshot`` (what the index holds),
``entry`` (the slot and its check).
"""
