"""SST-2, sentence classification on the pooled [CLS] vector (Devlin et al. 2018, §4.1).

BERT reads ``[CLS] sentence [SEP]``. The final hidden state of [CLS], through the pooler (dense +
tanh), is the sentence's vector C ∈ R^H; fine-tuning adds one matrix W ∈ R^{K×H} and trains
everything on log softmax(CWᵀ) (`BertForSequenceClassification`). SST-2 (GLUE) has K = 2:
movie-review phrases that are negative (0) or positive (1), 67,349 to train on and 872 in the dev
set. GLUE's test labels are secret, so the dev set is where accuracies are compared: BERT-base
reaches 92.7 there.

Sentences are tokenised once with ``datasets``' `Dataset.map` (batched, so the Rust tokenizer sees
a thousand at a time) and padded per batch in `collate`: a batch is as long as its longest
sentence, not ``max_length``, and SST-2's phrases are short. Evaluation sorts the sentences by
length first (`batches_by_length`), so that each batch holds sentences of about the same length.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from .. import data
from ..modes import eval_mode
from ..training import batches_by_length, pad_with_mask

DATASET = "sst2"
SPLITS = ("train", "dev")  # GLUE's test.tsv has no labels
LABELS = ("negative", "positive")


def load_sst2(split: str = "train"):
    """SST-2 ``"train"`` (67,349 phrases) or ``"dev"`` (872) as a `datasets.Dataset` of ``sentence``, ``label``.

    The TSV comes from the data folder, fetched first when absent (`minibert.data`): copied from the
    data mirror, or rebuilt from the Hub's ``nyu-mll/glue`` (config ``sst2``) with the internet.
    """
    import datasets  # here, not at the top: it takes a second to import

    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r} (GLUE's SST-2 test set has no labels)")
    path = data.ensure(DATASET) / f"{split}.tsv"
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    if header != "sentence\tlabel":
        raise ValueError(f"{path} does not start with the header 'sentence<TAB>label' of GLUE's SST-2")
    sentences, labels = zip(*(line.rsplit("\t", 1) for line in lines))
    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=list(LABELS))})
    return datasets.Dataset.from_dict({"sentence": [s.strip() for s in sentences], "label": list(map(int, labels))},
                                      features=features)


def encode(dataset, tokenizer, max_length: int = 128):
    """Tokenise a ``sentence`` / ``label`` dataset into ``input_ids`` / ``labels``, unpadded, with `Dataset.map`."""
    def tokenize(batch):
        return {"input_ids": tokenizer(batch["sentence"], truncation=True, max_length=max_length)["input_ids"],
                "labels": batch["label"]}
    return dataset.map(tokenize, batched=True, batch_size=1000, remove_columns=dataset.column_names,
                       desc="tokenizing")


def collate(items: list[dict], pad_token_id: int = 0) -> dict[str, Tensor]:
    """Encoded examples → a batch padded to its longest sentence: (B, T) ``input_ids`` and
    ``attention_mask``, (B,) ``labels``."""
    input_ids, attention_mask = pad_with_mask([item["input_ids"] for item in items], pad_token_id)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if "labels" in items[0]:
        batch["labels"] = torch.tensor([item["labels"] for item in items])
    return batch


def accuracy(logits: Tensor, labels: Tensor) -> float:
    """The fraction of rows of (N, K) ``logits`` whose largest entry is at the (N,) label."""
    return (logits.argmax(-1) == labels).float().mean().item()


def metrics(outputs, batch: dict[str, Tensor]) -> dict[str, float]:
    """The `Trainer`'s ``metrics_fn``: accuracy of a batch (it averages them weighted by examples)."""
    return {"accuracy": accuracy(outputs.logits, batch["labels"])}


@torch.inference_mode()
def predict(model: nn.Module, input_ids: list[list[int]], pad_token_id: int = 0, batch_size: int = 64,
            progress: bool = True) -> Tensor:
    """Logits (N, K) of the encoded sentences, in their order, with dropout off; batches go longest first."""
    device = next(model.parameters()).device
    logits = torch.empty(len(input_ids), model.config.num_labels)
    with eval_mode(model):
        batches = batches_by_length([len(ids) for ids in input_ids], batch_size)
        for chunk in tqdm(batches, desc="classifying", unit="batch", disable=not progress):
            ids, mask = pad_with_mask([input_ids[i] for i in chunk], pad_token_id)
            logits[chunk] = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float().cpu()
    return logits


def evaluate(model: nn.Module, tokenizer, dataset, *, max_length: int = 128, batch_size: int = 64,
             progress: bool = True) -> tuple[Tensor, dict[str, float]]:
    """Classify a ``sentence`` / ``label`` dataset (`load_sst2`): (predicted labels (N,), ``{"accuracy"}``)."""
    encoded = encode(dataset, tokenizer, max_length)[:]  # whole columns, as lists
    logits = predict(model, encoded["input_ids"], tokenizer.pad_token_id, batch_size, progress)
    return logits.argmax(-1), {"accuracy": accuracy(logits, torch.tensor(encoded["labels"]))}


def classify(model: nn.Module, tokenizer, sentences: list[str], max_length: int = 128) -> list[dict]:
    """Ask the model about a few sentences: ``{"label", "probability"}`` each, e.g. ``{"label": "positive", ...}``."""
    input_ids = tokenizer(sentences, truncation=True, max_length=max_length)["input_ids"]
    probabilities = predict(model, input_ids, tokenizer.pad_token_id, progress=False).softmax(-1)  # (N, K)
    best = probabilities.max(-1)
    return [{"label": LABELS[i], "probability": p} for i, p in zip(best.indices.tolist(), best.values.tolist())]
