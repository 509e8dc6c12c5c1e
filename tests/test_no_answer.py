"""SQuAD 2.0's no-answer rule (§4.3) and official scores, minibert.tasks.no_answer.

The reference is the official evaluation script, evaluate-v2.0.py (Rajpurkar, Jia & Liang 2018). It is not
installed here (neither is `evaluate`'s squad_v2, which wraps it), so `Official` below restates its rules,
function by function and under its names, as the script defines them: references that normalise to nothing
are dropped and an unanswerable question's only reference is ""; compute_f1 gives 1 when both answers are
empty and 0 when one is; the totals are split into HasAns/NoAns; find_best_thresh answers questions in order
of their no-answer probability. Given the official references, the scores must also agree with torchmetrics'
SQuAD, an implementation nobody here wrote.
"""
import collections
import math
import random
import re
import string

import pytest
import torch

from minibert.tasks.no_answer import (
    apply_threshold,
    choose_threshold,
    other_article_questions,
    span_and_null,
    squad_v2_metric,
    v2_f1,
    v2_references,
)
from minibert.tasks.squad import SquadExample, SquadFeatures, best_spans


class Official:
    """evaluate-v2.0.py's definitions, restated (its normalisation included, apart from the library's)."""

    @staticmethod
    def normalize_answer(s):
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", s)
        return " ".join(s.split())

    @classmethod
    def get_tokens(cls, s):
        return cls.normalize_answer(s).split() if s else []

    @classmethod
    def compute_exact(cls, a_gold, a_pred):
        return int(cls.normalize_answer(a_gold) == cls.normalize_answer(a_pred))

    @classmethod
    def compute_f1(cls, a_gold, a_pred):
        gold_toks, pred_toks = cls.get_tokens(a_gold), cls.get_tokens(a_pred)
        num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
        if len(gold_toks) == 0 or len(pred_toks) == 0:
            return int(gold_toks == pred_toks)  # if either is no-answer, F1 is 1 if they agree, 0 otherwise
        if num_same == 0:
            return 0
        precision, recall = num_same / len(pred_toks), num_same / len(gold_toks)
        return (2 * precision * recall) / (precision + recall)

    @classmethod
    def get_raw_scores(cls, references, preds):
        exact_scores, f1_scores = {}, {}
        for qid, answers in references.items():
            gold_answers = [a for a in answers if cls.normalize_answer(a)] or [""]
            exact_scores[qid] = max(cls.compute_exact(a, preds[qid]) for a in gold_answers)
            f1_scores[qid] = max(cls.compute_f1(a, preds[qid]) for a in gold_answers)
        return exact_scores, f1_scores

    @staticmethod
    def make_eval_dict(exact_scores, f1_scores, qid_list=None):
        qid_list = qid_list or list(exact_scores)
        total = len(qid_list)
        return {"exact": 100.0 * sum(exact_scores[k] for k in qid_list) / total,
                "f1": 100.0 * sum(f1_scores[k] for k in qid_list) / total, "total": total}

    @classmethod
    def evaluate(cls, references, preds):
        has_ans = {qid: bool([a for a in answers if cls.normalize_answer(a)]) for qid, answers in references.items()}
        exact, f1 = cls.get_raw_scores(references, preds)
        out = cls.make_eval_dict(exact, f1)
        for prefix, qids in (("HasAns", [k for k, v in has_ans.items() if v]),
                             ("NoAns", [k for k, v in has_ans.items() if not v])):
            if qids:
                out.update({f"{prefix}_{k}": v for k, v in cls.make_eval_dict(exact, f1, qid_list=qids).items()})
        return out

    @staticmethod
    def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
        num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
        cur_score = best_score = num_no_ans
        best_thresh = 0.0
        for qid in sorted(na_probs, key=lambda k: na_probs[k]):
            if qid_to_has_ans[qid]:
                diff = scores[qid]
            else:
                diff = -1 if preds[qid] else 0
            cur_score += diff
            if cur_score > best_score:
                best_score, best_thresh = cur_score, na_probs[qid]
        return 100.0 * best_score / len(scores), best_thresh


# --- the official rules, case by case ------------------------------------------------------------------------
@pytest.mark.parametrize("prediction, answers, exact, f1", [
    ("", [], 100, 100),                                  # no answer, none given: exactly right
    ("Denver", [], 0, 0),                                # an answer where there is none
    ("", ["Denver Broncos"], 0, 0),                      # no answer where there is one
    ("the", [], 100, 100),                               # normalises to nothing: the same as no answer
    ("", ["the", "."], 100, 100),                        # references that normalise to nothing are dropped...
    ("", ["the", "Broncos"], 0, 0),                      # ...so here the only reference is "Broncos"
    ("Denver Broncos", ["the Broncos"], 0, 100 * 2 / 3),  # answerable: as in v1.1
    ("The Broncos.", ["broncos", "Carolina"], 100, 100),
])
def test_one_question_scores_as_the_official_script_scores_it(prediction, answers, exact, f1):
    ours = squad_v2_metric({"q": prediction}, {"q": answers})
    theirs = Official.evaluate({"q": answers}, {"q": prediction})
    assert ours == pytest.approx(theirs) and (ours["exact"], ours["f1"]) == pytest.approx((exact, f1))
    assert ("NoAns_total" in ours) == (not [a for a in answers if Official.normalize_answer(a)])


def test_v2_differs_from_v1_only_where_an_answer_is_empty():
    assert v2_f1("", "") == 1.0 and v2_f1("the", "a") == 1.0 and v2_f1("", "x") == 0.0 and v2_f1("x", "") == 0.0
    assert v2_references(["an", "", "Paris"]) == ["Paris"] and v2_references([]) == [""]


def random_questions(n, seed):
    """Random predictions and references over a small vocabulary, about a third of them unanswerable."""
    rng = random.Random(seed)
    words = ["the", "Denver", "broncos", "won", "a", "title", "in", "2016", "Super", "Bowl", ",", "."]
    phrase = lambda: " ".join(rng.choices(words, k=rng.randint(1, 4)))  # noqa: E731
    references = {f"q{i}": [] if rng.random() < 0.35 else [phrase() for _ in range(rng.randint(1, 3))]
                  for i in range(n)}
    predictions = {q: "" if rng.random() < 0.3 else phrase() for q in references}
    return predictions, references


@pytest.mark.parametrize("seed", range(5))
def test_a_whole_set_scores_as_the_official_script_scores_it(seed):
    predictions, references = random_questions(300, seed)
    ours, theirs = squad_v2_metric(predictions, references), Official.evaluate(references, predictions)
    assert ours.keys() == theirs.keys() == {"exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                                            "NoAns_exact", "NoAns_f1", "NoAns_total"}
    assert ours == pytest.approx(theirs)


def test_scores_agree_with_torchmetrics_given_the_official_references():
    """torchmetrics' SQuAD scores F1 with v2.0's rule for empty answers; given each question's references as
    the official script makes them ([""] for an unanswerable one), it must agree with squad_v2_metric."""
    from torchmetrics.functional.text.squad import squad as torchmetrics_squad

    predictions, references = random_questions(300, 7)
    official = {q: [a for a in answers if Official.normalize_answer(a)] or [""] for q, answers in references.items()}
    theirs = torchmetrics_squad([{"id": q, "prediction_text": p} for q, p in predictions.items()],
                                [{"id": q, "answers": {"text": a, "answer_start": []}} for q, a in official.items()])
    ours = squad_v2_metric(predictions, references)
    assert (ours["exact"], ours["f1"]) == pytest.approx((float(theirs["exact_match"]), float(theirs["f1"])), abs=1e-4)


def test_every_question_needs_a_prediction():
    with pytest.raises(ValueError, match="same question ids"):
        squad_v2_metric({"a": ""}, {"a": [], "b": ["x"]})
    with pytest.raises(ValueError, match="same question ids"):
        squad_v2_metric({"a": "", "c": "x"}, {"a": []})


# --- the threshold τ -------------------------------------------------------------------------------------------
def random_candidates(n, seed):
    """Spans with distinct margins ŝ − s_null; answerable questions tend to have larger ones."""
    predictions, references = random_questions(n, seed)
    rng = random.Random(seed + 100)
    candidates = {}
    for q, answers in references.items():
        text = predictions[q] if Official.normalize_answer(predictions[q]) else "Denver"
        null = rng.gauss(0, 3)
        candidates[q] = {"text": text, "null_score": null, "score": null + rng.gauss(2 if answers else -2, 3)}
    return candidates, references


@pytest.mark.parametrize("seed", range(5))
def test_the_chosen_threshold_is_the_official_best_and_gives_what_it_promises(seed):
    candidates, references = random_candidates(400, seed)
    tau, f1 = choose_threshold(candidates, references)
    preds = {q: c["text"] for q, c in candidates.items()}
    _, raw_f1 = Official.get_raw_scores(references, preds)
    has_ans = {q: bool([a for a in answers if Official.normalize_answer(a)]) for q, answers in references.items()}
    na_probs = {q: c["null_score"] - c["score"] for q, c in candidates.items()}  # larger: more likely no answer
    best_f1, _ = Official.find_best_thresh(preds, raw_f1, na_probs, has_ans)
    assert f1 == pytest.approx(best_f1)
    assert squad_v2_metric(apply_threshold(candidates, tau), references)["f1"] == pytest.approx(f1)
    for other in (-math.inf, 0.0, tau - 1, tau + 1, math.inf):
        assert squad_v2_metric(apply_threshold(candidates, other), references)["f1"] <= f1 + 1e-9


def test_the_threshold_sits_between_the_last_answered_and_the_first_not():
    candidates = {"a": {"text": "x", "score": 5.0, "null_score": 0.0},    # margin 5, right
                  "b": {"text": "y", "score": 1.0, "null_score": 0.0},    # margin 1, unanswerable
                  "c": {"text": "z", "score": -3.0, "null_score": 0.0}}   # margin -3, unanswerable
    references = {"a": ["x"], "b": [], "c": []}
    assert choose_threshold(candidates, references) == (3.0, 100.0)
    assert apply_threshold(candidates, 3.0) == {"a": "x", "b": "", "c": ""}
    assert choose_threshold(candidates, {"a": ["x"], "b": ["y"], "c": ["z"]}) == (-math.inf, 100.0)
    assert choose_threshold(candidates, {"a": [], "b": [], "c": []}) == (5.0, 100.0)
    tied = {q: {**c, "score": 2.0} for q, c in candidates.items()}  # equal margins: answered together or not at all
    assert choose_threshold(tied, references) == (2.0, pytest.approx(200 / 3))


# --- ŝ and s_null from the windows' logits -----------------------------------------------------------------------
def test_span_and_null_take_the_best_span_and_the_smallest_null_over_windows(tokenizer):
    context = " ".join(f"word{i} is here." for i in range(60))
    examples = [SquadExample("long", "A", context, "Which word is here?"),
                SquadExample("short", "B", "Paris is the capital of France.", "What is the capital of France?")]
    features = SquadFeatures(examples, tokenizer, max_length=64, doc_stride=16)
    assert features.example_index.count(0) > 2, "the long paragraph is read in several windows"
    g = torch.Generator().manual_seed(0)
    start = [torch.randn(len(ids), generator=g) for ids in features.input_ids]
    end = [torch.randn(len(ids), generator=g) for ids in features.input_ids]
    found = span_and_null(features, start, end, max_answer_length=5)
    for k, example in enumerate(examples):
        windows = [w for w, i in enumerate(features.example_index) if i == k]
        assert found[example.id]["null_score"] == pytest.approx(min(float(start[w][0] + end[w][0]) for w in windows))
        best = max(float(best_spans(start[w][None], end[w][None], torch.tensor([features.context_spans[w][0]]),
                                    torch.tensor([features.context_spans[w][1]]), 5, n_best=1)[2]) for w in windows)
        assert found[example.id]["score"] == pytest.approx(best)
        assert found[example.id]["text"] in example.context


def test_other_article_questions_are_unanswerable_twins():
    examples = [SquadExample(f"{t}{i}", t, f"paragraph {i} of {t}", f"question {i} on {t}?", ["x"], [0])
                for t in "ABC" for i in range(4)]
    twins = other_article_questions(examples, seed=0)
    assert [t.id for t in twins] == [f"{e.id}/other" for e in examples]
    assert all(t.question == e.question and t.title != e.title and t.context.endswith(t.title) and t.answers == []
               for t, e in zip(twins, examples))
    assert other_article_questions(examples, seed=0) == twins
    with pytest.raises(ValueError, match="one article"):
        other_article_questions([e for e in examples if e.title == "A"])
