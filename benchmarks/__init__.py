"""Benchmark for OOM advice: scenarios from real cases, a scorer for any agent's answer, an evals export.

Run it with ``python3 benchmarks/run.py``; see ``benchmarks/README.md``.
"""
