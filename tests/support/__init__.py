"""Test support code that ships nowhere: the ORT checkpoint writer (tests and benchmarks)."""
