"""Sentence pairs: paraphrase, similarity and entailment on the pooled [CLS] vector (Devlin et al. 2018, §4.1).

BERT reads two texts as one input, ``[CLS] A [SEP] B [SEP]`` (Figure 4a), and tells them apart by
the segment embedding: token type 0 for [CLS], A and the first [SEP], 1 for B and the last [SEP].
Self-attention then compares every word of A with every word of B in every layer, which is why
one encoder serves all of GLUE's pair tasks: the new layer on C, the pooled [CLS] vector, is all
that changes. A pair too long for ``max_length`` loses tokens from its longer text first
(``longest_first``, as in the paper's code and ``transformers``), so both texts keep their start.

The tasks, and what each reports (GLUE's metrics; the paper's Table 1 quotes the first):

    mrpc  MRPC: is B a paraphrase of A?                 F1 of "paraphrase", accuracy
    stsb  STS-B: how similar, from 0 to 5?              Spearman, Pearson (a regression: num_labels=1, MSE)
    rte   RTE: does A entail B?                         accuracy
    qnli  QNLI: does sentence B answer question A?      accuracy (dev only here: its train set is not)
    snli  SNLI: entailment, neutral or contradiction?   accuracy (stands in for MNLI, not here)

Accuracy and F1 come from scikit-learn, the correlations from scipy.stats: well-kept libraries,
and the ones Hugging Face's GLUE metric calls. MRPC's test labels and STS-B's test scores are
public (Microsoft's release, the STS Benchmark), so the paper's test figures can be measured there;
GLUE's RTE and QNLI test labels are secret. MRPC's GLUE dev set is the 408 pairs of
``dev_ids.tsv``, taken out of Microsoft's training file; the other 3,668 are GLUE's train set.
"""
from __future__ import annotations

import gzip
import json
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from .. import data
from ..modes import eval_mode
from ..padding import pad, pad_with_mask
from ..training import batches_by_length

# Label names by id (as in Hugging Face's GLUE and SNLI); None: a regression on one number.
LABELS: dict[str, tuple[str, ...] | None] = {
    "mrpc": ("not_paraphrase", "paraphrase"),
    "stsb": None,
    "rte": ("entailment", "not_entailment"),
    "qnli": ("entailment", "not_entailment"),
    "snli": ("entailment", "neutral", "contradiction"),
}
# Pairs in each split, as the data manifest counts them (SNLI without the pairs that have no gold label).
SIZES = {"mrpc": {"train": 3_668, "dev": 408, "test": 1_725},
         "stsb": {"train": 5_749, "dev": 1_500, "test": 1_379},
         "rte": {"train": 2_490, "dev": 277},
         "qnli": {"dev": 5_463},
         "snli": {"dev": 9_842, "test": 9_824}}
# The split each role uses offline: SNLI has no train split here, so it trains on dev and is scored on test.
SPLITS = {"mrpc": {"train": "train", "eval": "dev"}, "stsb": {"train": "train", "eval": "dev"},
          "rte": {"train": "train", "eval": "dev"}, "qnli": {"train": None, "eval": "dev"},
          "snli": {"train": "dev", "eval": "test"}}
TITLES = {"mrpc": "GLUE MRPC", "stsb": "GLUE STS-B", "rte": "GLUE RTE", "qnli": "GLUE QNLI", "snli": "SNLI 1.0"}
NOTES = {"snli": "SNLI stands in for MNLI (not in the offline data), and its train split is not here either: "
                 "fine-tuned on SNLI dev, evaluated on test",
         "qnli": "QNLI's train split is not in the offline data: only a model fine-tuned elsewhere can be scored"}
METRICS = {"mrpc": ("f1", "accuracy"), "stsb": ("spearman", "pearson"), "rte": ("accuracy",),
           "qnli": ("accuracy",), "snli": ("accuracy",)}

MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
GLUE_HEADERS = {"rte": "index\tsentence1\tsentence2\tlabel", "qnli": "index\tquestion\tsentence\tlabel"}


# --- reading the files ----------------------------------------------------------------------------------------

def _fetch_again(path: Path) -> str:
    return f"fetch it again with `python -m minibert.data fetch {path.parent.name} --force`"


def _rows(path: Path, columns: int, header: str | None = None, encoding: str = "utf-8") -> list[list[str]]:
    """The tab-separated fields of each line, after checking the header (None: the file has none) and that
    each line has at least ``columns`` fields. Not csv: the sentences hold quotes that are not quoting."""
    lines = path.read_text(encoding=encoding).split("\n")  # not splitlines: it also splits on \x1c, \u2028 ...
    if lines[-1] == "":
        lines.pop()
    if header is not None:
        if not lines or lines[0].rstrip("\r") != header:
            raise ValueError(f"{path} does not start with the header {header!r}; {_fetch_again(path)}")
        lines = lines[1:]
    rows = []
    for number, line in enumerate(lines, start=1 + (header is not None)):
        fields = line.rstrip("\r").split("\t")
        if len(fields) < columns:
            raise ValueError(f"{path}, line {number}: {len(fields)} tab-separated fields where {columns} were "
                             f"expected; {_fetch_again(path)}")
        rows.append(fields)
    return rows


def _label(path: Path, task: str, value: str) -> str:
    if value not in LABELS[task]:
        raise ValueError(f"{path}: label {value!r} is not one of {LABELS[task]}; {_fetch_again(path)}")
    return value


def _read_mrpc(split: str) -> tuple[Path, list[tuple]]:
    """Microsoft's files (UTF-8 with a BOM); GLUE's dev pairs are those whose two ids are in dev_ids.tsv."""
    folder = data.ensure("mrpc")
    path = folder / ("msr_paraphrase_test.txt" if split == "test" else "msr_paraphrase_train.txt")
    rows = _rows(path, 5, MRPC_HEADER, encoding="utf-8-sig")
    if split != "test":
        dev_ids = {(first, second) for first, second, *_ in _rows(folder / "dev_ids.tsv", 2)}
        rows = [r for r in rows if ((r[1], r[2]) in dev_ids) == (split == "dev")]
    quality = {"0": "not_paraphrase", "1": "paraphrase"}
    for r in rows:
        if r[0] not in quality:
            raise ValueError(f"{path}: Quality {r[0]!r} is neither 0 nor 1; {_fetch_again(path)}")
    return path, [(r[3], r[4], quality[r[0]]) for r in rows]


def _read_stsb(split: str) -> tuple[Path, list[tuple]]:
    """GLUE's train/dev TSVs (a header, score last); the test file is the STS Benchmark's own, with gold
    scores and no header: genre, file, year, id, score, sentence 1, sentence 2 (some rows add two more)."""
    folder = data.ensure("stsb")
    if split == "test":
        path = folder / "sts-test.tsv"
        rows = [(r[5], r[6], r[4]) for r in _rows(path, 7)]
    else:
        path = folder / f"{split}.tsv"
        rows = [(r[7], r[8], r[9]) for r in _rows(path, 10, STSB_HEADER)]
    try:
        return path, [(a, b, float(score)) for a, b, score in rows]
    except ValueError as error:
        raise ValueError(f"{path}: a similarity score is not a number ({error}); {_fetch_again(path)}") from None


def _read_glue(task: str, split: str) -> tuple[Path, list[tuple]]:
    """RTE and QNLI: GLUE's ``index, text A, text B, label`` TSVs."""
    path = data.ensure(task) / f"{split}.tsv"
    return path, [(r[1], r[2], _label(path, task, r[3])) for r in _rows(path, 4, GLUE_HEADERS[task])]


def _read_snli(split: str) -> tuple[Path, list[tuple]]:
    """Gzipped JSON Lines; pairs whose annotators reached no majority have gold label "-": dropped, as is usual."""
    path = data.ensure("snli") / f"snli_1.0_{split}.jsonl.gz"
    try:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines if line.strip()]
        return path, [(r["sentence1"], r["sentence2"], _label(path, "snli", r["gold_label"]))
                      for r in rows if r["gold_label"] != "-"]
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not SNLI's gzipped JSON Lines ({error!r}); {_fetch_again(path)}") from None


# task -> (split -> (the file read, its (text A, text B, label name or score) rows))
READERS = {"mrpc": _read_mrpc, "stsb": _read_stsb, "rte": partial(_read_glue, "rte"),
           "qnli": partial(_read_glue, "qnli"), "snli": _read_snli}


def load_pairs(task: str, split: str):
    """One split of a pair task as a `datasets.Dataset` of ``sentence1``, ``sentence2`` and ``label``
    (a class id, or STS-B's score from 0 to 5). QNLI's question is ``sentence1``.

    The files come from the data folder, fetched first when absent (`minibert.data`); a split whose
    number of pairs is not the data manifest's is an error, so a truncated or edited file shows at once.
    """
    import datasets  # here, not at the top: it takes a second to import

    if task not in SIZES:
        raise ValueError(f"unknown pair task {task!r}; choose one of {', '.join(SIZES)}")
    if split not in SIZES[task]:
        raise ValueError(f"{TITLES[task]} has no {split!r} split here; choose one of {', '.join(SIZES[task])} "
                         "(GLUE keeps the other test labels secret, and the offline data has no larger train files)")
    path, rows = READERS[task](split)
    if len(rows) != SIZES[task][split]:
        raise ValueError(f"{path}: {len(rows):,} {TITLES[task]} {split} pairs where the data manifest has "
                         f"{SIZES[task][split]:,}; {_fetch_again(path)}")
    first, second, labels = zip(*rows)
    names = LABELS[task]
    label = datasets.Value("float32") if names is None else datasets.ClassLabel(names=list(names))
    features = datasets.Features({"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
                                  "label": label})
    return datasets.Dataset.from_dict(
        {"sentence1": [s.strip() for s in first], "sentence2": [s.strip() for s in second],
         "label": list(labels) if names is None else [names.index(y) for y in labels]}, features=features)


# --- encoding and batches -------------------------------------------------------------------------------------

def encode_pairs(tokenizer, first: list[str], second: list[str], max_length: int = 128) -> dict:
    """``[CLS] A [SEP] B [SEP]`` ids and token types (0 up to the first [SEP], 1 after), at most ``max_length``
    tokens: the tokenizer's own pair support, trimming the longer text first."""
    enc = tokenizer(first, second, truncation="longest_first", max_length=max_length)
    return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]}


def encode(dataset, tokenizer, max_length: int = 128):
    """Tokenise a ``sentence1`` / ``sentence2`` / ``label`` dataset into ``input_ids``, ``token_type_ids`` and
    ``labels``, unpadded, with `Dataset.map`."""
    def tokenize(batch):
        return {**encode_pairs(tokenizer, batch["sentence1"], batch["sentence2"], max_length),
                "labels": batch["label"]}
    return dataset.map(tokenize, batched=True, batch_size=1000, remove_columns=dataset.column_names,
                       desc="tokenizing")


def collate(items: list[dict], pad_token_id: int = 0) -> dict[str, Tensor]:
    """Encoded pairs → a batch padded to its longest: (B, T) ``input_ids``, ``token_type_ids`` and
    ``attention_mask``; (B,) ``labels``, class ids or (STS-B) float scores."""
    input_ids, attention_mask = pad_with_mask([item["input_ids"] for item in items], pad_token_id)
    batch = {"input_ids": input_ids, "token_type_ids": pad([item["token_type_ids"] for item in items], 0),
             "attention_mask": attention_mask}
    if "labels" in items[0]:
        batch["labels"] = torch.tensor([item["labels"] for item in items])
    return batch


def metrics(outputs, batch: dict[str, Tensor]) -> dict[str, float]:
    """The `Trainer`'s ``metrics_fn`` for the classification tasks: a batch's accuracy (STS-B's is its loss, MSE)."""
    return {"accuracy": (outputs.logits.argmax(-1) == batch["labels"]).float().mean().item()}


@torch.inference_mode()
def predict(model: nn.Module, input_ids: list[list[int]], token_type_ids: list[list[int]], pad_token_id: int = 0,
            batch_size: int = 64, progress: bool = True) -> Tensor:
    """Logits (N, K) of the encoded pairs (K = 1 for STS-B), in their order, with dropout off; batches go
    longest first."""
    device = next(model.parameters()).device
    logits = torch.empty(len(input_ids), model.config.num_labels)
    with eval_mode(model):
        for chunk in tqdm(batches_by_length([len(ids) for ids in input_ids], batch_size), desc="classifying",
                          unit="batch", disable=not progress):
            ids, mask = pad_with_mask([input_ids[i] for i in chunk], pad_token_id)
            types = pad([token_type_ids[i] for i in chunk], 0)  # (B, T)
            logits[chunk] = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                                  token_type_ids=types.to(device)).logits.float().cpu()
    return logits


# --- scores -----------------------------------------------------------------------------------------------------

def classification_scores(gold, predicted, positive: int | None = None) -> dict[str, float]:
    """``{"accuracy"}``, and with a ``positive`` class id its F1 (MRPC: of "paraphrase", as GLUE reports)."""
    from sklearn.metrics import accuracy_score, f1_score

    scores = {"accuracy": float(accuracy_score(gold, predicted))}
    if positive is not None:
        scores = {"f1": float(f1_score(gold, predicted, pos_label=positive, average="binary")), **scores}
    return scores


def correlations(gold, predicted) -> dict[str, float]:
    """STS-B's scores: Spearman's rank correlation (the paper's) and Pearson's linear one, both in [-1, 1]."""
    from scipy.stats import pearsonr, spearmanr

    return {"spearman": float(spearmanr(gold, predicted).statistic),
            "pearson": float(pearsonr(gold, predicted).statistic)}


def scores(task: str, gold, logits: Tensor) -> dict[str, float]:
    """The task's metrics (`METRICS`) of (N, K) ``logits`` against the gold labels or scores."""
    if LABELS[task] is None:
        return correlations(list(gold), logits[:, 0].tolist())
    positive = LABELS[task].index("paraphrase") if "f1" in METRICS[task] else None
    return classification_scores(list(gold), logits.argmax(-1).tolist(), positive)


def evaluate(model: nn.Module, tokenizer, dataset, task: str, *, max_length: int = 128, batch_size: int = 64,
             progress: bool = True) -> tuple[list, dict[str, float]]:
    """Score a pair dataset (`load_pairs`): (predicted labels, or STS-B scores, per pair; the task's metrics)."""
    encoded = encode(dataset, tokenizer, max_length)[:]  # whole columns, as lists
    logits = predict(model, encoded["input_ids"], encoded["token_type_ids"], tokenizer.pad_token_id, batch_size,
                     progress)
    predicted = logits[:, 0].tolist() if LABELS[task] is None else [LABELS[task][i] for i in logits.argmax(-1).tolist()]
    return predicted, scores(task, encoded["labels"], logits)


def classify_pairs(model: nn.Module, tokenizer, pairs: list[tuple[str, str]], task: str,
                   max_length: int = 128) -> list[dict]:
    """Ask the model about a few (A, B) pairs: ``{"label", "probability"}`` each, or STS-B's ``{"score"}``."""
    enc = encode_pairs(tokenizer, [a for a, _ in pairs], [b for _, b in pairs], max_length)
    logits = predict(model, enc["input_ids"], enc["token_type_ids"], tokenizer.pad_token_id, progress=False)
    if LABELS[task] is None:
        return [{"score": score} for score in logits[:, 0].tolist()]
    best = logits.softmax(-1).max(-1)  # over (N, K)
    return [{"label": LABELS[task][i], "probability": p} for i, p in zip(best.indices.tolist(), best.values.tolist())]
