"""Pre-training data: corpus -> documents -> sentences -> sentence pairs -> masked batches.

BERT learns from unlabeled text by solving two made-up tasks (Devlin et al. 2018, §3.1 and
Appendix A). This module makes their data, step by step, as Google's ``create_pretraining_data.py``
did, with the variations of the papers that came after:

1. `load_documents`: text -> documents, each a list of sentences. Document boundaries matter:
   the "next sentence" must come from the same document and a random one from another.
2. `tokenize_documents`: sentences -> WordPiece ids, in batches with the fast tokenizer.
3. Examples of at most ``max_seq_len`` tokens:
   - NSP (BERT): ``[CLS] A [SEP] B [SEP]`` where B follows A (IsNext, label 0) or, half the time,
     comes from another document (NotNext, label 1) -- `create_sentence_pairs`;
   - SOP (ALBERT, Lan et al. 2019): B follows A (label 0) or the two are swapped (label 1);
   - no NSP (RoBERTa FULL-SENTENCES, Liu et al. 2019): ``[CLS] s1 s2 ... [SEP]`` packed with whole
     sentences across documents -- `pack_full_sentences`.
4. `MLMMasking`: choose 15% of the tokens; of those, 80% become [MASK], 10% stay the SAME and 10%
   become a RaNDom token; the model must predict the original token at exactly those positions.
   Static (drawn once, like BERT's duplicated data) or dynamic (drawn anew for every batch, RoBERTa).

`build_pretraining_data` does it all and returns a `PretrainingDataset` whose ``collate`` makes the
batches that ``BertForPreTraining(**batch)`` or ``BertForMaskedLM(**batch)`` take.
"""
from __future__ import annotations

import itertools
import random
import re
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor
from torch.utils.data import Dataset

from .. import data
from ..heads import IGNORE_INDEX

# The registry's text corpora: in WikiText an article is a document, elsewhere a file is.
TEXT_CORPORA = ("wikitext2_raw", "wikitext2", "gutenberg", "gutenberg_more", "state_union", "inaugural")
OBJECTIVES = ("nsp", "sop", "none")


class HubDataset(NamedTuple):
    """A text dataset on the Hugging Face Hub, one row per document: ``load_dataset(path, name, split)[column]``."""
    path: str
    name: str | None = None
    split: str = "train"
    column: str = "text"


# --- 1. corpus -> documents -> sentences ------------------------------------------------------

# Words whose period does not end a sentence ("Mr. Hyde"); "No. 5" only before a number. Single
# letters (initials, "H. americanus") and dotted words ("e.g.", "U.S.") count as abbreviations too.
ABBREVIATIONS = frozenset("mr mrs ms messrs dr prof rev st jr sr gen col capt lt sgt gov sen rep hon "
                          "mt ft vs etc cf al approx inc ltd co corp jan feb mar apr jun jul aug sep sept "
                          "oct nov dec".split())
NUMBERED_ABBREVIATIONS = frozenset("no nos vol p pp fig ch art sec".split())
# A candidate sentence end: a word, end punctuation, closing quotes or brackets, space, then what can
# start a sentence (a capital or a digit, maybe after an opening quote or bracket).
_SENTENCE_END = re.compile(r"""(\S*?)([.!?]+)["'”’)\]]*\s+(?=["'“‘(\[]?[A-Z0-9])""")
_PG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)
_PG_END = re.compile(r"^(\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG|END OF (THE )?PROJECT GUTENBERG)",
                     re.MULTILINE | re.IGNORECASE)
_WIKITEXT_TITLE = re.compile(r" = [^=].* = ")  # " = Homarus gammarus = "; sections are " = = ... = = "


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with a few readable rules (no trained model, no nltk).

    A sentence ends at ``.``, ``!`` or ``?`` followed by space and a capital or a digit, unless the
    period belongs to an abbreviation. Good enough for pre-training: a wrong split only moves a
    segment boundary, which NSP tolerates (the paper's "sentences" are spans of text anyway).
    """
    sentences, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        word, punctuation = end.group(1).lstrip("\"'“‘([").lower(), end.group(2)
        if punctuation == "." and (len(word) == 1 and word.isalpha() or "." in word or word in ABBREVIATIONS
                                   or word in NUMBERED_ABBREVIATIONS and text[end.end()].isdigit()):
            continue
        sentences.append(text[start:end.end()].strip())
        start = end.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def read_text(file: str | Path) -> str:
    """A text file as str: UTF-8 (a BOM dropped), else Latin-1; ``\\n`` line ends; no Project Gutenberg licence.

    Latin-1 decodes any bytes, so old files that are not UTF-8 (some State of the Union addresses)
    still load. A Project Gutenberg header and licence footer are not the book: when the START / END
    marker lines are there, only the text between them is kept.
    """
    raw = Path(file).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if start := _PG_START.search(text):
        text = text[start.end():]
    if end := _PG_END.search(text):
        text = text[:end.start()]
    return text


def text_to_sentences(text: str) -> list[str]:
    """One document's sentences: paragraphs are separated by blank lines, hard-wrapped lines are joined."""
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return [sentence for paragraph in paragraphs for sentence in split_sentences(paragraph)]


def wikitext_to_documents(text: str) -> list[list[str]]:
    """WikiText: an article starts at a `` = Title = `` line between blank lines; one paragraph per line.

    Headings are left out, as BERT's Wikipedia text left out headers; ``@-@``, ``@,@``, ``@.@``
    (WikiText's escaped separators, as in ``1 @,@ 000``) go back to ``-``, ``,``, ``.``.
    """
    lines = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").split("\n")
    documents = []
    for i, line in enumerate(lines):
        blank_around = 0 < i < len(lines) - 1 and not lines[i - 1].strip() and not lines[i + 1].strip()
        if _WIKITEXT_TITLE.fullmatch(line) and blank_around:
            documents.append([])
        elif documents and line.strip() and not line.lstrip().startswith("= "):
            documents[-1].extend(split_sentences(" ".join(line.split())))
    return documents


def load_documents(sources) -> list[list[str]]:
    """Documents, each a list of sentences, from one source or a list of them.

    A source is a corpus of the data registry (``"wikitext2_raw"``, ``"gutenberg"``, ``"state_union"``,
    ``"inaugural"``, ...) or one of its files (``"gutenberg/carroll-alice.txt"``), fetched if missing;
    a `Path` (or a str that is not a corpus name) to a ``.txt`` file or a folder of them, one file =
    one document; or a `HubDataset`, one row = one document.
    """
    if isinstance(sources, (str, Path, HubDataset)):
        sources = [sources]
    documents = []
    for source in sources:
        found = [doc for doc in _source_documents(source) if doc]
        if not found:
            raise ValueError(f"the source {source!r} holds no text")
        documents += found
    return documents


def _source_documents(source) -> list[list[str]]:
    if isinstance(source, HubDataset):
        import datasets  # here: it takes seconds to import, and only this source needs it

        rows = datasets.load_dataset(source.path, source.name, split=source.split)[source.column]
        return [text_to_sentences(row) for row in rows]
    name, _, filename = str(source).partition("/")
    if isinstance(source, str) and name in TEXT_CORPORA:
        spec = data.DATASETS[name]
        known = [*spec["files"], *spec.get("online_extras", ())]
        if filename and filename not in known:
            raise ValueError(f"{name} has no file {filename!r}; its files are {', '.join(known)}")
        folder = data.ensure(name)
        files = [data.path(name, filename)] if filename else [folder / f for f in known if (folder / f).is_file()]
        if name.startswith("wikitext"):
            return [doc for file in files for doc in wikitext_to_documents(read_text(file))]
        return [text_to_sentences(read_text(file)) for file in files]
    path = Path(source)
    if not path.exists():
        raise ValueError(f"{source!r} is neither a text corpus ({', '.join(TEXT_CORPORA)}) nor an existing "
                         "file or folder; for a Hugging Face Hub dataset pass HubDataset(path, name, split)")
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"the folder {path} holds no .txt files (one file = one document)")
    return [text_to_sentences(read_text(file)) for file in files]


def tokenize_documents(tokenizer, documents: list[list[str]]) -> list[list[list[int]]]:
    """Each sentence -> its WordPiece ids (no special tokens), in one batch call to the Rust tokenizer.

    Sentences that tokenize to nothing are dropped, and then documents left empty.
    """
    sentences = [sentence for document in documents for sentence in document]
    encodings = tokenizer.backend_tokenizer.encode_batch(sentences, add_special_tokens=False)
    ids = iter([encoding.ids for encoding in encodings])
    tokenized = [[s for s in itertools.islice(ids, len(document)) if s] for document in documents]
    return [document for document in tokenized if document]


# --- 2. sentence pairs (NSP, SOP) and full-sentence packing -----------------------------------

def create_sentence_pairs(documents: list[list[list[int]]], max_seq_len: int = 128, *,
                          objective: str = "nsp", short_seq_prob: float = 0.1,
                          rng: random.Random | None = None) -> list[tuple[list[int], list[int], int]]:
    """(A, B, label) segment pairs from tokenized documents, as ``create_pretraining_data.py`` makes them.

    Whole sentences are gathered into a chunk until it reaches the target length (``max_seq_len - 3``,
    room for ``[CLS] A [SEP] B [SEP]``; with probability ``short_seq_prob`` a random shorter target,
    so the model also sees the short inputs of fine-tuning). A random number of the chunk's
    sentences form A, the rest B. Then, by a fair coin:

    - NSP: keep B (IsNext, 0), or replace it by text from a random start in another document
      (NotNext, 1; the chunk's unused sentences are put back for the next chunk);
    - SOP: keep the order (0), or swap A and B (1): the same topic, so only coherence tells.

    Finally the longer segment loses a token from its front or back (at random, so the model does not
    learn where text was cut) until the pair fits.

    Departures from Google's script, so that the labels are exactly a fair coin: a chunk holds at
    least two sentences (there a one-sentence chunk is always NotNext), and a document's last
    sentence left alone is not used as A; NotNext draws from the *other* documents (there, ten tries
    that may all land on the same one); the short target is drawn per pair, not per document.
    """
    if objective not in ("nsp", "sop"):
        raise ValueError(f"objective must be 'nsp' or 'sop' for sentence pairs, got {objective!r}")
    if max_seq_len < 5:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for two segments and [CLS] [SEP] [SEP]")
    if objective == "nsp" and len(documents) < 2:
        raise ValueError(f"NSP needs at least two documents (NotNext takes B from another one), got {len(documents)}")
    rng = rng or random.Random(0)
    max_num_tokens = max_seq_len - 3

    def draw_target() -> int:
        return rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens

    pairs = []
    for index, document in enumerate(documents):
        chunk, length, i, target = [], 0, 0, draw_target()
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            i += 1
            if i < len(document) and (length < target or len(chunk) < 2):
                continue
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                tokens_a, tokens_b = list(itertools.chain(*chunk[:a_end])), list(itertools.chain(*chunk[a_end:]))
                label = int(rng.random() < 0.5)
                if label and objective == "sop":
                    tokens_a, tokens_b = tokens_b, tokens_a
                elif label:  # NotNext: B from a random place in another document
                    other = rng.randrange(len(documents) - 1)
                    other_document = documents[other + (other >= index)]
                    tokens_b = []
                    for sentence in other_document[rng.randrange(len(other_document)):]:
                        tokens_b += sentence
                        if len(tokens_b) >= target - len(tokens_a):
                            break
                    i -= len(chunk) - a_end  # the unused sentences start the next chunk
                _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                pairs.append((tokens_a, tokens_b, label))
            chunk, length, target = [], 0, draw_target()
    if not pairs:
        raise ValueError("no sentence pair could be made: every document is shorter than two sentences")
    return pairs


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        del longer[0 if rng.random() < 0.5 else -1]


def pack_full_sentences(documents: list[list[list[int]]], max_seq_len: int, sep_token_id: int) -> list[list[int]]:
    """RoBERTa's FULL-SENTENCES inputs: whole sentences packed in order up to ``max_seq_len - 2`` tokens.

    A sequence may cross into the next document, with an extra ``[SEP]`` between the two. A sentence
    longer than a whole sequence is cut into pieces, so no text is lost. No NSP label: RoBERTa found
    that dropping NSP and filling every input matches or beats BERT (Liu et al. 2019, Table 2).
    """
    capacity = max_seq_len - 2  # [CLS] ... [SEP]
    if capacity < 1:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for text beside [CLS] and [SEP]")
    sequences, current = [], []
    for document in documents:
        new_document = True
        for sentence in document:
            for start in range(0, len(sentence), capacity):
                piece = sentence[start:start + capacity]
                separator = [sep_token_id] if new_document and current else []
                if len(current) + len(separator) + len(piece) > capacity:
                    sequences.append(current)
                    current, separator = [], []
                current += separator + piece
                new_document = False
    return sequences + [current] if current else sequences


# --- 3. masked LM --------------------------------------------------------------------------

class MLMMasking:
    """The masked-LM corruption (§3.1, Appendix A.1) with the knobs of its ablations.

    ``mlm_probability``: the chance that a token is chosen (15% in BERT; Wettig et al. 2023 find
    40% works well too). ``mask_same_rnd``: how the chosen tokens are corrupted, as in Table 8:
    [MASK], left the SAME, or a RaNDom token. [MASK] never appears at fine-tuning time, so some
    chosen tokens must look like ordinary input; then the model cannot tell which tokens it will
    be asked about and must keep a good representation of every one. ``whole_word``: choose whole
    words (the later "whole word masking" BERT): all pieces of a word are chosen together, where a
    piece starting with ``##`` continues the previous word, so ``play ##ing`` cannot be solved from
    ``play``.

    Each token is chosen by its own coin (Bernoulli), as ``transformers``' collator does, so the count
    varies around 15%. A sequence whose coins all miss gets its one lowest-drawn token (or word)
    chosen anyway: the original BERT chose ``max(1, round(15% of n))`` tokens, and a batch of short
    sequences with nothing to predict would make the MLM loss a mean over no tokens, i.e. NaN. For
    a sequence of 100 tokens that is needed about once in ten million.
    """

    def __init__(self, tokenizer, mlm_probability: float = 0.15,
                 mask_same_rnd: tuple[float, float, float] = (0.8, 0.1, 0.1), whole_word: bool = False):
        if not 0 < mlm_probability <= 1:
            raise ValueError(f"mlm_probability must be in (0, 1], got {mlm_probability!r}")
        if len(mask_same_rnd) != 3 or min(mask_same_rnd) < 0 or abs(sum(mask_same_rnd) - 1) > 1e-6:
            raise ValueError(f"mask_same_rnd={tuple(mask_same_rnd)!r} must be three shares >= 0 of the chosen "
                             "tokens (MASK, SAME, RND) that sum to 1, e.g. (0.8, 0.1, 0.1)")
        self.mlm_probability, self.mask_same_rnd, self.whole_word = mlm_probability, tuple(mask_same_rnd), whole_word
        self.mask_token_id, self.pad_token_id = tokenizer.mask_token_id, tokenizer.pad_token_id
        vocab = tokenizer.get_vocab()
        size = max(vocab.values()) + 1
        self.special = torch.zeros(size, dtype=torch.bool)  # (V,) never chosen: [CLS] [SEP] [PAD] [UNK] [MASK]
        self.special[tokenizer.all_special_ids] = True
        self.continues_word = torch.zeros(size, dtype=torch.bool)  # (V,) "##" pieces
        self.continues_word[[i for token, i in vocab.items() if token.startswith("##")]] = True
        # RND draws from real tokens: not the special ones, nor the reserved "[unused7]" that text never holds.
        self.random_ids = torch.tensor(sorted(i for token, i in vocab.items()
                                              if not (len(token) > 2 and token[0] == "[" and token[-1] == "]")))

    def __call__(self, input_ids: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """(B, T) ids -> (corrupted ids, labels): labels hold the original id where chosen, -100 elsewhere.

        ``generator`` None uses torch's global RNG, so restoring ``torch.get_rng_state()`` replays it.
        """
        B, T = input_ids.shape
        choosable = ~self.special[input_ids]                                 # (B, T)
        draw = torch.rand(B, T, generator=generator)                          # (B, T) one coin per token
        if self.whole_word:  # every piece takes the draw of its word's first piece
            starts = ~self.continues_word[input_ids]
            positions = torch.arange(T).expand(B, T)
            first_piece = torch.where(starts, positions, 0).cummax(dim=1).values  # (B, T)
            draw = draw.gather(1, first_piece)
        chosen = choosable & (draw < self.mlm_probability)
        draw = draw.masked_fill(~choosable, 2.0)
        lowest = draw == draw.min(dim=1, keepdim=True).values
        chosen |= lowest & choosable & ~chosen.any(dim=1, keepdim=True)       # at least one per sequence
        labels = torch.where(chosen, input_ids, IGNORE_INDEX)

        share_mask, share_same, _ = self.mask_same_rnd
        how = torch.rand(B, T, generator=generator)                           # (B, T) MASK | SAME | RND
        random_tokens = self.random_ids[torch.randint(len(self.random_ids), (B, T), generator=generator)]
        corrupted = torch.where(chosen & (how < share_mask), self.mask_token_id, input_ids)
        corrupted = torch.where(chosen & (how >= share_mask + share_same), random_tokens, corrupted)
        return corrupted, labels


def mask_statically(examples: list[dict], masking: MLMMasking, seed: int = 0) -> list[dict]:
    """Mask every example once, seeded, and store the result: the original BERT's static masking.

    Google wrote masked examples to disk (each sentence ``dupe_factor=10`` times with different masks),
    so over 40 epochs the model saw each mask 4 times. RoBERTa's dynamic masking (a new mask for every
    batch, `PretrainingDataset.collate`) was slightly better (Liu et al. 2019, Table 1).
    """
    generator = torch.Generator().manual_seed(seed)
    masked = []
    for start in range(0, len(examples), 1024):  # in chunks: one padded tensor of a big corpus is too big
        batch = examples[start:start + 1024]
        ids = _pad([e["input_ids"] for e in batch], masking.pad_token_id)   # (1024, T)
        corrupted, labels = masking(ids, generator)
        masked += [{**e, "input_ids": c[:len(e["input_ids"])].tolist(), "labels": y[:len(e["input_ids"])].tolist()}
                   for e, c, y in zip(batch, corrupted, labels)]
    return masked


def _pad(rows: list[list[int]], value: int, length: int | None = None) -> Tensor:
    length = length or max(map(len, rows))
    return torch.tensor([row + [value] * (length - len(row)) for row in rows])


# --- 4. what the training loop reads --------------------------------------------------------

class PretrainingDataset(Dataset):
    """Pre-tokenized examples (dicts: ``input_ids``, ``token_type_ids``, maybe ``next_sentence_label`` and,
    when masked statically, ``labels``) and the ``collate`` that turns a list of them into a batch.

    ``DataLoader(dataset, batch_size=32, shuffle=True, collate_fn=dataset.collate)``.
    """

    def __init__(self, examples: list[dict], masking: MLMMasking, pad_to: int | None = None):
        self.examples, self.masking, self.pad_to = examples, masking, pad_to

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict:
        return self.examples[index]

    def collate(self, examples: list[dict]) -> dict[str, Tensor]:
        """Pad to the longest example (or ``pad_to``) and mask (dynamically, unless masked already).

        Dynamic masking draws from torch's global RNG and nothing else, so a training loop that saves
        and restores the RNG state with its checkpoint resumes with exactly the same masks.
        """
        lengths = [len(e["input_ids"]) for e in examples]
        if self.pad_to is not None and self.pad_to < max(lengths):
            raise ValueError(f"pad_to={self.pad_to} is shorter than an example ({max(lengths)} tokens)")
        T = self.pad_to or max(lengths)
        batch = {"input_ids": _pad([e["input_ids"] for e in examples], self.masking.pad_token_id, T),  # (B, T)
                 "attention_mask": _pad([[1] * n for n in lengths], 0, T),
                 "token_type_ids": _pad([e["token_type_ids"] for e in examples], 0, T)}
        if "labels" in examples[0]:
            batch["labels"] = _pad([e["labels"] for e in examples], IGNORE_INDEX, T)
        else:
            batch["input_ids"], batch["labels"] = self.masking(batch["input_ids"])
        if "next_sentence_label" in examples[0]:
            batch["next_sentence_label"] = torch.tensor([e["next_sentence_label"] for e in examples])  # (B,)
        return batch


def build_pretraining_data(tokenizer, sources, objective: str = "nsp", max_seq_len: int = 128, *,
                           masking: MLMMasking | None = None, static_masking: bool = False,
                           short_seq_prob: float = 0.1, dupe_factor: int = 1, seed: int = 0,
                           pad_to: int | None = None) -> PretrainingDataset:
    """Text in, a dataset of pre-training examples out: the whole pipeline of this module.

    ``sources``: see `load_documents`. ``objective``: ``"nsp"`` (BERT: MLM + next sentence
    prediction), ``"sop"`` (ALBERT: MLM + sentence order) or ``"none"`` (RoBERTa: MLM alone on packed
    full sentences; train a ``BertForMaskedLM``, as there is no ``next_sentence_label``).
    ``short_seq_prob``: see `create_sentence_pairs` (NSP and SOP). ``masking``: an `MLMMasking`
    (default 15%, 80/10/10). ``static_masking``: mask once now (BERT) instead of in every batch
    (RoBERTa). ``dupe_factor``: make the examples that many times over, pairs and static masks drawn
    anew each time, as Google's script did. The same ``seed`` gives the same examples.

    >>> dataset = build_pretraining_data(tokenizer, "wikitext2_raw/wiki.valid.raw", max_seq_len=128)
    >>> batch = dataset.collate([dataset[0], dataset[1]])  # input_ids, attention_mask, token_type_ids,
    >>> loss = BertForPreTraining(config)(**batch).loss    # labels, next_sentence_label
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    masking = masking or MLMMasking(tokenizer)
    documents = tokenize_documents(tokenizer, load_documents(sources))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rng, examples = random.Random(seed), []
    for _ in range(dupe_factor):
        if objective == "none":  # the same packing each time; only static masks differ between copies
            examples += [{"input_ids": [cls, *tokens, sep], "token_type_ids": [0] * (len(tokens) + 2)}
                         for tokens in pack_full_sentences(documents, max_seq_len, sep)]
            continue
        for a, b, label in create_sentence_pairs(documents, max_seq_len, objective=objective,
                                                 short_seq_prob=short_seq_prob, rng=rng):
            examples.append({"input_ids": [cls, *a, sep, *b, sep],                     # [CLS] A [SEP] B [SEP]
                             "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                             "next_sentence_label": label})
    if static_masking:
        examples = mask_statically(examples, masking, seed)
    return PretrainingDataset(examples, masking, pad_to)
