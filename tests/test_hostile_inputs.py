"""Inputs a careless caller passes to the model, each answered by a message that names the value and the fix,
never by torch internals or a silently wrong result."""
import os

import pytest
import torch

from minibert import BertConfig, BertModel


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=16)).eval()


IDS = torch.tensor([[2, 7, 9, 3, 0]])


def test_an_additive_mask_is_refused_not_inverted(model):
    additive = torch.tensor([[0.0, 0.0, 0.0, 0.0, -10000.0]])  # what older code passes: 0 keep, -1e4 drop
    with pytest.raises(ValueError, match=r"1 \(a real token\) and 0 \(padding\).*-10000.*additive_mask == 0"):
        model(IDS, additive)
    as_bool = model(IDS, torch.tensor([[True, True, True, True, False]])).last_hidden_state
    as_long = model(IDS, (additive == 0).long()).last_hidden_state
    assert torch.equal(as_bool, as_long)


def test_float_token_types_a_list_mask_and_no_tokens_say_what_to_do(model):
    with pytest.raises(TypeError, match="integer segment ids.*token_type_ids.long()"):
        model(IDS, token_type_ids=torch.zeros(1, 5))
    with pytest.raises(TypeError, match=r"attention_mask must be a torch.Tensor.*got list"):
        model(IDS, [[1, 1, 1, 1, 0]])
    with pytest.raises(ValueError, match=r"no tokens.*at least \[CLS\]"):
        model(torch.zeros(1, 0, dtype=torch.long))


@pytest.mark.parametrize("eps", [-1e-12, 0.0, 2.0, "1e-12", True])
def test_a_layer_norm_eps_that_is_not_small_and_positive_is_refused(eps):
    with pytest.raises(ValueError, match="layer_norm_eps must be a small positive number"):
        BertConfig(layer_norm_eps=eps)


def test_a_vocab_txt_with_a_repeated_line_is_refused_not_renumbered(tmp_path):
    from minibert import BertTokenizer
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "the", "sat"]
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match=r"vocab.txt, line 8 repeats 'the' \(line 6\): .*remove the repeat"):
        BertTokenizer.from_pretrained(tmp_path / "vocab.txt")


def test_a_vocabulary_too_small_for_any_word_is_refused_before_training():
    from minibert import BertTokenizer
    text = ["the cat sat on the mat", "a dog barked at the cat"]
    with pytest.raises(ValueError, match=r"vocab_size=3 leaves no room for a single word piece.*choose more than"):
        BertTokenizer.train(text, vocab_size=3, min_frequency=1)
    vocab = BertTokenizer.train(text, vocab_size=60, min_frequency=1).get_vocab()
    assert "the" in vocab and "cat" in vocab


# --- damaged model folders: the file is named and the fix given ---------------------------------------------------
@pytest.fixture
def saved(tmp_path, model):
    model.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:300]),
     r"model.safetensors is not a readable safetensors file.*cut off or damaged"),
    (lambda f: (f / "model.safetensors").write_bytes(b""), r"model.safetensors is not a readable safetensors file"),
    (lambda f: (f / "config.json").write_text("{bad json"), r"config.json is not valid JSON.*line 1, column 2"),
    (lambda f: (f / "config.json").write_text("[1, 2]"), r"config.json holds a JSON list, not the dict a config is"),
])
def test_a_damaged_folder_names_the_file_through_the_command_line(saved, damage, message, capsys):
    from minibert.cli import main
    damage(saved)
    with pytest.raises(ValueError, match=message):
        BertModel.from_pretrained(saved)
    assert main(["evaluate", "sst2", "--model", str(saved), "--eval-examples", "2"]) == 2
    assert "error: " in capsys.readouterr().err


def test_new_weights_with_an_old_config_are_refused_not_computed(saved, model):
    old_config = (saved / "config.json").read_text()
    model.save_pretrained(saved)                       # a second save ...
    (saved / "config.json").write_text(old_config)     # ... interrupted after the weights, before config.json
    with pytest.raises(ValueError, match="come from two different saves.*save the model again"):
        BertModel.from_pretrained(saved)
    model.save_pretrained(saved)
    assert torch.equal(BertModel.from_pretrained(saved).embeddings.word_embeddings.weight,
                       model.embeddings.word_embeddings.weight)
    import transformers  # transformers reads our folder, the save id is only an extra config field
    theirs = transformers.BertModel.from_pretrained(saved).eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(IDS).last_hidden_state, model(IDS).last_hidden_state, atol=1e-5, rtol=0)


def test_a_shard_index_without_a_map_or_pointing_outside_its_folder_is_refused(tmp_path, model):
    import json

    from safetensors.torch import save_file
    folder = tmp_path / "sharded"
    model.save_pretrained(folder)
    (folder / "model.safetensors").rename(folder / "part-1.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}}))
    with pytest.raises(ValueError, match="has no 'weight_map'"):
        BertModel.from_pretrained(folder)
    save_file({"x": torch.zeros(1)}, tmp_path / "elsewhere.safetensors")
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "part-1.safetensors", "b": "../elsewhere.safetensors"}}))
    with pytest.raises(ValueError, match=r"shards outside its folder \(\.\./elsewhere.safetensors\)"):
        BertModel.from_pretrained(folder)


def test_a_sharded_checkpoint_in_the_hub_cache_layout_loads(tmp_path, model):
    """The Hugging Face cache keeps a snapshot's files as links into blobs/: a sharded model there is read
    (transformers reads it), its shards found through the links."""
    import json

    from safetensors.torch import load_file, save_file
    model.save_pretrained(tmp_path / "saved")
    weights = load_file(tmp_path / "saved" / "model.safetensors")
    names = sorted(weights)
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc123"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for shard, keys in halves.items():
        save_file({k: weights[k] for k in keys}, blobs / f"blob-{shard}", metadata={"format": "pt"})
        (snapshot / shard).symlink_to(os.path.relpath(blobs / f"blob-{shard}", snapshot))
    (blobs / "index").write_text(json.dumps({"weight_map": {k: s for s, keys in halves.items() for k in keys}}))
    (snapshot / "model.safetensors.index.json").symlink_to(os.path.relpath(blobs / "index", snapshot))
    (blobs / "config").write_text((tmp_path / "saved" / "config.json").read_text())
    (snapshot / "config.json").symlink_to(os.path.relpath(blobs / "config", snapshot))
    loaded = BertModel.from_pretrained(snapshot)
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())


# --- a shipped int8 folder, converted for transformers, comes with its tokenizer ----------------------------------
def test_export_of_a_shipped_folder_without_a_tokenizer_brings_its_base_models(tmp_path):
    from pathlib import Path

    import transformers

    from minibert import BertForSequenceClassification, BertTokenizer
    from minibert.cli import main
    shipped = Path(__file__).resolve().parents[1] / "notebooks" / "pretrained" / "minilm-sst2"
    assert not (shipped / "tokenizer.json").exists()  # the case: int8 weights, no tokenizer of its own
    assert main(["export", str(shipped), "--out", str(tmp_path / "fp16"), "--dtype", "fp16"]) == 0
    texts = ["a gorgeous, witty and deeply moving film.", "a dull, lifeless and overlong mess."]
    theirs = transformers.pipeline("text-classification", model=str(tmp_path / "fp16"), device="cpu")(texts)
    tokenizer = BertTokenizer.from_pretrained(tmp_path / "fp16")
    ours = BertForSequenceClassification.from_pretrained(shipped)
    with torch.no_grad():
        labels = ours(**dict(tokenizer(texts, padding=True, return_tensors="pt"))).logits.argmax(-1).tolist()
    assert [int(t["label"].split("_")[-1]) for t in theirs] == labels == [1, 0]
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path / "fp16")) == 30522


def test_export_without_any_tokenizer_refuses_before_writing(tmp_path, model):
    from minibert.cli import main
    model.save_pretrained(tmp_path / "bare")
    assert main(["export", str(tmp_path / "bare"), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


# --- what a user hands in must be a regular file: a named pipe would hang the command, a device never end ----------
def _pipe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _small_sst2_model(folder, tokenizer):
    from minibert import BertConfig, BertForSequenceClassification
    BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1,
                                             num_attention_heads=2, intermediate_size=32)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _in_data_dir(tmp_path):
    """A data folder whose sst2/dev.tsv is a named pipe, its other files the mirror's (linked, not copied)."""
    from offline import mirror_with
    mirror = mirror_with("sst2/dev.tsv")
    for name in ("train.tsv", "test.tsv"):
        (tmp_path / "data" / "sst2").mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "sst2" / name).symlink_to(mirror / "sst2" / name)
    return _pipe(tmp_path / "data" / "sst2" / "dev.tsv")


def _fifo_corpus_folder(tmp_path):
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("One sentence. Another one.\n")
    return _pipe(tmp_path / "texts" / "b.txt")


PRETRAIN = ["pretrain", "--objective", "none", "--max-seq-len", "16", "--steps", "1", "--eval-corpus", "none"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
@pytest.mark.parametrize("handed_in", ["data file", "model config", "corpus file", "corpus folder", "vocabulary",
                                       "device as corpus"])
def test_a_file_handed_in_that_is_not_a_regular_file_is_refused_not_waited_on(tmp_path, tokenizer, handed_in):
    """Each command is run as a user runs it, in its own process, with a time limit: before, each of these waited
    forever for a writer to the pipe (`minibert evaluate` with a FIFO in data/ never returned)."""
    import subprocess
    import sys
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MINIBERT_DATA_DIR": str(tmp_path / "data")}
    env.pop("MINIBERT_SHARED_DATA_DIR", None)
    pretrain = [*PRETRAIN, "--out", str(tmp_path / "out")]
    if handed_in == "data file":
        named = _in_data_dir(tmp_path)
        argv = ["evaluate", "sst2", "--model", str(_small_sst2_model(tmp_path / "m", tokenizer))]
    elif handed_in == "model config":
        model = _small_sst2_model(tmp_path / "m", tokenizer)
        (model / "config.json").unlink()
        named, argv = _pipe(model / "config.json"), ["evaluate", "sst2", "--model", str(model)]
    elif handed_in == "corpus file":
        named = _pipe(tmp_path / "book.txt")
        argv = [*pretrain, "--vocab-size", "300", "--corpus", str(named)]
    elif handed_in == "corpus folder":
        named = _fifo_corpus_folder(tmp_path)
        argv = [*pretrain, "--vocab-size", "300", "--corpus", str(tmp_path / "texts")]
    elif handed_in == "vocabulary":
        named = _pipe(tmp_path / "vocab.txt")
        argv = [*pretrain, "--corpus", "gutenberg/blake-poems.txt", "--tokenizer", str(named)]
    else:
        named, argv = "/dev/null", [*pretrain, "--vocab-size", "300", "--corpus", "/dev/null"]
    done = subprocess.run([sys.executable, "-m", "minibert.cli", *argv], capture_output=True, text=True, env=env,
                          timeout=120)
    kind = "a character device" if handed_in == "device as corpus" else "a named pipe (FIFO)"
    assert done.returncode == 2, done.stderr
    assert f"error: {named} is not a regular file but {kind}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # nothing written for a refused command
