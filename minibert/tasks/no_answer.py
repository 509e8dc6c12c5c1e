"""SQuAD 2.0: when to answer nothing (Devlin et al. 2018, §4.3, Table 3), and SQuAD 2.0's official scores.

SQuAD 2.0 (Rajpurkar, Jia & Liang 2018) adds questions that the paragraph does not answer; the right
reply to them is nothing. BERT adds no parameter for this: "no answer" is the span that starts and ends
at [CLS], scored s_null = S·C + E·C with C the final vector of [CLS], like any span S·T_i + E·T_j. The
best non-null span ŝ (`squad.best_spans`) is given as the answer when ŝ > s_null + τ, with the threshold
τ chosen on the dev set to maximise F1 (`choose_threshold`). A paragraph read in several windows
proposes the best span over all of them, and its s_null is the smallest of its windows' [CLS] scores,
as in the paper's code (run_squad.py): the window that most believes the answer is in it speaks for
the paragraph (`span_and_null`).

The official v2.0 script (evaluate-v2.0.py) scores answers like v1.1 (`squad_metric`: normalised exact
match and word-overlap F1, the best over the references) with these differences, all kept in
`squad_v2_metric`: reference answers that normalise to nothing are dropped, and a question left with
none (an unanswerable one) has the single reference "", which only an empty prediction matches; F1
between two empty answers is 1, between an empty and a non-empty one 0; and the totals are also given
for the answerable (``HasAns_``) and the unanswerable (``NoAns_``) questions apart, with the script's
key names.
"""
from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np
from torch import Tensor

from .squad import CLS_INDEX, SquadExample, SquadFeatures, postprocess
from .squad_metric import exact_match_score, f1_score, normalize_answer


def span_and_null(features: SquadFeatures, start_logits: Sequence[Tensor], end_logits: Sequence[Tensor], *,
                  max_answer_length: int = 30) -> dict[str, dict]:
    """Each example's best non-null span and its null score: ``{id: {"text", "score", "null_score"}}``.

    ``score`` is ŝ = S·T_i + E·T_j of the best valid span over the example's windows (`squad.postprocess`),
    ``null_score`` is s_null = S·C + E·C, the smallest over its windows. ``start_logits`` and
    ``end_logits`` are `squad.predict`'s, one (T_w,) tensor per window of ``features``.
    """
    null = {}
    for window, (start, end) in enumerate(zip(start_logits, end_logits)):
        qid = features.examples[features.example_index[window]].id
        null[qid] = min(null.get(qid, math.inf), float(start[CLS_INDEX] + end[CLS_INDEX]))
    best = postprocess(features, start_logits, end_logits, max_answer_length=max_answer_length, n_best=1)
    return {qid: {"text": found[0]["text"], "score": found[0]["score"], "null_score": null[qid]}
            for qid, found in best.items()}


def apply_threshold(candidates: Mapping[str, dict], tau: float) -> dict[str, str]:
    """The predictions at threshold τ: the span's text where ŝ > s_null + τ, else "" (no answer)."""
    return {qid: c["text"] if c["score"] > c["null_score"] + tau else "" for qid, c in candidates.items()}


def choose_threshold(candidates: Mapping[str, dict], references: Mapping[str, Sequence[str]]) -> tuple[float, float]:
    """(τ, the F1 in percent it gives): the threshold that maximises SQuAD 2.0's F1 over ``references``.

    Questions are answered in order of their margin ŝ − s_null, from the highest; each one answered gains
    its span's F1 and loses what abstaining scored (1 on an unanswerable question, 0 on an answerable
    one). The best count is found as the official script's ``find_best_thresh`` finds it (the fewest
    answers among equal totals), and τ is put halfway between the margins of the last question answered
    and the first not: every τ in that gap scores the same here, and the middle leaves most room on new
    questions. τ = -inf answers everything, a τ at or above the largest margin nothing.
    """
    qids = list(references)
    margin = np.array([candidates[q]["score"] - candidates[q]["null_score"] for q in qids])
    answered = np.array([max(v2_f1(candidates[q]["text"], r) for r in v2_references(references[q])) for q in qids])
    abstained = np.array([float(not v2_references(references[q])[0]) for q in qids])  # "" is right only there
    order = np.argsort(-margin, kind="stable")
    totals = abstained.sum() + np.concatenate([[0.0], np.cumsum((answered - abstained)[order])])  # answer the top m
    ordered = margin[order]
    cuttable = np.ones(len(qids) + 1, dtype=bool)
    cuttable[1:-1] = ordered[:-1] > ordered[1:]           # questions with equal margins are answered together
    m = int(np.argmax(np.where(cuttable, totals, -np.inf)))
    if m == 0:
        tau = float(ordered[0])
    elif m == len(qids):
        tau = -math.inf
    else:
        tau = float((ordered[m - 1] + ordered[m]) / 2)
    return tau, 100 * float(totals[m]) / len(qids)


def v2_references(answers: Sequence[str]) -> list[str]:
    """The official script's references: the answers that do not normalise to nothing, or [""] if none do."""
    kept = [a for a in answers if normalize_answer(a)]
    return kept or [""]


def v2_exact(prediction: str, truth: str) -> float:
    """Exact match of the normalised answers; "" matches only "" (v1.1's `exact_match_score`)."""
    return exact_match_score(prediction, truth)


def v2_f1(prediction: str, truth: str) -> float:
    """Word-overlap F1 as in v1.1, except that an empty answer scores 1 against an empty one and 0 against
    any other (v1.1 gives two empty answers 0)."""
    if not normalize_answer(prediction) or not normalize_answer(truth):
        return float(normalize_answer(prediction) == normalize_answer(truth))
    return f1_score(prediction, truth)


def squad_v2_metric(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """SQuAD 2.0's scores in percent, with the official script's keys: ``exact``, ``f1``, ``total`` and the
    same for the answerable (``HasAns_exact``, ``HasAns_f1``, ``HasAns_total``) and unanswerable
    (``NoAns_...``) questions; a part with no questions is left out, as the script leaves it out.

    ``references`` maps every question id to its reference answers, an empty list (or only answers that
    normalise to nothing) for an unanswerable question; ``predictions`` maps every id to the answer text,
    "" for no answer. The official script skips a question without a prediction and scores the rest,
    which flatters a system that answers only what it is sure of: here it is an error.
    """
    if not references:
        raise ValueError("references is empty: there are no questions to score")
    missing = [qid for qid in references if qid not in predictions]
    unknown = [qid for qid in predictions if qid not in references]
    if missing or unknown:
        raise ValueError(f"predictions and references must have the same question ids: {len(missing)} without a "
                         f"prediction (e.g. {missing[:3]}), {len(unknown)} without references (e.g. {unknown[:3]})")
    exact, f1, has_answer = {}, {}, {}
    for qid, answers in references.items():
        if isinstance(answers, str):
            raise ValueError(f"question {qid!r}: references must map to a list of answer texts, got {answers!r}")
        prediction = predictions[qid]
        if not isinstance(prediction, str):
            raise TypeError(f"question {qid!r}: a prediction must be the answer text (str, \"\" for no answer), "
                            f"got {type(prediction).__name__}")
        truths = v2_references(answers)
        has_answer[qid] = bool(truths[0])
        exact[qid] = max(v2_exact(prediction, truth) for truth in truths)
        f1[qid] = max(v2_f1(prediction, truth) for truth in truths)
    scores = {}
    for prefix, qids in (("", list(references)), ("HasAns_", [q for q in references if has_answer[q]]),
                         ("NoAns_", [q for q in references if not has_answer[q]])):
        if qids:
            scores |= {f"{prefix}exact": 100 * sum(exact[q] for q in qids) / len(qids),
                       f"{prefix}f1": 100 * sum(f1[q] for q in qids) / len(qids), f"{prefix}total": len(qids)}
    return scores


def other_article_questions(examples: Sequence[SquadExample], seed: int = 0) -> list[SquadExample]:
    """Each question again, on a paragraph of another article of ``examples`` (seeded): unanswerable
    questions made from answerable ones, with no reference answers and the id ``<id>/other``.

    A paragraph about another subject almost never holds the answer, so no one has to write these
    questions; but they are far easier to refuse than SQuAD 2.0's, whose writers made each unanswerable
    question fit its paragraph and gave it a plausible wrong answer in it.
    """
    paragraphs = list(dict.fromkeys((e.title, e.context) for e in examples))
    if len({title for title, _ in paragraphs}) < 2:
        raise ValueError("the examples come from one article: there is no other article to take a paragraph from")
    rng = random.Random(seed)
    unanswerable = []
    for example in examples:
        title, context = rng.choice([p for p in paragraphs if p[0] != example.title])
        unanswerable.append(SquadExample(f"{example.id}/other", title, context, example.question))
    return unanswerable
