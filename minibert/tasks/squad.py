"""SQuAD v1.1, span extraction (Devlin et al. 2018, §4.2): point at the answer inside a paragraph.

BERT reads ``[CLS] question [SEP] paragraph [SEP]`` and scores every token twice, with a start
vector S and an end vector E (`BertForQuestionAnswering`): S·T_i says "the answer starts at token
i", E·T_j "it ends at token j". The answer is the span i ≤ j with the largest S·T_i + E·T_j;
training minimises the cross-entropy of the true start plus that of the true end.

A paragraph longer than ``max_length`` tokens is read in overlapping windows: every window
repeats the question, and neighbouring windows share ``doc_stride`` context tokens, so an answer
cut by one window's edge lies whole in the next one. A training window that does not hold the
answer points both its start and its end at ``[CLS]`` (position 0), as in the original code. At
prediction time every window proposes its best valid spans (inside the context, at most
``max_answer_length`` tokens), the best over all windows wins, and the tokens' character offsets
turn it back into the paragraph's own text, which the official metric (`squad_metric`) scores.

Offline only the dev set is at hand (the data mirror holds no train set), so the course splits
it by article (`split_by_article`) into train and eval: its numbers are on that held-out part of
the dev set, not the paper's dev-set numbers, and every number shown should say so.
"""
from __future__ import annotations

import json
import math
import random
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from .. import data
from ..modes import eval_mode
from .squad_metric import squad_metric

DATASET = "squad_v1.1"
SPLITS = ("train", "dev")
CLS_INDEX = 0  # where a window that does not hold the answer points its start and end
N_SPECIAL = 3  # [CLS] question [SEP] context [SEP]
OFFLINE_EVAL_FRACTION, OFFLINE_SPLIT_SEED = 0.2, 0  # offline fine-tuning holds out a fixed fifth of the dev set's articles


@dataclass
class SquadExample:
    """One question on one paragraph; ``answers`` are the reference texts, ``answer_starts`` their character offsets."""
    id: str
    title: str
    context: str
    question: str
    answers: list[str] = field(default_factory=list)
    answer_starts: list[int] = field(default_factory=list)


def read_squad(path: str | Path) -> list[SquadExample]:
    """Flatten SQuAD's JSON (data > articles > paragraphs > qas) into one example per question, in file order."""
    dataset = json.loads(Path(path).read_text(encoding="utf-8"))
    examples = []
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa["answers"]:
                    raise ValueError(f"{path}: question {qa['id']!r} has no answer; unanswerable questions "
                                     "are SQuAD 2.0, and this is a SQuAD v1.1 reader")
                examples.append(SquadExample(qa["id"], article["title"], paragraph["context"], qa["question"],
                                             [a["text"] for a in qa["answers"]],
                                             [a["answer_start"] for a in qa["answers"]]))
    return examples


def load_squad(split: str = "dev") -> list[SquadExample]:
    """SQuAD v1.1 ``"dev"`` (10,570 questions on 48 articles) or ``"train"`` (87,599 on 442), from the data folder.

    A missing file is fetched first (`minibert.data`): copied from the data mirror, or downloaded
    from the Hugging Face Hub. The mirror holds only the dev set, so ``"train"`` needs the internet.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    filename = f"{split}-v1.1.json"
    if not (data.ensure(DATASET) / filename).is_file():
        data.fetch([DATASET])  # the train file comes only with the online download
    return read_squad(data.path(DATASET, filename))


def split_by_article(examples: Sequence[SquadExample], eval_fraction: float = 0.2, *,
                     eval_articles: int | None = None, seed: int = 0) -> tuple[list[SquadExample], list[SquadExample]]:
    """(train, eval): whole articles held out for eval, ``eval_articles`` of them or ``eval_fraction`` of all.

    Splitting by article, not by question, keeps every paragraph and its topic on one side, so the
    eval questions are about text the model never trained on, as on the real dev set. The same
    seed gives the same split; both parts keep the examples' order.
    """
    titles = list(dict.fromkeys(example.title for example in examples))
    if len(titles) < 2:
        raise ValueError(f"splitting by article needs at least 2 articles, got {len(titles)}")
    if eval_articles is None:
        if not 0 < eval_fraction < 1:
            raise ValueError(f"eval_fraction must be between 0 and 1, got {eval_fraction}")
        eval_articles = min(max(round(eval_fraction * len(titles)), 1), len(titles) - 1)
    elif not (isinstance(eval_articles, int) and 1 <= eval_articles < len(titles)):
        raise ValueError(f"eval_articles must be an int from 1 to {len(titles) - 1} (there are {len(titles)} "
                         f"articles), got {eval_articles!r}")
    held_out = set(random.Random(seed).sample(titles, eval_articles))
    return ([example for example in examples if example.title not in held_out],
            [example for example in examples if example.title in held_out])


def finetuning_split(split: str | None = None, training: bool = True) -> tuple[list | None, list, dict]:
    """(training questions, held-out questions, what they are) for fine-tuning; no training questions
    (None) when not ``training``.

    ``split``: ``"train/dev"`` (the real train set, scored on dev), ``"dev by article"`` (offline:
    `split_by_article` holds out a fixed fifth of the dev set's articles) or None: the real train
    set where it is in the data folder, else the offline split, which the description then says.
    """
    if split is None:
        split = "train/dev" if (data.ensure(DATASET) / "train-v1.1.json").is_file() else "dev by article"
    if split == "train/dev":
        return ((load_squad("train") if training else None), load_squad("dev"),
                {"split": split, "train": "SQuAD v1.1 train", "eval": "SQuAD v1.1 dev"})
    if split != "dev by article":
        raise ValueError(f"split must be 'train/dev', 'dev by article' or None, got {split!r}")
    train, held_out = split_by_article(load_squad("dev"), OFFLINE_EVAL_FRACTION, seed=OFFLINE_SPLIT_SEED)
    articles = sorted({example.title for example in held_out})
    description = {"split": split,
                   "train": f"SQuAD v1.1 dev, {len({example.title for example in train})} of its 48 articles",
                   "eval": f"SQuAD v1.1 dev, the other {len(articles)} articles", "eval_articles": articles,
                   "note": "SQuAD's train set is not in the offline data: trained and evaluated on disjoint "
                           "articles of the dev set, so EM/F1 are not the paper's dev-set numbers"}
    return (train if training else None), held_out, description


class SquadFeatures(Dataset):
    """The model's view of SQuAD examples: one item per window of ``[CLS] question [SEP] context [SEP]``.

    Item i is a dict for the `Trainer` (batch it with `collate`): ``input_ids``, ``token_type_ids``
    and, when every example has an answer, ``start_positions`` / ``end_positions`` of its first
    reference answer (both ``CLS_INDEX`` when the answer is not whole inside the window). What
    turns logits back into text stays here: ``example_index[i]`` (the example window i reads),
    ``offsets[i]`` (each token's character span in the context) and ``context_spans[i]`` (the
    window's first and last context token).
    """

    def __init__(self, examples: Sequence[SquadExample], tokenizer, max_length: int = 384, doc_stride: int = 128):
        self.examples, self.pad_token_id = list(examples), tokenizer.pad_token_id
        _check_windows(self.examples, tokenizer, max_length, doc_stride)
        enc = tokenizer([e.question for e in self.examples], [e.context for e in self.examples],
                        truncation="only_second", max_length=max_length, stride=doc_stride,
                        return_overflowing_tokens=True, return_offsets_mapping=True)
        self.input_ids, self.token_type_ids = enc["input_ids"], enc["token_type_ids"]
        self.offsets, self.example_index = enc["offset_mapping"], enc["overflow_to_sample_mapping"]
        # The context runs from the first segment-B token to the one before the closing [SEP] (also segment B).
        self.context_spans = [(types.index(1), len(types) - 2) for types in self.token_type_ids]
        for (first, last), i in zip(self.context_spans, self.example_index):
            if first > last:
                raise ValueError(f"example {self.examples[i].id!r}: the context has no tokens "
                                 f"({self.examples[i].context[:40]!r}...)")
        self.start_positions = self.end_positions = None
        if all(example.answers for example in self.examples):
            self.start_positions, self.end_positions = map(list, zip(*map(self._answer_tokens, range(len(self)))))

    def _answer_tokens(self, i: int) -> tuple[int, int]:
        """Token positions of the first reference answer in window i; (CLS_INDEX, CLS_INDEX) if it is not all there."""
        example = self.examples[self.example_index[i]]
        text, start_char = example.answers[0], example.answer_starts[0]
        start_char += len(text) - len(text.lstrip())  # whitespace around an answer belongs to no token
        end_char = start_char + len(text.strip())
        first, last = self.context_spans[i]
        offsets = self.offsets[i]
        if not (offsets[first][0] <= start_char and end_char <= offsets[last][1]):
            return CLS_INDEX, CLS_INDEX
        # The first token that ends after the answer starts, the last token that starts before it ends
        # (a few answers begin or end inside a word piece: "gold" in "golden").
        start = bisect_right(offsets, start_char, first, last + 1, key=lambda span: span[1])
        end = bisect_left(offsets, end_char, first, last + 1, key=lambda span: span[0]) - 1
        return start, end

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        item = {"input_ids": torch.tensor(self.input_ids[i]), "token_type_ids": torch.tensor(self.token_type_ids[i])}
        if self.start_positions is not None:
            item["start_positions"] = torch.tensor(self.start_positions[i])
            item["end_positions"] = torch.tensor(self.end_positions[i])
        return item

    def collate(self, items: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        """Pad a list of items to the longest one: (B, T) inputs with their attention_mask, (B,) positions."""
        ids = [item["input_ids"] for item in items]
        batch = {"input_ids": pad_sequence(ids, batch_first=True, padding_value=self.pad_token_id),
                 "token_type_ids": pad_sequence([item["token_type_ids"] for item in items], batch_first=True),
                 "attention_mask": pad_sequence([torch.ones_like(x) for x in ids], batch_first=True)}
        for key in ("start_positions", "end_positions"):
            if key in items[0]:
                batch[key] = torch.stack([item[key] for item in items])  # (B,)
        return batch


def _check_windows(examples: list[SquadExample], tokenizer, max_length: int, doc_stride: int) -> None:
    """Every window must hold the whole question and move on through the context by at least one token."""
    if not examples:
        raise ValueError("no examples to encode")
    for example in examples:
        for name in ("question", "context"):
            value = getattr(example, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"example {example.id!r}: the {name} is empty (or not a str): {value!r}")
    if not (isinstance(max_length, int) and N_SPECIAL < max_length <= tokenizer.model_max_length):
        raise ValueError(f"max_length must be an int from {N_SPECIAL + 1} to the tokenizer's model_max_length="
                         f"{tokenizer.model_max_length}, got {max_length!r}")
    if not (isinstance(doc_stride, int) and doc_stride >= 0):
        raise ValueError(f"doc_stride must be an int >= 0 (context tokens that neighbouring windows share), "
                         f"got {doc_stride!r}")
    questions = tokenizer([e.question for e in examples], add_special_tokens=False)["input_ids"]
    longest = max(range(len(examples)), key=lambda i: len(questions[i]))
    room = max_length - N_SPECIAL - len(questions[longest])  # context tokens per window
    if room <= doc_stride:
        raise ValueError(f"example {examples[longest].id!r}: its question has {len(questions[longest])} tokens, so "
                         f"max_length={max_length} leaves {max(room, 0)} context tokens per window, and windows "
                         f"that share doc_stride={doc_stride} of them cannot move on; raise max_length or lower "
                         "doc_stride (BERT used 384 and 128)")


@torch.inference_mode()
def predict(model: nn.Module, features: SquadFeatures, batch_size: int = 64,
            progress: bool = True) -> tuple[list[Tensor], list[Tensor]]:
    """Start and end logits of every window, each (T_i,) on the CPU, in the order of ``features``.

    Windows go through the model longest first, so a batch is padded little; dropout is off.
    """
    device = next(model.parameters()).device
    order = sorted(range(len(features)), key=lambda i: -len(features.input_ids[i]))
    start_logits, end_logits = [None] * len(features), [None] * len(features)
    with eval_mode(model):
        for k in tqdm(range(0, len(order), batch_size), desc="answering", unit="batch", disable=not progress):
            chunk = order[k:k + batch_size]
            batch = features.collate([features[i] for i in chunk])
            out = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device),
                        token_type_ids=batch["token_type_ids"].to(device))
            for i, start, end in zip(chunk, out.start_logits.float().cpu(), out.end_logits.float().cpu()):
                n = len(features.input_ids[i])
                start_logits[i], end_logits[i] = start[:n], end[:n]  # (T,) -> (T_i,): padding off
    return start_logits, end_logits


def best_spans(start_logits: Tensor, end_logits: Tensor, first: Tensor, last: Tensor, max_answer_length: int = 30,
               n_best: int = 20) -> tuple[Tensor, Tensor, Tensor]:
    """The ``n_best`` valid spans of each window, best first: start tokens, end tokens and scores, each (B, k).

    ``start_logits``, ``end_logits`` are (B, T); ``first``, ``last`` (B,) bound each window's
    context. A span (i, j) is valid inside the context (first ≤ i ≤ j ≤ last) and at most
    ``max_answer_length`` tokens long; its score is S·T_i + E·T_j. The search is exhaustive over
    that band of the (T, T) score matrix, so it finds what the reference code's search over the
    top-20 starts × top-20 ends finds, and never comes back empty. Where a window has fewer than k
    valid spans, the rest score -inf.
    """
    B, T = start_logits.shape
    L = max_answer_length
    position = torch.arange(T)
    outside = (position < first[:, None]) | (position > last[:, None])                  # (B, T)
    start = start_logits.float().masked_fill(outside, -math.inf)                        # (B, T)
    end = end_logits.float().masked_fill(outside, -math.inf)
    end = F.pad(end, (0, L - 1), value=-math.inf).unfold(1, L, 1)                       # (B, T, L): E·T_{i+l}
    scores = start[:, :, None] + end                                                    # (B, T, L): span (i, i + l)
    top = scores.flatten(1).topk(min(n_best, T * L), dim=1)                             # (B, k) over (B, T·L)
    starts = top.indices // L
    return starts, starts + top.indices % L, top.values


def postprocess(features: SquadFeatures, start_logits: Sequence[Tensor], end_logits: Sequence[Tensor], *,
                max_answer_length: int = 30, n_best: int = 20, batch_size: int = 256) -> dict[str, list[dict]]:
    """Each example's ``n_best`` answers, best first: ``{"text", "start", "end", "score"}`` with
    ``text == context[start:end]`` and score S·T_i + E·T_j.

    Every window proposes its ``n_best`` valid spans (`best_spans`, ``batch_size`` windows at a
    time) and the spans of all the example's windows compete by score; a span that two
    overlapping windows both see keeps the higher of its two scores.
    """
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(f"got {len(start_logits)} start and {len(end_logits)} end logits for {len(features)} windows")
    if not (isinstance(max_answer_length, int) and max_answer_length >= 1):
        raise ValueError(f"max_answer_length must be a positive int (tokens), got {max_answer_length!r}")
    if not (isinstance(n_best, int) and n_best >= 1):
        raise ValueError(f"n_best must be a positive int, got {n_best!r}")
    candidates = [{} for _ in features.examples]  # per example: (start_char, end_char) -> best score
    for k in range(0, len(features), batch_size):
        windows = range(k, min(k + batch_size, len(features)))
        first, last = torch.tensor([features.context_spans[w] for w in windows]).T      # 2 × (B,)
        starts, ends, scores = best_spans(pad_sequence(list(start_logits[k:k + batch_size]), batch_first=True),
                                          pad_sequence(list(end_logits[k:k + batch_size]), batch_first=True),
                                          first, last, max_answer_length, n_best)
        for w, i_s, j_s, score_s in zip(windows, starts.tolist(), ends.tolist(), scores.tolist()):
            offsets, found = features.offsets[w], candidates[features.example_index[w]]
            for i, j, score in zip(i_s, j_s, score_s):
                if score == -math.inf:  # the window has fewer valid spans than n_best
                    break
                span = (offsets[i][0], offsets[j][1])
                found[span] = max(score, found.get(span, -math.inf))
    answers = {}
    for example, found in zip(features.examples, candidates):
        ranked = sorted(found.items(), key=lambda item: -item[1])[:n_best]
        answers[example.id] = [{"text": example.context[a:b], "start": a, "end": b, "score": score}
                               for (a, b), score in ranked]
    return answers


def evaluate(model: nn.Module, tokenizer, examples: Sequence[SquadExample], *, max_length: int = 384,
             doc_stride: int = 128, max_answer_length: int = 30, batch_size: int = 64,
             progress: bool = True) -> tuple[dict[str, str], dict[str, float]]:
    """Answer every example and score the answers: (predictions ``{id: text}``, ``{"exact_match", "f1"}``).

    The scores are the official SQuAD v1.1 ones in percent (`squad_metric`) against all the
    reference answers of each question. On the offline dev-set split, report them as such.
    """
    ids = [example.id for example in examples]
    if len(set(ids)) != len(ids):
        raise ValueError("the examples' ids are not unique, so predictions could not be told apart")
    features = SquadFeatures(examples, tokenizer, max_length, doc_stride)
    start_logits, end_logits = predict(model, features, batch_size, progress)
    best = postprocess(features, start_logits, end_logits, max_answer_length=max_answer_length, n_best=1)
    predictions = {qid: found[0]["text"] for qid, found in best.items()}
    return predictions, squad_metric(predictions, {example.id: example.answers for example in examples})


def answer(model: nn.Module, tokenizer, question: str, context: str, *, max_length: int = 384,
           doc_stride: int = 128, max_answer_length: int = 30) -> dict:
    """Ask the model one question about ``context``: ``{"text", "start", "end", "score"}``.

    ``text == context[start:end]``; score is S·T_i + E·T_j (a logit sum, not a probability). A
    context longer than ``max_length`` tokens is read in windows, as in evaluation.
    """
    example = SquadExample("question", "", context, question)
    features = SquadFeatures([example], tokenizer, max_length, doc_stride)
    start_logits, end_logits = predict(model, features, progress=False)
    return postprocess(features, start_logits, end_logits, max_answer_length=max_answer_length,
                       n_best=1)[example.id][0]
