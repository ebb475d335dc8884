"""The benchmark runner (``run_case``) on single models: rows, not timings.

Split from test_bench.py so that ``--dist loadfile`` runs these beside its CLI run. Graph
mode's warm compile is measured here in the same process: the fresh-process warm compile
(``fresh_process_warm_cache``) is covered once, by test_bench.py's CLI run.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from npu_inductor.benchmarks.dynamic import padding_overhead
from npu_inductor.benchmarks.runner import Backend, Settings, make_backends, prime, run_case
from npu_inductor.benchmarks.zoo import ZOO, ZooModel


def _backends(names: tuple[str, ...], compare: tuple[str, ...] = ()) -> list[Backend]:
    """``make_backends`` restricted to ``names``, every warm compile in this process."""
    return [dataclasses.replace(b, warm_kind="cache_same_process") if b.name == "npu" else b
            for b in make_backends(list(compare)) if b.name in names]


def _raise(gm, example_inputs):
    raise RuntimeError("backend exploded")


def test_failing_backend_is_a_row_not_a_crash() -> None:
    broken = Backend("broken", lambda m: torch.compile(m, backend=_raise))
    eager = Backend("eager", lambda m: m)
    rows = run_case(ZOO["mlp"], "inference", [eager, broken], Settings(repeat=1, warmup=0))
    assert [r.accuracy for r in rows] == ["pass", "fail_to_run"]
    assert "backend exploded" in rows[1].error and rows[1].abs_latency is None


def test_base_zoo_entry_compiles_and_matches() -> None:
    """One realistic-size entry end to end (the others share its architectures)."""
    rows = run_case(ZOO["mlp_base"], "inference", _backends(("eager", "npu")),
                    Settings(repeat=1, warmup=0))
    assert [r.accuracy for r in rows] == ["pass", "pass"], [r.error for r in rows]
    assert padding_overhead([5, 8, 9], [8, 16]) == pytest.approx((8 + 8 + 16) / 22 - 1)


class _ConvBN(nn.Module):
    """Two Conv+BatchNorm pairs (eval mode: each BatchNorm folds into its Conv2D)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def _conv_bn(batch: int, seed: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(seed)
    model = _ConvBN()
    for bn in (model.body[1], model.body[4]):  # non-trivial running statistics to fold
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return model, (torch.randn(batch, 3, 8, 8),)


def test_npu_freeze_variant_folds_and_runs_inference_only() -> None:
    backends = _backends(("eager", "npu", "npu_freeze"), compare=("npu_freeze",))
    settings = Settings(repeat=1, warmup=0)
    rows = run_case(ZooModel("conv_bn", _conv_bn), "inference", backends, settings)
    by_name = {r.backend: r for r in rows}
    assert [r.accuracy for r in rows] == ["pass"] * 3, [r.error for r in rows]
    npu, frozen = by_name["npu"], by_name["npu_freeze"]
    assert npu.ge_ops is not None and frozen.ge_ops is not None
    assert frozen.ge_ops <= npu.ge_ops - 2, (npu.ge_ops, frozen.ge_ops)  # both BNs folded
    rows = run_case(ZOO["mlp"], "training", [b for b in backends if b.name != "npu"], settings)
    assert [r.backend for r in rows] == ["eager"]  # npu_freeze is inference only


def test_training_rows_report_step_cpu_time() -> None:
    """Training rows carry each backend's median step CPU ms and eager's over it."""
    from npu_inductor.benchmarks.report import TRAINING, format_markdown

    rows = run_case(ZOO["mlp"], "training", _backends(("eager", "npu")),
                    Settings(repeat=3, warmup=0))
    eager, npu = rows
    assert eager.accuracy == npu.accuracy == "pass"
    assert eager.step_cpu_ms > 0 and npu.step_cpu_ms > 0
    assert eager.cpu_speedup == 1.0
    assert npu.cpu_speedup == pytest.approx(eager.step_cpu_ms / npu.step_cpu_ms)
    table = format_markdown(rows, TRAINING)
    assert "| step cpu ms | cpu vs eager |" in table
    assert f"{npu.step_cpu_ms:.3f}" in table


def test_prime_runs_a_training_step_with_a_compiled_optimizer_step() -> None:
    """``prime`` hands the backend a module and then the optimizer's ``step`` (so Dynamo's
    optimizer imports land outside the timed compile) after a backward."""
    wrapped: list = []

    def wrap(fn):
        wrapped.append(fn)
        return fn

    prime([Backend("eager", wrap)])
    module, step = wrapped
    assert isinstance(module, torch.nn.Linear) and module.weight.grad is not None
    assert isinstance(step.__self__, torch.optim.SGD) and step.__func__.__name__ == "step"
    wrapped.clear()
    prime([Backend("eager", wrap)], train=False)  # inference runs: the forward alone
    assert len(wrapped) == 1 and wrapped[0].weight.grad is None


def test_warm_summary_reports_round_ratios_and_spread() -> None:
    """``warm.summary``: ratios within each interleaved round and each figure's spread, next
    to the medians (samples chosen so the median of ratios differs from the ratio of
    medians)."""
    from npu_inductor.benchmarks.warm import summary

    cpu = {"aot_eager": [1.0, 2.0, 4.0], "cold": [1.5, 2.0, 3.0], "warm": [0.75, 0.5, 1.5]}
    row = summary({k: list(v) for k, v in cpu.items()}, cpu)
    assert row["cpu_round_ratios"]["cold_vs_aot_eager"] == [1.5, 1.0, 0.75]
    assert row["cpu_round_ratios"]["warm_vs_cold"] == [0.5, 0.25, 0.5]
    assert row["cpu_round_ratio_median"] == {"cold_vs_aot_eager": 1.0, "warm_vs_cold": 0.5}
    assert row["cpu_round_ratio_range"]["cold_vs_aot_eager"] == [0.75, 1.5]
    assert row["cpu_spread"]["aot_eager"] == [1.0, 4.0]
    assert row["cpu_cold_vs_aot_eager"] == 1.0 and row["cpu_warm_vs_cold"] == 0.375


def test_warm_floor_is_the_warm_start_without_its_backend_call() -> None:
    """``warm.phase_summary``: per-phase medians, and per round the warm start less its
    backend call over the cold compile (the ratio no backend can beat)."""
    from npu_inductor.benchmarks.warm import phase_summary

    cpu = {"aot_eager": [1.0, 1.0], "cold": [2.0, 4.0], "warm": [1.0, 1.5]}
    phases = {k: [{"backend": b, "guards": 0.1} for b in bs]
              for k, bs in {"aot_eager": [0.5, 0.7], "cold": [1.0, 1.2],
                            "warm": [0.2, 0.5]}.items()}
    row = phase_summary(cpu, phases)
    assert row["warm_floor_vs_cold"]["rounds"] == [0.4, 0.25]
    assert row["warm_floor_vs_cold"]["range"] == [0.25, 0.4]
    assert row["cpu_phase_median"]["cold"] == {"backend": 1.1, "guards": 0.1}


def test_precompiled_warm_process_loads_the_artifact() -> None:
    """``--precompile``: the in-process compile stores no precompiled artifact, so the warm
    process starts from a folder a fresh cold precompile filled (it was a second cold
    precompile: warm ~= cold)."""
    from npu_inductor.benchmarks.runner import Runner, prepare, warm_and_memory

    backend = next(b for b in make_backends(["aot_eager"]) if b.name == "npu")
    settings = Settings(repeat=1, warmup=0, precompile=True)
    case = prepare(ZOO["mlp"], "inference", settings)
    r = Runner(backend, case, case.model, settings)
    warm_and_memory(r, fresh=True)
    assert not r.notes, r.notes
    assert r.fresh_cold_s is not None and r.warm_s is not None
    assert r.warm_cache == (1, 0)  # the one GE graph a hit, nothing lowered


def test_each_cold_compile_starts_without_fake_tensor_cache_entries() -> None:
    """The fake-tensor dispatch cache is process-wide and survives ``torch._dynamo.reset()``:
    a backend compiled after another would trace faster on its entries."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from npu_inductor.benchmarks.runner import Runner, prepare

    seen = []

    def wrap(m):
        seen.append(len(FakeTensorMode.cache))
        return torch.compile(m, backend="aot_eager")

    settings = Settings(repeat=1, warmup=0)
    case = prepare(ZOO["mlp"], "inference", settings)
    for _ in range(2):
        Runner(Backend("aot_eager", wrap), case, case.model, settings).first_call()
        assert FakeTensorMode.cache  # the compile filled it
    assert seen == [0, 0]
