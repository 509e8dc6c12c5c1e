"""The fine-tuning tasks by name: what model each needs, and its data made ready to train and score.

Fine-tuning (Devlin et al. 2018, §4) is the same run for every task but for these: the task layer
(`Task.model_class`, with ``num_labels`` outputs per [CLS] or per token), the training and held-out
data, how a batch is made and measured, and the official score. ``TASKS[name]`` holds them; a
recipe (``minibert finetune``) asks for a task by name and needs nothing else:

    task = get_task("sst2")
    model = task.new_model("sentence-transformers/all-MiniLM-L6-v2")   # a new classifier layer
    data = task.build_data(tokenizer, model, max_length=64)
    predictions, metrics = data.evaluate(model)
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from typing import Callable

from ..heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from . import ner, pairs, squad, sst2, tagging

EVAL_BATCH_SIZE = 64


@dataclass
class TaskData:
    """What a task hands the recipe: the Trainer's data, and how to score a model on the held-out part."""
    evaluate: Callable                # (model, progress) -> (predictions, {metric: value}): the final score
    description: dict                 # what the training and held-out data are
    examples: tuple                   # (training, held-out) examples before encoding; training None if not training
    train: object = None              # for training only: the encoded training examples,
    eval: object = None               # the encoded held-out examples (for evaluations during training),
    collate: Callable | None = None   # a list of them -> a batch dict,
    metrics: Callable | None = None   # and the Trainer's metrics_fn


@dataclass(frozen=True)
class Task:
    """One fine-tuning task: its model class and new layer's size, its data, and the paper's figure for it."""
    name: str
    model_class: type
    num_labels: int | None   # outputs of the new layer; None: the model class's own (SQuAD: start and end)
    build_data: Callable     # (tokenizer, model, *, max_length, train_examples, eval_examples, seed, training,
                             #  split) -> TaskData
    paper: str | None = None
    labels: tuple[str, ...] | None = None  # the new layer's class names, stored in config.json as id2label

    def new_model(self, pretrained):
        """A pre-trained BERT (Hub id or folder) with the task's new layer on top, to fine-tune. A model
        fine-tuned already loads with ``model_class.from_pretrained``, its layer's size from its config."""
        new_layer = {"num_labels": self.num_labels} if self.num_labels is not None else {}
        if self.labels:
            new_layer["id2label"] = dict(enumerate(self.labels))
        return self.model_class.from_pretrained(pretrained, **new_layer)


def subset(items, n: int | None, seed: int | None = None):
    """``n`` of the items, in their order: the first n (seed None) or n drawn with the seed; all when n is None."""
    if n is None or n >= len(items):
        return items
    indices = range(n) if seed is None else sorted(random.Random(seed).sample(range(len(items)), n))
    return items.select(indices) if hasattr(items, "select") else [items[i] for i in indices]


def _sst2_data(tokenizer, model=None, *, max_length: int, train_examples: int | None = None,
               eval_examples: int | None = None, seed: int = 0, training: bool = True, split=None) -> TaskData:
    """GLUE SST-2: train on train (67,349 phrases), score on dev (872)."""
    held_out = subset(sst2.load_sst2("dev"), eval_examples)

    def evaluate(model, progress=True):
        predicted, metrics = sst2.evaluate(model, tokenizer, held_out, max_length=max_length,
                                           batch_size=EVAL_BATCH_SIZE, progress=progress)
        return [sst2.LABELS[i] for i in predicted.tolist()], metrics

    task = TaskData(evaluate, {"train": None, "eval": f"SST-2 dev (GLUE): {len(held_out):,} of 872 phrases"},
                    (None, held_out))
    if training:
        train = subset(sst2.load_sst2("train"), train_examples, seed)
        task.description["train"] = f"SST-2 train (GLUE): {len(train):,} of 67,349 phrases"
        task.examples = (train, held_out)
        task.train = sst2.encode(train, tokenizer, max_length)
        task.eval = sst2.encode(held_out, tokenizer, max_length)
        task.collate, task.metrics = partial(sst2.collate, pad_token_id=tokenizer.pad_token_id), sst2.metrics
    return task


def _pos_data(tokenizer, model=None, *, max_length: int, train_examples: int | None = None,
              eval_examples: int | None = None, seed: int = 0, training: bool = True, split=None) -> TaskData:
    """UD English EWT has no train split offline: train on its dev split, score on test (whole sentences,
    up to the ``model``'s longest input)."""
    held_out = subset(tagging.load_pos(tagging.SPLITS["eval"]), eval_examples)

    def evaluate(model, progress=True):
        return tagging.evaluate(model, tokenizer, held_out, batch_size=EVAL_BATCH_SIZE, progress=progress)

    description = {"train": None, "eval": f"UD English EWT test split: {len(held_out):,} of 2,077 sentences",
                   "note": "EWT's train split is not in the offline data: fine-tuned on dev, evaluated on test"}
    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = subset(tagging.load_pos(tagging.SPLITS["train"]), train_examples, seed)
        task.description["train"] = f"UD English EWT dev split: {len(train):,} of 2,001 sentences"
        task.examples = (train, held_out)
        task.train = tagging.encode(train, tokenizer, max_length)
        task.eval = tagging.encode(held_out, tokenizer, model.config.max_position_embeddings)  # whole sentences
        task.collate = partial(tagging.collate, pad_token_id=tokenizer.pad_token_id)
        task.metrics = tagging.metrics_for(task.eval)
    return task


def _squad_data(tokenizer, model=None, *, max_length: int, train_examples: int | None = None,
                eval_examples: int | None = None, seed: int = 0, training: bool = True,
                split: str | None = None) -> TaskData:
    """SQuAD v1.1 train and dev, or offline the dev set split by article (`squad.finetuning_split`)."""
    train, held_out, description = squad.finetuning_split(split, training)
    held_out = subset(held_out, eval_examples)
    description["eval"] += f": {len(held_out):,} questions"
    doc_stride = max_length // 3  # BERT: windows of 384 tokens, 128 of them shared with the next window

    def evaluate(model, progress=True):
        return squad.evaluate(model, tokenizer, held_out, max_length=max_length, doc_stride=doc_stride,
                              batch_size=EVAL_BATCH_SIZE, progress=progress)

    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = subset(train, train_examples, seed)
        description["train"] += f": {len(train):,} questions"
        task.examples = (train, held_out)
        task.train = squad.SquadFeatures(train, tokenizer, max_length, doc_stride)
        task.eval = squad.SquadFeatures(held_out, tokenizer, max_length, doc_stride)
        task.collate = task.train.collate
    else:
        description["train"] = None
    return task


def _pairs_data(name: str, tokenizer, model=None, *, max_length: int, train_examples: int | None = None,
                eval_examples: int | None = None, seed: int = 0, training: bool = True,
                split: str | None = None) -> TaskData:
    """A sentence-pair task (`pairs`): train on its train split (SNLI: dev), score on ``split``, by default
    dev (SNLI: test). MRPC's and STS-B's test sets are labelled here: ``split="test"`` gives the paper's."""
    roles, title = pairs.SPLITS[name], pairs.TITLES[name]
    split = split or roles["eval"]
    if training and roles["train"] is None:
        raise ValueError(f"{title} has no training split in the offline data: score a model fine-tuned "
                         f"elsewhere with `minibert evaluate {name} --model DIR`")
    if training and split == roles["train"]:
        raise ValueError(f"{title} trains on its {split} split here, so it cannot also be scored on it")
    held_out = subset(pairs.load_pairs(name, split), eval_examples)

    def evaluate(model, progress=True):
        return pairs.evaluate(model, tokenizer, held_out, name, max_length=max_length, batch_size=EVAL_BATCH_SIZE,
                              progress=progress)

    description = {"split": split, "train": None,
                   "eval": f"{title} {split}: {len(held_out):,} of {pairs.SIZES[name][split]:,} pairs"}
    if name in pairs.NOTES:
        description["note"] = pairs.NOTES[name]
    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = subset(pairs.load_pairs(name, roles["train"]), train_examples, seed)
        total = pairs.SIZES[name][roles["train"]]
        description["train"] = f"{title} {roles['train']}: {len(train):,} of {total:,} pairs"
        task.examples = (train, held_out)
        task.train = pairs.encode(train, tokenizer, max_length)
        task.eval = pairs.encode(held_out, tokenizer, max_length)
        task.collate = partial(pairs.collate, pad_token_id=tokenizer.pad_token_id)
        task.metrics = pairs.metrics if pairs.LABELS[name] is not None else None  # STS-B: the loss is its MSE
    return task


def _ner_data(dataset: str, tokenizer, model=None, *, max_length: int, train_examples: int | None = None,
              eval_examples: int | None = None, seed: int = 0, training: bool = True,
              split: str | None = None) -> TaskData:
    """CoNLL-2003 or WNUT-17 (`ner`): train on train, score on ``split`` (default dev; test for the paper's
    figure) with entity-level F1, whole sentences up to the ``model``'s longest input."""
    split, title = split or ner.SPLITS["eval"], ner.TITLES[dataset]
    if training and split == ner.SPLITS["train"]:
        raise ValueError(f"{title} trains on its {split} split, so it cannot also be scored on it")
    held_out = subset(ner.load_ner(dataset, split), eval_examples)

    def evaluate(model, progress=True):
        return ner.evaluate(model, tokenizer, held_out, batch_size=EVAL_BATCH_SIZE, progress=progress)

    total = ner.SENTENCES[dataset]
    description = {"split": split, "train": None,
                   "eval": f"{title} {split}: {len(held_out):,} of {total[split]:,} sentences"}
    task = TaskData(evaluate, description, (None, held_out))
    if training:
        train = subset(ner.load_ner(dataset, ner.SPLITS["train"]), train_examples, seed)
        description["train"] = f"{title} train: {len(train):,} of {total['train']:,} sentences"
        task.examples = (train, held_out)
        task.train = tagging.encode(train, tokenizer, max_length)
        task.eval = tagging.encode(held_out, tokenizer, model.config.max_position_embeddings)  # whole sentences
        task.collate = partial(tagging.collate, pad_token_id=tokenizer.pad_token_id)
        task.metrics = tagging.metrics_for(task.eval)  # during training: word accuracy; at the end, entity F1
    return task


def _pair_task(name: str, paper: str | None = None) -> Task:
    labels = pairs.LABELS[name]
    return Task(name, BertForSequenceClassification, len(labels) if labels else 1,  # 1: STS-B's score, by MSE
                partial(_pairs_data, name), paper, labels=tuple(labels) if labels else None)


TASKS = {"sst2": Task("sst2", BertForSequenceClassification, len(sst2.LABELS), _sst2_data,
                      "BERT-base: SST-2 dev accuracy 92.7 (test 93.5)", labels=sst2.LABELS),
         "squad": Task("squad", BertForQuestionAnswering, None, _squad_data,
                       "BERT-base: SQuAD v1.1 dev EM 80.8 / F1 88.5"),
         "pos": Task("pos", BertForTokenClassification, len(tagging.UPOS), _pos_data, labels=tuple(tagging.UPOS)),
         "mrpc": _pair_task("mrpc", "BERT-base: MRPC test F1 88.9"),
         "stsb": _pair_task("stsb", "BERT-base: STS-B test Spearman 85.8"),
         "rte": _pair_task("rte", "BERT-base: RTE test accuracy 66.4"),
         "qnli": _pair_task("qnli", "BERT-base: QNLI test accuracy 90.5"),
         "snli": _pair_task("snli"),  # not in the paper; MNLI, which it stands in for, is (84.6)
         "ner": Task("ner", BertForTokenClassification, len(ner.TAGS["conll2003"]), partial(_ner_data, "conll2003"),
                     "BERT-base: CoNLL-2003 NER test F1 92.4 (dev 96.4)", labels=ner.TAGS["conll2003"]),
         "wnut17": Task("wnut17", BertForTokenClassification, len(ner.TAGS["wnut17"]), partial(_ner_data, "wnut17"),
                        labels=ner.TAGS["wnut17"])}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name]
