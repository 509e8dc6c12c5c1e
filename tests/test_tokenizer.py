"""minibert.tokenizer against transformers: the fast BertTokenizer and the slow, pure-Python
BertTokenizerLegacy (the original BERT algorithm), both loaded from the Hugging Face cache."""
import json
from pathlib import Path

import pytest
import torch
from offline import MINILM as MODEL
from offline import mirror_with, unavailable

from minibert.tokenizer import BatchEncoding, BertTokenizer, wordpiece

SENTENCES = [
    "Hello, world!",
    "Héllo naïve café, Ångström and Øresund",
    "北京欢迎你 and 東京, 서울",
    "I paid $3.50 for 12,000 items in 1999 (about 0.3%).",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The capital of France is [MASK].",
    "don't stop—it's 5 o'clock; \"quoted\" & <tagged> text...",
    "x" * 150 + " is too long to be a word",
    "  spaces\tand\nnewlines\u00a0\u200b everywhere  ",
    "",
    "emoji 🤗 and a snowman ☃ and the ﬁ ligature",
    "Homarus gammarus , known as the European lobster , is a species of clawed lobster .",
]
PAIRS = [
    ("my dog is cute", "he likes playing"),
    ("Who wrote Hamlet?", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Héllo", "naïve café"),
    ("a b c d e f g h i j k l m n o p", "q r"),
]
KEYS = ["input_ids", "token_type_ids", "attention_mask", "offset_mapping", "special_tokens_mask"]
EXTRAS = dict(return_offsets_mapping=True, return_special_tokens_mask=True)


@pytest.fixture(scope="module")
def hub_dir():
    from huggingface_hub import hf_hub_download
    try:
        return Path(hf_hub_download(MODEL, "vocab.txt")).parent
    except Exception as error:  # offline without a cache, or no network
        unavailable(f"{MODEL} is not in the Hugging Face cache and the Hub is unreachable "
                    f"({type(error).__name__})")


@pytest.fixture(scope="module")
def mirror():
    return mirror_with("wikitext2_raw/wiki.valid.raw")


@pytest.fixture(scope="module")
def ours(hub_dir):
    return BertTokenizer.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def fast(hub_dir):
    import transformers
    return transformers.BertTokenizerFast.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def slow(hub_dir):
    from transformers.models.bert import BertTokenizerLegacy
    return BertTokenizerLegacy.from_pretrained(MODEL)


@pytest.fixture(scope="module")
def trained(mirror, tmp_path_factory):
    """A 2,000-piece vocabulary learned from WikiText-2 valid, saved where transformers can read it."""
    tokenizer = BertTokenizer.train([mirror / "wikitext2_raw" / "wiki.valid.raw"], vocab_size=2000)
    folder = tmp_path_factory.mktemp("trained")
    tokenizer.save_pretrained(folder)
    return tokenizer, folder


def held_out_lines(mirror, n=150):
    lines = (mirror / "wikitext2_raw" / "wiki.test.raw").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:n]


def assert_same(ours_enc, theirs_enc, keys=KEYS):
    for key in keys:
        mine, theirs = ours_enc[key], theirs_enc[key]
        if isinstance(mine, torch.Tensor):
            assert torch.equal(mine, theirs), key
        else:
            assert mine == theirs, key


# --- encoding equals transformers ---------------------------------------------------------------
@pytest.mark.parametrize("text", SENTENCES)
def test_single_text_matches_transformers(ours, fast, slow, text):
    enc = ours(text, **EXTRAS)
    assert_same(enc, fast(text, **EXTRAS))
    assert enc["input_ids"] == slow(text)["input_ids"]  # the original algorithm, in Python
    assert ours.tokenize(text) == slow.tokenize(text)


@pytest.mark.parametrize("pair", PAIRS)
def test_pair_matches_transformers(ours, fast, slow, pair):
    enc = ours(*pair, **EXTRAS)
    assert_same(enc, fast(*pair, **EXTRAS))
    assert enc["input_ids"] == slow(*pair)["input_ids"]
    assert enc["token_type_ids"] == slow(*pair, return_token_type_ids=True)["token_type_ids"]


def test_paper_example(ours, hub_dir):
    enc = ours("my dog is cute", "he likes playing")
    tokens = ours.convert_ids_to_tokens(enc.input_ids)
    # bert-base-uncased has "playing" as one piece; segment B gets token type 1, its [SEP] included.
    assert tokens == "[CLS] my dog is cute [SEP] he likes playing [SEP]".split()
    assert enc.token_type_ids == [0] * 6 + [1] * 4
    assert enc.attention_mask == [1] * 10
    # The paper's Figure 2 uses a vocabulary without it: then WordPiece spells it play ##ing.
    vocab = ours.get_vocab()
    del vocab["playing"]
    vocab = {token: i for i, token in enumerate(sorted(vocab, key=vocab.get))}
    paper = BertTokenizer(vocab)
    enc = paper("my dog is cute", "he likes playing")
    assert paper.convert_ids_to_tokens(enc.input_ids) == \
        "[CLS] my dog is cute [SEP] he likes play ##ing [SEP]".split()
    assert enc.token_type_ids == [0] * 6 + [1] * 5


@pytest.mark.parametrize("padding", [True, "longest"])
def test_batch_with_padding_matches_transformers(ours, fast, padding):
    enc = ours(SENTENCES[:8], padding=padding, **EXTRAS)
    assert_same(enc, fast(SENTENCES[:8], padding=padding, **EXTRAS))
    assert len({len(ids) for ids in enc.input_ids}) == 1
    firsts, seconds = zip(*PAIRS)
    assert_same(ours(list(firsts), list(seconds), padding=True, **EXTRAS),
                fast(list(firsts), list(seconds), padding=True, **EXTRAS))


@pytest.mark.parametrize("max_length", [4, 5, 8, 13, 40])
def test_truncation_matches_transformers(ours, fast, max_length):
    kwargs = dict(truncation=True, max_length=max_length, **EXTRAS)
    assert_same(ours(SENTENCES, **kwargs), fast(SENTENCES, **kwargs))
    firsts, seconds = map(list, zip(*PAIRS))
    # longest_first: take tokens from the longer segment until the pair fits.
    enc = ours(firsts, seconds, **kwargs)
    assert_same(enc, fast(firsts, seconds, **kwargs))
    assert max(len(ids) for ids in enc.input_ids) <= max_length
    padded = dict(kwargs, padding="max_length")
    assert_same(ours(firsts, seconds, **padded), fast(firsts, seconds, **padded))
    assert {len(ids) for ids in ours(firsts, seconds, **padded).input_ids} == {max_length}


def test_only_second_truncation_keeps_the_question(ours, fast):
    question, context = PAIRS[1]
    kwargs = dict(truncation="only_second", max_length=12)
    enc = ours(question, context, **kwargs)
    assert_same(enc, fast(question, context, **kwargs), KEYS[:3])
    assert enc.input_ids[:6] == ours(question).input_ids  # [CLS] who wrote hamlet ? [SEP]


def test_return_tensors_pt_matches_transformers(ours, fast):
    enc = ours(SENTENCES, padding=True, return_tensors="pt", **EXTRAS)
    assert_same(enc, fast(SENTENCES, padding=True, return_tensors="pt", **EXTRAS))
    assert enc.input_ids.dtype == torch.long and enc.input_ids.shape == enc.attention_mask.shape
    single = ours("my dog is cute", return_tensors="pt")
    assert single.input_ids.shape == (1, 6)
    assert_same(single, fast("my dog is cute", return_tensors="pt"), KEYS[:3])
    assert single.to("cpu") is single


def test_max_length_padding_without_truncation(ours, fast):
    kwargs = dict(padding="max_length", max_length=16)
    assert_same(ours(SENTENCES[:4], **kwargs), fast(SENTENCES[:4], **kwargs), KEYS[:3])


def test_split_into_words_gives_word_ids(ours, fast):
    words = [["Homarus", "gammarus", "is", "a", "lobster"], ["don't", "stop", "!"]]
    enc = ours(words, is_split_into_words=True)
    theirs = fast(words, is_split_into_words=True)
    assert_same(enc, theirs, KEYS[:3])
    assert enc.word_ids(0) == theirs.word_ids(0) and enc.word_ids(1) == theirs.word_ids(1)
    assert enc.word_ids(0)[:3] == [None, 0, 0]
    pair = ours("Who wrote Hamlet?", "Shakespeare did.")
    assert pair.sequence_ids() == fast("Who wrote Hamlet?", "Shakespeare did.").sequence_ids()
    assert pair.tokens()[0] == "[CLS]"


def test_decode_matches_transformers(ours, fast):
    for text in SENTENCES + [" ".join(pair) for pair in PAIRS]:
        ids = fast(text)["input_ids"]
        assert ours.decode(ids) == fast.decode(ids)
        assert ours.decode(ids, skip_special_tokens=True) == fast.decode(ids, skip_special_tokens=True)
    ids = ours("my dog is cute", return_tensors="pt").input_ids[0]
    assert ours.decode(ids) == "[CLS] my dog is cute [SEP]"
    assert ours.decode(ours.encode("unaffable playing", add_special_tokens=False)) == "unaffable playing"
    assert ours.batch_decode([[101, 2026, 102], [7592]], skip_special_tokens=True) == ["my", "hello"]


def test_vocabulary_and_special_tokens_match_transformers(ours, fast):
    assert ours.get_vocab() == fast.get_vocab()
    assert ours.vocab_size == len(ours) == fast.vocab_size == 30522
    for name in ["pad", "unk", "cls", "sep", "mask"]:
        assert getattr(ours, f"{name}_token") == getattr(fast, f"{name}_token")
        assert getattr(ours, f"{name}_token_id") == getattr(fast, f"{name}_token_id")
    assert (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id) == \
        (0, 100, 101, 102, 103)
    assert sorted(ours.all_special_ids) == sorted(fast.all_special_ids)
    tokens = ["[CLS]", "play", "##ing", "no-such-piece", "[MASK]"]
    assert ours.convert_tokens_to_ids(tokens) == fast.convert_tokens_to_ids(tokens)
    assert ours.convert_tokens_to_ids("play") == fast.convert_tokens_to_ids("play")
    ids = [101, 2377, 2075, 100, 103, 0]
    assert ours.convert_ids_to_tokens(ids) == fast.convert_ids_to_tokens(ids)
    assert ours.convert_ids_to_tokens(torch.tensor(2377)) == "play"
    assert ours.model_max_length == fast.model_max_length == 512


def test_batch_encoding_is_a_dict_with_attributes(ours):
    enc = ours(["my dog", "is cute"])
    assert isinstance(enc, BatchEncoding) and isinstance(enc, dict)
    assert set(enc) == {"input_ids", "token_type_ids", "attention_mask"}
    assert enc.input_ids is enc["input_ids"]
    with pytest.raises(AttributeError):
        enc.offset_mapping  # noqa: B018
    assert ours.encode("my dog", "is cute") == ours("my dog", "is cute")["input_ids"]


# --- WordPiece in plain Python --------------------------------------------------------------------
def test_wordpiece_matches_the_original_on_wikitext(ours, slow, mirror):
    lines = (mirror / "wikitext2_raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()[:400]
    vocab = slow.vocab
    basic_words = {word for line in lines for word in slow.basic_tokenizer.tokenize(line)}
    raw_words = {word for line in lines for word in line.split()}  # cased, punctuation attached
    odd_words = {"☃", "snow☃man", "🤗abc", "a" * 100, "a" * 101, "x" * 500, "##ing", "", "unaffable"}
    words = sorted(basic_words | raw_words | odd_words)
    assert len(words) > 3000
    for word in words:
        assert wordpiece(word, vocab) == slow.wordpiece_tokenizer.tokenize(word), word
    assert wordpiece("a" * 101, vocab) == ["[UNK]"]
    assert wordpiece("snow☃man", vocab) == ["[UNK]"]  # one unknown piece makes the whole word [UNK]
    assert wordpiece("unaffable", {"un", "##aff", "##able"}) == ["un", "##aff", "##able"]


def test_pre_tokenize_then_wordpiece_is_tokenize(ours, mirror):
    vocab = ours.get_vocab()
    assert ours.pre_tokenize("Héllo, naïve café!") == ["hello", ",", "naive", "cafe", "!"]
    for text in [s for s in SENTENCES if "[MASK]" not in s] + held_out_lines(mirror, 50):
        pieces = [piece for word in ours.pre_tokenize(text) for piece in wordpiece(word, vocab)]
        assert pieces == ours.tokenize(text), text


# --- training, saving and loading ---------------------------------------------------------------
def test_trained_vocabulary_loads_in_transformers(trained, mirror):
    import transformers
    from transformers.models.bert import BertTokenizerLegacy
    tokenizer, folder = trained
    assert len(tokenizer) == 2000
    assert tokenizer.convert_ids_to_tokens(list(range(5))) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id) == (0, 2, 3)
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    lines = held_out_lines(mirror)
    pairs = dict(text=lines, text_pair=lines[::-1], truncation=True, max_length=128)
    for theirs in [transformers.BertTokenizerFast.from_pretrained(folder),
                   transformers.AutoTokenizer.from_pretrained(folder)]:
        assert theirs.convert_tokens_to_ids("[MASK]") == 4
        assert tokenizer(**pairs)["input_ids"] == theirs(**pairs)["input_ids"]
    # The Python original breaks ties differently when it truncates two equally long segments,
    # so it is compared on single texts.
    legacy = BertTokenizerLegacy.from_pretrained(folder)
    assert tokenizer(lines, truncation=True)["input_ids"] == legacy(lines, truncation=True)["input_ids"]
    reloaded = BertTokenizer.from_pretrained(folder)
    assert reloaded.get_vocab() == tokenizer.get_vocab()
    assert reloaded(lines, truncation=True) == tokenizer(lines, truncation=True)


def test_training_is_reproducible_from_strings_or_files(trained, mirror):
    # tokenizers alone breaks ties between equally frequent merges in hash-map order, which
    # changes from run to run (huggingface/tokenizers#1794); train() fixes the order.
    lines = (mirror / "wikitext2_raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
    assert BertTokenizer.train(iter(lines), vocab_size=2000).get_vocab() == trained[0].get_vocab()
    first = BertTokenizer.train(lines[:600], vocab_size=3000, min_frequency=1).get_vocab()
    assert BertTokenizer.train(lines[:600], vocab_size=3000, min_frequency=1).get_vocab() == first


def test_cased_training_keeps_case_and_accents(mirror, tmp_path):
    import transformers
    lines = (mirror / "wikitext2_raw" / "wiki.valid.raw").read_text(encoding="utf-8").splitlines()
    cased = BertTokenizer.train(lines[:1000], vocab_size=1000, lowercase=False)
    assert cased.tokenize("The") == ["The"] and "é" in "".join(cased.tokenize("café"))
    cased.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["do_lower_case"] is False
    theirs = transformers.BertTokenizerFast.from_pretrained(tmp_path)
    for text in held_out_lines(mirror, 50) + ["Héllo Wörld"]:
        assert cased(text, truncation=True).input_ids == theirs(text, truncation=True)["input_ids"]


def test_from_pretrained_reads_every_layout(ours, hub_dir, tmp_path):
    (tmp_path / "only_vocab").mkdir()
    (tmp_path / "only_vocab" / "vocab.txt").write_bytes((hub_dir / "vocab.txt").read_bytes())
    (tmp_path / "only_vocab" / "tokenizer_config.json").write_text('{"do_lower_case": true, "model_max_length": 128}')
    layouts = [BertTokenizer.from_pretrained(hub_dir), BertTokenizer.from_pretrained(hub_dir / "vocab.txt"),
               BertTokenizer.from_pretrained(hub_dir / "tokenizer.json"),
               BertTokenizer.from_pretrained(tmp_path / "only_vocab"), BertTokenizer(hub_dir / "vocab.txt")]
    assert layouts[3].model_max_length == 128
    for tokenizer in layouts:
        assert tokenizer(SENTENCES[:8], PAIRS[0][:1] * 8, truncation=True) == \
            ours(SENTENCES[:8], PAIRS[0][:1] * 8, truncation=True)
    assert BertTokenizer.from_pretrained(MODEL, model_max_length=64).model_max_length == 64


def test_cached_padding_and_truncation_settings_are_ignored(ours, fast):
    # The cached tokenizer.json was saved with fixed padding and truncation to 128 tokens.
    text = "the " * 300
    assert len(ours(text).input_ids) == len(fast(text)["input_ids"]) == 302
    assert len(ours("short").input_ids) == 3


# --- mistakes get messages that say what to do ----------------------------------------------------
def test_too_long_without_truncation_warns_and_keeps_every_id_as_transformers_does(ours, fast):
    with pytest.warns(UserWarning, match=r"513 tokens.*model_max_length=512.*truncation=True"):
        ids = ours("word " * 511).input_ids
    assert ids == fast("word " * 511)["input_ids"] and len(ids) == 513  # whole, to be cut into windows
    assert len(ours("word " * 511, truncation=True).input_ids) == 512
    with pytest.warns(UserWarning, match="truncation=True"):
        ours(["short", "long " * 600], padding=True)


def test_max_length_without_truncation_truncates_as_transformers_does(ours, fast):
    text = "the quick brown fox jumps over the lazy dog near the river bank"
    with pytest.warns(UserWarning, match="max_length=5 without truncation"):
        ours_ids = ours(text, max_length=5).input_ids
    assert ours_ids == fast(text, max_length=5)["input_ids"] and len(ours_ids) == 5
    with pytest.warns(UserWarning):
        pair = ours(text, "a second text", max_length=8).input_ids
    assert pair == fast(text, "a second text", max_length=8)["input_ids"]
    assert len(ours(text, max_length=5, truncation=False).input_ids) == 15  # asked not to: every token


@pytest.mark.parametrize("bad, name", [(42, "text"), (None, "text"), ([1, 2], "text"), (b"bytes", "text"),
                                       ([], "text"), ([["nested"]], "text")])
def test_wrong_text_types_name_the_argument(ours, bad, name):
    with pytest.raises(TypeError, match=f"^{name} must be a str"):
        ours(bad)


def test_a_dataset_column_is_a_batch(ours):
    import datasets
    import numpy as np
    rows = datasets.Dataset.from_dict({"sentence": ["my dog is cute", "he likes playing"]})
    expected = ours(["my dog is cute", "he likes playing"]).input_ids
    assert ours(rows["sentence"]).input_ids == expected  # a datasets Column, not a list
    assert ours(np.array(["my dog is cute", "he likes playing"])).input_ids == expected


def test_wrong_arguments_are_explained(ours):
    with pytest.raises(TypeError, match="^text_pair must be"):
        ours("my dog", 5)
    with pytest.raises(TypeError, match=r"list of words"):
        ours("not split", is_split_into_words=True)
    with pytest.raises(ValueError, match="same size"):
        ours(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="same size"):
        ours("a", ["b"])
    with pytest.raises(ValueError, match="padding must be one of"):
        ours("a", padding="yes")
    with pytest.raises(ValueError, match="truncation must be one of"):
        ours("a", truncation="sometimes")
    with pytest.raises(ValueError, match="return_tensors"):
        ours("a", return_tensors="tf")
    with pytest.raises(ValueError, match="max_length must be a positive int"):
        ours("a", max_length=0)
    with pytest.raises(ValueError, match="no room for text"):
        ours("a", "b", truncation=True, max_length=3)


def test_unequal_lengths_to_tensors_suggest_padding(ours):
    with pytest.raises(ValueError, match=r"different lengths \(4 to 6 tokens\).*padding=True"):
        ours(["my dog", "my dog is cute"], return_tensors="pt")


def test_loading_errors_say_what_was_tried(tmp_path, hub_dir):
    # offline: not in the cache; online: not on the Hub
    with pytest.raises(OSError, match=r"'no-such-org/no-such-bert' is not in the local Hugging Face cache|"
                                      r"there is no model 'no-such-org/no-such-bert'"):
        BertTokenizer.from_pretrained("no-such-org/no-such-bert")
    with pytest.raises(FileNotFoundError, match="'./not/a/model/dir' is not a tokenizer directory, nor a model id"):
        BertTokenizer.from_pretrained("./not/a/model/dir")
    with pytest.raises(FileNotFoundError, match="is not a tokenizer directory: it needs one of tokenizer.json, vocab.txt"):
        BertTokenizer.from_pretrained(tmp_path)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}, "normalizer": None}))
    with pytest.raises(ValueError, match="not a BERT WordPiece tokenizer"):
        BertTokenizer.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"no \[CLS\], \[MASK\]"):
        BertTokenizer({"[PAD]": 0, "[UNK]": 1, "[SEP]": 2, "a": 3})
    with pytest.raises(TypeError, match="wrap it in a list"):
        BertTokenizer.train("a single sentence, not a list", vocab_size=100)


# --- overflowing windows with a stride (SQuAD's long contexts) ---------------------------------------
@pytest.fixture(scope="module")
def squad_pairs(mirror):
    """(question, context) pairs from SQuAD v1.1 dev, the longest contexts first, so most overflow."""
    squad = json.loads((mirror / "squad_v1.1" / "dev-v1.1.json").read_text(encoding="utf-8"))
    pairs = [(qa["question"], paragraph["context"]) for article in squad["data"]
             for paragraph in article["paragraphs"] for qa in paragraph["qas"][:1]]
    return sorted(pairs, key=lambda pair: -len(pair[1]))[:150] + pairs[::40]


OVERFLOW_KEYS = KEYS[:4] + ["overflow_to_sample_mapping"]


@pytest.mark.parametrize("max_length, stride", [(384, 128), (128, 32), (64, 0), (48, 7)])
def test_overflowing_windows_match_transformers(ours, fast, squad_pairs, max_length, stride):
    questions, contexts = map(list, zip(*squad_pairs))
    kwargs = dict(truncation="only_second", max_length=max_length, stride=stride, return_overflowing_tokens=True,
                  return_offsets_mapping=True)
    enc = ours(questions, contexts, **kwargs)
    assert_same(enc, fast(questions, contexts, **kwargs), OVERFLOW_KEYS)
    assert len(enc.input_ids) > len(squad_pairs)  # contexts did overflow
    assert max(map(len, enc.input_ids)) == max_length
    assert enc.tokens(1)[0] == "[CLS]" and len(enc.encodings) == len(enc.input_ids)
    padded = dict(kwargs, padding="max_length", return_tensors="pt")
    assert_same(ours(questions[:20], contexts[:20], **padded), fast(questions[:20], contexts[:20], **padded),
                OVERFLOW_KEYS)


def test_one_pair_with_overflow_stays_a_batch_of_windows(ours, fast, squad_pairs):
    question, context = squad_pairs[0]
    kwargs = dict(truncation="only_second", max_length=64, stride=16, return_overflowing_tokens=True)
    enc = ours(question, context, **kwargs)
    assert_same(enc, fast(question, context, **kwargs), KEYS[:3] + ["overflow_to_sample_mapping"])
    assert isinstance(enc.input_ids[0], list) and set(enc.overflow_to_sample_mapping) == {0}
    # the stride alone changes nothing without return_overflowing_tokens: one truncated sequence
    assert ours(question, context, truncation="only_second", max_length=64, stride=16).input_ids == enc.input_ids[0]
    single = dict(truncation=True, max_length=16, stride=4, return_overflowing_tokens=True)
    assert_same(ours(context, **single), fast(context, **single), KEYS[:3] + ["overflow_to_sample_mapping"])


def test_stride_too_large_is_explained(ours, fast):
    question, context = PAIRS[1]  # a 4-token question: max_length=16 leaves 16 - 3 - 4 = 9 context tokens
    ours(question, context, truncation="only_second", max_length=16, stride=8, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match=r"stride=9 must be smaller than the 9 tokens.*longest text"):
        ours(question, context, truncation="only_second", max_length=16, stride=9, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match=r"stride=13 must be smaller than the 13 tokens"):
        ours(context, truncation=True, max_length=15, stride=13, return_overflowing_tokens=True)
    with pytest.raises(ValueError, match="stride must be an int >= 0"):
        ours(question, context, truncation="only_second", stride=-1)


@pytest.mark.parametrize("content, complaint", [
    ("{not json", "tokenizer_config.json is not valid JSON"),
    ('["do_lower_case"]', "holds a JSON list"),
    ('{"do_lower_case": "yes"}', "do_lower_case must be true or false, got 'yes'"),
    ('{"strip_accents": 1}', "strip_accents must be true, false or null"),
    ('{"model_max_length": -5}', "model_max_length must be a positive number of tokens, got -5"),
    ('{"model_max_length": "512"}', "model_max_length must be a positive number"),
])
def test_a_broken_tokenizer_config_is_refused_by_name(hub_dir, tmp_path, content, complaint):
    folder = tmp_path / "tokenizer"
    BertTokenizer.from_pretrained(hub_dir).save_pretrained(folder)
    (folder / "tokenizer_config.json").write_text(content)
    with pytest.raises(ValueError, match=complaint):
        BertTokenizer.from_pretrained(folder)


def test_tokenizer_config_flags_win_over_tokenizer_json_as_in_transformers(hub_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "tokenizer"
    BertTokenizer.from_pretrained(hub_dir).save_pretrained(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False,
                                                              "model_max_length": 1e30}))
    (folder / "vocab.txt").unlink()  # tokenizer.json (which lower-cases) is what both read
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    ours = BertTokenizer.from_pretrained(folder)
    assert ours("Hello World")["input_ids"] == theirs("Hello World")["input_ids"]
    assert ours.unk_token_id in ours("Hello World")["input_ids"]  # an uncased vocabulary, cased text
    assert ours.model_max_length == 512  # transformers' 1e30 means "not set"
