"""``python -m npu_inductor.benchmarks.train_split``: a training step's forward, backward and
optimizer CPU time per backend, interleaved in one process."""

import torch

from npu_inductor.benchmarks import train_split


def test_split_reports_every_phase_per_backend():
    result = train_split.split("mlp", torch.float32, steps=3, warmup=1,
                               backends=("eager", "npu"))
    assert set(result) == {"eager", "npu"}
    for phases in result.values():
        assert set(phases) == set(train_split.PHASES)
        for median, p25 in phases.values():
            assert 0 < p25 <= median
        # the whole step holds its three phases (one clock, read at their boundaries)
        parts = sum(phases[p][0] for p in ("forward", "backward", "optimizer"))
        assert phases["step"][0] <= parts * 1.5 + 1.0


def test_main_prints_a_row_per_backend(capsys):
    train_split.main(["--model", "mlp", "--steps", "2", "--warmup", "1",
                      "--backends", "eager,npu,aot_eager"])
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["eager", "npu", "aot_eager"] and "x (" in out
