"""The guard compiler: guard kinds, the builder that turns guards into leaves, code
generation into one straight-line check function (cut into chunks when very large), a
reference evaluator, failure reasons.

May import: everything below ``compiler`` in [Note: Layering].

Modules, lowest first: ``values`` (safe display of values, identity binding) <- ``kinds``
(the GuardKind protocol and registry) <- ``builtin_kinds`` <- ``python_kinds`` <- ``shape`` (SHAPE_ENV) <-
``builder`` (GuardBuilder) <- ``reference`` <- ``codegen`` <- ``check`` (CheckFunction,
compile_guards).
"""
