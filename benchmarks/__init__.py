"""Benchmarks of knowwhen_runner: ``python -m benchmarks`` prints a table and writes results.json."""
