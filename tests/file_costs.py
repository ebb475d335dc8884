"""The order in which ``pytest -n 2 --dist loadfile`` (CI) hands out test files: the most
expensive first.

pytest-xdist's ``loadfile`` sends whole files to the workers and by default
(``--loadscope-reorder``) the files with the most tests first. That put the few-test but
expensive files (benchmarks, fresh-process, distributed and example tests) last, where the
last one handed out could keep one worker busy while the other had finished. conftest.py
turns that reordering off and has the workers collect the files longest first (Graham's
LPT rule): the last files handed out are cheap ones and the two workers finish together.

``COST_S``: seconds of each file in one serial run of the suite (``--durations=0``, no
``-n``, on the shared 2-core machine, so only their ratios mean much; refresh with
``tools/test_costs.py`` after large changes). A file not listed is estimated at
``PER_TEST_S`` per test. Only the order depends on these numbers, never a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

PER_TEST_S = 0.1
COST_S: dict[str, float] = {
    "tests/opinfo/test_opinfo_int_bool.py": 620,
    "tests/opinfo/test_opinfo_float32.py": 507,
    "tests/opinfo/test_opinfo_low_precision.py": 504,
    "tests/lowering/test_special.py": 84,
    "tests/hf/test_hf_models.py": 69,
    "tests/runtime/test_memory_plan.py": 68,
    "tests/lowering/test_elementwise.py": 62,
    "tests/examples/test_finetune_llama.py": 60,
    "tests/test_dynamic.py": 60,
    "tests/benchmarks/test_serve.py": 59,
    "tests/runtime/test_host_codegen.py": 58,
    "tests/test_device_rules_models.py": 58,
    "tests/distributed/test_ddp.py": 53,
    "tests/lowering/test_reduction.py": 52,
    "tests/test_acl_models.py": 50,
    "tests/test_cache.py": 49,
    "tests/test_export.py": 48,
    "tests/lowering/test_shape.py": 47,
    "tests/fuzz/test_fuzz.py": 43,
    "tests/distributed/test_finetune_ddp.py": 43,
    "tests/test_buckets_auto.py": 41,
    "tests/test_backend.py": 40,
    "tests/graph_passes/test_fused_models.py": 40,
    "tests/benchmarks/test_bench_runner.py": 40,
    "tests/test_generate.py": 39,
    "tests/benchmarks/test_bench.py": 39,
    "tests/lowering/test_misc_coverage.py": 37,
    "tests/lowering/test_nn.py": 36,
    "tests/hf/test_hf_inference.py": 34,
    "tests/test_warm_start.py": 33,
    "tests/distributed/test_failures.py": 31,
    "tests/lowering/test_spectral.py": 30,
    "tests/distributed/test_tensor_parallel.py": 27,
    "tests/test_buckets.py": 27,
    "tests/distributed/test_collectives.py": 24,
    "tests/test_device_report.py": 23,
    "tests/distributed/test_acl_hccl.py": 22,
    "tests/test_models.py": 16,
    "tests/distributed/test_examples.py": 16,
    "tests/test_mutation.py": 15,
    "tests/test_explain.py": 15,
    "tests/test_optimizer.py": 14,
    "tests/hf/test_layer_ops.py": 14,
    "tests/runtime/test_attention_edges.py": 12,
    "tests/runtime/test_attention_chain.py": 12,
    "tests/test_bad_input.py": 11,
    "tests/lowering/test_creation.py": 11,
    "tests/lowering/test_linalg.py": 11,
    "tests/test_cache_precompile.py": 10,
    "tests/lowering/test_index.py": 8,
    "tests/runtime/test_acl_device.py": 5,
    "tests/runtime/test_shape_steps.py": 4,
    "tests/runtime/test_allocator.py": 4,
    "tests/runtime/test_precision_mode.py": 3,
    "tests/test_fallback.py": 3,
}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(items: Sequence[T], nodeid=lambda item: item.nodeid) -> list[T]:
    """``items`` grouped by file, the files in decreasing cost, each file's tests in their
    collected order (ties keep the collected order of the files)."""
    files: dict[str, list[T]] = {}
    for item in items:
        files.setdefault(file_of(nodeid(item)), []).append(item)

    def cost(path: str) -> float:
        return COST_S.get(path, PER_TEST_S * len(files[path]))

    return [item for path in sorted(files, key=lambda p: -cost(p)) for item in files[path]]
