"""The build of jitguard's optional native extensions. Everything else is in pyproject.toml.

* ``jitguard._src._speedups.ext`` (C): the C hot path of the specializing cache. When it
  cannot be compiled (no compiler, no Python headers, a free-threaded build), the build says
  so and goes on, and jitguard runs in pure Python (``jitguard.speedups_enabled()`` is then
  False). ``JITGUARD_NO_SPEEDUPS=1`` skips it.
* ``jitguard._src._torchext.ext`` (C++): TENSORS_MATCH's native checker
  ([Note: A native tensor checker] in jitguard/_src/torch/native_checks.py), built only
  where torch is importable by the Python running this build, against that torch's headers
  and libraries. pip's isolated build has no torch, so ``make venv`` builds it in place
  afterwards (``python setup.py build_ext --inplace``). Without it, tensor guards run on
  torch's own checker (slower; a WARNING on the ``jitguard.torch`` log says why).
  ``JITGUARD_NO_SPEEDUPS=1`` skips it too.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class optional_build_ext(build_ext):
    """A ``build_ext`` whose failure is not the install's."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all (DistutilsPlatformError, ...)
            self._skip(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # the compiler failed (CompileError, LinkError)
            self._skip(e)

    def _skip(self, e: BaseException) -> None:
        print(f"jitguard: the C speedups were not built ({e}); jitguard runs in pure Python",
              file=sys.stderr)


# One translation unit: speedups.c includes the header and the other parts, listed as
# depends so that a change to any of them rebuilds the extension.
SPEEDUPS_DIR = "src/jitguard/_src/_speedups"
SPEEDUPS_PARTS = [
    f"{SPEEDUPS_DIR}/{part}"
    for part in ("speedups.h", "facts.c.h", "tokens.c.h", "state.c.h", "dispatch.c.h",
                 "dispatch_type.c.h", "tags.c.h")
]

extensions = []
if os.environ.get("JITGUARD_NO_SPEEDUPS") != "1":
    extensions.append(
        Extension("jitguard._src._speedups.ext", [f"{SPEEDUPS_DIR}/speedups.c"],
                  depends=SPEEDUPS_PARTS, optional=True)
    )


def torch_extension() -> Extension | None:
    """The C++ tensor checker's build, against the torch this Python imports, or None."""
    try:
        import torch
        from torch.utils import cpp_extension
    except Exception:  # no torch here (pip's isolated build, the core venvs)
        return None
    lib_dirs = cpp_extension.library_paths()
    return Extension(
        "jitguard._src._torchext.ext",
        ["src/jitguard/_src/_torchext/tensor_checks.cpp"],
        include_dirs=cpp_extension.include_paths(),
        library_dirs=lib_dirs,
        runtime_library_dirs=lib_dirs,
        libraries=["c10", "torch", "torch_cpu", "torch_python"],
        language="c++",
        extra_compile_args=[
            "-std=c++20", "-O2",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f'-DJITGUARD_TORCH_VERSION="{torch.__version__}"',
        ],
        optional=True,
    )


if os.environ.get("JITGUARD_NO_SPEEDUPS") != "1":
    torch_ext = torch_extension()
    if torch_ext is not None:
        extensions.append(torch_ext)

setup(ext_modules=extensions, cmdclass={"build_ext": optional_build_ext})
