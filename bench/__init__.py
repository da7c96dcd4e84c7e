"""Benchmarks for squall (see BENCHMARKS.md); never run by the test suite."""
