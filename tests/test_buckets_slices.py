"""The bucket wrapper's per-call path: output narrows are computed once per size signature
(``BucketedGraph._narrows``) and reused, so sizes that share a bucket, revisited in any
order, each get their own valid region, contiguous as an unpadded graph's output."""

import torch
from models import make

from npu_inductor import buckets


def test_sizes_sharing_a_bucket_revisited_slice_their_own_rows():
    model, _ = make("llama")
    model.eval()
    compiled = torch.compile(model, backend="npu", dynamic=True,
                             options={"shape_buckets": {"ids": {1: [8, 16]}}})
    gen = torch.Generator().manual_seed(0)
    ids = {n: torch.randint(0, 128, (2, n), generator=gen) for n in (5, 7, 3, 12)}
    with torch.no_grad():
        for n in (5, 7, 5, 3, 12, 7, 12, 3):
            out = compiled(ids[n])
            assert out.shape[:2] == (2, n) and out.is_contiguous()
            torch.testing.assert_close(out, model(ids[n]), rtol=1e-5, atol=1e-5)
    graph = buckets.REPORTS[-1]
    assert graph.compiles == 2 and graph.padded_elements > graph.real_elements
