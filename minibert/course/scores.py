"""What autograding gives back: each test cell's points and, where it lost them, why."""
from dataclasses import dataclass
from pathlib import Path

import nbformat


@dataclass(frozen=True)
class CellGrade:
    score: float
    max_score: float
    error: str = ""  # the check that failed and its message: why points were lost
    notes: tuple[str, ...] = ()  # integrity notes for the person grading (the library's answer used?): never a score


@dataclass(frozen=True)
class Scores:
    """nbgrader's autograde result: notebook name -> grade_id of each test cell -> its grade."""

    notebooks: dict[str, dict[str, CellGrade]]

    @property
    def score(self) -> float:
        return sum(cell.score for cells in self.notebooks.values() for cell in cells.values())

    @property
    def max_score(self) -> float:
        return sum(cell.max_score for cells in self.notebooks.values() for cell in cells.values())

    def table(self) -> str:
        width = max([len("total")] + [len(f"  {g}") for c in self.notebooks.values() for g in c] +
                    [len(name) for name in self.notebooks])
        lines = []
        for name, cells in self.notebooks.items():
            score, max_score = (sum(getattr(c, a) for c in cells.values()) for a in ("score", "max_score"))
            lines.append(f"{name:<{width}}  {score:g} / {max_score:g}")
            for grade_id, cell in cells.items():
                why = f"  ({cell.error})" if cell.error else ""
                lines.append(f"{'  ' + grade_id:<{width}}  {cell.score:g} / {cell.max_score:g}{why}")
                lines += [f"{'':<{width}}    note: {note}" for note in cell.notes]
        lines.append(f"{'total':<{width}}  {self.score:g} / {self.max_score:g}")
        return "\n".join(lines)


def with_errors(grades: dict[str, tuple[float, float]], autograded: Path,
                 present: set | None = None) -> dict[str, CellGrade]:
    """Attach to each test cell that lost points the error it raised in the autograded notebook, or why it
    could not run: a test cell missing from the submission (``present``: the grade_ids it has)."""
    errors = {}
    if autograded.exists():
        for cell in nbformat.read(autograded, as_version=4).cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    errors[grade_id] = f"{output.ename}: {output.evalue}".rstrip(": ")
    for grade_id, _ in grades.items():
        if present is not None and grade_id not in present and grade_id not in errors:
            errors[grade_id] = ("this test cell is not in the submitted notebook (deleted, or its nbgrader metadata "
                                "removed): copy it back from the release")
    missing = "" if autograded.exists() else "not submitted"
    return {grade_id: CellGrade(score or 0.0, max_score, "" if score == max_score else errors.get(grade_id, missing))
            for grade_id, (score, max_score) in grades.items()}
