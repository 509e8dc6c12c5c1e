"""The GLUE benchmark as the paper used it: nine tasks, their sizes, metrics and the paper's figures.

Wang et al. (2018) collected nine English tasks into GLUE and score each with its own metric, because
accuracy says little where the labels are unbalanced or the answer is a number. Devlin et al. (2018)
report eight of them in Table 1 (GLUE's test server) and leave WNLI out. The figures here are the
paper's (Table 1, test) and GLUE's (Wang et al. 2018, Table 1, sizes); the caveats are the ones a
lecture on Table 1 has to give, because each changes how a row reads. `glue_table` puts the course's
own runs (`minibert experiment glue`) beside them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GlueTask:
    """One task of GLUE: what it asks, how much data, how it is scored, and what BERT scored."""
    name: str                  # as GLUE writes it
    key: str                   # as `minibert finetune` and glue.json write it
    asks: str
    train: int                 # training examples
    test: int                  # test examples (labels kept secret by GLUE's server, except where said)
    metric: str                # the metric of the paper's Table 1
    bert_base: float | None    # Table 1, GLUE test; None: not reported
    bert_large: float | None
    caveat: str


GLUE = (
    GlueTask("MNLI", "mnli", "entailment, neutral or contradiction (3 classes), many genres", 392_702, 19_643,
             "accuracy (matched)", 84.6, 86.7,
             "two test sets: genres seen in training (this row) and genres not seen ('mismatched', BERT-base "
             "83.4), both in Table 1's average"),
    GlueTask("QQP", "qqp", "are two Quora questions the same question?", 363_846, 390_965, "F1", 71.2, 72.1,
             "F1 of 'duplicate', the rarer class: BERT-base's predictions are 89.2% accurate (GLUE's leaderboard), "
             "so the low-looking number is the metric, not the model"),
    GlueTask("QNLI", "qnli", "does this sentence of a Wikipedia paragraph answer the question? (from SQuAD)",
             104_743, 5_463, "accuracy", 90.5, 92.7, "a reading-comprehension task recast as pairs"),
    GlueTask("SST-2", "sst2", "is a movie-review sentence positive or negative?", 67_349, 1_821, "accuracy", 93.5,
             94.9, "balanced classes: here accuracy is a fair measure"),
    GlueTask("CoLA", "cola", "is a sentence grammatical English?", 8_551, 1_063, "Matthews correlation", 52.1, 60.5,
             "×100, from -100 to 100: 0 for any constant answer or chance, though 70% of training sentences are "
             "acceptable (saying 'yes' to all is 70% accurate); not comparable with the accuracies"),
    GlueTask("STS-B", "stsb", "how similar in meaning are two sentences, 0 to 5?", 5_749, 1_379,
             "Spearman correlation", 85.8, 86.5,
             "a regression (one output), ×100; GLUE also reports Pearson's (BERT-base 87.1); test labels public"),
    GlueTask("MRPC", "mrpc", "is one news sentence a paraphrase of the other?", 3_668, 1_725, "F1", 88.9, 89.3,
             "F1 of 'paraphrase', the majority class (66.5% of test): saying 'paraphrase' to every pair "
             "already scores F1 79.9; BERT-base's accuracy 84.8 (GLUE's leaderboard); test labels public"),
    GlueTask("RTE", "rte", "does the first text entail the second? (2 classes)", 2_490, 3_000, "accuracy", 66.4, 70.1,
             "the smallest training set the paper reports: seeds and learning rates move it by points, and "
             "BERT-large's fine-tuning, unstable on small sets, took the best of several restarts"),
    GlueTask("WNLI", "wnli", "which noun does a pronoun mean? (Winograd schemas as pairs)", 635, 146, "accuracy",
             None, None,
             "left out of Table 1: train and dev share sentences with opposite labels, so learning the training "
             "set is wrong on dev, and no system submitted to GLUE then beat the majority class (65.1); BERT's "
             "submission answered the majority class"),
)
# Not GLUE, but the paper's Table 7 and a row of the course's table (notebook 09's task).
CONLL2003_NER = GlueTask("NER", "ner", "which words name a person, place, organisation or other? (CoNLL-2003)",
                         14_041, 3_453, "F1", 92.4, 92.8,
                         "Table 7, not GLUE: F1 of whole entities (seqeval), test labels public; the paper's "
                         "figure used each word's document context, ours the sentence alone")
MNLI_MISMATCHED = {"BERT-base": 83.4, "BERT-large": 85.9}  # Table 1's MNLI-mm column
TABLE1_AVERAGE = {"BERT-base": 79.6, "BERT-large": 82.1}   # Table 1's average of its nine columns (WNLI left out)
BY_KEY = {task.key: task for task in (*GLUE, CONLL2003_NER)}


def glue_table(ours: list[dict] | None = None, tasks: tuple[GlueTask, ...] = GLUE) -> list[dict]:
    """Every GLUE task as a row (plain data), with the course's measurement beside the paper's where there is
    one: ``ours`` is glue.json's ``rows`` (`minibert experiment glue`); ``ours_on`` says "dev" or "test"."""
    measured = {r["task"]: r for r in ours or [] if r.get("ours") is not None}
    rows = []
    for task in tasks:
        mine = measured.get(task.key)
        if mine and mine["metric"] != metric_key(task.metric):
            raise ValueError(f"glue.json scores {task.key} by {mine['metric']!r}, the paper's Table 1 by "
                             f"{task.metric!r}: re-run `minibert experiment glue` with this version")
        rows.append({"task": task.name, "train": task.train, "test": task.test, "metric": task.metric,
                     "bert_base": task.bert_base, "bert_large": task.bert_large,
                     "ours": mine["ours"] if mine else None,
                     "ours_on": _split_name(mine["split"]) if mine else None, "caveat": task.caveat})
    return rows


def metric_key(metric: str) -> str:
    """The name of a Table 1 metric in minibert's results files (``accuracy (matched)`` → ``accuracy``)."""
    return {"F1": "f1", "Spearman correlation": "spearman", "Matthews correlation": "matthews"}.get(
        metric, metric.split(" ")[0])


def _split_name(split: str) -> str:
    """ "dev" or "test" from a results file's description of its held-out data ("SST-2 dev (GLUE): 872 ...")."""
    return "dev" if "dev" in split.split(":")[0].split() else "test"
