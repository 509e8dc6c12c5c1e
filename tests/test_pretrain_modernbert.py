"""`minibert pretrain --architecture modernbert`: the course's recipe builds the 2024 encoder, and what it
ships is a ModernBERT that transformers reads and agrees with."""
import json
import os

import pytest
import torch
import transformers

import minibert
from minibert.cli import main
from minibert.recipes import PretrainSettings

pytestmark = pytest.mark.skipif(not os.environ.get("MINIBERT_DATA_MIRROR") and not os.environ.get("CI"),
                                reason="needs the data mirror (MINIBERT_DATA_MIRROR)")
transformers.logging.set_verbosity_error()


def run(out, *extra):
    return main(["pretrain", "--architecture", "modernbert", "--out", str(out), "--vocab-size", "600",
                 "--max-seq-len", "32", "--batch-size", "8", "--corpus", "gutenberg/blake-poems.txt", *extra])


def test_a_modernbert_run_exports_a_folder_transformers_reads_and_agrees_with(tmp_path, eval_text, capsys):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "4", "--local-attention", "8", "--mlm-probability", "0.3",
               "--eval-corpus", eval_text) == 0
    recipe = json.loads((tmp_path / "run" / "recipe.json").read_text())
    assert recipe["args"]["objective"] == "none"  # ModernBERT's default: MLM alone, on packed sentences
    assert {"eval_mlm_accuracy", "eval_mlm_loss"} <= set(recipe["final"]) and "eval_nsp_accuracy" not in recipe["final"]
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "model"), "--dtype", "fp32"]) == 0
    ours = minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "model").eval()
    config = ours.config
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (2, 128, 2)  # bert-tiny's
    assert config.intermediate_size == round(8 * 128 / 3) and config.local_attention == 8  # BERT's FFN parameters
    tokenizer = minibert.BertTokenizer.from_pretrained(tmp_path / "model")
    assert (config.vocab_size, config.pad_token_id, config.cls_token_id, config.sep_token_id) == \
        (len(tokenizer), tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id)

    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "model").eval()
    assert type(theirs).__name__ == "ModernBertForMaskedLM"
    # a padded batch longer than the window (8): both libraries, the same logits at every real token
    batch = tokenizer(["tyger tyger burning bright in the forests of the night what immortal hand or eye",
                       "the lamb"], padding=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] > 8
    with torch.no_grad():
        mine = ours(**batch).logits  # the BertTokenizer's token_type_ids go in as they are
        reference = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(mine[real], reference[real], atol=1e-4, rtol=0)

    card = (tmp_path / "model" / "README.md").read_text()
    assert "A ModernBERT at bert-tiny's size" in card and "alone, on packed full sentences (ModernBERT" in card
    assert "--architecture modernbert" in card and "--local-attention 8" in card and "NSP" not in card
    assert "(minibert or transformers)" in card
    held_out = json.loads((tmp_path / "model" / "held_out.json").read_text())
    assert f"| {held_out['eval_mlm_accuracy']:.1%} | {held_out['eval_mlm_top5']:.1%} |" in card

    # int8 to ship small (minibert reads it), and back to fp16, which transformers reads again
    assert main(["export", str(tmp_path / "model"), "--out", str(tmp_path / "int8"), "--dtype", "int8"]) == 0
    assert main(["export", str(tmp_path / "int8"), "--out", str(tmp_path / "fp16"), "--dtype", "fp16"]) == 0
    small = minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "int8").eval()
    again = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "fp16", dtype=torch.float32).eval()
    with torch.no_grad():
        rounded = again(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        torch.testing.assert_close(small(**batch).logits[real], rounded[real], atol=5e-2, rtol=0)

    # going on from the exported folder: the same architecture, named; another is refused with the flag to give
    assert main(["pretrain", "--architecture", "modernbert", "--init-from", str(tmp_path / "model"), "--steps", "2",
                 "--max-seq-len", "32", "--batch-size", "8", "--corpus", "gutenberg/blake-poems.txt",
                 "--eval-corpus", "--out", str(tmp_path / "more")]) == 0
    assert minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "more" / "step-000002").config.local_attention == 8
    capsys.readouterr()
    assert main(["pretrain", "--init-from", str(tmp_path / "model"), "--steps", "2", "--eval-corpus",
                 "--out", str(tmp_path / "wrong")]) == 2
    assert "holds a modernbert model" in capsys.readouterr().err and not (tmp_path / "wrong").exists()


@pytest.mark.parametrize("bad, message", [
    (dict(preset="albert-base"), "is ALBERT's"),
    (dict(pre_layer_norm=True), "pre-LN already"),
    (dict(random_positions=256), "has none"),
    (dict(local_attention=1), "at least 2 tokens"),
    (dict(architecture="electra"), "architecture must be one of bert, modernbert"),
    (dict(architecture="bert", local_attention=64), "add --architecture modernbert"),
])
def test_what_modernbert_cannot_do_is_refused_with_its_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        PretrainSettings(out="runs/x", **{"architecture": "modernbert", **bad})


def test_a_modernbert_with_bert_s_pair_head_trains_both_tasks_and_transformers_reads_its_masked_lm(tmp_path, eval_text):
    """A second stage on sentence pairs, from an MLM-only ModernBERT: the encoder and MLM head kept, the pair head
    fresh; the card scores NSP; transformers reads the masked LM and leaves the pair head out."""
    torch.set_num_threads(1)
    assert run(tmp_path / "s1", "--steps", "2", "--max-seq-len", "16", "--eval-corpus", eval_text) == 0
    assert main(["export", str(tmp_path / "s1"), "--out", str(tmp_path / "s1-model"), "--dtype", "fp32"]) == 0
    assert main(["pretrain", "--architecture", "modernbert", "--init-from", str(tmp_path / "s1-model"), "--objective",
                 "nsp", "--local-attention", "8", "--steps", "3", "--max-seq-len", "32", "--batch-size", "8", "--corpus",
                 "gutenberg/blake-poems.txt", "gutenberg/shakespeare-caesar.txt", "--eval-corpus", eval_text,
                 "--out", str(tmp_path / "s2")]) == 0
    recipe = json.loads((tmp_path / "s2" / "recipe.json").read_text())
    assert {"eval_mlm_accuracy", "eval_nsp_accuracy"} <= set(recipe["final"])
    first = minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "s1-model")
    assert main(["export", str(tmp_path / "s2"), "--out", str(tmp_path / "model"), "--dtype", "fp32"]) == 0
    ours = minibert.ModernBertForPreTraining.from_pretrained(tmp_path / "model").eval()
    assert not ours.loading_info["missing_keys"] and not ours.loading_info["unexpected_keys"]
    assert (first.config.local_attention, ours.config.local_attention) == (128, 8)  # a window given: the new one
    assert not torch.equal(ours.model.embeddings.tok_embeddings.weight, first.model.embeddings.tok_embeddings.weight)
    card = (tmp_path / "model" / "README.md").read_text()
    assert "NSP accuracy" in card and "NSP, no blanks" in card
    assert "A ModernBERT at bert-tiny's size pre-trained from scratch by the course's own recipe in two runs" in card
    assert "transformers' `AutoModelForMaskedLM` reads the masked LM" in card
    assert 0 <= json.loads((tmp_path / "model" / "held_out.json").read_text())["eval_nsp_accuracy_unmasked"] <= 1

    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "model").eval()
    tokenizer = minibert.BertTokenizer.from_pretrained(tmp_path / "model")
    pair = tokenizer(["the tyger burns"], ["in the forests of the night"], return_tensors="pt")
    with torch.no_grad():
        mine = ours(**pair, next_sentence_label=torch.tensor([0]))
        torch.testing.assert_close(mine.prediction_logits, theirs(input_ids=pair["input_ids"]).logits, atol=1e-4, rtol=0)
        masked_lm = minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "model").eval()
        torch.testing.assert_close(masked_lm(**pair).logits, mine.prediction_logits, atol=0, rtol=0)
    assert mine.seq_relationship_logits.shape == (1, 2)


def test_the_objective_s_default_follows_the_architecture():
    assert PretrainSettings(out="runs/x").objective == "nsp"
    assert PretrainSettings(out="runs/x", architecture="modernbert").objective == "none"


def test_resume_goes_on_as_the_run_s_architecture_and_refuses_another(tmp_path, capsys):
    torch.set_num_threads(1)
    assert run(tmp_path / "run", "--steps", "3", "--time-budget", "1e-9", "--eval-corpus") == 0
    capsys.readouterr()
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--architecture", "bert", "--objective", "none",
                 "--resume"]) == 2
    assert "--architecture 'bert' (the run: 'modernbert')" in capsys.readouterr().err
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--resume"]) == 0  # its flags from its recipe.json
    assert minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "run" / "step-000003").config.hidden_size == 128
