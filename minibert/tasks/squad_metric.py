"""SQuAD v1.1's exact match and F1, as the official evaluation script (evaluate-v1.1.py) defines them.

Both compare *normalised* answers: lower-cased, punctuation removed, the articles a / an / the
removed, whitespace collapsed, so "The Broncos." and "broncos" are the same answer. Exact match
asks for the whole normalised string; F1 treats the two answers as bags of words (precision and
recall of the shared words). A question has several reference answers from different crowd
workers (three for most dev questions); a prediction gets its best score over them. The totals
are means over all questions, in percent: BERT-base reaches EM 80.8 / F1 88.5 on the dev set.

Two details of the official script are kept on purpose, because published numbers depend on them:
an answer that normalises to nothing scores F1 0 even against a reference that also normalises to
nothing (exact match 1), and a question without a prediction counts as 0 rather than being skipped.
"""
from __future__ import annotations

import re
import string
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence

PUNCTUATION = set(string.punctuation)  # ASCII only: the official script leaves "–" and "’" in place
ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles, collapse whitespace: the official order."""
    text = "".join(ch for ch in text.lower() if ch not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, ground_truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction: str, ground_truth: str) -> float:
    """Word-overlap F1 = 2PR / (P + R) of the normalised answers, with repeated words counted as often as shared."""
    predicted, true = normalize_answer(prediction).split(), normalize_answer(ground_truth).split()
    shared = sum((Counter(predicted) & Counter(true)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(true)
    return 2 * precision * recall / (precision + recall)


def squad_metric(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """``{"exact_match", "f1"}`` in percent over every question in ``references``.

    ``predictions`` maps a question id to the predicted answer text; ``references`` maps every
    question id to its reference answer texts. A prediction for an id that has no reference is an
    error (the predictions belong to another split); a question without a prediction scores 0, as
    in the official script, with a warning.
    """
    if not references:
        raise ValueError("references is empty: there are no questions to score")
    unknown = [qid for qid in predictions if qid not in references]
    if unknown:
        raise ValueError(f"{len(unknown)} prediction id(s) have no reference answers, e.g. {unknown[:3]}; "
                         "are the predictions for another split, or another version of SQuAD?")
    missing = [qid for qid in references if qid not in predictions]
    if missing:
        warnings.warn(f"{len(missing)} of {len(references)} questions have no prediction and score 0, "
                      f"e.g. {missing[:3]}", stacklevel=2)
    exact_match = f1 = 0.0
    for qid, answers in references.items():
        if isinstance(answers, str) or not answers:
            raise ValueError(f"question {qid!r}: references must map to a non-empty list of answer texts, "
                             f"got {answers!r}")
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        if not isinstance(prediction, str):
            raise TypeError(f"question {qid!r}: a prediction must be the answer text (str), "
                            f"got {type(prediction).__name__}")
        exact_match += max(exact_match_score(prediction, answer) for answer in answers)
        f1 += max(f1_score(prediction, answer) for answer in answers)
    return {"exact_match": 100 * exact_match / len(references), "f1": 100 * f1 / len(references)}
