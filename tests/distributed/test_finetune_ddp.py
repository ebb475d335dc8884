"""examples/finetune_llama.py trains with 2-rank DDP (gloo on 127.0.0.1) in graph mode with
the losses and gradient norms of eager DDP (fp32, 1e-4 relative, as the single-rank test)."""

from __future__ import annotations

import case_finetune
import pytest
import torch
from launcher import describe, run_ranks

pytestmark = pytest.mark.distributed


def test_recipe_under_ddp_matches_eager_ddp(tmp_path):
    results = run_ranks("case_finetune:run", tmp_path, timeout_s=300)
    for r in results:
        assert r.returncode == 0 and "error" not in r.result, describe(results)
    rank0 = results[0].result
    for key in ("losses", "grad_norms"):
        graph = torch.tensor(rank0["graph"][key], dtype=torch.float64)
        eager = torch.tensor(rank0["eager"][key], dtype=torch.float64)
        assert len(graph) == 3
        torch.testing.assert_close(graph, eager, rtol=1e-4, atol=0)
    # the printed loss is the mean over ranks: both ranks report the same numbers
    assert results[1].result["graph"]["losses"] == rank0["graph"]["losses"]
    # and it is not a 1-rank run's: each rank trained on its own batches
    recipe = case_finetune._recipe()
    torch._dynamo.reset()
    single = recipe.train(recipe.parse_args([*case_finetune.TINY, "--eager"]))
    assert [r["loss"] for r in single] != rank0["eager"]["losses"]
