"""Both sides of a blank (minibert.analysis.context_sides): what each mask hides, that hiding by the mask
really keeps a side's words from the blank, and the interval against scipy's."""
import pytest
import torch
from scipy.stats import binomtest

from minibert import BertConfig, BertForMaskedLM
from minibert.analysis.context_sides import SideResult, choose_blanks, fill_from_sides, guesses_from_sides, side_mask


def test_each_side_keeps_cls_the_blank_and_its_own_words_and_never_the_padding():
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    blank = torch.tensor([3, 2])
    assert side_mask(mask, blank, "left").tolist() == [[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]]
    assert side_mask(mask, blank, "right").tolist() == [[1, 0, 0, 1, 1, 1], [1, 0, 1, 1, 0, 0]]
    assert side_mask(mask, blank, "both").tolist() == mask.tolist()
    with pytest.raises(ValueError, match="side must be one of"):
        side_mask(mask, blank, "up")


def test_a_hidden_side_cannot_reach_the_blank_in_any_layer():
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=16)).eval()
    ids = torch.randint(5, 40, (1, 9))
    other = ids.clone()
    other[0, 6:] = torch.randint(5, 40, (3,))   # other words right of the blank at 4
    mask, blank = torch.ones_like(ids), torch.tensor([4])

    def at_blank(x, side):
        return model(input_ids=x, attention_mask=side_mask(mask, blank, side)).logits[0, 4]

    assert torch.allclose(at_blank(ids, "left"), at_blank(other, "left"), atol=1e-6)
    assert not torch.allclose(at_blank(ids, "both"), at_blank(other, "both"), atol=1e-3)


def test_the_interval_is_wilsons():
    result = SideResult("both", [True] * 37 + [False] * 63)
    expected = binomtest(37, 100).proportion_ci(confidence_level=0.95, method="wilson")
    assert result.accuracy == 0.37
    assert result.interval == pytest.approx((expected.low, expected.high), abs=1e-4)


def test_blanks_are_single_pieces_with_words_on_both_sides_and_the_scoring_runs(tmp_path):
    from minibert import BertTokenizer

    sentences = ["the cat sat on the mat because it was tired of the dog .", "too short .",
                 "a dog ran across the green field to fetch the red ball quickly ."]
    tokenizer = BertTokenizer.train(sentences * 20, vocab_size=120)
    blanks = choose_blanks(sentences, tokenizer, n=5, min_side=3)
    assert len(blanks) == 2 and all(3 <= b.index < len(b.words) - 3 for b in blanks)
    assert all(b.words[b.index] in tokenizer.get_vocab() for b in blanks)
    assert [b.text("[MASK]").count("[MASK]") for b in blanks] == [1, 1]
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32, max_position_embeddings=32))
    results = fill_from_sides(model, tokenizer, blanks, batch_size=1)
    assert set(results) == {"both", "left", "right"} and all(len(r.correct) == 2 for r in results.values())
    guesses = guesses_from_sides(model, tokenizer, "the [MASK] sat on the mat .", k=2)
    assert set(guesses) == {"both", "left", "right"} and all(len(g) == 2 for g in guesses.values())
    with pytest.raises(ValueError, match="exactly one"):
        guesses_from_sides(model, tokenizer, "the cat sat .")
