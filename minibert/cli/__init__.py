"""``minibert`` on the command line: one entry point for the course's chores.

    minibert data list | fetch [NAMES...]        fill data/ from the Hub or a mirror
    minibert pretrain --out DIR [options]       pre-train a BERT (minibert pretrain --help)
    minibert export RUN --out DIR              a pretrain or finetune run as a model folder to ship
    minibert finetune TASK --model M --out DIR  fine-tune on sst2, squad, pos, mrpc, ner ... (minibert finetune --help)
    minibert evaluate TASK --model DIR          score a fine-tuned model on its held-out data
    minibert experiment masking --out FILE      the masking ablation of notebook 05
    minibert experiment beyond-bert --out FILE  BERT/RoBERTa/ALBERT on one budget and a small Table 6 (notebook 11)
    minibert experiment bidirectionality --out FILE  MLM vs left-to-right vs no masking (notebook 04)
    minibert experiment electra --out FILE      ELECTRA's replaced token detection vs MLM at equal compute (notebook 11)
    minibert experiment modern --out FILE       BERT 2018 against ModernBERT's changes at equal CPU time (notebook 11b)
    minibert experiment glue --runs DIR --out FILE  the paper's fine-tuning table (Tables 1, 3) for MiniLM (notebook 08)
    minibert release [--out release]            student versions of the notebooks (nbgrader) and their zip
    minibert autograde SUBMISSION_DIR           grade a folder of filled-in notebooks
    minibert autograde-class CLASS_DIR [--course DIR]  grade one folder per student into an nbgrader gradebook
    minibert slides [NOTEBOOKS...] [--out DIR]  reveal.js slides of the notebooks, offline (default: slides/)
    minibert slides annotate NOTEBOOKS...       write slide metadata into the cells not annotated before
"""
import shlex
import sys

from .. import stops
from ..atomic import DiskFullError, disk_full
from ..out_folder import locked_file
from .experiment_commands import (EXPERIMENTS, beyond_bert_parser, bidirectionality_parser, electra_parser,
                                  glue_parser, masking_parser)
from .recipe_commands import RECIPES, evaluate_parser, export_parser, finetune_parser, pretrain_parser

__all__ = ["main", "pretrain_parser", "export_parser", "finetune_parser", "evaluate_parser", "masking_parser",
           "beyond_bert_parser", "bidirectionality_parser", "electra_parser", "glue_parser", "RECIPES", "EXPERIMENTS"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "data":
        from ..data import main as run
        return run(rest) or 0
    if command in RECIPES:
        make_parser, recipe, label, then = RECIPES[command]
        given = vars(make_parser().parse_args(rest))
        return _run(lambda: recipe(given), label, then)
    if command == "experiment":
        if not rest or rest[0] not in EXPERIMENTS:
            print("usage: minibert experiment masking|beyond-bert|bidirectionality|electra|modern|glue --out FILE [options] "
                  "(see minibert experiment masking --help)", file=sys.stderr)
            return 2
        make_parser, experiment = EXPERIMENTS[rest[0]]
        given = vars(make_parser().parse_args(rest[1:]))
        command_line = shlex.join(["minibert", "experiment", *rest])  # stored with the results

        def locked_experiment():  # one grid at a time on a results file: two would each rewrite it
            with locked_file(given["out"], f"minibert experiment {rest[0]}"):
                return experiment(given, command_line)
        return _run(locked_experiment, None, "run the same command again to go on (finished runs are kept)")
    if command in ("release", "autograde", "autograde-class"):
        from ..grading import main as run
        return run([command, *rest]) or 0
    if command == "slides":
        from ..course.slides import main as run
        return run(rest if rest[:1] == ["annotate"] else ["build", *rest]) or 0
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


def _run(recipe, label, then: str) -> int:
    """Run a recipe; bad settings, missing data or models, a full disk, end in one line that says what to do
    (``then``: how to go on after an interruption or a full disk). SIGTERM and SIGHUP (`kill`, `docker stop`,
    a closed terminal) stop it as Ctrl-C does, so that every command cleans up what it had half-written."""
    try:
        with stops.as_ctrl_c():  # SIGTERM and SIGHUP clean up as Ctrl-C does
            result = recipe()
    except Exception as e:
        if disk_full(e):  # whatever raised it (our writes say what is intact; a library's says less)
            said = str(e) if isinstance(e, DiskFullError) else (
                f"the disk is full{' writing ' + str(e.filename) if getattr(e, 'filename', None) else ''}: "
                f"{' '.join(str(e).split())}. Free some space on that disk")
            print(f"error: {said}, then {then}", file=sys.stderr)
            return 2
        if isinstance(e, (ValueError, OSError, FloatingPointError, OverflowError)):  # FloatingPointError: diverged
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt as e:  # the Trainer saved a checkpoint first when it had an out folder
        print(f"interrupted{f': {e}' if str(e) else ''}; {then}", file=sys.stderr)
        return 130
    if label:
        print(f"{label}: {result}")
    return 0

