"""minibert.analysis.held_out: heads and offsets are chosen on one result and scored on the other, by hand."""
from __future__ import annotations

import numpy as np
import pytest

from minibert.analysis import CoreferenceAccuracy, HeldOutCoreference, HeldOutSyntax, SyntaxAccuracy, split_in_two


def syntax_result(det_rows, det_cols, all_rows, counts, offsets):
    """A SyntaxAccuracy of 1 layer x 3 heads for "det" and "all" (rows: dep->head, cols: head->dep)."""
    accuracy = {"dep->head": {"det": np.array([det_rows]), "all": np.array([all_rows])},
                "head->dep": {"det": np.array([det_cols]), "all": np.array([all_rows]) / 2}}
    return SyntaxAccuracy(accuracy, counts, offsets, skipped=0)


# on the choosing side head 2 (dep->head) and offset +1 win; on the scoring side head 0 and offset -1 would
CHOSEN = syntax_result([0.5, 0.6, 0.9], [0.1, 0.1, 0.1], [0.4, 0.3, 0.2], {"all": 200, "det": 150},
                       {"det": {-1: 0.2, 1: 0.7}, "all": {-1: 0.3, 1: 0.5}})
SCORED = syntax_result([0.95, 0.6, 0.7], [0.1, 0.8, 0.1], [0.1, 0.2, 0.35], {"all": 300, "det": 120},
                       {"det": {-1: 0.6, 1: 0.4}, "all": {-1: 0.45, 2: 0.1}})


def test_the_head_and_offset_chosen_on_one_side_are_scored_on_the_other():
    held_out = HeldOutSyntax(CHOSEN, SCORED)
    assert held_out.best_head("det") == (0.7, 0, 2, "dep->head")  # not 0.95: head 0 was not the choice
    assert held_out.best_offset("det") == (1, 0.4)                # not 0.6: offset -1 was not the choice
    assert held_out.best_offset("all") == (1, 0.0)                # +1 never occurs on the scoring side
    assert held_out.best_head("all") == (0.1, 0, 0, "dep->head")


def test_the_held_out_table_keeps_relations_frequent_on_both_sides():
    held_out = HeldOutSyntax(CHOSEN, SCORED)
    rows = held_out.table(min_count=100)
    assert [r["relation"] for r in rows] == ["all", "det"]
    assert rows[1] == {"relation": "det", "count": 120, "head": "1-3", "direction": "dep->head", "accuracy": 0.7,
                       "chosen_accuracy": 0.9, "offset": 1, "offset_accuracy": 0.4}
    assert [r["relation"] for r in held_out.table(min_count=130)] == ["all"]  # 150 chosen, but 120 scored


def test_a_relation_missing_on_one_side_says_so():
    scored = syntax_result([0.1] * 3, [0.1] * 3, [0.1] * 3, {"all": 5}, {"all": {1: 1.0}})
    with pytest.raises(KeyError, match="no 'det' words in the scored sentences"):
        HeldOutSyntax(CHOSEN, scored).best_head("det")


def test_coreference_head_chosen_on_one_half_is_scored_on_the_other():
    chosen = CoreferenceAccuracy(np.array([[0.5, 0.7], [0.6, 0.55]]), {"nearest": 0.5, "first": 0.4}, 10, {})
    scored = CoreferenceAccuracy(np.array([[0.8, 0.45], [0.6, 0.5]]), {"nearest": 0.6, "first": 0.5}, 12, {})
    assert HeldOutCoreference(chosen, scored).best_head() == (0.45, 0, 1)


def test_split_in_two_is_seeded_disjoint_and_keeps_the_order():
    items = list("abcdefghijk")
    first, second = split_in_two(items, seed=3)
    assert (first, second) == split_in_two(items, seed=3)
    assert len(first) == 5 and len(second) == 6 and sorted(first + second) == items
    assert first == sorted(first) and second == sorted(second)
    assert split_in_two(items, seed=4) != (first, second)
