"""Builds squall's optional C hot path (squall/_speedups.c, which includes the other
squall/_speedups_*.c files); everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build is skipped and squall runs
on the pure-Python twins of ``squall._native``. The build records the source's SHA-256 in the
module, so that an edit of the source without a rebuild is refused at import, not run stale.
The digest is squall._native.source_digest's, written again here because setup.py runs before
squall can be imported.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "squall/_speedups.c"
INCLUDED = sorted(str(p.relative_to(Path(__file__).parent)) for p in Path(__file__).parent.glob("squall/_speedups_*.c"))
# The build records its sources' hash (the module's SOURCE_SHA256); squall._native refuses a
# module built from another version of them, which would otherwise run old C silently.
digest = hashlib.sha256()
for name in [SOURCE, *INCLUDED]:
    digest.update((Path(__file__).parent / name).read_bytes())
SOURCE_SHA256 = digest.hexdigest()

setup(ext_modules=[Extension("squall._speedups", [SOURCE], depends=INCLUDED, optional=True, extra_compile_args=["-O2"],
                             define_macros=[("SQUALL_SOURCE_SHA256", f'"{SOURCE_SHA256}"')])])
