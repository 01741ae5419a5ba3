"""Activation labels on any runner, and the offline data they read: checked by hand on patterns
built to attend one way, against the toy's own labels, and for the data's shape and seeds."""

import inspect
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from compscope.data.head_labels import LABELS, activation_labels, label_heads, pattern_labels
from compscope.data.runner import runner_for
from compscope.data.sequences import Repeats, natural_text, repeats, stdlib_text
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
    assert float(sink["previous_token"]) == pytest.approx(1 / (T - 1))  # row 1's attention on 0 is on its previous


def test_labels_asked_by_sequences_half_and_seed_are_a_verdicts_labels():
    """``activation_labels(model, sequences=, half=, seed=)`` labels the heads on the sequences a
    verdict with the same options reads (the same numbers, not only the same recipe); the defaults
    are the verdict's defaults; bad values, a ``half`` the context cannot take, and ``reps`` given
    beside them are refused by name."""
    import compscope

    small = dict(sequences=6, half=10, seed=3)
    got = activation_labels("induction-2l", progress=False, **small)
    v = compscope.validate("induction-2l", kinds="K", metrics=("identity",), intervention_sequences=2, progress=False,
                           **small)
    for k in LABELS:
        assert torch.equal(got.mean[k], v.labels.mean[k]) and torch.equal(got.error[k], v.labels.error[k])
    assert (got.sequences, got.half, got.seed) == (6, 10, 3)
    runner = runner_for("induction-2l")
    plain = activation_labels(runner, progress=False)
    assert torch.equal(plain.induction, activation_labels(runner, sequences=64, half=32, seed=12345, progress=False).induction)
    for kw, said in ((dict(sequences=0), "sequences=0"), (dict(half=1), "half=1"), (dict(seed=1.5), "seed=1.5"),
                     (dict(half=40), "half=40: sequences \\[t, t\\] of 80 tokens are longer than induction-2l takes")):
        with pytest.raises(OptionError, match=said):
            activation_labels(runner, progress=False, **kw)
    with pytest.raises(OptionError, match="seed: the sequences reps gives are the data"):
        activation_labels(runner, repeats(2, 4, runner.hw.n_vocab, 0), seed=2, progress=False)


def test_labels_on_the_toy_runner_equal_the_toy_labels():
    runner = runner_for("induction-2l", device="cpu")  # the sums compared exactly: one device's kernels
    reps = repeats(24, 16, runner.hw.n_vocab, seed=7)
    got = activation_labels(runner, reps, batch_size=8, progress=False)
    want = label_heads(runner.model, reps.tokens)
    torch.testing.assert_close(got.induction, want.induction, atol=1e-6, rtol=0)
    torch.testing.assert_close(got.previous_token, want.previous, atol=1e-6, rtol=0)
    assert got.batches == 3 and all(got.spread[k].shape == (2, 4) for k in LABELS)
    assert float(got.spread["induction"].max()) > 0  # three batches of different sequences differ
    df = got.to_pandas()
    assert list(df.columns[:6]) == ["layer", "head", *LABELS] and len(df) == 8
    for bad, said in ((reps.tokens[:0], r"shape \(0, 32\)"), (reps.tokens[:, :0], r"shape \(24, 0\)"),
                      (reps.tokens[0], r"shape \(32,\)"), (reps.tokens.tolist(), "a list")):
        with pytest.raises(OptionError, match=r"tokens must be a non-empty \(batch, pos\) tensor, got " + said):
            label_heads(runner.model, bad)
    with pytest.raises(OptionError, match=r"label_heads needs repeated sequences \[t, t\]"):
        label_heads(runner.model, reps.tokens[:, 1:])
    assert list(df.columns[6:]) == [f"{k}_spread" for k in LABELS] + [f"{k}_error" for k in LABELS]
    # the standard error of the mean over the 24 sequences, from each sequence's own labels
    per = torch.stack([activation_labels(runner, Repeats(reps.tokens[i : i + 1], 16, reps.start, 7), 1, False).induction
                       for i in range(24)])
    torch.testing.assert_close(got.error["induction"], per.std(0) / 24**0.5, rtol=1e-9, atol=1e-15)
    # the spread: the standard deviation (no Bessel) of the batches' means, three batches of 8, or two of 12
    for size, got_b in ((8, got), (12, activation_labels(runner, reps, batch_size=12, progress=False))):
        means = per.reshape(24 // size, size, 2, 4).mean(1)
        torch.testing.assert_close(got_b.spread["induction"], means.std(0, correction=0), rtol=1e-9, atol=1e-12)
        assert got_b.batches == 24 // size
    one = activation_labels(runner, Repeats(reps.tokens[:1], 16, reps.start, 7), 1, False)
    assert all(torch.isnan(one.error[k]).all() for k in LABELS)  # one sequence: no spread to judge by
    for n, batches in ((16, 1), (17, 2)):  # 16 sequences a batch by default
        assert activation_labels(runner, Repeats(reps.tokens[:n], 16, reps.start, 7), progress=False).batches == batches
    for bad in (0, -1, 1.5):
        with pytest.raises(OptionError, match="batch_size"):
            activation_labels(runner, reps, batch_size=bad, progress=False)


def test_repeats_shape_seed_and_first_token():
    r = repeats(4, 6, 50, seed=1, bos=49, avoid=(0, 49))
    assert r.tokens.shape == (4, 13) and (r.tokens[:, 0] == 49).all() and r.start == 1
    assert torch.equal(r.tokens[:, 1:7], r.tokens[:, 7:])
    assert not ((r.tokens[:, 1:] == 0) | (r.tokens[:, 1:] == 49)).any()
    assert torch.equal(repeats(4, 6, 50, seed=1).tokens, repeats(4, 6, 50, seed=1).tokens)
    assert not torch.equal(repeats(4, 6, 50, seed=1).tokens, repeats(4, 6, 50, seed=2).tokens)
    with pytest.raises(OptionError, match="half-length"):
        repeats(4, 1, 50, seed=1)
    least = repeats(1, 2, 50, seed=1)  # the least: one sequence, |t| = 2
    assert least.tokens.shape == (1, 4) and least.start == 0 and torch.equal(least.tokens[:, :2], least.tokens[:, 2:])
    with pytest.raises(OptionError, match="n >= 1"):
        repeats(0, 2, 50, seed=1)


def test_repeats_leave_out_every_avoided_id_in_the_vocabulary_and_ignore_the_rest():
    """3,200 draws over the 8 ids left of 10: each is drawn (a miss has chance below 1e-180); the
    first id and the last are avoided, ids outside ``0 … n_vocab − 1`` (a tokenizer's extra ids) ignored."""
    r = repeats(200, 16, 10, seed=3, avoid=(0, 9, 10, 57, -1))
    assert sorted(r.tokens.unique().tolist()) == list(range(1, 9))


def test_the_text_is_the_module_docstring_then_its_own_public_long_docstrings_by_name(monkeypatch):
    """A module made here: its docstring, then those of its public functions and classes defined in
    it, sorted by name, each over 40 characters; private names, shorter docstrings and objects
    imported from elsewhere are left out."""
    import types

    name = "compscope_test_docstring_module"
    mod = types.ModuleType(name, "The module's own docstring.")

    def keep():
        """A public function, its docstring over forty characters."""

    def forty():
        """Exactly forty characters, kept out ....."""

    def forty_one():
        """Forty-one characters long: the least kept"""

    def short():
        """Thirty characters, kept out..."""

    def _private():
        """A private function, its docstring over forty characters."""

    class Kept:
        """A public class defined here, its docstring over forty characters."""

    class Imported:
        """A class from another module, its docstring over forty characters."""

    assert [len(inspect.getdoc(f)) for f in (forty, forty_one, short)] == [40, 41, 30]
    for obj in (keep, forty, forty_one, short, _private, Kept):
        obj.__module__ = name
    for obj in (keep, forty, forty_one, short, _private, Kept, Imported):
        setattr(mod, obj.__name__, obj)
    monkeypatch.setitem(sys.modules, name, mod)
    assert stdlib_text(("compscope_no_such_module", name)) == stdlib_text((name,))  # a module missing is passed over
    assert stdlib_text((name,)) == "\n\n".join([
        "The module's own docstring.",
        "A public class defined here, its docstring over forty characters.",  # "Kept" sorts before "keep"
        "Forty-one characters long: the least kept",
        "A public function, its docstring over forty characters."])


class _Chars:
    """A stand-in tokenizer: one id per byte."""

    def encode(self, text, add_special_tokens=False):
        return list(text.encode())


def test_natural_text_is_the_standard_library_cut_into_seeded_windows():
    from compscope.data.sequences import corpus_text, corpus_words

    text = stdlib_text()
    assert len(text) > 100_000 and "Return" in text
    assert corpus_text() == text and corpus_words() == "standard-library docstrings"  # no corpus given
    a = natural_text(_Chars(), 5, 64, seed=0, bos=1)
    assert a.shape == (5, 64) and (a[:, 0] == 1).all()
    assert torch.equal(a, natural_text(_Chars(), 5, 64, seed=0, bos=1))
    assert not torch.equal(a, natural_text(_Chars(), 5, 64, seed=1, bos=1))
    assert bytes(a[0, 1:].tolist()).decode(errors="replace") in text
    with pytest.raises(OptionError, match="tokenizer"):
        natural_text(None, 5, 64, seed=0)


def test_the_standard_library_text_gives_as_many_windows_as_its_tokens_fill():
    """The text's bytes (the stand-in tokenizer's ids) fill ``⌊bytes / (seq_len − 1)⌋`` windows after a
    first token and ``⌊bytes / seq_len⌋`` without: all of them can be asked for, one more is refused
    by name; the recorded Python version is the interpreter's major.minor.micro (by ``platform``)."""
    import platform

    from compscope.data.sequences import python_version

    n_bytes = len(stdlib_text().encode())
    for bos, body in ((1, 63), (None, 64)):
        every = natural_text(_Chars(), n_bytes // body, 64, seed=0, bos=bos)
        assert every.shape == (n_bytes // body, 64)
        with pytest.raises(OptionError, match=f"the standard-library text gives {n_bytes // body} sequences of 64 "
                                              f"tokens; asked for {n_bytes // body + 1}"):
            natural_text(_Chars(), n_bytes // body + 1, 64, seed=0, bos=bos)
    assert python_version().count(".") == 2 and platform.python_version().startswith(python_version())  # 3.x.y(rc1)


def test_natural_text_with_a_tokenizer_of_ones_own_does_not_need_transformers(monkeypatch):
    """A tokenizer that is not ``transformers``' (here the bytes of the text) cuts the text where
    ``transformers`` cannot be imported (``sys.modules[...] = None`` makes importing it fail)."""
    import sys

    want = natural_text(_Chars(), 3, 16, seed=0, bos=1)
    monkeypatch.setitem(sys.modules, "transformers", None)
    assert torch.equal(natural_text(_Chars(), 3, 16, seed=0, bos=1), want)


def test_a_corpus_of_ones_own_is_cut_into_windows_as_the_docstrings_are(tmp_path):
    """A UTF-8 file's bytes (the stand-in tokenizer's ids) in windows of ``seq_len − 1`` after the
    first token: all of them, in order, when all are asked for; a seeded choice of them otherwise.
    Its name and SHA-256 (by hashlib here) are what results record; an edited file is read again."""
    import hashlib

    from compscope.data.sequences import corpus_words

    body = "Induction heads copy what followed an earlier copy of the current token. " * 8  # 73 × 8 = 584 ASCII bytes
    path = tmp_path / "notes.txt"
    path.write_text(body)
    ids = torch.tensor(list(body.encode()))
    windows = ids[: len(ids) // 15 * 15].view(-1, 15)  # 38 windows of 15 bytes after the first token
    every = natural_text(_Chars(), 38, 16, seed=3, bos=1, corpus=path)
    assert torch.equal(every[:, 1:], windows) and (every[:, 0] == 1).all()
    some = natural_text(_Chars(), 4, 16, seed=3, bos=1, corpus=str(path))
    assert all((windows == row).all(1).any() for row in some[:, 1:])
    assert not torch.equal(some, natural_text(_Chars(), 4, 16, seed=4, bos=1, corpus=path))
    assert corpus_words(path) == f"notes.txt (sha256 {hashlib.sha256(body.encode()).hexdigest()[:12]})"
    assert corpus_words(None) == "standard-library docstrings"
    path.write_text("ünïcode " * 10)  # 10 × 10 bytes: another size: read again, and read as UTF-8
    assert corpus_words(path) == f"notes.txt (sha256 {hashlib.sha256(('ünïcode ' * 10).encode()).hexdigest()[:12]})"
    assert bytes(natural_text(_Chars(), 1, 80, seed=0, corpus=path)[0].tolist()).decode().startswith("ünïcode ünïcode")
    with pytest.raises(OptionError, match=r"notes.txt \(100 tokens\) gives 1 sequences of 80 tokens; asked for 2 "
                                          r"\(ask for fewer or shorter sequences, or give a longer text\)"):
        natural_text(_Chars(), 2, 80, seed=0, corpus=path)
    with pytest.raises(OptionError, match="corpus .*notes.txt: needs the model's tokenizer"):
        natural_text(None, 1, 16, seed=0, corpus=path)


@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=1, max_size=400).filter(str.strip), seq_len=st.integers(4, 24), seed=st.integers(0, 99),
       data=st.data())
def test_a_corpus_gives_distinct_aligned_windows_in_order(tmp_path_factory, text, seq_len, seed, data):
    """Any text: after the first token the sequences are distinct ones of the text's consecutive
    windows of ``seq_len − 1`` byte ids (aligned at multiples of it), in the text's order."""
    path = tmp_path_factory.mktemp("corpus") / "t.txt"
    path.write_text(text, encoding="utf-8")
    ids = list(text.encode())
    body = seq_len - 1
    windows = len(ids) // body
    if windows == 0:
        with pytest.raises(OptionError, match="gives 0 sequences"):
            natural_text(_Chars(), 1, seq_len, seed, bos=0, corpus=path)
        return
    n = data.draw(st.integers(1, windows))
    got = natural_text(_Chars(), n, seq_len, seed, bos=0, corpus=path)
    rest = iter([ids[k * body:(k + 1) * body] for k in range(windows)])
    assert got.shape == (n, seq_len) and (got[:, 0] == 0).all()
    assert all(any(w == row[1:].tolist() for w in rest) for row in got)  # a subsequence of the windows, in order


@pytest.mark.parametrize("content, error", [(None, "no such file"), ("dir", "not a file"),
                                            (b"caf\xe9 au lait", "not UTF-8 text \\(byte 3: invalid continuation byte\\)"),
                                            (b" \n\t\n", "holds no text")])
def test_a_corpus_that_is_no_text_is_refused_by_name(tmp_path, content, error):
    path = tmp_path / "corpus.txt"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(OptionError, match=f"corpus {path}: {error}"):
        natural_text(_Chars(), 1, 8, seed=0, corpus=path)


def test_a_corpus_that_cannot_be_read_is_refused_by_name(tmp_path, monkeypatch):
    """The operating system's refusal (here made by hand: the tests may run as root, whom file modes do
    not stop) is said with the file's name, not raised as an OSError."""
    from compscope.data import sequences

    path = tmp_path / "corpus.txt"
    path.write_text("some text")

    def refused(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(sequences, "_read_corpus", refused)
    with pytest.raises(OptionError, match=f"^corpus {path}: cannot be read \\(Permission denied\\)$"):
        natural_text(_Chars(), 1, 8, seed=0, corpus=path)


# ---------------------------------------------------------------- labels on any tokens (natural text)
def _random_pattern(b: int, h: int, T: int, g: torch.Generator) -> torch.Tensor:
    """(b, h, T, T) causal row-stochastic patterns."""
    logits = torch.randn(b, h, T, T, generator=g, dtype=torch.float64)
    return logits.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -torch.inf).softmax(-1)


def _sums(pattern, tokens, start):
    from compscope.data.head_labels import text_pattern_sums

    return {k: s.sum(0) / n.sum() for k, (s, n) in text_pattern_sums(pattern, tokens, start).items()}


def test_natural_text_from_a_transformers_tokenizer_says_nothing_of_the_texts_length():
    """The whole text is tokenised in one call, longer than any model's context; a ``transformers``
    tokenizer is told not to warn of it (the windows cut from it fit), and gives the same ids. Its
    warning is read from the flag the tokenizer sets when it warns (whatever logging shows)."""
    transformers = pytest.importorskip("transformers")
    import tokenizers

    warned = "sequence-length-is-longer-than-the-specified-maximum"
    words = sorted({w for w in stdlib_text().split()[:2000]})
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])},
                                                          unk_token="[UNK]"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]", model_max_length=32)
    got = natural_text(tok, 3, 16, seed=0)
    assert not tok.deprecation_warnings.get(warned)
    ids = torch.tensor(tok.encode(stdlib_text(), add_special_tokens=False))  # as a user calls it: the warning
    assert tok.deprecation_warnings.get(warned)
    windows = ids[: len(ids) // 16 * 16].view(-1, 16)
    assert got.shape == (3, 16) and all((windows == row).all(1).any() for row in got)


@pytest.mark.parametrize("start", [0, 1])
def test_text_labels_by_hand_on_a_short_sequence(start):
    """``x = [5, 7, 5, 7, 5]``: earlier copies at i = 2 (j = 0), 3 (j = 1), 4 (j = 0, 2); the tokens
    after them (j < i − 1): 1; 2; 1 and 3. With a first token (start 1), j = 0 is not a copy. And ``[5, 5, 7, 5]``,
    where two tokens after copies serve one position."""
    g = torch.Generator().manual_seed(0)
    A = _random_pattern(1, 1, 5, g)
    a = A[0, 0]
    got = _sums(A, torch.tensor([[5, 7, 5, 7, 5]]), start)
    if start == 0:
        dup = (a[2, 0] + a[3, 1] + a[4, 0] + a[4, 2]) / 3
        ind = (a[2, 1] + a[3, 2] + a[4, 1] + a[4, 3]) / 3
    else:
        dup = (a[3, 1] + a[4, 2]) / 2
        ind = (a[3, 2] + a[4, 3]) / 2
    assert float(got["duplicate_token"]) == pytest.approx(float(dup), rel=1e-12)
    assert float(got["induction"]) == pytest.approx(float(ind), rel=1e-12)
    assert float(got["previous_token"]) == pytest.approx(float(sum(a[i, i - 1] for i in range(1, 5)) / 4), rel=1e-12)
    assert float(got["sink"]) == pytest.approx(float(a[1:, 0].mean()), rel=1e-12)
    # x = [5, 5, 7, 5]: earlier copies at i = 1 (j = 0) and 3 (j = 0, 1); the tokens after them (j < i - 1) at
    # i = 3 alone, 1 and 2: one position (not two, as there are two tokens after copies)
    got = _sums(A[:, :, :4, :4], torch.tensor([[5, 5, 7, 5]]), start)
    dup, ind = ((a[1, 0] + a[3, 0] + a[3, 1]) / 2, a[3, 1] + a[3, 2]) if start == 0 else (a[3, 1], a[3, 2])
    assert float(got["duplicate_token"]) == pytest.approx(float(dup), rel=1e-12)
    assert float(got["induction"]) == pytest.approx(float(ind), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(half=st.integers(2, 9), start=st.integers(0, 1), b=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_text_labels_on_repeats_of_distinct_tokens_are_the_repeats_labels(half, start, b, seed):
    """On ``[first] t t`` with no token repeated inside ``t``, every label of any pattern equals
    :func:`pattern_labels`' (the copies are exactly the second half's earlier occurrences)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.stack([torch.randperm(40, generator=g)[:half] + 1 for _ in range(b)])
    tokens = torch.cat(([torch.zeros(b, 1, dtype=torch.long)] if start else []) + [t, t], dim=1)
    A = _random_pattern(b, 2, tokens.shape[1], g)
    got = _sums(A, tokens, start)
    want = {k: v.mean(0) for k, v in pattern_labels(A, half, start).items()}
    for k in LABELS:
        torch.testing.assert_close(got[k], want[k], rtol=1e-12, atol=1e-12)


def test_text_labels_on_the_toy_equal_a_count_over_its_own_cache_whatever_the_batches():
    """The mean is over every position that has a copy, not over batches: batches of 2 and of 16
    give the same; each label equals a loop over the toy's own cached patterns, and its standard
    error the ratio estimator's over that loop's per-sequence sums (numpy); the previous-token label,
    with as many positions in every sequence, has the per-sequence means' ``std / √B``."""
    from compscope.data.head_labels import text_labels

    runner = runner_for("induction-2l", device="cpu")  # exact sums: the CPU (a GPU's is tests/test_device.py's)
    tokens = torch.randint(0, runner.hw.n_vocab, (6, 20), generator=torch.Generator().manual_seed(3))
    one = text_labels(runner, tokens, batch_size=16, progress=False)
    many = text_labels(runner, tokens, batch_size=2, progress=False)
    two = text_labels(runner, tokens, batch_size=3, progress=False)
    for k in LABELS:
        torch.testing.assert_close(one.mean[k], many.mean[k], rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(one.error[k], many.error[k], rtol=1e-10, atol=1e-12)
    assert many.batches == 3 and float(many.spread["induction"].max()) > 0 and one.batches == 1
    cache: dict = {}
    with torch.no_grad():
        runner.model(tokens, cache=cache)
    n_ind = n_dup = 0
    for l in range(2):
        p = cache[f"pattern.{l}"].double().numpy()
        S = {"induction": np.zeros((6, 4)), "duplicate_token": np.zeros((6, 4))}
        n = {"induction": np.zeros(6), "duplicate_token": np.zeros(6)}
        for s in range(6):
            x = tokens[s].tolist()
            for i in range(20):
                after = {j + 1 for j in range(i - 1) if x[j] == x[i]}
                same = [j for j in range(i) if x[j] == x[i]]
                for name, ks in (("induction", after), ("duplicate_token", same)):
                    if ks:
                        S[name][s] += sum(p[s, :, i, k] for k in ks)
                        n[name][s] += 1
        for name in S:
            m = S[name].sum(0) / n[name].sum()
            se = np.sqrt(6 / 5 * ((S[name] - m * n[name][:, None]) ** 2).sum(0)) / n[name].sum()
            np.testing.assert_allclose(one.mean[name][l].numpy(), m, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(one.error[name][l].numpy(), se, rtol=1e-6, atol=1e-7)
            # many's spread: the standard deviation (no Bessel) of its three batches' ratios of sums
            batch_means = [S[name][b : b + 2].sum(0) / n[name][b : b + 2].sum() for b in (0, 2, 4)]
            np.testing.assert_allclose(many.spread[name][l].numpy(), np.std(batch_means, 0), rtol=1e-6, atol=1e-9)
        prev = np.array([[p[s, h, range(1, 20), range(19)].mean() for h in range(4)] for s in range(6)])
        np.testing.assert_allclose(one.error["previous_token"][l].numpy(), prev.std(0, ddof=1) / np.sqrt(6), rtol=1e-6)
        for got_b, batches in ((many, 3), (two, 2)):
            np.testing.assert_allclose(got_b.spread["previous_token"][l].numpy(),
                                       prev.reshape(batches, -1, 4).mean(1).std(0), rtol=1e-6, atol=1e-9)
        n_ind, n_dup = n["induction"].sum(), n["duplicate_token"].sum()
    assert one.positions["induction"] == n_ind and one.positions["duplicate_token"] == n_dup
    assert float(one.error["induction"].min()) > 0
    df = one.to_pandas()
    assert list(df.columns[:6]) == ["layer", "head", *LABELS] and df.attrs["induction"] == n_ind
    assert list(df.columns[-4:]) == [f"{k}_error" for k in LABELS]
    single = text_labels(runner, tokens[:1], progress=False)
    assert all(bool(single.error[k].isnan().all()) for k in LABELS)


def test_text_labels_take_16_sequences_a_batch_by_default_and_one_at_the_least():
    from compscope.data.head_labels import text_labels

    runner = runner_for("induction-2l", device="cpu")
    tokens = torch.randint(0, runner.hw.n_vocab, (17, 6), generator=torch.Generator().manual_seed(5))
    assert text_labels(runner, tokens[:16], progress=False).batches == 1
    default = text_labels(runner, tokens, progress=False)
    single = text_labels(runner, tokens, batch_size=1, progress=False)
    assert default.batches == 2 and single.batches == 17
    # the same means whatever the batches, to float32's rounding: the model runs in float32, whose matrix products
    # may round differently by batch shape (on some CPUs 3.6e-7 apart for batches of 1 and 16; equal on others)
    for k in LABELS:
        torch.testing.assert_close(single.mean[k], default.mean[k], rtol=1e-5, atol=1e-6)


def test_text_labels_refuse_bad_tokens():
    from compscope.data.head_labels import text_labels

    for bad in (torch.zeros(5, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long), [[1, 2, 3]]):
        with pytest.raises(OptionError, match="text labels need"):
            text_labels("induction-2l", bad, progress=False)
    with pytest.raises(OptionError, match="batch_size"):
        text_labels("induction-2l", torch.zeros(2, 4, dtype=torch.long), batch_size=0, progress=False)


def test_text_labels_count_copies_after_the_first_token_where_the_model_has_one(monkeypatch):
    """The first position is a copy only for a model without a first token of its own (no BOS): in
    ``3 5 3 7 5`` position 2 (a copy of 3) and 4 (of 5) have earlier copies, both with a token after an
    earlier copy but the one before them; with a BOS the leading 3 is that token, and only position 4
    counts. Three positions suffice; the words name the given tokens' shape."""
    from compscope.data.head_labels import text_labels

    runner = runner_for("induction-2l", device="cpu")
    tokens = torch.tensor([[3, 5, 3, 7, 5], [1, 2, 4, 6, 8]])
    plain = text_labels(runner, tokens, progress=False)
    assert plain.positions["duplicate_token"] == plain.positions["induction"] == 2
    assert plain.data == "2 given sequences of 5 tokens"
    monkeypatch.setattr(runner, "bos", 3)
    first = text_labels(runner, tokens, progress=False)
    assert first.positions["duplicate_token"] == first.positions["induction"] == 1
    torch.testing.assert_close(first.previous_token, plain.previous_token, rtol=0, atol=0)  # (the same patterns)
    assert text_labels(runner, tokens[:, :3], progress=False).positions["previous_token"] == 2 * 2


@pytest.mark.parametrize("which", ["repeats", "text"])
def test_the_label_passes_count_sequences_on_a_bar_shown_by_default(bars, which):
    """Each pass's bar counts sequences, 5 of them in batches of 2 (not positions), reaches its total,
    and is on unless ``progress=False``."""
    from compscope.data.head_labels import text_labels

    runner = runner_for("induction-2l", device="cpu", progress=False)
    tokens = torch.randint(0, runner.hw.n_vocab, (5, 12), generator=torch.Generator().manual_seed(1))
    run = ((lambda **kw: activation_labels(runner, sequences=5, half=6, batch_size=2, **kw)) if which == "repeats"
           else (lambda **kw: text_labels(runner, tokens, batch_size=2, **kw)))
    run()
    assert [(b.total, b.n, b.enabled) for b in bars] == [(5, 5, True)]
    run(progress=False)
    assert not bars[-1].enabled


def test_the_labels_repr_names_their_data_and_top_heads():
    labels = activation_labels(runner_for("induction-2l", device="cpu"), sequences=4, half=6, progress=False)
    text = repr(labels)
    assert text.startswith("ActivationLabels(2 layers x 4 heads; 4 sequences [t, t], |t| = 6, seed 12345; "
                           "top induction ")
    for name in ("induction", "previous_token"):
        values, order = labels.mean[name].flatten().sort(descending=True)
        three = ", ".join(f"{int(i) // 4}.{int(i) % 4} {float(v):.2f}" for v, i in zip(values[:3], order[:3]))
        assert f"top {name} {three}" + (")" if name == "previous_token" else ";") in text  # three heads, largest first


def test_more_sequences_than_memory_holds_are_refused_by_their_number(monkeypatch, capsys):
    """Token ids (int64) for ``n`` sequences ``[bos] t t`` (and the toy's ``[t, t]``) beyond the
    free memory are refused before torch is asked for them, by their number."""
    from compscope.cli.main import main
    from compscope.core import memory
    from compscope.toy.data import repeated_random

    monkeypatch.setattr(memory, "free_memory", lambda device: 1000)
    assert repeats(2, 4, 100, 0, bos=1).tokens.shape == (2, 9)  # 2 x (3 x 4 + 1) x 8 = 208 bytes
    assert repeated_random(2, 4, 100, 0).shape == (2, 8)  # 3 x 2 x 4 x 8 = 192 bytes
    with pytest.raises(OptionError, match=r"10 sequences \[bos\] t t with \|t\| = 4 \(token ids, int64\) take about "
                                          r"9.69e-07 GiB, more than the 9.31e-07 GiB free on cpu; ask for fewer"):
        repeats(10, 4, 100, 0)  # 10 x 13 x 8 = 1040 bytes
    with pytest.raises(OptionError, match=r"6 sequences \[t, t\] with \|t\| = 7 \(token ids, int64\) take about"):
        repeated_random(6, 7, 100, 0)  # 3 x 6 x 7 x 8 = 1008 bytes
    assert main(["intervene", "--kinds", "K", "--sequences", "100000000"]) == 2
    assert "100,000,000 sequences [t, t] with |t| = 32 (token ids, int64)" in capsys.readouterr().err


def test_a_heads_error_is_a_float_or_none_and_printed_to_two_digits():
    from compscope.data.head_labels import error_text, label_error

    error = torch.tensor([[0.012345, float("nan")], [float("inf"), 2.0]])
    assert label_error(error, 0, 0) == pytest.approx(0.012345) and isinstance(label_error(error, 0, 0), float)
    assert label_error(error, 0, 1) is None and label_error(error, 1, 0) is None and label_error(None, 0, 0) is None
    assert label_error(error, 1, 1) == 2.0
    assert [error_text(error, 0, 0), error_text(error, 0, 1), error_text(None, 1, 1), error_text(error, 1, 1)] == [
        " ± 0.012", "", "", " ± 2"]


def test_the_ratio_estimators_standard_error_by_hand():
    """``√(B/(B−1) Σ_s (S_s − m n_s)²) / Σ_s n_s``, ``m = ΣS / Σn``: worked out by hand for two sequences of one
    position each (the sample standard deviation over √2) and for three of unequal counts; NaN with one sequence
    or no positions."""
    from compscope.data.head_labels import ratio_error

    two = ratio_error(torch.tensor([[1.0], [3.0]], dtype=torch.float64), torch.tensor([1, 1]))
    assert two.tolist() == [1.0]  # m = 2; √(2 · (1 + 1)) / 2 = 1: √2 (Bessel) / √2
    # S = 2, 3, 10 over n = 1, 2, 5: m = 15/8; residuals 1/8, -3/4, 5/8; squares 1/64 + 36/64 + 25/64 = 62/64
    three = ratio_error(torch.tensor([2.0, 3.0, 10.0], dtype=torch.float64), torch.tensor([1, 2, 5]))
    assert float(three) == pytest.approx((3 / 2 * 62 / 64) ** 0.5 / 8, rel=1e-12)
    assert ratio_error(torch.tensor([[5.0, 1.0]]), torch.tensor([3])).isnan().all()  # one sequence
    assert ratio_error(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long)).isnan().all()  # no positions


class _LossModel(torch.nn.Module):
    """Logits that put ``a_i = i`` on the token that follows position ``i`` and 0 on the others (vocabulary
    ``V``), so that predicting token ``i + 1`` costs ``log(e^i + V − 1) − i``; one layer's pattern, uniform."""

    def __init__(self, V):
        super().__init__()
        self.V, self.anchor = V, torch.nn.Parameter(torch.zeros(()))

    def forward(self, tokens, cache):
        b, T = tokens.shape
        logits = torch.zeros(b, T, self.V)
        logits[:, :-1].scatter_(-1, tokens[:, 1:, None], torch.arange(T - 1.0)[None, :, None].expand(b, -1, 1))
        cache["pattern.0"] = torch.tril(torch.ones(T, T)).div(torch.arange(1.0, T + 1)[:, None])[None, None]
        return logits


def test_in_context_losses_are_of_the_targets_in_each_copy_by_hand():
    """``loss_first``: the mean loss of targets ``1 … n−1`` (positions ``0 … n−2`` predict them), ``loss_second``:
    of ``n+1 … 2n−1`` (positions ``n … 2n−2``), the target ``n`` (the second copy's first token, which nothing
    before predicts) in neither; ``icl_drop`` their difference."""
    import math

    V, half = 7, 4
    t = torch.tensor([[1, 4, 2, 6]])
    got = label_heads(_LossModel(V), torch.cat([t, t], 1))
    cost = [math.log(math.exp(i) + V - 1) - i for i in range(2 * half - 1)]  # of target i + 1, from position i
    first, second = sum(cost[0:3]) / 3, sum(cost[4:7]) / 3
    assert (got.loss_first, got.loss_second) == (pytest.approx(first, rel=1e-6), pytest.approx(second, rel=1e-6))
    assert got.icl_drop == pytest.approx(first - second, rel=1e-6) and got.half == half
    assert got.previous.tolist() == [[pytest.approx(sum(1 / (i + 1) for i in range(1, 8)) / 7)]]  # uniform rows
