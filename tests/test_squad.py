"""minibert.tasks.squad: the official v1.1 metric (hand-made cases, and a few hundred real questions
against torchmetrics' independent implementation), windows and labels on the whole dev set,
post-processing on hand-made logits, the split by article, and answer() / evaluate() end to end."""
import math
import random
from collections import defaultdict

import pytest
import torch
from offline import mirror_with, unavailable

from minibert import BertConfig, BertForQuestionAnswering, TrainConfig, Trainer
from minibert.tasks import (
    SquadExample,
    SquadFeatures,
    answer,
    best_spans,
    evaluate,
    exact_match_score,
    f1_score,
    load_squad,
    normalize_answer,
    postprocess,
    read_squad,
    split_by_article,
    squad_metric,
)
from minibert.tasks.squad import CLS_INDEX

HAMLET = SquadExample("hamlet", "Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600.",
                      "Who wrote Hamlet?", ["William Shakespeare"], [31])
# [CLS] who wrote hamlet ? [SEP] hamlet is a tragedy written by william shakespeare around 1600 . [SEP]
#   0    1    2     3     4   5     6    7  8    9       10    11   12       13        14    15 16  17


@pytest.fixture(scope="module")
def mirror():
    return mirror_with("squad_v1.1/dev-v1.1.json")


@pytest.fixture(scope="module")
def dev(mirror):
    return read_squad(mirror / "squad_v1.1" / "dev-v1.1.json")


@pytest.fixture(scope="module")
def dev_features(dev, tokenizer):
    return SquadFeatures(dev, tokenizer, max_length=384, doc_stride=128)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return BertForQuestionAnswering(BertConfig.from_preset("bert-tiny", vocab_size=30522)).eval()


# --- the official v1.1 metric, by hand ---------------------------------------------------------------------
@pytest.mark.parametrize("text, normalized", [
    ("The Broncos", "broncos"),
    ("a dog, an apple and the cat", "dog apple and cat"),
    ("Theatre Anne thence", "theatre anne thence"),      # articles only as whole words
    ("  New\tYork \n City  ", "new york city"),
    ("U.S. (1999)!", "us 1999"),
    ("rock 'n' roll", "rock n roll"),
    ("24–10 “quoted”", "24–10 “quoted”"),                # ASCII punctuation only, as the official script
    ("the-end", "theend"),                               # punctuation goes before the articles
    ("The", ""),
    ("", ""),
])
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match_and_f1_by_hand():
    assert exact_match_score("the Denver Broncos.", "Denver  broncos") == 1.0
    assert exact_match_score("Denver Broncos", "Broncos") == 0.0
    assert f1_score("Denver Broncos", "Broncos") == pytest.approx(2 / 3)          # P 1/2, R 1
    assert f1_score("Broncos", "the Denver Broncos") == pytest.approx(2 / 3)      # P 1, R 1/2
    assert f1_score("broncos broncos", "broncos") == pytest.approx(2 / 3)         # a shared word counts once
    assert f1_score("Carolina Panthers", "Denver Broncos") == 0.0
    assert f1_score("an apple", "the apple") == 1.0
    # An empty prediction scores 0; one that normalises to nothing, like the reference ".", still has F1 0
    # (the official v1.1 script; v2.0 and torchmetrics would give 1) but exact match 1.
    assert f1_score("", "Broncos") == exact_match_score("", "Broncos") == 0.0
    assert (exact_match_score("", "."), f1_score("", ".")) == (1.0, 0.0)


def test_squad_metric_takes_the_best_reference_and_averages_in_percent():
    references = {"q1": ["Carolina Panthers", "the Panthers", "Panthers"], "q2": ["Denver Broncos"],
                  "q3": ["Santa Clara, California", "Levi's Stadium"], "q4": ["February 7, 2016"]}
    predictions = {"q1": "Panthers", "q2": "Broncos", "q3": "Levi's Stadium in Santa Clara", "q4": ""}
    scores = squad_metric(predictions, references)
    f1_q3 = max(f1_score(predictions["q3"], answer) for answer in references["q3"])
    assert f1_q3 == pytest.approx(2 * (2 / 5) * 1 / (2 / 5 + 1))  # "levis stadium": P 2/5, R 1
    assert scores["exact_match"] == pytest.approx(100 * 1 / 4)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + f1_q3 + 0) / 4)


def test_squad_metric_errors_and_missing_predictions():
    with pytest.raises(ValueError, match=r"1 prediction id\(s\) have no reference.*'q9'"):
        squad_metric({"q1": "a", "q9": "b"}, {"q1": ["a"]})
    with pytest.raises(ValueError, match="references is empty"):
        squad_metric({}, {})
    with pytest.raises(ValueError, match="non-empty list of answer texts"):
        squad_metric({"q1": "a"}, {"q1": []})
    with pytest.raises(ValueError, match="non-empty list of answer texts"):
        squad_metric({"q1": "a"}, {"q1": "a"})
    with pytest.raises(TypeError, match="must be the answer text"):
        squad_metric({"q1": ["a"]}, {"q1": ["a"]})
    with pytest.warns(UserWarning, match="1 of 2 questions have no prediction"):
        scores = squad_metric({"q1": "Broncos"}, {"q1": ["Broncos"], "q2": ["Panthers"]})
    assert scores == {"exact_match": 50.0, "f1": 50.0}  # the unanswered question counts as 0


# --- against an independent implementation, on real questions ------------------------------------------
def synthetic_prediction(example: SquadExample, kind: int, rng: random.Random) -> str:
    """What a model might answer, made from the context: right, too long, beside the answer, a sentence, ..."""
    context, text, start = example.context, example.answers[0], example.answer_starts[0]
    end = start + len(text)
    after = context[end:].split()
    words = context.split()
    if kind == 0:
        return text
    if kind == 1:
        return " ".join([text, *after[:1]])                        # one word too many
    if kind == 2:
        return " ".join(after[:rng.randint(1, 4)])                 # the words beside the answer
    if kind == 3:
        return context[context.rfind(". ", 0, start) + 2:context.find(". ", end) + 1]  # its sentence
    if kind == 4:
        return f"The {example.answers[-1].upper()}!"               # case, an article, punctuation
    if kind == 5:
        return ""
    if kind == 6:
        i = rng.randrange(len(words))
        return " ".join(words[i:i + rng.randint(1, 6)])            # anywhere in the context
    if kind == 7:
        return " \n" + text.replace(" ", "  ") + "\t"              # whitespace
    return " ".join(example.answers[-1].split()[1:])               # another reference, first word dropped


def test_metric_matches_torchmetrics_on_real_questions(dev):
    try:
        from torchmetrics.functional.text.squad import squad as torchmetrics_squad
    except ImportError:
        unavailable("torchmetrics is not installed: it is the independent SQuAD metric this test compares with")
    rng = random.Random(0)
    # 300 random dev questions, plus the three whose only-punctuation reference "." normalises to nothing
    examples = rng.sample([e for e in dev if "." not in e.answers], 300) + [e for e in dev if "." in e.answers]
    predictions = {e.id: synthetic_prediction(e, i % 9, rng) for i, e in enumerate(examples)}
    predictions.update({e.id: e.answers[e.answers.index(".")] for e in examples if "." in e.answers})
    references = {e.id: e.answers for e in examples}

    def theirs(ids):
        scores = torchmetrics_squad([{"id": qid, "prediction_text": predictions[qid]} for qid in ids],
                                    [{"id": qid, "answers": {"text": references[qid], "answer_start": []}}
                                     for qid in ids])
        return {name: float(value) for name, value in scores.items()}

    agree, differ = [], []
    for qid in references:
        mine = squad_metric({qid: predictions[qid]}, {qid: references[qid]})
        other = theirs([qid])
        assert mine["exact_match"] == other["exact_match"], qid
        (agree if mine["f1"] == pytest.approx(other["f1"], abs=1e-4) else differ).append(qid)
    # torchmetrics gives F1 1 where both answers normalise to nothing (SQuAD 2.0's rule); v1.1 gives 0.
    assert sorted(differ) == sorted(e.id for e in examples if "." in e.answers)
    for qid in differ:
        assert normalize_answer(predictions[qid]) == "" and squad_metric({qid: predictions[qid]},
                                                                         {qid: references[qid]})["f1"] == 0
    assert len(agree) == 300
    totals = squad_metric({qid: predictions[qid] for qid in agree}, {qid: references[qid] for qid in agree})
    assert totals == pytest.approx(theirs(agree), abs=1e-3)
    # the predictions exercise the metric: right, wrong and partly right answers
    partial = [qid for qid in agree if 0 < squad_metric({qid: predictions[qid]}, {qid: references[qid]})["f1"] < 100]
    assert len(partial) > 50 and 20 < totals["exact_match"] < 60


# --- data, split --------------------------------------------------------------------------------------
def test_load_squad_copies_the_dev_set_and_explains_the_missing_train_set(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MINIBERT_DATA_MIRROR", str(mirror))
    examples = load_squad("dev")
    assert len(examples) == 10570 and len({e.title for e in examples}) == 48
    assert (tmp_path / "squad_v1.1" / "dev-v1.1.json").is_file()
    first = examples[0]
    assert (first.title, first.answers[0]) == ("Super_Bowl_50", "Denver Broncos")
    assert all(e.context[s:s + len(a)] == a for e in examples for a, s in zip(e.answers, e.answer_starts))
    with pytest.raises(FileNotFoundError, match="only with the online download"):
        load_squad("train")
    with pytest.raises(ValueError, match="split must be one of"):
        load_squad("validation")


def test_read_squad_refuses_squad_2(tmp_path):
    path = tmp_path / "v2.json"
    path.write_text('{"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": '
                    '[{"id": "x", "question": "q", "answers": [], "is_impossible": true}]}]}]}')
    with pytest.raises(ValueError, match="SQuAD 2.0"):
        read_squad(path)


def test_split_by_article_is_disjoint_and_deterministic(dev):
    train, held_out = split_by_article(dev, eval_fraction=0.2, seed=0)
    train_titles, eval_titles = {e.title for e in train}, {e.title for e in held_out}
    assert not train_titles & eval_titles and len(eval_titles) == round(0.2 * 48)
    assert len(train) + len(held_out) == len(dev)
    assert [e.id for e in train] == [e.id for e in dev if e.title in train_titles]  # order kept
    again = split_by_article(dev, eval_fraction=0.2, seed=0)
    assert [e.id for e in again[1]] == [e.id for e in held_out]
    assert {e.title for e in split_by_article(dev, seed=1)[1]} != eval_titles
    assert len({e.title for e in split_by_article(dev, eval_articles=3)[1]}) == 3
    with pytest.raises(ValueError, match="eval_articles must be an int from 1 to 47"):
        split_by_article(dev, eval_articles=48)
    with pytest.raises(ValueError, match="eval_fraction"):
        split_by_article(dev, eval_fraction=1.0)
    with pytest.raises(ValueError, match="at least 2 articles"):
        split_by_article([HAMLET])


# --- windows and labels ----------------------------------------------------------------------------
def answer_chars(example):
    start = example.answer_starts[0]
    return start, start + len(example.answers[0])


def test_every_dev_answer_maps_back_through_the_offsets(dev, dev_features):
    f = dev_features
    assert len(f) > len(dev) and set(f.example_index) == set(range(len(dev)))
    found, exact = set(), 0
    for w in range(len(f)):
        example = f.examples[f.example_index[w]]
        start, end = f.start_positions[w], f.end_positions[w]
        first, last = f.context_spans[w]
        offsets = f.offsets[w]
        a, b = answer_chars(example)
        inside = offsets[first][0] <= a and b <= offsets[last][1]
        if not inside:  # the window does not hold the whole answer: both point at [CLS]
            assert (start, end) == (CLS_INDEX, CLS_INDEX)
            continue
        found.add(f.example_index[w])
        assert first <= start <= end <= last
        span = (offsets[start][0], offsets[end][1])
        # the smallest run of tokens that covers the answer
        assert span[0] <= a and b <= span[1]
        assert offsets[start][1] > a and offsets[end][0] < b
        exact += example.context[span[0]:span[1]] == example.answers[0]
    assert found == set(range(len(dev)))  # with 384 tokens every answer fits in some window
    labelled = sum(s != CLS_INDEX for s in f.start_positions)
    # the rest are answers that start or end inside a word ("gold" in "golden")
    assert exact / labelled > 0.995


def test_windows_cover_the_context_with_the_stride(dev, tokenizer):
    examples = dev[:400]
    f = SquadFeatures(examples, tokenizer, max_length=96, doc_stride=24)
    windows = defaultdict(list)
    for w, i in enumerate(f.example_index):
        windows[i].append(f.offsets[w][f.context_spans[w][0]:f.context_spans[w][1] + 1])
    assert max(map(len, windows.values())) > 3
    for i, spans in windows.items():
        alone = tokenizer(examples[i].context, add_special_tokens=False, return_offsets_mapping=True).offset_mapping
        assert [o for o in spans[0]] == alone[:len(spans[0])]
        for before, after in zip(spans, spans[1:]):
            assert before[-24:] == after[:24]  # neighbours share doc_stride context tokens
        covered = sorted({o for span in spans for o in span})
        assert covered == alone
    for w in range(len(f)):
        assert len(f.input_ids[w]) <= 96 and f.input_ids[w][0] == tokenizer.cls_token_id
        if f.start_positions[w] == CLS_INDEX:
            a, b = answer_chars(f.examples[f.example_index[w]])
            first, last = f.context_spans[w]
            assert not (f.offsets[w][first][0] <= a and b <= f.offsets[w][last][1])
    assert 0 < sum(s == CLS_INDEX for s in f.start_positions) < len(f)


def test_features_batch_for_the_trainer(tokenizer):
    f = SquadFeatures([HAMLET] * 4, tokenizer, max_length=14, doc_stride=2)
    batch = f.collate([f[i] for i in range(len(f))])
    T = max(map(len, f.input_ids))
    assert batch["input_ids"].shape == batch["attention_mask"].shape == batch["token_type_ids"].shape == (len(f), T)
    assert batch["start_positions"].shape == (len(f),)
    # "william shakespeare" in the window that holds it
    w = next(w for w in range(len(f)) if f.start_positions[w] != CLS_INDEX)
    assert tokenizer.decode(f.input_ids[w][f.start_positions[w]:f.end_positions[w] + 1]) == "william shakespeare"
    model = BertForQuestionAnswering(BertConfig.from_preset("bert-tiny", vocab_size=30522))
    config = TrainConfig(max_steps=2, batch_size=4, progress=False, device="cpu")
    history = Trainer(model, config, f, f, collate_fn=f.collate).fit()
    assert math.isfinite(history.last("loss")) and math.isfinite(history.last("eval_loss"))


def test_bad_inputs_are_explained(tokenizer):
    with pytest.raises(ValueError, match="'x': the question is empty"):
        SquadFeatures([SquadExample("x", "", "a context", "  ")], tokenizer)
    with pytest.raises(ValueError, match="the context is empty"):
        SquadFeatures([SquadExample("x", "", "", "a question?")], tokenizer)
    with pytest.raises(ValueError, match=r"question has 4 tokens, so max_length=8 leaves 1 context tokens.*stride=1"):
        SquadFeatures([HAMLET], tokenizer, max_length=8, doc_stride=1)
    with pytest.raises(ValueError, match=r"leaves 0 context tokens"):
        SquadFeatures([HAMLET], tokenizer, max_length=7, doc_stride=0)
    with pytest.raises(ValueError, match=r"leaves 121 context tokens.*doc_stride=128"):
        SquadFeatures([HAMLET], tokenizer, max_length=128, doc_stride=128)
    with pytest.raises(ValueError, match="model_max_length=512"):
        SquadFeatures([HAMLET], tokenizer, max_length=1024)
    with pytest.raises(ValueError, match="no examples"):
        SquadFeatures([], tokenizer)
    f = SquadFeatures([HAMLET], tokenizer)
    with pytest.raises(ValueError, match="got 0 start and 0 end logits for 1 windows"):
        postprocess(f, [], [])
    with pytest.raises(ValueError, match="max_answer_length"):
        postprocess(f, [torch.zeros(18)], [torch.zeros(18)], max_answer_length=0)


# --- post-processing ---------------------------------------------------------------------------------
def logits(T, peaks):
    x = torch.zeros(T)
    for i, value in peaks.items():
        x[i] = value
    return x


def test_postprocess_picks_the_best_valid_span(tokenizer):
    f = SquadFeatures([HAMLET], tokenizer)
    assert (len(f), f.context_spans[0]) == (1, (6, 16))
    # The largest scores are in the question (1..3), at [CLS] and at the last [SEP]: none may be chosen.
    start = logits(18, {0: 50, 1: 40, 7: 3, 12: 5})
    end = logits(18, {3: 40, 17: 50, 11: 8, 13: 5})
    best = postprocess(f, [start], [end], max_answer_length=30)["hamlet"]
    # (7, 11) "is a tragedy written by" scores 3 + 8 = 11, more than (12, 13) "william shakespeare" with 10;
    # (12, 11) would score 13 but ends before it starts.
    assert (best[0]["text"], best[0]["score"]) == ("is a tragedy written by", 11)
    assert (best[1]["text"], best[1]["score"]) == ("William Shakespeare", 10)
    for candidate in best:
        assert HAMLET.context[candidate["start"]:candidate["end"]] == candidate["text"]
    assert [c["score"] for c in best] == sorted((c["score"] for c in best), reverse=True) and len(best) == 20
    # five tokens are too many for max_answer_length=4
    best = postprocess(f, [start], [end], max_answer_length=4, n_best=1)["hamlet"]
    assert best == [{"text": "William Shakespeare", "start": 31, "end": 50, "score": 10.0}]


def test_postprocess_compares_windows_and_keeps_a_shared_span_once(tokenizer):
    f = SquadFeatures([HAMLET], tokenizer, max_length=12, doc_stride=3)  # 5 context tokens a window
    assert len(f) > 2
    tokens = [[tokenizer.convert_ids_to_tokens(i) for i in ids] for ids in f.input_ids]
    last = len(f) - 1
    i1600 = tokens[last].index("1600")
    starts = [logits(len(t), {}) for t in tokens]
    ends = [logits(len(t), {}) for t in tokens]
    starts[last][i1600], ends[last][i1600] = 4.0, 4.0  # "1600", only the last window sees it
    iwilliam = [t.index("william") if "william" in t else None for t in tokens]
    shared = [w for w, i in enumerate(iwilliam) if i is not None]
    assert len(shared) >= 2
    for score, w in zip((3.0, 2.0), shared[:2]):  # "william" in two windows, with different scores
        starts[w][iwilliam[w]] = ends[w][iwilliam[w]] = score
    best = postprocess(f, starts, ends, n_best=3)["hamlet"]
    assert [(c["text"], c["score"]) for c in best[:2]] == [("1600", 8.0), ("William", 6.0)]
    assert len({(c["start"], c["end"]) for c in best}) == len(best)


def test_best_spans_is_the_exhaustive_search():
    gen = torch.Generator().manual_seed(0)
    for L, n_best in [(1, 1), (3, 5), (7, 2), (30, 20), (30, 400)]:
        B, T = 16, 40
        first = torch.randint(1, T - 1, (B,), generator=gen)
        last = torch.minimum(first + torch.randint(0, 25, (B,), generator=gen), torch.tensor(T - 2))
        start, end = torch.randn(B, T, generator=gen), torch.randn(B, T, generator=gen)
        starts, ends, scores = best_spans(start, end, first, last, max_answer_length=L, n_best=n_best)
        for b in range(B):
            spans = sorted(((float(start[b, i] + end[b, j]), i, j) for i in range(first[b], last[b] + 1)
                            for j in range(i, min(last[b], i + L - 1) + 1)), reverse=True)[:n_best]
            k = len(spans)  # a short context may have fewer than n_best valid spans: the rest score -inf
            assert list(zip(starts[b, :k].tolist(), ends[b, :k].tolist())) == [(i, j) for _, i, j in spans]
            assert scores[b, :k].tolist() == pytest.approx([score for score, _, _ in spans])
            assert (scores[b, k:] == -math.inf).all()


# --- answer() and evaluate() on a random model ------------------------------------------------------
def test_answer_reads_a_long_context_in_windows(dev, tokenizer, tiny_model):
    example = max(dev[:200], key=lambda e: len(e.context))
    kwargs = dict(max_length=64, doc_stride=16, max_answer_length=10)
    result = answer(tiny_model, tokenizer, example.question, example.context, **kwargs)
    assert set(result) == {"text", "start", "end", "score"}
    assert 0 <= result["start"] < result["end"] <= len(example.context)
    assert result["text"] == example.context[result["start"]:result["end"]] and result["text"].strip()
    # the best valid span over every window, searched here by brute force
    f = SquadFeatures([example], tokenizer, **{k: kwargs[k] for k in ("max_length", "doc_stride")})
    assert len(f) > 3
    best = -math.inf
    with torch.inference_mode():
        for w in range(len(f)):
            out = tiny_model(torch.tensor([f.input_ids[w]]), token_type_ids=torch.tensor([f.token_type_ids[w]]))
            s, e = out.start_logits[0], out.end_logits[0]
            first, last = f.context_spans[w]
            best = max(best, max(float(s[i] + e[j]) for i in range(first, last + 1)
                                 for j in range(i, min(last, i + 9) + 1)))
    assert result["score"] == pytest.approx(best, abs=1e-4)
    with pytest.raises(ValueError, match="the question is empty"):
        answer(tiny_model, tokenizer, "", example.context)


def test_evaluate_answers_every_question(dev, tokenizer, tiny_model):
    examples = dev[:24]
    predictions, scores = evaluate(tiny_model, tokenizer, examples, max_length=128, doc_stride=32,
                                   batch_size=8, progress=False)
    assert list(predictions) == [e.id for e in examples]
    assert scores == squad_metric(predictions, {e.id: e.answers for e in examples})
    assert 0 <= scores["exact_match"] <= scores["f1"] <= 100
    for e in examples[:2]:
        single = answer(tiny_model, tokenizer, e.question, e.context, max_length=128, doc_stride=32)
        assert predictions[e.id] == single["text"]
    assert not tiny_model.training
    with pytest.raises(ValueError, match="not unique"):
        evaluate(tiny_model, tokenizer, examples[:2] * 2, progress=False)
