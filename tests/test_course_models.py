"""Notebook 04's model loader: the course's folder loaded or made, any other folder or Hub id loaded as
transformers wrote it, and models without pre-training heads (or names that are no model) refused."""
import json
import re

import pytest
import torch
import transformers
from offline import one_torch_thread

import minibert
from minibert.recipes import PretrainSettings, course_models
from minibert.recipes.course_models import load_or_pretrain, pretrain_stages

TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with one_torch_thread():
        yield


def test_a_transformers_pretraining_folder_loads_with_both_heads(tmp_path, tokenizer):
    torch.manual_seed(0)
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**TINY)).eval()
    theirs.save_pretrained(tmp_path / "google-style")  # the layout of bert-base-uncased on the Hub
    ours = load_or_pretrain(str(tmp_path / "google-style"))
    batch = tokenizer(["paris is the [MASK] of france ."], ["it is a big city ."], return_tensors="pt")
    with torch.no_grad():
        expected, got = theirs(**batch), ours(**batch)
    torch.testing.assert_close(got.prediction_logits, expected.prediction_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got.seq_relationship_logits, expected.seq_relationship_logits, atol=1e-4, rtol=1e-4)


def test_a_model_without_pretraining_heads_is_refused(tmp_path):
    transformers.BertModel(transformers.BertConfig(**TINY)).save_pretrained(tmp_path / "encoder")
    with pytest.raises(ValueError, match="no pre-trained masked-LM or next-sentence head"):
        load_or_pretrain(str(tmp_path / "encoder"))
    with pytest.raises(ValueError, match="no pre-trained masked-LM head.*bert-base-uncased"):  # MiniLM, from the Hub cache
        load_or_pretrain("sentence-transformers/all-MiniLM-L6-v2", minibert.BertForMaskedLM)


@pytest.fixture
def text(tmp_path):
    folder = tmp_path / "text"
    folder.mkdir()
    for name, body in [("a.txt", "The river rose. Farmers moved. The bridge held. The town was glad."),
                       ("b.txt", "The mill stood by the water. Its wheel had stopped. Children played there.")]:
        (folder / name).write_text(body + "\n")
    return folder


def test_only_the_course_folder_is_made_and_then_loaded(tmp_path, monkeypatch, text):
    recipe = PretrainSettings(corpus=(str(text),), eval_corpus=(str(text),), steps=2, batch_size=2, max_seq_len=32)
    course = tmp_path / "pretrained" / "tiny-course"
    with pytest.raises((OSError, FileNotFoundError)):  # another missing name is no model, and nothing is made there
        load_or_pretrain(str(tmp_path / "typo"), course_folder=str(course), recipe=recipe, run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "typo").exists() and not (tmp_path / "run").exists()
    made = load_or_pretrain(str(course), course_folder=str(course), recipe=recipe, run_dir=str(tmp_path / "run"))
    assert (course / "README.md").is_file() and (course / "model.int8.safetensors").is_file()
    assert not made.training and isinstance(made, minibert.BertForPreTraining)
    monkeypatch.setattr(course_models, "pretrain", lambda settings: pytest.fail("a present model is trained again"))
    again = load_or_pretrain(str(course), course_folder=str(course), recipe=recipe, run_dir=str(tmp_path / "run"))
    for a, b in zip(made.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)


def test_a_recipe_in_stages_goes_on_from_each_stage(tmp_path, text):
    """The course's ModernBERT recipe: masked LM alone, then pairs with NSP from its weights."""
    common = dict(corpus=(str(text),), eval_corpus=(str(text),), batch_size=2, max_seq_len=32, architecture="modernbert")
    stages = [PretrainSettings(**common, steps=3, objective="none", local_attention=8),
              PretrainSettings(**common, steps=2, objective="nsp")]
    course = tmp_path / "pretrained" / "modern-course"
    made = load_or_pretrain(str(course), minibert.ModernBertForPreTraining, course_folder=str(course), recipe=stages,
                            run_dir=str(tmp_path / "run"), dtype="fp16")
    assert isinstance(made, minibert.ModernBertForPreTraining) and not made.training
    first = minibert.ModernBertForMaskedLM.from_pretrained(tmp_path / "run-s1-model")
    assert first.config.local_attention == 8 == made.config.local_attention  # the window carried through
    second = json.loads((tmp_path / "run-s2" / "recipe.json").read_text())
    assert second["args"]["init_from"] == str(tmp_path / "run-s1-model") and second["step"] == 2
    card = (course / "README.md").read_text()  # both stages' time, in this process's CPU-minutes too
    assert re.search(r"\d+ minutes \(\d+ CPU-minutes\) \(of the last `minibert pretrain` call", card)
    assert re.search(r"The first run: 3 steps of 2 sequences, .*\d+ minutes \(\d+ CPU-minutes\) on cpu", card)
    with torch.no_grad():  # the second stage trained the first stage's weights further
        assert not torch.equal(first.model.embeddings.tok_embeddings.weight,
                               made.model.embeddings.tok_embeddings.weight.float())


def test_a_stage_the_budget_cut_short_stops_the_recipe(tmp_path, text):
    common = dict(corpus=(str(text),), eval_corpus=(str(text),), batch_size=2, max_seq_len=32)
    stages = [PretrainSettings(**common, steps=500, objective="none"), PretrainSettings(**common, steps=2)]
    with pytest.raises(RuntimeError, match="stage 1 of the recipe stopped at step-.* of 500.*run again"):
        pretrain_stages(stages, str(tmp_path / "run"), time_budget=0.5)
    assert not (tmp_path / "run-s2").exists() and not (tmp_path / "run-s1-model").exists()
    with pytest.raises(ValueError, match="no stages"):
        pretrain_stages([], str(tmp_path / "run"))
