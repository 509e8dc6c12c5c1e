"""Part-of-speech tagging, the course's single-sentence tagging task (Devlin et al. 2018, §4.3 and §5.3).

Fine-tuned, BERT tags every word with one linear layer on its final hidden state T_i
(`BertForTokenClassification`). Words are the unit of a treebank, word pieces the unit of BERT: as
the paper does for NER, a word's tag goes on its *first* piece, and its other pieces, [CLS] and
[SEP] get -100, which the loss ignores and no score counts (`first_piece_labels`). Accuracy is
over words. The tags are the 17 universal parts of speech (UPOS) of Universal Dependencies.

The data is UD English EWT. Its train split (12.5k sentences) is too big for the course's offline
data, so the course fine-tunes on the **dev** split (2,001 sentences, 25,147 words) and evaluates
on the **test** split (2,077 sentences, 25,094 words), and says so wherever a number is shown.

The paper's other way to use BERT is feature-based (§5.3, Table 7): freeze the encoder and train
only a model on its hidden states: the last layer, the second to last, the last four concatenated,
or a learned weighted sum of the layers (`FEATURE_VARIANTS`). The paper put a two-layer BiLSTM on
those features for NER; here a linear probe reads them (`minibert.analysis.probing`), the strictest test of
what the frozen vectors hold, and is compared with fine-tuning on the same split. `feature_based` scores
POS by word accuracy and NER (`minibert.tasks.ner`, the task of Table 7) by entity-level F1.
"""
from __future__ import annotations

from itertools import chain

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from ..analysis.conllu import load_ud_english_ewt
from ..analysis.probing import LinearProbe, majority_tags, word_features
from ..heads import IGNORE_INDEX
from ..modes import eval_mode
from ..padding import pad, pad_with_mask
from ..training import batches_by_length

UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
        "SCONJ", "SYM", "VERB", "X")
SPLITS = {"train": "dev", "eval": "test"}  # UD EWT's split that each role uses (no train split offline)

# Table 7's feature-based rows: which hidden_states (0 = embeddings, -1 = last layer) and how to combine them.
# "all" is every Transformer layer, 1 to L (the paper's "all 12 layers" of BERT-base), without the embeddings.
FEATURE_VARIANTS: dict[str, tuple[tuple[int, ...] | str, str]] = {
    "embeddings": ((0,), "concat"),
    "second_to_last_hidden": ((-2,), "concat"),
    "last_hidden": ((-1,), "concat"),
    "weighted_sum_last_four_hidden": ((-4, -3, -2, -1), "weighted_sum"),
    "concat_last_four_hidden": ((-4, -3, -2, -1), "concat"),
    "weighted_sum_all_layers": ("all", "weighted_sum"),
}
# BERT-base, CoNLL-2003 NER, dev F1 (Table 7): the shape to compare with, not the same task or metric.
PAPER_TABLE7 = {"fine_tuning": 96.4, "embeddings": 91.0, "second_to_last_hidden": 95.6, "last_hidden": 94.9,
                "weighted_sum_last_four_hidden": 95.9, "concat_last_four_hidden": 96.1,
                "weighted_sum_all_layers": 95.5}


def load_pos(split: str = "dev"):
    """UD English EWT ``"dev"`` or ``"test"`` as a `datasets.Dataset` of ``words`` and their UPOS ``tags`` (ids)."""
    import datasets  # here, not at the top: it takes a second to import

    sentences = load_ud_english_ewt(split)
    index = {tag: i for i, tag in enumerate(UPOS)}
    features = datasets.Features({"words": datasets.Sequence(datasets.Value("string")),
                                  "tags": datasets.Sequence(datasets.ClassLabel(names=list(UPOS)))})
    return datasets.Dataset.from_dict({"words": [s.forms for s in sentences],
                                       "tags": [[index[w.upos] for w in s.words] for s in sentences]},
                                      features=features)


def first_piece_labels(word_ids: list[int | None], tags: list[int]) -> list[int]:
    """One label per token: a word's tag on its first piece, -100 on its other pieces and on [CLS] / [SEP].

    ``word_ids``: the word of each token (``enc.word_ids(i)``), None for special tokens.
    """
    labels, previous = [], None
    for word in word_ids:
        labels.append(tags[word] if word is not None and word != previous else IGNORE_INDEX)
        previous = word
    return labels


def encode(dataset, tokenizer, max_length: int = 128):
    """Tokenise a ``words`` / ``tags`` dataset into ``input_ids`` / ``labels``, unpadded, with `Dataset.map`.

    A sentence longer than ``max_length`` pieces loses its last words (they get no label).
    """
    def tokenize(batch):
        enc = tokenizer(batch["words"], is_split_into_words=True, truncation=True, max_length=max_length)
        return {"input_ids": enc["input_ids"],
                "labels": [first_piece_labels(enc.word_ids(i), tags) for i, tags in enumerate(batch["tags"])]}
    return dataset.map(tokenize, batched=True, batch_size=1000, remove_columns=dataset.column_names,
                       desc="tokenizing")


def collate(items: list[dict], pad_token_id: int = 0) -> dict[str, Tensor]:
    """Encoded sentences → a batch padded to its longest: (B, T) ``input_ids``, ``attention_mask`` and
    ``labels`` (-100 on padding)."""
    input_ids, attention_mask = pad_with_mask([item["input_ids"] for item in items], pad_token_id)
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    if "labels" in items[0]:
        batch["labels"] = pad([item["labels"] for item in items], IGNORE_INDEX)
    return batch


def word_accuracy(logits: Tensor, labels: Tensor) -> float:
    """Accuracy over the words: the positions of (B, T) ``labels`` that are not -100, scored by (B, T, K) ``logits``."""
    scored = labels != IGNORE_INDEX
    return (logits.argmax(-1)[scored] == labels[scored]).float().mean().item()


def metrics_for(eval_data):
    """The `Trainer`'s ``metrics_fn`` for the encoded ``eval_data``: its exact word accuracy.

    The Trainer averages each batch's number weighted by the batch's sentences; reporting a batch's
    correct words / (its sentences × the set's mean words per sentence) makes that weighted mean
    exactly correct words / all words.
    """
    labels = eval_data[:]["labels"]
    words_per_sentence = sum(label != IGNORE_INDEX for label in chain.from_iterable(labels)) / len(labels)

    def metrics(outputs, batch: dict[str, Tensor]) -> dict[str, float]:
        scored = batch["labels"] != IGNORE_INDEX
        correct = (outputs.logits.argmax(-1)[scored] == batch["labels"][scored]).sum().item()
        return {"accuracy": correct / (len(batch["labels"]) * words_per_sentence)}
    return metrics


@torch.inference_mode()
def predict(model: nn.Module, input_ids: list[list[int]], labels: list[list[int]], pad_token_id: int = 0,
            batch_size: int = 64, progress: bool = True) -> list[Tensor]:
    """Predicted tag ids at the labelled positions (first pieces) of each sentence: one (W_i,) tensor per
    sentence, in their order, with dropout off; batches go longest first."""
    device = next(model.parameters()).device
    predictions = [None] * len(input_ids)
    with eval_mode(model):
        batches = batches_by_length([len(ids) for ids in input_ids], batch_size)
        for chunk in tqdm(batches, desc="tagging", unit="batch", disable=not progress):
            ids, mask = pad_with_mask([input_ids[i] for i in chunk], pad_token_id)
            first = pad([labels[i] for i in chunk], IGNORE_INDEX) != IGNORE_INDEX                    # (B, T)
            tags = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.argmax(-1).cpu()  # (B, T)
            for i, row in zip(chunk, tags[first].split(first.sum(1).tolist())):
                predictions[i] = row
    return predictions


def evaluate(model: nn.Module, tokenizer, dataset, *, batch_size: int = 64,
             progress: bool = True) -> tuple[list[list[str]], dict[str, float]]:
    """Tag a ``words`` / ``tags`` dataset (`load_pos`): (predicted UPOS per sentence, ``{"accuracy", "words"}``).

    Sentences are read whole, up to the model's longest input; a word beyond it (none in EWT) gets
    no prediction and counts as wrong, so the accuracy is over every word.
    """
    encoded = encode(dataset, tokenizer, max_length=model.config.max_position_embeddings)[:]
    predicted = predict(model, encoded["input_ids"], encoded["labels"], tokenizer.pad_token_id, batch_size, progress)
    gold = torch.tensor([label for label in chain.from_iterable(encoded["labels"]) if label != IGNORE_INDEX])
    words = sum(len(words) for words in dataset[:]["words"])
    correct = (torch.cat(predicted) == gold).sum().item()
    return [[UPOS[t] for t in row.tolist()] for row in predicted], {"accuracy": correct / words, "words": words}


def tag(model: nn.Module, tokenizer, sentences: list[list[str]]) -> list[list[str]]:
    """Ask the model to tag a few sentences, each a list of words: their UPOS tags, e.g. ``[["PRON", "VERB", ...]]``."""
    enc = tokenizer(sentences, is_split_into_words=True, truncation=True,
                    max_length=model.config.max_position_embeddings)
    labels = [first_piece_labels(enc.word_ids(i), [0] * len(words)) for i, words in enumerate(sentences)]
    predicted = predict(model, enc["input_ids"], labels, tokenizer.pad_token_id, progress=False)
    return [[UPOS[t] for t in row.tolist()] for row in predicted]


# --- feature-based (§5.3, Table 7) ----------------------------------------------------------------------------

def variant_features(states: Tensor, variant: str) -> Tensor:
    """One of `FEATURE_VARIANTS` from all hidden states stacked, (N, L + 1, H) with the embeddings at 0:
    (N, H) for one layer, (N, k·H) for k concatenated, (N, k, H) for a weighted sum of k layers."""
    layers, combine = FEATURE_VARIANTS[variant]
    chosen = states[:, 1:] if layers == "all" else states[:, list(layers)]  # (N, k, H)
    return chosen if combine == "weighted_sum" else chosen.flatten(1)      # (N, k, H) or (N, k·H)


SCORES = ("accuracy", "entity_f1")  # what `feature_based` measures: POS's word accuracy, NER's entity-level F1


def feature_based(model: nn.Module, tokenizer, train, test, variants: tuple[str, ...] = tuple(FEATURE_VARIANTS),
                  batch_size: int = 64, seed: int = 0, score: str = "accuracy") -> dict[str, float]:
    """The score on ``test`` of a linear probe per variant, trained on ``train``'s frozen features.

    ``train``, ``test``: ``words`` / ``tags`` datasets (`load_pos`, or `ner.load_ner` with
    ``score="entity_f1"``); the tags' names come from the dataset. ``score``: ``"accuracy"`` over
    the words, or ``"entity_f1"``, seqeval's entity-level F1 of the probe's tags (`ner.entity_scores`).
    The encoder runs once per set, on the sentences sorted by length (little padding), and every
    variant reads its layers from the same features (N words × (L + 1) layers × H floats: 25k words
    of MiniLM take 270 MB). Also returns ``majority_baseline``: each word's most frequent training
    tag (`majority_tags`), scored the same way. A word cut off by the model's length counts as
    wrong (in NER it is tagged ``O``, as `ner.word_tags` does).
    """
    unknown = [v for v in variants if v not in FEATURE_VARIANTS]
    if unknown:
        raise ValueError(f"unknown feature variant(s) {unknown}; choose from {', '.join(FEATURE_VARIANTS)}")
    if score not in SCORES:
        raise ValueError(f"score must be one of {', '.join(SCORES)}, got {score!r}")
    names = tuple(train.features["tags"].feature.names)
    all_layers = tuple(range(getattr(model, "bert", model).config.num_hidden_layers + 1))

    def features(rows) -> tuple[Tensor, Tensor, Tensor, list[list[int]]]:
        """(N, L+1, H) states of the N words the model read, their (N,) tags, which of all the words it read
        (a boolean mask), and each sentence's tags; sentence by sentence, from the shortest."""
        order = sorted(range(len(rows["words"])), key=lambda i: len(rows["words"][i]))
        tags = [rows["tags"][i] for i in order]
        states, kept = word_features(model, tokenizer, [rows["words"][i] for i in order], all_layers, batch_size,
                                     stack=True)
        return states, torch.tensor(list(chain.from_iterable(tags)))[kept], kept, tags

    def scored(predicted: list[list[int]], gold: list[list[int]]) -> float:
        """Tag ids predicted for every word of every sentence, against the ``gold`` ones."""
        if score == "accuracy":
            return sum(p == t for row, right in zip(predicted, gold) for p, t in zip(row, right)) / sum(map(len, gold))
        from seqeval.metrics import f1_score  # conlleval's entity F1, as `ner.entity_scores` reports it
        as_names = lambda rows: [[names[t] for t in row] for row in rows]
        return float(f1_score(as_names(gold), as_names(predicted)))

    train_rows, test_rows = train[:], test[:]
    train_states, train_tags, _, _ = features(train_rows)
    test_states, _, test_kept, test_gold = features(test_rows)
    results = {}
    for variant in variants:
        x_train, x_test = variant_features(train_states, variant), variant_features(test_states, variant)
        torch.manual_seed(seed)
        probe = LinearProbe(x_train.shape[-1], len(names), num_layers=x_train.shape[1] if x_train.dim() == 3 else None)
        probe.fit(x_train, train_tags)
        every = torch.full((len(test_kept),), -1 if score == "accuracy" else names.index("O"))  # cut off: wrong, or O
        with torch.no_grad():
            every[test_kept] = probe(x_test).argmax(-1)
        results[variant] = scored([row.tolist() for row in every.split([len(t) for t in test_gold])], test_gold)
    results["majority_baseline"] = scored(majority_tags(train_rows["words"], train_rows["tags"], test_rows["words"]),
                                          test_rows["tags"])
    return results
