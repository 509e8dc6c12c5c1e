"""Multiple choice in SWAG's form (Devlin et al. 2018, §4.4, Table 4): which of k endings follows the context?

SWAG (Zellers et al. 2018) gives a sentence and four candidate continuations, one of them the real
one. BERT reads each candidate with the context as its own pair ``[CLS] context [SEP] ending_i [SEP]``;
`BertForMultipleChoice` scores each pair's pooled [CLS] vector C_i with one vector V, and a softmax
over the k scores V·C_i picks the ending.

SWAG is not in the offline data, so the course asks the same kind of question of held-out Wikipedia
text (`next_sentence_questions`): the context is a sentence, the right choice the sentence that
followed it, the wrong ones sentences from elsewhere. A pre-trained BERT already holds such a V:
next sentence prediction scores IsNext and NotNext from C, and the difference of the two logits,
(w_IsNext − w_NotNext)·C + (b_IsNext − b_NotNext), is one vector dotted with C
(`from_next_sentence_head`). So NSP answers these questions with no fine-tuning at all.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..heads import BertForMultipleChoice, BertForPreTraining
from ..modes import eval_mode

DISTRACTORS = ("other articles", "same article")
NEAREST_SAME_ARTICLE_DISTRACTOR = 3  # sentences from the context at least: its neighbours could read as its sequel


@dataclass
class ChoiceQuestion:
    """A context, the k candidate endings, and which of them is the real one (``label``)."""
    context: str
    choices: list[str]
    label: int


def next_sentence_questions(documents: Sequence[Sequence[str]], n: int, *, n_choices: int = 4,
                            distractors: str = "other articles", min_words: int = 5, max_words: int = 30,
                            seed: int = 0) -> list[ChoiceQuestion]:
    """``n`` SWAG-like questions from ``documents`` (each a list of sentences): which sentence came next?

    The context is a sentence of ``min_words`` to ``max_words`` words, the right choice the sentence after
    it, at a seeded random place among the ``n_choices``. The wrong ones are sentences of the same length
    range from ``"other articles"`` (what NSP's NotNext was in pre-training: a sentence from another
    document) or from the ``"same article"``, at least `NEAREST_SAME_ARTICLE_DISTRACTOR` sentences from
    the context: on the same topic, which is closer to SWAG, whose wrong endings were picked to fool a
    model. With one seed, both kinds ask the same contexts with the right choice in the same place, so
    their accuracies are a paired comparison.
    """
    if distractors not in DISTRACTORS:
        raise ValueError(f"distractors must be one of {DISTRACTORS}, got {distractors!r}")
    if not (isinstance(n_choices, int) and n_choices >= 2):
        raise ValueError(f"n_choices must be an int of at least 2, got {n_choices!r}")
    fits = [[min_words <= len(sentence.split()) <= max_words for sentence in doc] for doc in documents]
    far = NEAREST_SAME_ARTICLE_DISTRACTOR

    def same_article(d: int, i: int) -> list[str]:
        return [s for j, s in enumerate(documents[d])
                if fits[d][j] and abs(j - i) >= far and s not in (documents[d][i], documents[d][i + 1])]

    # Contexts that both kinds can ask: a fitting sentence and its fitting successor, with enough fitting
    # sentences far from them in the same article.
    contexts = [(d, i) for d, doc in enumerate(documents) for i in range(len(doc) - 1)
                if fits[d][i] and fits[d][i + 1] and len(same_article(d, i)) >= n_choices - 1]
    if len(contexts) < n or len(documents) < 2:
        raise ValueError(f"asked for {n} questions; these documents hold {len(contexts)} usable contexts")
    rng, distractor_rng = random.Random(seed), random.Random(f"{seed}/{distractors}")
    questions = []
    for d, i in rng.sample(contexts, n):
        label = rng.randrange(n_choices)
        right = documents[d][i + 1]
        if distractors == "same article":
            wrong = distractor_rng.sample(same_article(d, i), n_choices - 1)
        else:
            wrong = []
            while len(wrong) < n_choices - 1:
                other = distractor_rng.randrange(len(documents))
                j = distractor_rng.randrange(len(documents[other]))
                if other != d and fits[other][j] and documents[other][j] not in (right, *wrong):
                    wrong.append(documents[other][j])
        questions.append(ChoiceQuestion(documents[d][i], [*wrong[:label], right, *wrong[label:]], label))
    return questions


def encode_choices(questions: Sequence[ChoiceQuestion], tokenizer, max_length: int = 128) -> dict[str, Tensor]:
    """(B, k, T) ``input_ids``, ``token_type_ids`` and ``attention_mask`` of the pairs ``[CLS] context [SEP] choice_i
    [SEP]``, padded to the longest pair; ``labels`` (B,). A pair longer than ``max_length`` loses tokens from
    the longer of its two texts first."""
    k = len(questions[0].choices)
    if any(len(q.choices) != k for q in questions):
        raise ValueError("the questions of one batch must have the same number of choices")
    contexts = [q.context for q in questions for _ in range(k)]
    choices = [choice for q in questions for choice in q.choices]
    enc = tokenizer(contexts, choices, truncation="longest_first", max_length=max_length, padding=True,
                    return_tensors="pt")
    batch = {name: enc[name].view(len(questions), k, -1)          # (B·k, T) -> (B, k, T)
             for name in ("input_ids", "token_type_ids", "attention_mask")}
    batch["labels"] = torch.tensor([q.label for q in questions])
    return batch


@torch.inference_mode()
def choose(model: BertForMultipleChoice, tokenizer, questions: Sequence[ChoiceQuestion], *, max_length: int = 128,
           batch_size: int = 16) -> Tensor:
    """The (N, k) choice scores (logits) of ``questions``, in their order; ``argmax(-1)`` is the model's choice.

    Questions go through the model by the length of their longest pair, so a batch is padded little;
    dropout is off.
    """
    device = next(model.parameters()).device
    longest_pair = [len(q.context) + max(map(len, q.choices)) for q in questions]
    order = sorted(range(len(questions)), key=longest_pair.__getitem__)
    scores = torch.empty(len(questions), len(questions[0].choices)) if questions else torch.empty(0, 0)
    with eval_mode(model):
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = encode_choices([questions[i] for i in chunk], tokenizer, max_length)
            logits = model(**{name: batch[name].to(device) for name in ("input_ids", "token_type_ids",
                                                                         "attention_mask")}).logits  # (B, k)
            scores[chunk] = logits.float().cpu()
    return scores


def from_next_sentence_head(model: BertForPreTraining) -> BertForMultipleChoice:
    """The multiple-choice model that a pre-trained BERT's NSP layer already is, untrained on any choice.

    Same encoder and pooler; V = w_IsNext − w_NotNext and bias b_IsNext − b_NotNext, so a choice's score
    is IsNext's logit minus NotNext's: the log-odds, to NSP, that the choice is the context's next
    sentence. Adding the same number to every choice's score would not change the softmax over them, so
    only V matters for which choice wins.
    """
    chooser = BertForMultipleChoice(model.config)
    chooser.bert.load_state_dict(model.bert.state_dict())
    nsp = model.cls.seq_relationship                              # rows: 0 IsNext, 1 NotNext
    with torch.no_grad():
        chooser.classifier.weight.copy_(nsp.weight[0:1] - nsp.weight[1:2])   # (1, H)
        chooser.classifier.bias.copy_(nsp.bias[0:1] - nsp.bias[1:2])         # (1,)
    return chooser.eval()
