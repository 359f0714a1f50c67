"""The guard compiler: guard kinds, the builder that turns guards into leaves, code
generation into one straight-line check function (cut into chunks when very large), a
reference evaluator, failure reasons.

May import: everything below ``compiler`` in [Note: Layering].

Modules, lowest first: ``codecache`` (compiling generated code, for every layer that
generates some; it imports nothing of jitguard) and ``constants`` (what a constant is,
strict equality); ``values`` (safe display of values, identity binding) <- ``kinds`` (the GuardKind
protocol and registry) <- ``identity_kinds``, ``global_state_kind`` <- ``builtin_kinds``
(registers them all) <- ``python_kinds`` and ``attr_kinds`` (kinds a bytecode frontend needs),
``array_kinds`` and ``triton_kinds`` (arrays, Triton's int and pointer classes, over the pure
fact functions of ``array_facts``) <- ``builder``
(GuardBuilder) <- ``shape`` (SHAPE_ENV) <- ``reference`` <- ``writer`` (one generated function) <- ``chunks`` <- ``codegen`` <- ``check``
(CheckFunction, compile_guards).
"""
