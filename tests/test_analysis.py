"""minibert.analysis: the CoNLL-U and GAP readers on edge cases and the real files, word attention and
head scoring on hand-made examples with hand-computed answers, and a real MiniLM on UD English EWT."""
from __future__ import annotations

import collections
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from offline import MINILM
from torch import nn

from minibert import BertConfig, BertModel, data
from minibert.analysis import (
    coreference_accuracy,
    dependency_accuracy,
    load_gap,
    load_ud_english_ewt,
    offset_accuracy,
    parse_conllu,
    piece_words,
    predict_heads,
    random_like,
    read_conllu,
    read_gap,
    word_attention,
)
from minibert.analysis.coreference import head_word_span
from minibert.analysis.gap import GapExample


@pytest.fixture(scope="session")
def data_home(tmp_path_factory):
    """A fresh data folder, filled from the mirror (or the internet) by the loaders themselves."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIBERT_DATA_DIR", str(tmp_path_factory.mktemp("data")))
        yield data.data_dir()


@pytest.fixture(scope="session")
def ewt_dev(data_home):
    return load_ud_english_ewt("dev")


@pytest.fixture(scope="session")
def minilm():
    return BertModel.from_pretrained(MINILM)


# --- CoNLL-U ------------------------------------------------------------------------------------

EDGE_CASES = """\
# newdoc id = doc1
# sent_id = s1
# text = I didn't go.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t4:nsubj\t_
2-3\tdidn't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdid\tdo\tAUX\tVBD\t_\t4\taux\t4:aux\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t0:root\tSpaceAfter=No
4.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t4:conj\tCopyOf=4
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_

# sent_id = s2
1\tIt\tit\tPRON\tPRP\t_\t3\tnsubj:pass\t3:nsubj:pass\t_
2\twas\tbe\tAUX\tVBD\t_\t3\taux:pass\t3:aux:pass\t_
3\tmade\tmake\tVERB\tVBN\t_\t0\troot\t0:root\t_
"""


def test_conllu_keeps_syntactic_words_and_skips_empty_nodes():
    first, second = parse_conllu(EDGE_CASES)  # the last sentence has no blank line after it
    assert first.sent_id == "s1" and first.text == "I didn't go."
    assert first.forms == ["I", "did", "n't", "go", "."]  # the words of the tree, not "didn't", not 4.1
    assert first.multiword_tokens == [(2, 3, "didn't")]
    assert [(w.id, w.head, w.upos) for w in first.words] == [(1, 4, "PRON"), (2, 4, "AUX"), (3, 4, "PART"),
                                                              (4, 0, "VERB"), (5, 4, "PUNCT")]
    assert second.sent_id == "s2" and second.text is None
    assert [(w.deprel, w.relation) for w in second.words] == [("nsubj:pass", "nsubj"), ("aux:pass", "aux"),
                                                               ("root", "root")]


@pytest.mark.parametrize("text, message", [
    ("ID\tText\tPronoun\n1\tA text\the\n", "3 tab-separated column.*Is this a CoNLL-U file"),
    ("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n3\tb\tb\tX\tX\t_\t1\tdep\t_\t_\n", "word ID '3' where 2 was expected"),
    ("1\ta\ta\tX\tX\t_\t_\t_\t_\t_\n", "HEAD '_'.*dependency tree"),
    ("# just a comment\n\n", "holds no CoNLL-U sentences"),
])
def test_conllu_errors_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_conllu(text)


def test_ud_english_ewt_dev_matches_the_manifest(ewt_dev, data_home):
    """2,001 sentences, 25,147 words; obj 1,211, det 1,841, nsubj 2,137 count universal relations
    (det includes det:predet, nsubj includes nsubj:pass and nsubj:outer)."""
    assert len(ewt_dev) == 2001 and sum(len(s.words) for s in ewt_dev) == 25147
    relations = collections.Counter(w.relation for s in ewt_dev for w in s.words)
    deprels = collections.Counter(w.deprel for s in ewt_dev for w in s.words)
    assert (relations["obj"], relations["det"], relations["nsubj"]) == (1211, 1841, 2137)
    assert (deprels["det"], deprels["nsubj"], deprels["nsubj:pass"]) == (1817, 1958, 154)
    assert relations["root"] == 2001  # one root per tree
    assert sum(len(s.multiword_tokens) for s in ewt_dev) == 359
    assert all(s.sent_id and s.text for s in ewt_dev)
    assert read_conllu(data_home / "ud_english_ewt" / "en_ewt-ud-dev.conllu")[5] == ewt_dev[5]


def test_a_gap_file_is_not_conllu(data_home):
    with pytest.raises(ValueError, match="line 1: 11 tab-separated column.*CoNLL-U"):
        read_conllu(data.ensure("gap_coreference") / "gap-validation.tsv")


# --- word attention ---------------------------------------------------------------------------

def test_word_attention_sums_to_and_averages_from_the_pieces():
    """[CLS] play ##ing now [SEP]: "playing" is pieces 1 and 2 (hand-computed below)."""
    pieces = torch.tensor([[.2, .2, .2, .2, .2],
                           [.1, .0, .5, .3, .1],
                           [.1, .3, .0, .5, .1],
                           [.0, .4, .4, .1, .1],
                           [.5, .0, .0, .0, .5]])
    short = torch.tensor([[.5, .5, 0, 0, 0], [.3, .7, 0, 0, 0]] + [[0.] * 5] * 3)  # [CLS] [SEP] + padding
    attention = torch.stack([pieces, short]).view(2, 1, 1, 5, 5).expand(2, 3, 4, 5, 5)  # (B, L, H, T, T)
    words = torch.tensor([[0, 1, 1, 2, 3], [0, 1, -1, -1, -1]])
    expected = torch.tensor([[.2, .4, .2, .2],
                             [.1, .4, .4, .1],  # mean of the rows of play and ##ing, summed into columns
                             [.0, .8, .1, .1],
                             [.5, .0, .0, .5]])
    out = word_attention(attention, words)
    assert out.shape == (2, 3, 4, 4, 4)
    torch.testing.assert_close(out[0, 2, 3], expected)
    torch.testing.assert_close(out[0].sum(-1), torch.ones(3, 4, 4))
    torch.testing.assert_close(out[1, 0, 0], torch.tensor([[.5, .5, 0, 0], [.3, .7, 0, 0], [0.] * 4, [0.] * 4]))


def test_piece_words_maps_pieces_to_conllu_ids(tokenizer):
    encoding = tokenizer([["the", "embeddings"], ["hi"]], is_split_into_words=True, padding=True,
                         return_tensors="pt")
    assert encoding.tokens(0) == ["[CLS]", "the", "em", "##bed", "##ding", "##s", "[SEP]"]
    assert piece_words(encoding).tolist() == [[0, 1, 2, 2, 2, 2, 3], [0, 1, 2, -1, -1, -1, -1]]


# --- dependency heads on a hand-made sentence ---------------------------------------------------
# "the dog chased a cat": the -det-> dog -nsubj-> chased (root) <-obj- cat <-det- a
SENTENCE = parse_conllu("1\tthe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
                        "3\tchased\t_\tVERB\t_\t_\t0\troot\t_\t_\n4\ta\t_\tDET\t_\t_\t5\tdet\t_\t_\n"
                        "5\tcat\t_\tNOUN\t_\t_\t3\tobj\t_\t_\n")[0]
UNIFORM = [1 / 7] * 7
# Head 0: each dependent's row peaks on its head once [CLS] (row 2), [SEP] (row 1) and the word
# itself (row 5) are set aside. Read by columns, only "the" is right (its column peaks at dog).
DEPENDENT_TO_HEAD = [UNIFORM,
                     [.05, 0, .30, .05, .05, .05, .50],
                     [.50, .05, 0, .25, .05, .10, .05],
                     [.50, .02, .08, 0, .06, .20, .14],
                     [.31, .04, .05, .10, 0, .45, .05],
                     [.10, .03, .07, .30, .05, .40, .05],
                     UNIFORM]
# Head 1: each head's row peaks on a dependent, so every column peaks at the head; no row peaks on its head.
HEAD_TO_DEPENDENT = [UNIFORM,
                     [.40, 0, .10, .20, .10, .10, .10],
                     [.30, .40, 0, .10, .05, .05, .10],
                     [.20, .05, .31, 0, .05, .29, .10],
                     [.40, .05, .05, .21, 0, .19, .10],
                     [.30, .06, .04, .10, .40, 0, .10],
                     UNIFORM]


class FixedAttention(nn.Module):
    """A stand-in model whose attention is given, to score known maps through the real pipeline."""

    def __init__(self, maps, vocab_size=30522, returns=...):
        super().__init__()
        maps = torch.tensor(maps)  # (heads, T, T)
        self.maps, self.returns = maps, returns  # returns: what to give as .attentions instead of the maps
        self.config = BertConfig(vocab_size=vocab_size, hidden_size=8 * maps.size(0), num_hidden_layers=1,
                                 num_attention_heads=maps.size(0), intermediate_size=8)
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, output_attentions=False):
        assert input_ids.shape[1] == self.maps.size(-1) and output_attentions
        maps = self.maps.expand(input_ids.size(0), -1, -1, -1)
        return SimpleNamespace(attentions=(maps,) if self.returns is ... else self.returns)


def test_predict_heads_in_both_directions():
    attention = torch.tensor([DEPENDENT_TO_HEAD, HEAD_TO_DEPENDENT])[None]  # (B=1, heads=2, W, W)
    predicted = predict_heads(attention, torch.tensor([5]))
    assert predicted["dep->head"][0, :, 1:6].tolist() == [[2, 3, 5, 5, 3], [3, 1, 2, 3, 4]]
    assert predicted["head->dep"][0, :, 1:6].tolist() == [[2, 1, 5, 3, 4], [2, 3, 4, 5, 3]]


def test_dependency_accuracy_and_offset_baseline_by_hand(tokenizer):
    result = dependency_accuracy(FixedAttention([DEPENDENT_TO_HEAD, HEAD_TO_DEPENDENT]), tokenizer,
                                 [SENTENCE, SENTENCE], progress=False)
    acc = {d: {r: a[0].tolist() for r, a in by_relation.items()} for d, by_relation in result.accuracy.items()}
    assert acc["dep->head"] == {"det": [1, 0], "nsubj": [1, 0], "obj": [1, 0], "all": [1, 0]}
    assert acc["head->dep"] == {"det": [.5, 1], "nsubj": [0, 1], "obj": [0, 1], "all": [.25, 1]}
    assert result.counts == {"all": 8, "det": 4, "nsubj": 2, "obj": 2} and result.skipped == 0
    # head - dependent: the +1, dog +1, a +1, cat -2
    assert result.offsets == offset_accuracy([SENTENCE]) == {
        "det": {1: 1.0}, "nsubj": {1: 1.0}, "obj": {-2: 1.0}, "all": {-2: .25, 1: .75}}
    assert result.best_offset("all") == (1, .75)
    assert result.best_head("nsubj") in [(1.0, 0, 0, "dep->head"), (1.0, 0, 1, "head->dep")]


# --- coreference on GAP -------------------------------------------------------------------------

def test_gap_development_offsets_land_on_the_names(data_home):
    examples = load_gap("development")
    assert len(examples) == 2000
    for e in examples:
        assert e.text[e.pronoun_offset:].startswith(e.pronoun)
        assert e.text[e.a_offset:].startswith(e.a) and e.text[e.b_offset:].startswith(e.b)
    assert collections.Counter(e.antecedent for e in examples) == {"A": 874, "B": 925, None: 201}
    first = examples[0]
    assert (first.id, first.pronoun, first.pronoun_offset, first.a, first.a_coref, first.b, first.b_coref) == (
        "development-1", "her", 274, "Cheryl Cassidy", True, "Pauline", False)


def test_gap_errors(tmp_path, data_home):
    with pytest.raises(ValueError, match="is not a GAP TSV"):
        read_gap(data_home / "ud_english_ewt" / "en_ewt-ud-dev.conllu")
    lines = (data.ensure("gap_coreference") / "gap-validation.tsv").read_text(encoding="utf-8").splitlines()
    row = lines[1].split("\t")
    row[3] = str(int(row[3]) + 1)  # the pronoun's offset, one character off
    (tmp_path / "bad.tsv").write_text("\n".join([lines[0], "\t".join(row)]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: the text at offset"):
        read_gap(tmp_path / "bad.tsv")


def test_head_word_of_a_name_is_its_last_word():
    assert head_word_span("Kathleen Nott", 10) == (19, 23)
    assert head_word_span("Pauline", 207) == (207, 214)
    for name, head in [("Jack *", "Jack"), ("Matthew 12:40", "Matthew"), ("Smith,", "Smith"), ("J.R.R. Tolkien", "Tolkien"),
                       ("Sinéad O'Connor", "O'Connor"), ("Jean-Luc Picard.", "Picard"), ("1984", "1984")]:
        start, end = head_word_span(name, 100)
        assert name[start - 100:end - 100] == head, name


def test_coreference_accuracy_and_baselines_by_hand(tokenizer):
    """[CLS] anna met beth . she smiled . [SEP]: head 0 sends "she" to Beth, head 1 to Anna."""
    example = GapExample("t-1", "Anna met Beth. She smiled.", "She", 15, "Anna", 0, True, "Beth", 9, False, "")
    neither = GapExample("t-2", "Anna met Beth. She smiled.", "She", 15, "Anna", 0, False, "Beth", 9, False, "")
    uniform = [[1 / 9] * 9] * 9
    to_beth, to_anna = [.1, .1, .05, .5, .05, 0, .1, .05, .05], [.1, .5, .05, .1, .05, 0, .1, .05, .05]
    maps = [uniform[:5] + [to_beth] + uniform[6:], uniform[:5] + [to_anna] + uniform[6:]]
    result = coreference_accuracy(FixedAttention(maps), tokenizer, [example, neither], progress=False)
    assert result.accuracy.tolist() == [[0.0, 1.0]]
    assert result.baselines == {"nearest": 0.0, "first": 1.0}  # Beth is nearer to "She", Anna comes first
    assert result.count == 1 and result.skipped == {"no single antecedent": 1, "too long": 0}
    assert result.best_head() == (1.0, 0, 1)


# --- errors that say what to do -------------------------------------------------------------------

@pytest.mark.parametrize("returns", [None, (), (None,)])  # () is what transformers' sdpa attention gives
def test_a_model_without_attentions_gets_a_clear_error(tokenizer, returns):
    with pytest.raises(ValueError, match="returned no attention probabilities.*attn_implementation='eager'"):
        dependency_accuracy(FixedAttention([DEPENDENT_TO_HEAD], returns=returns), tokenizer, [SENTENCE],
                            progress=False)


def test_bad_models_get_clear_errors(tokenizer):
    with pytest.raises(ValueError, match="different checkpoints.*from_pretrained"):
        dependency_accuracy(FixedAttention([DEPENDENT_TO_HEAD], vocab_size=1000), tokenizer, [SENTENCE],
                            progress=False)
    with pytest.raises(TypeError, match="expected a BERT model"):
        dependency_accuracy(nn.Linear(2, 2), tokenizer, [SENTENCE], progress=False)


# --- a real model -------------------------------------------------------------------------------

def test_minilm_det_head_beats_the_best_offset_and_the_random_control(minilm, tokenizer, ewt_dev):
    """First 200 dev sentences, 364 det words: head 3-9 (dep->head) 78.3% vs offset +1 55.5%;
    the best head of a randomly initialised MiniLM gets 8.8%."""
    sentences = ewt_dev[:200]
    trained = {r["relation"]: r for r in dependency_accuracy(minilm, tokenizer, sentences, progress=False).table()}
    assert trained["det"]["offset"] == 1
    assert trained["det"]["accuracy"] > trained["det"]["offset_accuracy"] + 0.15
    assert trained["det"]["head"] == "3-9" and trained["det"]["direction"] == "dep->head"
    assert trained["all"]["accuracy"] > trained["all"]["offset_accuracy"]
    control = dependency_accuracy(random_like(minilm), tokenizer, sentences, progress=False)
    assert control.best_head("det")[0] < trained["det"]["offset_accuracy"]


def test_batching_and_skipping_do_not_change_the_numbers(minilm, tokenizer, ewt_dev):
    """Padding in a batch of 7 gives the counts of one sentence at a time; long sentences are skipped."""
    sentences = ewt_dev[20:41]
    one = dependency_accuracy(minilm, tokenizer, sentences, batch_size=1, progress=False)
    seven = dependency_accuracy(minilm, tokenizer, sentences, batch_size=7, progress=False)
    for direction in one.accuracy:
        np.testing.assert_allclose(one.accuracy[direction]["all"], seven.accuracy[direction]["all"])
    lengths = [len(tokenizer(s.forms, is_split_into_words=True)["input_ids"]) for s in sentences]
    short = dependency_accuracy(minilm, tokenizer, sentences, max_length=20, progress=False)
    assert short.skipped == sum(n > 20 for n in lengths) > 0
    assert short.counts["all"] == sum(1 for s, n in zip(sentences, lengths) if n <= 20 for w in s.words if w.head)


def test_a_sentence_with_a_word_that_has_no_piece_is_skipped(minilm, tokenizer):
    erased = parse_conllu("1\ta\t_\tX\t_\t_\t0\troot\t_\t_\n2\t\u200b\t_\tX\t_\t_\t1\tdep\t_\t_\n")
    result = dependency_accuracy(minilm, tokenizer, [SENTENCE, *erased], progress=False)
    assert result.skipped == 1 and result.counts["all"] == 4


def test_random_like_is_a_fresh_model_of_the_same_shape(minilm):
    state = torch.random.get_rng_state()
    control, again = random_like(minilm, seed=1), random_like(minilm, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's random stream is untouched
    assert type(control) is BertModel and control.config == minilm.config and not control.training
    q = "encoder.layer.0.attention.self.query.weight"
    assert torch.equal(control.state_dict()[q], again.state_dict()[q])
    assert not torch.allclose(control.state_dict()[q], minilm.state_dict()[q])
    assert control.state_dict()[q].std().item() == pytest.approx(0.02, rel=0.05)
