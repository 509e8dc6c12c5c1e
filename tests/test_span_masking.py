"""SpanBERT's span masking: runs of whole words, lengths as the paper draws them, 15% of the tokens,
one corruption per span; and the setting reaches a pre-training run."""
import pytest
import torch
from offline import fresh_data_fixture, mirror_with

from minibert.pretraining import MLMMasking, load_documents
from minibert.pretraining.span_masking import span_length_probabilities
from minibert.recipes import PretrainSettings

data_home = fresh_data_fixture()  # loaders copy from the mirror into a fresh folder, never the checkout's data/


@pytest.fixture(scope="module")
def batch(tokenizer):
    """Real text in long sequences (SpanBERT's were 512 tokens: in a short one the 15% budget cuts the
    spans short), as a padded batch, and each token's word (None for [CLS], [SEP], [PAD])."""
    mirror_with("gutenberg/chesterton-brown.txt")
    sentences = load_documents("gutenberg/chesterton-brown.txt")[0][:4000]
    passages = [" ".join(sentences[i:i + 10]) for i in range(0, len(sentences), 10)]
    encoding = tokenizer(passages, truncation=True, max_length=256, padding=True, return_tensors="pt")
    return encoding["input_ids"], [encoding.word_ids(i) for i in range(len(passages))]


def spans_of(labels_row, word_ids) -> list[list[int]]:
    """The chosen words of one sequence, grouped into runs of consecutive words."""
    chosen = sorted({word_ids[t] for t in range(len(word_ids)) if labels_row[t] != -100})
    runs = []
    for w in chosen:
        if runs and runs[-1][-1] == w - 1:
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def test_the_length_distribution_is_the_papers():
    p = span_length_probabilities()
    assert p.shape == (10,) and abs(float(p.sum()) - 1) < 1e-12
    mean = float((torch.arange(1, 11) * p).sum())
    assert abs(mean - 3.8) < 0.01, "SpanBERT: geometric, p = 0.2, cut at 10 words: 3.8 words on average"
    assert all(p[i] / p[i + 1] == pytest.approx(1 / 0.8) for i in range(9))


def test_spans_are_whole_words_in_runs_and_hide_fifteen_percent(tokenizer, batch):
    ids, words = batch
    corrupted, labels = MLMMasking(tokenizer, spans=True)(ids, torch.Generator().manual_seed(0))
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
    assert (labels[special] == -100).all(), "[CLS], [SEP] and padding are never chosen"
    ordinary = int((~special).sum())
    hidden = int((labels != -100).sum())
    assert 0.13 < hidden / ordinary < 0.16, f"{hidden / ordinary:.3f} of the tokens hidden; the budget is 15%"
    lengths = []
    for row, word_ids in zip(labels, words):
        for run in spans_of(row, word_ids):
            for w in run:  # every piece of a chosen word is chosen
                assert all(row[t] != -100 for t in range(len(word_ids)) if word_ids[t] == w)
        lengths += [len(run) for run in spans_of(row, word_ids)]
    mean_run = sum(lengths) / len(lengths)
    # adjacent spans merge into longer runs and the budget trims the last one: near the paper's 3.8
    assert 2.8 < mean_run < 5, f"runs of {mean_run:.2f} words on average"
    _, token_labels = MLMMasking(tokenizer)(ids, torch.Generator().manual_seed(0))
    token_runs = [len(r) for row, w in zip(token_labels, words) for r in spans_of(row, w)]
    assert sum(token_runs) / len(token_runs) < 1.3, "token-level masking scatters its choices"


def test_each_span_is_corrupted_as_a_whole(tokenizer, batch):
    ids, words = batch
    corrupted, labels = MLMMasking(tokenizer, spans=True)(ids, torch.Generator().manual_seed(1))
    kinds = {"mask": 0, "kept": 0, "random": 0, "mixed": 0}
    for b, (row, word_ids) in enumerate(zip(labels, words)):
        for run in spans_of(row, word_ids):
            positions = [t for t in range(len(word_ids)) if word_ids[t] in run and row[t] != -100]
            masked = [bool(corrupted[b, t] == tokenizer.mask_token_id) for t in positions]
            kept = [bool(corrupted[b, t] == ids[b, t]) for t in positions]
            if all(masked):
                kinds["mask"] += 1
            elif all(kept):
                kinds["kept"] += 1
            elif not any(masked):
                kinds["random"] += 1
            else:
                kinds["mixed"] += 1  # two spans side by side may be corrupted differently
    spans = sum(kinds.values())
    assert kinds["mixed"] < 0.1 * spans
    assert 0.72 < kinds["mask"] / spans < 0.86 and kinds["kept"] > 0.05 * spans and kinds["random"] > 0.05 * spans


def test_replays_with_the_same_generator_and_has_something_to_predict_everywhere(tokenizer):
    masking = MLMMasking(tokenizer, spans=True)
    short = torch.tensor([[tokenizer.cls_token_id, 2023, tokenizer.sep_token_id, 0]] * 50)
    _, labels = masking(short, torch.Generator().manual_seed(0))
    assert (labels[:, 1] == 2023).all() and (labels[:, [0, 2, 3]] == -100).all()
    ids = torch.randint(1000, 5000, (8, 40))
    first = masking(ids, torch.Generator().manual_seed(3))
    again = masking(ids, torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(first, again))


@pytest.mark.parametrize("kwargs, message", [
    (dict(whole_word=True, spans=True), "choose whole_word or spans, not both"),
    (dict(spans="yes"), "spans must be True or False, got 'yes'"),
    (dict(whole_word=1), "whole_word must be True or False, got 1"),
])
def test_bad_settings_are_refused(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MLMMasking(tokenizer, **kwargs)


def test_a_pretraining_run_can_ask_for_spans():
    assert PretrainSettings(span_masking=True).span_masking
    with pytest.raises(ValueError, match="not both"):
        PretrainSettings(span_masking=True, whole_word=True)
