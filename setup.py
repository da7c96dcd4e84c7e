"""Builds squall's optional C hot path (squall/_speedups.c); everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build is skipped and squall runs
on the pure-Python twins of ``squall._native``. The build records the source's SHA-256 in the
module, so that an edit of the source without a rebuild is refused at import, not run stale.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "squall/_speedups.c"
# The build records its source's hash (the module's SOURCE_SHA256); squall._native refuses a
# module built from another version of the source, which would otherwise run old C silently.
SOURCE_SHA256 = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()

setup(ext_modules=[Extension("squall._speedups", [SOURCE], optional=True, extra_compile_args=["-O2"],
                             define_macros=[("SQUALL_SOURCE_SHA256", f'"{SOURCE_SHA256}"')])])
