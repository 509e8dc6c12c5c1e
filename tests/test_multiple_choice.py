"""The multiple-choice head (SWAG, §4.4) against transformers' `BertForMultipleChoice`, which nobody here wrote:
checkpoints load both ways and give the same logits, hidden states, attentions and loss to 1e-5; and the
course's zero-shot chooser, NSP's layer read as one vector V, scores each choice with NSP's own logits."""
import pytest
import torch
import transformers

import minibert
from minibert.tasks.multiple_choice import (
    ChoiceQuestion,
    choose,
    encode_choices,
    from_next_sentence_head,
    next_sentence_questions,
)

CONFIGS = {
    "small": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=128, max_position_embeddings=64),
    "odd": dict(vocab_size=503, hidden_size=96, num_hidden_layers=3, num_attention_heads=6,
                intermediate_size=200, max_position_embeddings=40, hidden_act="gelu_new", layer_norm_eps=1e-7),
}
ATOL = 1e-5


def choice_batch(vocab_size, seed=0, batch=2, choices=3, length=17):
    """(B, k, T) pairs context [SEP] choice, of different lengths (some padded), two segments each."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (batch, choices, length), generator=g)
    types = torch.zeros_like(ids)
    types[..., 9:] = 1
    mask = torch.ones_like(ids)
    for b, c, end in [(0, 1, 12), (1, 0, 14), (1, 2, 10)]:
        mask[b, c, end:] = ids[b, c, end:] = types[b, c, end:] = 0
    labels = torch.randint(0, choices, (batch,), generator=g)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types), labels


def compare(ours, theirs):
    assert ours.logits.shape == theirs.logits.shape
    torch.testing.assert_close(ours.logits, theirs.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(ours.loss, theirs.loss, atol=ATOL, rtol=0)
    for name in ("hidden_states", "attentions"):
        for a, b in zip(getattr(ours, name), getattr(theirs, name), strict=True):
            torch.testing.assert_close(a, b, atol=ATOL, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("size", CONFIGS)
def test_a_transformers_checkpoint_loads_and_scores_the_same(size, tmp_path):
    torch.manual_seed(0)
    theirs = transformers.BertForMultipleChoice(
        transformers.BertConfig(**CONFIGS[size], attn_implementation="eager")).eval()
    theirs.save_pretrained(tmp_path)
    ours = minibert.BertForMultipleChoice.from_pretrained(tmp_path).eval()
    assert ours.loading_info["missing_keys"] == [] and ours.loading_info["unexpected_keys"] == []
    assert ours.classifier.out_features == 1, "one score per choice, whatever the number of choices"
    batch, labels = choice_batch(CONFIGS[size]["vocab_size"])
    with torch.no_grad():
        compare(ours(**batch, labels=labels, output_attentions=True, output_hidden_states=True),
                theirs(**batch, labels=labels, output_attentions=True, output_hidden_states=True))


@pytest.mark.parametrize("size", CONFIGS)
def test_a_minibert_checkpoint_loads_in_transformers_and_scores_the_same(size, tmp_path):
    torch.manual_seed(1)
    ours = minibert.BertForMultipleChoice(minibert.BertConfig(**CONFIGS[size])).eval()
    ours.save_pretrained(tmp_path)
    theirs, info = transformers.BertForMultipleChoice.from_pretrained(
        tmp_path, attn_implementation="eager", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    batch, labels = choice_batch(CONFIGS[size]["vocab_size"], seed=1, choices=4)
    with torch.no_grad():
        compare(ours(**batch, labels=labels, output_attentions=True, output_hidden_states=True),
                theirs.eval()(**batch, labels=labels, output_attentions=True, output_hidden_states=True))


def test_a_choice_scores_the_same_wherever_it_is_listed():
    """V·C_i depends on choice i alone: permuting the choices permutes the scores, and the loss is the
    cross-entropy over the choices."""
    torch.manual_seed(2)
    model = minibert.BertForMultipleChoice(minibert.BertConfig(**CONFIGS["small"])).eval()
    batch, labels = choice_batch(1000, seed=2, choices=4)
    permutation = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        out = model(**batch, labels=labels)
        permuted = model(**{k: v[:, permutation] for k, v in batch.items()})
    torch.testing.assert_close(permuted.logits, out.logits[:, permutation], atol=ATOL, rtol=0)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))


# --- NSP's layer as a multiple-choice layer ------------------------------------------------------------------
def test_the_nsp_chooser_scores_each_choice_with_isnext_minus_notnext(tmp_path):
    """Checked through transformers' own BertForPreTraining: its NSP logits, IsNext minus NotNext, are the
    chooser's scores, pair by pair."""
    torch.manual_seed(3)
    theirs = transformers.BertForPreTraining(
        transformers.BertConfig(**CONFIGS["odd"], attn_implementation="eager")).eval()
    theirs.save_pretrained(tmp_path)
    chooser = from_next_sentence_head(minibert.BertForPreTraining.from_pretrained(tmp_path))
    batch, _ = choice_batch(CONFIGS["odd"]["vocab_size"], seed=3, choices=4)
    with torch.no_grad():
        scores = chooser(**batch).logits                                                      # (B, k)
        nsp = theirs(**{k: v.flatten(0, 1) for k, v in batch.items()}).seq_relationship_logits  # (B·k, 2)
    torch.testing.assert_close(scores, (nsp[:, 0] - nsp[:, 1]).view(2, 4), atol=ATOL, rtol=0)


# --- SWAG-like questions from documents ----------------------------------------------------------------------
def documents(n_docs=6, n_sentences=12):
    return [[f"article {d} sentence {i} has enough words ." for i in range(n_sentences)] for d in range(n_docs)]


@pytest.mark.parametrize("distractors", ["other articles", "same article"])
def test_the_right_choice_is_the_next_sentence_and_the_others_are_not(distractors):
    docs = documents()
    questions = next_sentence_questions(docs, 40, distractors=distractors, seed=0)
    for q in questions:
        d, i = (int(w) for w in q.context.split()[1:4:2])
        assert q.choices[q.label] == docs[d][i + 1]
        for k, wrong in enumerate(q.choices):
            if k == q.label:
                continue
            d_w, i_w = (int(w) for w in wrong.split()[1:4:2])
            if distractors == "other articles":
                assert d_w != d
            else:
                assert d_w == d and abs(i_w - i) >= 3, "on topic, but not a neighbour of the context"
        assert len(set(q.choices)) == 4
    assert len({q.label for q in questions}) == 4, "the right choice is not always in the same place"


def test_both_kinds_of_distractor_ask_the_same_contexts():
    """So that their accuracies are a paired comparison; a seed gives the same questions again."""
    docs = documents()
    other = next_sentence_questions(docs, 20, seed=5)
    same = next_sentence_questions(docs, 20, seed=5, distractors="same article")
    assert [(q.context, q.label, q.choices[q.label]) for q in other] == \
           [(q.context, q.label, q.choices[q.label]) for q in same]
    assert next_sentence_questions(docs, 20, seed=5) == other
    assert next_sentence_questions(docs, 20, seed=6) != other


def test_short_and_long_sentences_are_not_asked():
    docs = [["too short .", *d[1:]] for d in documents()]
    questions = next_sentence_questions(docs, 30, seed=0, distractors="same article")
    assert all("too short ." not in (q.context, *q.choices) for q in questions)
    with pytest.raises(ValueError, match="usable contexts"):
        next_sentence_questions(documents(n_docs=2, n_sentences=4), 10)
    with pytest.raises(ValueError, match="distractors"):
        next_sentence_questions(documents(), 5, distractors="random")


def test_choices_are_encoded_as_pairs_and_chosen_in_order(tokenizer):
    questions = [ChoiceQuestion("the cat sat on the mat .", ["it slept .", "stocks fell sharply today .", "no ."], 0),
                 ChoiceQuestion("he opened the door .", ["a", "he walked in and sat down by the fire .", "b"], 1)]
    batch = encode_choices(questions, tokenizer)
    assert batch["input_ids"].shape[:2] == (2, 3) and batch["labels"].tolist() == [0, 1]
    want = tokenizer("he opened the door .", "he walked in and sat down by the fire .")
    n = len(want["input_ids"])
    assert batch["input_ids"][1, 1, :n].tolist() == want["input_ids"]
    assert batch["token_type_ids"][1, 1, :n].tolist() == want["token_type_ids"]
    assert batch["attention_mask"][1, 1].sum() == n
    torch.manual_seed(4)
    model = minibert.BertForMultipleChoice(minibert.BertConfig.from_preset("bert-tiny", vocab_size=30522)).eval()
    scores = choose(model, tokenizer, questions, batch_size=1)
    with torch.no_grad():
        one = model(**{k: v for k, v in encode_choices(questions[1:], tokenizer).items() if k != "labels"}).logits
    torch.testing.assert_close(scores[1], one[0], atol=ATOL, rtol=0)
