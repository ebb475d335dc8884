"""Benchmarks: eager vs graph mode (npu-bench)."""
