"""The optional C++ tensor checker's source, and the home of the extension built from it,
``jitguard._src._torchext.ext`` (setup.py builds it from ``tensor_checks.cpp`` where torch is
importable at build time, against that torch's headers and libraries). Nothing here is Python
but this docstring: the extension is loaded, once, by ``jitguard._src.torch.native_checks``
([Note: A native tensor checker]).

May import: nothing from jitguard.
"""
