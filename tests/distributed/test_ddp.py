"""2-rank DistributedDataParallel + torch.compile(backend="npu") vs eager DDP: 5 AdamW
steps give the same losses and parameters (gloo on 127.0.0.1)."""

from __future__ import annotations

import pytest
from launcher import describe, run_ranks

pytestmark = pytest.mark.distributed


@pytest.mark.parametrize("model", ["mlp", "llama"])
def test_ddp_matches_eager(tmp_path, model):
    results = run_ranks(f"case_ddp:run_{model}", tmp_path, timeout_s=120)
    for r in results:
        assert r.returncode == 0 and "error" not in r.result, describe(results)
        res = r.result
        assert len(res["compiled_losses"]) == 5 and res["synced"]
        # tiny buckets: Dynamo's DDP optimizer split the model into several GE graphs
        assert res["forward_graphs"] > 1 and res["backward_graphs"] > 1, res
    # data differ per rank, so equal losses across ranks would mean no data parallelism
    assert results[0].result["eager_losses"] != results[1].result["eager_losses"]
