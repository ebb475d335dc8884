"""``npu-bench --steady-heap``: freed multi-megabyte tensors stay in the process, so the next
allocation of that size is not page-faulted in again."""

import resource

import torch

from npu_inductor.benchmarks.cli import parse_args
from npu_inductor.benchmarks.measure import steady_heap


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_freed_large_tensors_are_reused_without_page_faults():
    assert steady_heap()
    n = (24 << 20) // 4  # 24 MB: above glibc's default mmap threshold
    rounds = []
    for _ in range(4):  # the first round may grow the heap (and a CI worker's other
        before = _faults()  # threads may fault in between: the quietest round counts)
        for _ in range(4):
            torch.empty(n).fill_(1.0)  # allocated, touched, freed
        rounds.append(_faults() - before)
    assert min(rounds[1:]) < 200, rounds  # a fresh 24 MB would be ~6,000 faults each


def test_flag_parses():
    assert parse_args(["--steady-heap"]).steady_heap
    assert not parse_args([]).steady_heap
