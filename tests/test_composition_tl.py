"""``frobenius`` equals TransformerLens's ``all_composition_scores`` on the same random weights.

TransformerLens (3.x, row convention) zeroes same-layer and backward pairs; compscope leaves
them NaN (not computed), so they are compared as zeros."""

import pytest
import torch

tl = pytest.importorskip("transformer_lens")

import compscope  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated:DeprecationWarning")  # (TL 3.9)

@pytest.mark.parametrize("shape", [dict(n_layers=3, d_model=32, d_head=8, n_heads=4), dict(n_layers=4, d_model=48, d_head=6, n_heads=6)])
def test_frobenius_matches_transformer_lens(shape):
    cfg = tl.HookedTransformerConfig(n_ctx=16, d_vocab=50, act_fn="gelu", normalization_type="LN", seed=7, **shape)
    model = tl.HookedTransformer(cfg)
    ours = compscope.scores(model, "QKV", ["frobenius"], precision="float64", progress=False)
    for kind in "QKV":
        theirs = model.all_composition_scores(kind).double()
        mine = torch.nan_to_num(ours.dense("frobenius", kind), nan=0.0)
        assert theirs.abs().max() > 0.05  # non-trivial scores
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)
