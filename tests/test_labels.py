"""Activation labels on any runner, and the offline data they read: checked by hand on patterns
built to attend one way, against the toy's own labels, and for the data's shape and seeds."""

import pytest
import torch

from compscope.data.head_labels import LABELS, activation_labels, label_heads, pattern_labels
from compscope.data.runner import runner_for
from compscope.data.sequences import natural_text, repeats, stdlib_text
from compscope.errors import OptionError


def _pattern(T, target):
    """(1, 1, T, T) pattern putting all attention of row i on target(i) (row 0 on 0)."""
    p = torch.zeros(1, 1, T, T)
    p[0, 0, 0, 0] = 1
    for i in range(1, T):
        p[0, 0, i, target(i)] = 1
    return p


@pytest.mark.parametrize("start", [0, 1])
def test_each_label_reads_the_attention_it_names(start):
    half = 5
    T = start + 2 * half
    prev = pattern_labels(_pattern(T, lambda i: i - 1), half, start)
    assert float(prev["previous_token"]) == 1.0 and float(prev["sink"]) == pytest.approx(1 / (T - 1))
    first_of_second = start + half
    ind = pattern_labels(_pattern(T, lambda i: i - half + 1 if i >= first_of_second else i), half, start)
    assert float(ind["induction"]) == 1.0 and float(ind["duplicate_token"]) == 0.0
    dup = pattern_labels(_pattern(T, lambda i: i - half if i >= first_of_second else i), half, start)
    assert float(dup["duplicate_token"]) == 1.0 and float(dup["induction"]) == 0.0
    sink = pattern_labels(_pattern(T, lambda i: 0), half, start)
    assert float(sink["sink"]) == 1.0


def test_labels_on_the_toy_runner_equal_the_toy_labels():
    runner = runner_for("induction-2l")
    reps = repeats(24, 16, runner.hw.n_vocab, seed=7)
    got = activation_labels(runner, reps, batch_size=8, progress=False)
    want = label_heads(runner.model, reps.tokens)
    torch.testing.assert_close(got.induction, want.induction, atol=1e-6, rtol=0)
    torch.testing.assert_close(got.previous_token, want.previous, atol=1e-6, rtol=0)
    assert got.batches == 3 and all(got.spread[k].shape == (2, 4) for k in LABELS)
    assert float(got.spread["induction"].max()) > 0  # three batches of different sequences differ
    df = got.to_pandas()
    assert list(df.columns[:6]) == ["layer", "head", *LABELS] and len(df) == 8


def test_repeats_shape_seed_and_first_token():
    r = repeats(4, 6, 50, seed=1, bos=49, avoid=(0, 49))
    assert r.tokens.shape == (4, 13) and (r.tokens[:, 0] == 49).all() and r.start == 1
    assert torch.equal(r.tokens[:, 1:7], r.tokens[:, 7:])
    assert not ((r.tokens[:, 1:] == 0) | (r.tokens[:, 1:] == 49)).any()
    assert torch.equal(repeats(4, 6, 50, seed=1).tokens, repeats(4, 6, 50, seed=1).tokens)
    assert not torch.equal(repeats(4, 6, 50, seed=1).tokens, repeats(4, 6, 50, seed=2).tokens)
    with pytest.raises(OptionError, match="half-length"):
        repeats(4, 1, 50, seed=1)


class _Chars:
    """A stand-in tokenizer: one id per byte."""

    def encode(self, text, add_special_tokens=False):
        return list(text.encode())


def test_natural_text_is_the_standard_library_cut_into_seeded_windows():
    text = stdlib_text()
    assert len(text) > 100_000 and "Return" in text
    a = natural_text(_Chars(), 5, 64, seed=0, bos=1)
    assert a.shape == (5, 64) and (a[:, 0] == 1).all()
    assert torch.equal(a, natural_text(_Chars(), 5, 64, seed=0, bos=1))
    assert not torch.equal(a, natural_text(_Chars(), 5, 64, seed=1, bos=1))
    assert bytes(a[0, 1:].tolist()).decode(errors="replace") in text
    with pytest.raises(OptionError, match="tokenizer"):
        natural_text(None, 5, 64, seed=0)
