"""BERT's WordPiece tokenizer: text -> ``[CLS] A [SEP] B [SEP]`` ids, segment ids and attention mask.

BERT reads a fixed vocabulary of about 30,000 *word pieces* (Wu et al. 2016): frequent words are
one piece, rare words are spelled out of smaller pieces (``playing -> play ##ing``), so every word
has an encoding and nothing is out of vocabulary but characters never seen. The pipeline is:

1. normalise: clean control characters, lower-case and strip accents (uncased models), put spaces
   around CJK characters (each one becomes a word);
2. pre-tokenise: split on whitespace and punctuation into words;
3. WordPiece: split each word greedily into the longest pieces in the vocabulary (`wordpiece`);
4. post-process: add ``[CLS]`` at the front (its final state feeds classifiers) and ``[SEP]`` after
   each segment, and give segment A type id 0 and segment B type id 1 (the segment embeddings).

`wordpiece` is the algorithm in plain Python, to read; `BertTokenizer` runs the same pipeline in
the Rust ``tokenizers`` library (fast enough for whole corpora) behind the method names of
Hugging Face ``transformers``, and reads and writes the same files. How a vocabulary is learned
is in `minibert.vocabulary`; how a folder or Hub id is found, in `minibert.hub.resolve`.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from .atomic import atomic_path
from .hub import resolve
from .tokenizer_files import read_tokenizer_config, read_tokenizer_json
from .user_files import regular_file
from .vocabulary import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, learn_vocabulary, read_texts, read_vocab_txt

TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")  # either holds the vocabulary; tokenizer.json is preferred
PADDING = {False, True, "do_not_pad", "longest", "max_length"}
TRUNCATION = {False, True, "do_not_truncate", "longest_first", "only_first", "only_second"}


def wordpiece(word: str, vocab, unk_token: str = UNK, max_input_chars_per_word: int = 100) -> list[str]:
    """Split one word into word pieces, greedy longest-match-first, as in the original BERT.

    Take the longest prefix of the word that is in the vocabulary, then the longest piece of the
    rest, written with ``##`` to say "continues a word", and so on. If some rest has no piece in
    the vocabulary the whole word becomes ``[UNK]`` (not just that part), and so does a very long
    word, which is almost always noise (a URL, a DNA string).
    """
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # the longest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:  # not even one character of the rest is in the vocabulary
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


class BatchEncoding(dict):
    """The tokenizer's output: a dict of model inputs, also readable as attributes (``enc.input_ids``).

    ``encodings`` keeps the ``tokenizers`` encodings, which know which word and which segment each
    token came from (`word_ids`, `sequence_ids`): what tagging and span extraction need.
    """

    def __init__(self, data: dict, encodings: list | None = None):
        super().__init__(data)
        self.encodings = encodings

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device) -> "BatchEncoding":
        for key, value in self.items():
            if isinstance(value, torch.Tensor):
                self[key] = value.to(device)
        return self

    def tokens(self, index: int = 0) -> list[str]:
        return self.encodings[index].tokens

    def word_ids(self, index: int = 0) -> list[int | None]:
        """For each token, the index of the word it is a piece of (None for special tokens)."""
        return self.encodings[index].word_ids

    def sequence_ids(self, index: int = 0) -> list[int | None]:
        """For each token, 0 for segment A, 1 for segment B, None for special tokens and padding."""
        return self.encodings[index].sequence_ids


class BertTokenizer:
    """BERT's WordPiece tokenizer with the interface of ``transformers.BertTokenizer``.

    Build one from a vocabulary (a ``vocab.txt`` path or a dict token -> id), load one with
    `from_pretrained`, or learn a vocabulary from text with `train`. Call it on text to get model
    inputs: ``tokenizer("my dog is cute", "he likes playing", return_tensors="pt")``.
    """

    pad_token, unk_token, cls_token, sep_token, mask_token = PAD, UNK, CLS, SEP, MASK

    def __init__(self, vocab: dict[str, int] | str | os.PathLike, *, do_lower_case: bool = True,
                 strip_accents: bool | None = None, tokenize_chinese_chars: bool = True,
                 model_max_length: int = 512, max_input_chars_per_word: int = 100):
        if not isinstance(vocab, dict):
            vocab = read_vocab_txt(vocab)
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"the vocabulary has no {', '.join(missing)}: BERT needs {SPECIAL_TOKENS}")
        self.do_lower_case, self.strip_accents = do_lower_case, strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.model_max_length = model_max_length
        self.pad_token_id, self.unk_token_id, self.cls_token_id, self.sep_token_id, self.mask_token_id = (
            vocab[t] for t in SPECIAL_TOKENS)

        tok = Tokenizer(WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=max_input_chars_per_word))
        # strip_accents=None follows lower-casing, as in the original BERT (uncased = no accents).
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=tokenize_chinese_chars,
                                                    strip_accents=strip_accents, lowercase=do_lower_case)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single=f"{CLS} $A {SEP}", pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
            special_tokens=[(CLS, self.cls_token_id), (SEP, self.sep_token_id)])
        tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        # Special tokens written in the text ("Paris is the [MASK] of France") stay one token.
        tok.add_special_tokens(SPECIAL_TOKENS)
        self.backend_tokenizer = tok

    # --- loading, training, saving ----------------------------------------------------------
    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kwargs) -> "BertTokenizer":
        """Load from a folder (tokenizer.json or vocab.txt), one of those files, or a Hub model id.

        A Hub id goes through the Hugging Face cache (``HF_HOME``), so it also works offline for
        models downloaded before. ``kwargs`` override what the files say, e.g. ``model_max_length``.
        """
        local = Path(name_or_path).expanduser()
        if not local.is_dir() and regular_file(local).is_file():  # tokenizer.json or a vocab.txt by any name
            files = {"tokenizer.json" if local.suffix == ".json" else "vocab.txt": local}
        else:
            files = resolve(name_or_path, [TOKENIZER_FILES], optional=("tokenizer_config.json",), what="tokenizer")
        settings = {"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True}
        if files.get("tokenizer.json"):
            vocab, pipeline = read_tokenizer_json(files["tokenizer.json"])
            settings.update(pipeline)
        else:
            vocab = files["vocab.txt"]
        settings.update(read_tokenizer_config(files.get("tokenizer_config.json")))  # its flags win, as in transformers
        return cls(vocab, **{**settings, **kwargs})

    @classmethod
    def train(cls, texts_or_files, vocab_size: int = 30522, min_frequency: int = 2,
              lowercase: bool = True, limit_alphabet: int = 1000, model_max_length: int = 512) -> "BertTokenizer":
        """Learn a WordPiece vocabulary of ``vocab_size`` pieces from text (`minibert.vocabulary`).

        ``texts_or_files`` is an iterable of strings (documents or lines) or a list of UTF-8 file
        paths, normalised and pre-tokenised as at encoding time. Pieces are kept if seen at least
        ``min_frequency`` times; the ``limit_alphabet`` most frequent characters are the alphabet.
        """
        texts = read_texts(texts_or_files)
        learner = cls({t: i for i, t in enumerate(SPECIAL_TOKENS)}, do_lower_case=lowercase).backend_tokenizer
        vocab = learn_vocabulary(learner, texts, vocab_size, min_frequency, limit_alphabet)
        return cls(vocab, do_lower_case=lowercase, model_max_length=model_max_length)

    def save_pretrained(self, save_directory: str | os.PathLike) -> tuple[str, ...]:
        """Write vocab.txt, tokenizer.json and tokenizer_config.json, the files transformers reads; each
        appears whole or not at all (a full disk leaves the old file, or none)."""
        folder = Path(save_directory)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = sorted(self.get_vocab().items(), key=lambda item: item[1])
        with atomic_path(folder / "vocab.txt") as tmp:
            tmp.write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
        with atomic_path(folder / "tokenizer.json") as tmp:
            self.backend_tokenizer.save(str(tmp))
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.do_lower_case,
                  "strip_accents": self.strip_accents, "tokenize_chinese_chars": self.tokenize_chinese_chars,
                  "model_max_length": self.model_max_length, "clean_up_tokenization_spaces": False,
                  **{f"{name}_token": getattr(self, f"{name}_token")
                     for name in ("pad", "unk", "cls", "sep", "mask")}}
        with atomic_path(folder / "tokenizer_config.json") as tmp:
            tmp.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        return tuple(str(folder / name) for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"))

    # --- encoding ---------------------------------------------------------------------------
    def __call__(self, text, text_pair=None, *, add_special_tokens: bool = True, padding=False,
                 truncation=None, max_length: int | None = None, is_split_into_words: bool = False,
                 return_tensors: str | None = None, return_offsets_mapping: bool = False,
                 return_special_tokens_mask: bool = False, stride: int = 0,
                 return_overflowing_tokens: bool = False) -> BatchEncoding:
        """Encode one text (a str) or a batch (a list of str), optionally with a second segment.

        Returns ``input_ids``, ``token_type_ids`` (the segment, 0 for A and 1 for B) and
        ``attention_mask`` (1 for real tokens, 0 for padding): lists for one text, lists of lists
        for a batch, tensors of shape (batch, length) with ``return_tensors="pt"``.
        ``padding=True`` pads to the longest in the batch, ``"max_length"`` to ``max_length``;
        ``truncation=True`` cuts to ``max_length`` (default ``model_max_length``), taking tokens
        from the longer segment of a pair first; as in transformers, ``max_length`` alone truncates too,
        and an over-long text is encoded whole with a warning (the model refuses it; its ids can be cut
        into windows). ``is_split_into_words``: each text is a list of words (as in tagging data);
        ``enc.word_ids()`` then maps tokens back to those words.

        ``return_overflowing_tokens=True`` keeps what truncation cuts off, as more windows of at most
        ``max_length`` tokens, each overlapping the one before by ``stride`` tokens: how a long
        SQuAD context is read (``truncation="only_second"`` cuts only the context and repeats the
        question in every window). The output is then a batch of windows, even for one text, and
        ``overflow_to_sample_mapping`` gives the input each window came from.
        """
        batch, batched = _as_batch(text, "text", is_split_into_words)
        if text_pair is not None:
            pairs, pairs_batched = _as_batch(text_pair, "text_pair", is_split_into_words)
            if pairs_batched != batched or len(pairs) != len(batch):
                raise ValueError(f"text and text_pair must both be single texts or batches of the same size, "
                                 f"got {len(batch)} text(s) and {len(pairs)} text_pair(s)")
            batch = list(zip(batch, pairs))
        if padding not in PADDING:
            raise ValueError(f"padding must be one of {sorted(map(repr, PADDING))}, got {padding!r}")
        if return_tensors not in (None, "pt"):
            raise ValueError(f"return_tensors must be None (lists) or 'pt' (PyTorch tensors), "
                             f"got {return_tensors!r}")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
        if truncation is None:  # transformers: max_length alone (without padding) means "cut to it"
            truncation = max_length is not None and padding in (False, "do_not_pad")
            if truncation:
                warnings.warn(f"max_length={max_length} without truncation: cutting to {max_length} tokens, longest "
                              "text first, as transformers does; pass truncation=True to say so, or drop max_length",
                              stacklevel=2)
        if truncation not in TRUNCATION:
            raise ValueError(f"truncation must be one of {sorted(map(repr, TRUNCATION))}, got {truncation!r}")
        if not isinstance(stride, int) or stride < 0:
            raise ValueError(f"stride must be an int >= 0 (tokens shared by neighbouring windows), got {stride!r}")
        truncate = truncation not in (False, "do_not_truncate")
        length = max_length or self.model_max_length
        tok = self.backend_tokenizer
        n_special = tok.num_special_tokens_to_add(text_pair is not None) if add_special_tokens else 0
        if truncate and length <= n_special:
            raise ValueError(f"max_length={length} leaves no room for text beside the {n_special} special tokens")
        if truncate and stride:
            self._check_stride(batch, text_pair is not None, truncation, length - n_special, stride,
                               is_split_into_words)

        try:  # the backend keeps these settings, so they are set for this call only
            if truncate:
                tok.enable_truncation(length, stride=stride,
                                      strategy="longest_first" if truncation is True else truncation)
            if padding not in (False, "do_not_pad"):
                tok.enable_padding(pad_id=self.pad_token_id, pad_token=self.pad_token,
                                   length=length if padding == "max_length" else None)
            encodings = tok.encode_batch(batch, is_pretokenized=is_split_into_words,
                                         add_special_tokens=add_special_tokens)
        finally:
            tok.no_truncation()
            tok.no_padding()
        if return_overflowing_tokens:  # each input's windows follow it: [e, *e.overflowing]
            sample_of_window = [i for i, e in enumerate(encodings) for _ in range(1 + len(e.overflowing))]
            encodings = [window for e in encodings for window in (e, *e.overflowing)]

        longest = max(sum(e.attention_mask) for e in encodings)
        if not truncate and longest > self.model_max_length:
            warnings.warn(f"a sequence has {longest} tokens, more than model_max_length={self.model_max_length} that "
                          "BERT's position embeddings cover: the model will refuse it. Pass truncation=True (and "
                          "max_length=...) to cut it, or cut the ids into windows yourself", stacklevel=2)
        data = {"input_ids": [e.ids for e in encodings], "token_type_ids": [e.type_ids for e in encodings],
                "attention_mask": [e.attention_mask for e in encodings]}
        if return_offsets_mapping:
            data["offset_mapping"] = [e.offsets for e in encodings]
        if return_special_tokens_mask:
            data["special_tokens_mask"] = [e.special_tokens_mask for e in encodings]
        if return_overflowing_tokens:
            data["overflow_to_sample_mapping"] = sample_of_window
        if return_tensors == "pt":
            lengths = {len(ids) for ids in data["input_ids"]}
            if len(lengths) > 1:
                raise ValueError(f"the sequences have different lengths ({min(lengths)} to {max(lengths)} tokens), "
                                 "so they do not stack into one tensor; pass padding=True to pad them")
            data = {key: torch.tensor(value) for key, value in data.items()}
        elif not batched and not return_overflowing_tokens:
            data = {key: value[0] for key, value in data.items()}
        return BatchEncoding(data, encodings)

    def _check_stride(self, batch: list, is_pair: bool, truncation, room: int, stride: int,
                      is_split_into_words: bool) -> None:
        """Fail with a message where the backend would abort: every window must move on by at least one token.

        ``room`` is what ``max_length`` leaves beside the special tokens; with ``only_first`` /
        ``only_second`` the segment that is kept whole (the question) takes its share of it too.
        """
        kept = ""
        if is_pair and truncation in ("only_first", "only_second"):
            whole = [pair[1] if truncation == "only_first" else pair[0] for pair in batch]
            encodings = self.backend_tokenizer.encode_batch(whole, is_pretokenized=is_split_into_words,
                                                            add_special_tokens=False)
            longest = max(len(e.ids) for e in encodings)
            room -= longest
            kept = f" and the {longest} tokens of the longest {'text_pair' if truncation == 'only_first' else 'text'}"
        if stride >= room:
            raise ValueError(f"stride={stride} must be smaller than the {max(room, 0)} tokens a window has for the "
                             f"truncated text (max_length minus the special tokens{kept}); lower stride or raise "
                             "max_length")

    def encode(self, text, text_pair=None, **kwargs) -> list[int]:
        """Just the ``input_ids`` of `__call__`."""
        return self(text, text_pair, **kwargs)["input_ids"]

    def pre_tokenize(self, text: str) -> list[str]:
        """The words that WordPiece sees: the text after normalisation and pre-tokenisation.

        (Special tokens written in the text, like ``[MASK]``, are set aside before this step.)
        """
        normalized = self.backend_tokenizer.normalizer.normalize_str(text)
        return [word for word, _ in self.backend_tokenizer.pre_tokenizer.pre_tokenize_str(normalized)]

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text``, without special tokens."""
        return self.backend_tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Ids back to text: ``##`` pieces join the piece before them; lower-casing stays."""
        ids = ids.tolist() if hasattr(ids, "tolist") else ids
        return self.backend_tokenizer.decode([ids] if isinstance(ids, int) else ids,
                                             skip_special_tokens=skip_special_tokens)

    def batch_decode(self, sequences, skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in sequences]

    # --- the vocabulary ---------------------------------------------------------------------
    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | list[int]:
        """Token(s) to id(s); a token outside the vocabulary gets the id of ``[UNK]``."""
        if isinstance(tokens, str):
            token_id = self.backend_tokenizer.token_to_id(tokens)
            return self.unk_token_id if token_id is None else token_id
        return [self.convert_tokens_to_ids(token) for token in tokens]

    def convert_ids_to_tokens(self, ids) -> str | list[str]:
        ids = ids.tolist() if hasattr(ids, "tolist") else ids
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab()

    @property
    def vocab_size(self) -> int:
        return self.backend_tokenizer.get_vocab_size()

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def all_special_tokens(self) -> list[str]:
        return list(SPECIAL_TOKENS)

    @property
    def all_special_ids(self) -> list[int]:
        return self.convert_tokens_to_ids(SPECIAL_TOKENS)

    def __repr__(self) -> str:
        return (f"BertTokenizer(vocab_size={self.vocab_size}, do_lower_case={self.do_lower_case}, "
                f"model_max_length={self.model_max_length})")


def _as_batch(text, name: str, split_into_words: bool) -> tuple[list, bool]:
    """``text`` as a list of inputs, and whether it was a batch; a TypeError names the argument."""
    def is_single(x):
        if split_into_words:
            return isinstance(x, (list, tuple)) and all(isinstance(word, str) for word in x)
        return isinstance(x, str)

    if is_single(text):
        return [text], False
    if not isinstance(text, (str, bytes, dict, list, tuple)) and hasattr(text, "__len__") and hasattr(text, "__iter__"):
        text = list(text)  # a datasets Column, a pandas Series, a numpy array of str: a batch too
    if isinstance(text, (list, tuple)) and text and all(is_single(x) for x in text):
        return list(text), True
    wanted = ("a list of words (list[str]) or a batch of them (list[list[str]])" if split_into_words
              else "a str or a non-empty list of str (a batch)")
    raise TypeError(f"{name} must be {wanted}, got {type(text).__name__} {text!r:.80}")
