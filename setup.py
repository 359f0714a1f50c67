"""The build of jitguard's one optional C extension, ``jitguard._src._speedups.ext`` (the C hot
path of the specializing cache). Everything else is in pyproject.toml.

The extension is optional: when it cannot be compiled (no compiler, no Python headers, a
free-threaded build), the build says so and goes on, and jitguard runs in pure Python
(``jitguard.speedups_enabled()`` is then False). ``JITGUARD_NO_SPEEDUPS=1`` skips it.
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

setup(ext_modules=extensions, cmdclass={"build_ext": optional_build_ext})
