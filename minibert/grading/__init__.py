"""The grader: nbgrader's autograde with the student's code walled off from the checks that score it.

One pipeline, one module a step:

1. copy in (`intake`): the submission as data, regular files only;
2. run walled (`walls`, `runner`): the student's cells in a process of their own, bubblewrapped, as an id of
   their own, with no network and bounded disk, memory, CPU time and processes;
3. hand back data (`plain`, `remote`): what the tests ask of the student's names comes back as JSON and
   safetensors, or stays behind as a proxy; never a pickle, never an object with behaviour;
4. check (`check`): the instructor's notebook, solutions and tests, runs in a second process where no student
   code ever ran, with the student's names bound to those values and proxies;
5. score (`execute`, `gradebook`): the verdicts become the test cells' outputs in nbgrader's own autograde
   chain, and its gradebook holds the scores.

`commands` holds what a grader calls (``python -m minibert.grading``, ``minibert autograde-class``).
"""
from .commands import autograde, autograde_class, main, release, summary  # noqa: F401
from .gradebook import CellGrade, GradingError, Scores, test_points  # noqa: F401
