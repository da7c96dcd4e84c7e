"""Builds squall's optional C hot path (squall/_speedups.c); everything else is in pyproject.toml.

``optional=True``: without a C compiler or Python's headers the build is skipped and squall runs
on the pure-Python twins of ``squall._native``.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("squall._speedups", ["squall/_speedups.c"], optional=True,
                             extra_compile_args=["-O2"])])
