"""GAP (Webster et al. 2018): gendered pronouns in Wikipedia text, each with two candidate names.

Each row of the TSV is one pronoun and two names, A and B, given by character offsets into the
text, with TRUE/FALSE for whether each name is the pronoun's antecedent. Neither, one, or (in
principle) both may be TRUE; coreference analysis uses the rows where exactly one is.
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from .. import data

HEADER = ["ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref",
          "B", "B-offset", "B-coref", "URL"]
SPLITS = ("development", "test", "validation")


@dataclass(frozen=True)
class GapExample:
    id: str
    text: str
    pronoun: str
    pronoun_offset: int
    a: str
    a_offset: int
    a_coref: bool
    b: str
    b_offset: int
    b_coref: bool
    url: str

    @property
    def antecedent(self) -> str | None:
        """"A" or "B" when exactly one candidate is the pronoun's antecedent, else None."""
        if self.a_coref != self.b_coref:
            return "A" if self.a_coref else "B"
        return None


def read_gap(path: str | os.PathLike) -> list[GapExample]:
    """Rows of a GAP TSV; an error says which row does not fit the format."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as f:
        # GAP's texts contain unbalanced quotes: read every field verbatim, as the TSV was written.
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != HEADER:
        raise ValueError(f"{path} is not a GAP TSV: its header should be {' '.join(HEADER)} (tab-separated), "
                         f"got {' '.join(rows[0])[:120] if rows else 'an empty file'!r}")
    examples = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(HEADER):
            raise ValueError(f"{path}, line {number}: {len(row)} columns, GAP has {len(HEADER)}")
        id_, text, pronoun, p_off, a, a_off, a_coref, b, b_off, b_coref, url = row
        try:
            example = GapExample(id_, text, pronoun, int(p_off), a, int(a_off), _bool(a_coref),
                                 b, int(b_off), _bool(b_coref), url)
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: {err}") from None
        for name, offset in ((pronoun, example.pronoun_offset), (a, example.a_offset), (b, example.b_offset)):
            if text[offset:offset + len(name)] != name:
                raise ValueError(f"{path}, line {number}: the text at offset {offset} is "
                                 f"{text[offset:offset + len(name)]!r}, not {name!r}")
        examples.append(example)
    return examples


def _bool(value: str) -> bool:
    if value not in ("TRUE", "FALSE"):
        raise ValueError(f"a coref column holds {value!r}, not TRUE or FALSE")
    return value == "TRUE"


def load_gap(split: str = "development") -> list[GapExample]:
    """A GAP split (development and test: 2,000 rows each; validation: 454), fetched first if absent."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return read_gap(data.ensure("gap_coreference") / f"gap-{split}.tsv")
