"""The optional C hot path's sources, and the home of the extension built from them,
``jitguard._src._speedups.ext`` (setup.py builds it from ``speedups.c``, which includes the
``*.c.h`` parts and ``speedups.h``). Nothing here is Python but this docstring: the extension
is loaded, once, by ``jitguard._src.native`` ([Note: Loading the extension]).

May import: nothing from jitguard.
"""
