"""Named entities (CoNLL-2003, WNUT-17): IOB1 to IOB2, entity-level scores by hand, the loaders against the
data manifest's counts, tags on first pieces and back on words, and a tiny random BERT through the registry."""
from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from offline import module_fixtures
from torch import nn

from minibert import BertConfig, BertForTokenClassification
from minibert.tasks import get_task, ner, tagging

one_thread, data_home = module_fixtures("conll2003/eng.train")


# --- IOB1 -> IOB2 and reading the files -----------------------------------------------------------------------

@pytest.mark.parametrize("iob1, iob2", [
    (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),     # every entity gets its B-
    (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),               # B-: a second PER right after one
    (["I-ORG", "I-LOC", "I-LOC"], ["B-ORG", "B-LOC", "I-LOC"]),               # a new type begins a new entity
    (["O", "I-MISC", "I-MISC", "O", "I-MISC"], ["O", "B-MISC", "I-MISC", "O", "B-MISC"]),
    (["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),                       # IOB2 already: unchanged
])
def test_iob1_to_iob2(iob1, iob2):
    assert ner.iob1_to_iob2(iob1) == iob2
    assert ner.iob1_to_iob2(iob2) == iob2


def test_read_conll_skips_docstart_and_takes_whitespace_lines_as_breaks(tmp_path):
    conll = tmp_path / "eng.x"
    conll.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n\n"
                     "Peter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\n\n\n"
                     "-DOCSTART- -X- -X- O\n\nBonn NNP I-NP I-LOC\n")
    assert ner.read_conll(conll, " ", 4) == [(["EU", "rejects"], ["I-ORG", "O"]),
                                             (["Peter", "Blackburn"], ["I-PER", "I-PER"]), (["Bonn"], ["I-LOC"])]
    wnut = tmp_path / "wnut"
    wnut.write_text("@paulwalk\tO\nIt\tO\n\t\nEmpire\tB-location\nState\tI-location\n\n")  # a lone tab ends one
    assert ner.read_conll(wnut, "\t", 2) == [(["@paulwalk", "It"], ["O", "O"]),
                                             (["Empire", "State"], ["B-location", "I-location"])]
    conll.write_text("EU NNP I-ORG\n")
    with pytest.raises(ValueError, match=r"eng.x, line 1: 3 fields where 4 were expected; fetch it again"):
        ner.read_conll(conll, " ", 4)


# --- entity-level scores by hand ------------------------------------------------------------------------------

SENTENCES = [["John", "Smith", "lives", "in", "New", "York"], ["The", "European", "Union", "met", "in", "Bonn"]]
GOLD = [["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC"], ["O", "B-ORG", "I-ORG", "O", "O", "B-LOC"]]
PREDICTED = [["B-PER", "I-PER", "O", "O", "B-ORG", "I-ORG"],   # John Smith right; New York typed ORG: wrong
             ["B-MISC", "B-ORG", "O", "O", "O", "B-LOC"]]      # European alone: partial, wrong; The: spurious


def test_a_wrong_type_or_a_partial_span_is_an_error():
    # gold entities 4, predicted 5, right 2 (John Smith, Bonn): P = 2/5, R = 2/4, F1 = 2PR / (P + R) = 4/9
    scores = ner.entity_scores(GOLD, PREDICTED)
    assert scores == pytest.approx({"precision": 2 / 5, "recall": 2 / 4, "f1": 4 / 9})
    assert ner.entity_scores(GOLD, GOLD) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    by_type = ner.scores_by_type(GOLD, PREDICTED)
    assert by_type["PER"]["f1"] == 1.0 and by_type["LOC"] == pytest.approx(
        {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2})
    assert by_type["ORG"]["f1"] == 0.0 and by_type["MISC"]["precision"] == 0.0


def test_an_i_tag_after_o_opens_an_entity_as_in_conlleval():
    assert ner.entities(["O", "I-PER", "I-PER", "O"]) == [("PER", 1, 2)]
    assert ner.entity_scores([["O", "B-PER", "I-PER"]], [["O", "I-PER", "I-PER"]])["f1"] == 1.0


def test_errors_list_missed_and_spurious_entities_per_sentence():
    found = ner.errors(SENTENCES, GOLD, PREDICTED)
    assert [f["index"] for f in found] == [0, 1]
    assert found[0]["text"] == "John Smith lives in New York"
    assert found[0]["missed"] == [("New York", "LOC")] and found[0]["spurious"] == [("New York", "ORG")]
    assert found[1]["gold"] == [("European Union", "ORG"), ("Bonn", "LOC")]
    assert found[1]["missed"] == [("European Union", "ORG")]
    assert found[1]["spurious"] == [("The", "MISC"), ("European", "ORG")]
    assert ner.errors(SENTENCES, GOLD, GOLD) == []


# --- the real files -------------------------------------------------------------------------------------------

# sentences, tokens, entities by type: the data manifest's figures (CoNLL-2003's match its paper)
COUNTS = {("conll2003", "train"): (14_041, 203_621, {"LOC": 7_140, "PER": 6_600, "ORG": 6_321, "MISC": 3_438}),
          ("conll2003", "dev"): (3_250, 51_362, {"PER": 1_842, "LOC": 1_837, "ORG": 1_341, "MISC": 922}),
          ("conll2003", "test"): (3_453, 46_435, {"LOC": 1_668, "ORG": 1_661, "PER": 1_617, "MISC": 702}),
          ("wnut17", "train"): (3_394, 62_730, {"person": 660, "location": 548, "group": 264, "corporation": 221,
                                                "product": 142, "creative-work": 140}),
          ("wnut17", "dev"): (1_009, 15_733, {"person": 470, "product": 114, "creative-work": 105, "location": 74,
                                              "group": 39, "corporation": 34}),
          ("wnut17", "test"): (1_287, 23_394, {"person": 429, "group": 165, "location": 150, "creative-work": 142,
                                               "product": 127, "corporation": 66})}


@pytest.mark.parametrize("dataset, split", list(COUNTS))
def test_every_split_has_the_manifests_sentences_words_and_entities(data_home, dataset, split):
    loaded = ner.load_ner(dataset, split)
    names = ner.TAGS[dataset]
    assert loaded.features["tags"].feature.names == list(names)
    rows = loaded[:]
    tags = [[names[t] for t in row] for row in rows["tags"]]
    sentences, tokens, entities = COUNTS[dataset, split]
    assert len(loaded) == sentences and sum(map(len, rows["words"])) == tokens
    assert Counter(kind for row in tags for kind, *_ in ner.entities(row)) == entities
    assert all(not (t.startswith("I-") and (i == 0 or row[i - 1][2:] != t[2:]))  # IOB2: every I- continues
               for row in tags for i, t in enumerate(row))
    assert "-DOCSTART-" not in {w for words in rows["words"] for w in words}


def test_conll_test_starts_after_its_docstart(data_home):
    first = ner.load_ner("conll2003", "test")[0]
    assert first["words"] == ["SOCCER", "-", "JAPAN", "GET", "LUCKY", "WIN", ",", "CHINA", "IN", "SURPRISE",
                              "DEFEAT", "."]
    assert [ner.TAGS["conll2003"][t] for t in first["tags"]][:3] == ["O", "O", "B-LOC"]
    with pytest.raises(ValueError, match="split must be one of train, dev, test"):
        ner.load_ner("conll2003", "testa")


# --- first pieces and back to words ---------------------------------------------------------------------------

class PieceModel(nn.Module):
    """Tags 1 on a piece that starts a word and 2 on a ``##`` piece: a word's tag shows which piece was read."""

    def __init__(self, tokenizer, max_position_embeddings=512):
        super().__init__()
        self.config = SimpleNamespace(max_position_embeddings=max_position_embeddings, num_labels=3)
        self.anchor = nn.Parameter(torch.zeros(1))  # where the model lives
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        self.continues = torch.tensor([token.startswith("##") for token, _ in vocab])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        return SimpleNamespace(logits=nn.functional.one_hot(1 + self.continues[input_ids].long(), 3).float())


def test_a_multi_piece_word_is_tagged_on_its_first_piece(tokenizer):
    words = ["Gutenberg", "unbelievably", "tokenization", "works"]
    assert len(tokenizer.tokenize("Gutenberg")) > 1 and len(tokenizer.tokenize("tokenization")) > 1
    import datasets
    dataset = datasets.Dataset.from_dict({"words": [words], "tags": [[1, 2, 3, 4]]})
    encoded = tagging.encode(dataset, tokenizer)[0]
    pieces = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert [p for p, label in zip(pieces, encoded["labels"]) if label != -100] == [
        tokenizer.tokenize(w)[0] for w in words]
    assert [label for label in encoded["labels"] if label != -100] == [1, 2, 3, 4]
    model = PieceModel(tokenizer)
    assert ner.word_tags(model, tokenizer, [words], ("O", "B-X", "I-X"), progress=False) == [["B-X"] * 4]


def test_words_without_a_piece_of_their_own_are_predicted_o(tokenizer):
    model = PieceModel(tokenizer, max_position_embeddings=6)  # [CLS] + 4 pieces + [SEP]
    sentences = [["cat", "\ufe0f", "dog"], ["a", "b", "c", "d", "e", "f"]]  # U+FE0F has no piece
    assert ner.word_tags(model, tokenizer, sentences, ("O", "B-X", "I-X"), progress=False) == [
        ["B-X", "O", "B-X"], ["B-X"] * 4 + ["O", "O"]]  # the words cut off at the model's length too


# --- a tiny random BERT end to end ----------------------------------------------------------------------------

def tiny_model(tokenizer, num_labels):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=256, num_labels=num_labels)
    return BertForTokenClassification(config)


def test_conll_through_the_registry(data_home, tokenizer):
    task = get_task("ner")
    model = tiny_model(tokenizer, task.num_labels)
    data = task.build_data(tokenizer, model, max_length=32, train_examples=8, eval_examples=8, seed=0)
    assert data.description == {"split": "dev", "train": "CoNLL-2003 train: 8 of 14,041 sentences",
                                "eval": "CoNLL-2003 dev: 8 of 3,250 sentences"}
    batch = data.collate([data.train[i] for i in range(4)])
    assert torch.isfinite(model(**batch).loss)
    predictions, metrics = data.evaluate(model, progress=False)
    held_out = data.examples[1]
    assert [len(p) for p in predictions] == [len(words) for words in held_out["words"]]
    assert {t for p in predictions for t in p} <= set(ner.TAGS["conll2003"])
    assert set(metrics) == {"precision", "recall", "f1"} and all(0 <= v <= 1 for v in metrics.values())
    test = task.build_data(tokenizer, model, max_length=32, eval_examples=4, training=False, split="test")
    assert test.description["eval"] == "CoNLL-2003 test: 4 of 3,453 sentences"
    tags = ner.tag(model, tokenizer, [["Peter", "Blackburn", "visited", "Gutenberg"], ["yes"]])
    assert [len(t) for t in tags] == [4, 1] and set(tags[0] + tags[1]) <= set(ner.TAGS["conll2003"])


def test_wnut17_through_the_registry(data_home, tokenizer):
    task = get_task("wnut17")
    assert task.num_labels == 13 and task.paper is None  # not in the paper
    data = task.build_data(tokenizer, tiny_model(tokenizer, 13), max_length=32, eval_examples=4, training=False,
                           split="test")
    assert data.description["eval"] == "WNUT-17 test: 4 of 1,287 sentences"
    predictions, metrics = data.evaluate(tiny_model(tokenizer, 13), progress=False)
    assert len(predictions) == 4 and 0 <= metrics["f1"] <= 1


def test_feature_based_entity_f1_of_frozen_minilm_beats_the_majority_tag(data_home, tokenizer):
    """Table 7 on NER: linear probes on frozen features, scored by seqeval like the fine-tuned model."""
    from offline import MINILM

    from minibert import BertModel
    model = BertModel.from_pretrained(MINILM)
    train = ner.load_ner("conll2003", "train").select(range(150))
    test = ner.load_ner("conll2003", "dev").select(range(100))
    variants = ("embeddings", "concat_last_four_hidden")
    scores = tagging.feature_based(model, tokenizer, train, test, variants=variants, score="entity_f1")
    assert set(scores) == {*variants, "majority_baseline"} and all(0 <= v <= 1 for v in scores.values())
    assert scores["concat_last_four_hidden"] > scores["majority_baseline"] + 0.1, scores  # context finds entities
    with pytest.raises(ValueError, match="score must be one of"):
        tagging.feature_based(model, tokenizer, train, test, score="f1")
