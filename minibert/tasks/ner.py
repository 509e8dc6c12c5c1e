"""Named entity recognition: CoNLL-2003 and WNUT-17 (Devlin et al. 2018, §5.3 and Figure 4d).

NER is tagging (`minibert.tasks.tagging`): one linear layer on each token's final hidden state,
a word's tag on its *first* word piece and -100 on the rest, so nothing changes in the model or the
batches; the tags and the score do. Tags say where entities begin and go on: ``B-PER`` the first
word of a person's name, ``I-PER`` the words after it, ``O`` outside any entity (IOB2). An entity
counts only if both its span and its type are right, so the score is entity-level precision, recall
and F1 (seqeval in its default mode, which reads tags as the CoNLL shared task's ``conlleval``
script does: an ``I-`` with no ``B-`` before it still opens an entity). Predictions are read from
the first pieces and put back on the words; a word without a piece of its own (cut off at the
model's length, or a lone emoji variation selector that the tokenizer drops) is predicted ``O``.

CoNLL-2003 (Tjong Kim Sang and De Meulder 2003): Reuters news, 4 types (PER, LOC, ORG, MISC);
``eng.train`` to train on, ``eng.testa`` is dev and ``eng.testb`` test, where BERT-base reaches
F1 96.4 and 92.4 (Table 7). The files use IOB1, where ``B-`` appears only between two entities of
the same type, so they are converted to IOB2 (`iob1_to_iob2`); ``-DOCSTART-`` lines mark articles
and are skipped. **No licence is stated for CoNLL-2003**: the text is Reuters newswire, for
research use; redistribution is not clearly permitted.

WNUT-17 (Derczynski et al. 2017): emerging and rare entities in tweets, Reddit, YouTube and Stack
Overflow comments, 6 types, already IOB2; CC BY 4.0. Not in the paper, and much harder: the
entities are new names that pre-training has rarely seen.
"""
from __future__ import annotations

from pathlib import Path

from torch import nn

from .. import data
from .tagging import first_piece_labels, predict

TYPES = {"conll2003": ("PER", "ORG", "LOC", "MISC"),
         "wnut17": ("corporation", "creative-work", "group", "location", "person", "product")}
# Tag names by id: O, then B- and I- of each type (Hugging Face's conll2003 and wnut_17 order).
TAGS = {dataset: ("O", *(f"{bi}-{t}" for t in types for bi in "BI")) for dataset, types in TYPES.items()}
FILES = {"conll2003": {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"},
         "wnut17": {"train": "wnut17train.conll", "dev": "emerging.dev.conll", "test": "emerging.test.annotated"}}
SENTENCES = {"conll2003": {"train": 14_041, "dev": 3_250, "test": 3_453},
             "wnut17": {"train": 3_394, "dev": 1_009, "test": 1_287}}
# How each file is written: the field separator, fields per line (the word first, its tag last), tag scheme.
FORMATS = {"conll2003": {"separator": " ", "fields": 4, "scheme": "IOB1"},
           "wnut17": {"separator": "\t", "fields": 2, "scheme": "IOB2"}}
SPLITS = {"train": "train", "eval": "dev"}  # test is there too: choose it to compare with the paper's figure
TITLES = {"conll2003": "CoNLL-2003", "wnut17": "WNUT-17"}


def iob1_to_iob2(tags: list[str]) -> list[str]:
    """IOB1 → IOB2: an ``I-X`` that does not continue an entity of type X (after ``O``, at the start, or after
    another type) begins one, so it becomes ``B-X``; a ``B-X`` (an entity right after another X) stays."""
    converted, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        converted.append(tag)
        previous = tag
    return converted


def read_conll(path: Path, separator: str, fields: int) -> list[tuple[list[str], list[str]]]:
    """Sentences of (words, tags) from a one-token-per-line file: the word first, the tag last. A blank line,
    or one of only whitespace (WNUT-17's training file separates sentences with a lone tab), ends a sentence;
    ``-DOCSTART-`` lines (CoNLL-2003's article breaks) are skipped."""
    sentences, words, tags = [], [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            if words:
                sentences.append((words, tags))
                words, tags = [], []
            continue
        parts = line.rstrip("\r").split(separator)
        if len(parts) != fields:
            raise ValueError(f"{path}, line {number}: {len(parts)} fields where {fields} were expected; fetch it "
                             f"again with `python -m minibert.data fetch {path.parent.name} --force`")
        if parts[0] != "-DOCSTART-":
            words.append(parts[0])
            tags.append(parts[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def load_ner(dataset: str = "conll2003", split: str = "train"):
    """``"train"``, ``"dev"`` or ``"test"`` of CoNLL-2003 or WNUT-17 as a `datasets.Dataset` of ``words`` and
    their IOB2 ``tags`` (ids into `TAGS`), the columns `tagging.encode` reads.

    The files come from the data folder, fetched first when absent (`minibert.data`); a file with
    another number of sentences than the data manifest's, or an unknown tag, is an error.
    """
    import datasets  # here, not at the top: it takes a second to import

    if dataset not in FILES:
        raise ValueError(f"unknown NER dataset {dataset!r}; choose one of {', '.join(FILES)}")
    if split not in FILES[dataset]:
        raise ValueError(f"split must be one of {', '.join(FILES[dataset])}, got {split!r}")
    form, names = FORMATS[dataset], TAGS[dataset]
    path = data.ensure(dataset) / FILES[dataset][split]
    sentences = read_conll(path, form["separator"], form["fields"])
    if len(sentences) != SENTENCES[dataset][split]:
        raise ValueError(f"{path}: {len(sentences):,} sentences where the data manifest has "
                         f"{SENTENCES[dataset][split]:,}; fetch it again with "
                         f"`python -m minibert.data fetch {dataset} --force`")
    if form["scheme"] == "IOB1":
        sentences = [(words, iob1_to_iob2(tags)) for words, tags in sentences]
    unknown = sorted({t for _, tags in sentences for t in tags} - set(names))
    if unknown:
        raise ValueError(f"{path}: tags {unknown} are not {TITLES[dataset]}'s ({', '.join(names)})")
    index = {tag: i for i, tag in enumerate(names)}
    features = datasets.Features({"words": datasets.Sequence(datasets.Value("string")),
                                  "tags": datasets.Sequence(datasets.ClassLabel(names=list(names)))})
    return datasets.Dataset.from_dict({"words": [words for words, _ in sentences],
                                       "tags": [[index[t] for t in tags] for _, tags in sentences]},
                                      features=features)


# --- scores -----------------------------------------------------------------------------------------------------

def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Entity-level ``{"precision", "recall", "f1"}`` over all sentences (micro-averaged), as conlleval counts:
    an entity is right only when its first word, last word and type all are."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    return {"precision": float(precision_score(gold, predicted)), "recall": float(recall_score(gold, predicted)),
            "f1": float(f1_score(gold, predicted))}


def scores_by_type(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, dict[str, float]]:
    """Per entity type: ``{"PER": {"precision", "recall", "f1", "support"}, ...}`` (support: gold entities)."""
    from seqeval.metrics import classification_report

    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    return {name: {k.replace("f1-score", "f1"): float(v) for k, v in row.items()}
            for name, row in report.items() if not name.endswith(" avg")}


def entities(tags: list[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence's tags as (type, first word, last word), read as seqeval reads them."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [tuple(e) for e in get_entities(tags)]


# --- tagging with a model ---------------------------------------------------------------------------------------

def word_tags(model: nn.Module, tokenizer, sentences: list[list[str]], names: tuple[str, ...], *,
              batch_size: int = 64, progress: bool = True) -> list[list[str]]:
    """One predicted tag per word: the model's tag at each word's first piece; ``O`` for a word that has none.

    Sentences are read whole, up to the model's longest input. `first_piece_labels`, given each
    word's own index as its "tag", marks the first pieces and says whose they are.
    """
    enc = tokenizer(sentences, is_split_into_words=True, truncation=True,
                    max_length=model.config.max_position_embeddings)
    firsts = [first_piece_labels(enc.word_ids(i), list(range(len(words)))) for i, words in enumerate(sentences)]
    predicted = predict(model, enc["input_ids"], firsts, tokenizer.pad_token_id, batch_size, progress)
    tagged = []
    for words, first, row in zip(sentences, firsts, predicted):
        tags = ["O"] * len(words)
        for word, tag in zip([w for w in first if w >= 0], row.tolist()):
            tags[word] = names[tag]
        tagged.append(tags)
    return tagged


def evaluate(model: nn.Module, tokenizer, dataset, *, batch_size: int = 64,
             progress: bool = True) -> tuple[list[list[str]], dict[str, float]]:
    """Tag a ``words`` / ``tags`` dataset (`load_ner`): (predicted tags per sentence, `entity_scores`)."""
    names = tuple(dataset.features["tags"].feature.names)
    rows = dataset[:]
    predicted = word_tags(model, tokenizer, rows["words"], names, batch_size=batch_size, progress=progress)
    return predicted, entity_scores([[names[t] for t in tags] for tags in rows["tags"]], predicted)


def tag(model: nn.Module, tokenizer, sentences: list[list[str]], dataset: str = "conll2003") -> list[list[str]]:
    """Ask the model to tag a few sentences, each a list of words: e.g. ``[["B-PER", "I-PER", "O", "B-LOC"]]``."""
    return word_tags(model, tokenizer, sentences, TAGS[dataset], progress=False)


def errors(sentences: list[list[str]], gold: list[list[str]], predicted: list[list[str]]) -> list[dict]:
    """The sentences whose predicted entities are not the gold ones, to read: ``{"index", "text", "gold",
    "predicted", "missed", "spurious"}``, each entity as (its words, type). A wrong type or a wrong span is
    both missed (the gold entity) and spurious (the predicted one), as it counts in the F1."""
    found = []
    for i, (words, gold_tags, predicted_tags) in enumerate(zip(sentences, gold, predicted)):
        right, guessed = set(entities(gold_tags)), set(entities(predicted_tags))
        if right == guessed:
            continue

        def shown(spans, words=words):
            return [(" ".join(words[start:end + 1]), kind) for kind, start, end in sorted(spans, key=lambda e: e[1:])]
        found.append({"index": i, "text": " ".join(words), "gold": shown(right), "predicted": shown(guessed),
                      "missed": shown(right - guessed), "spurious": shown(guessed - right)})
    return found
