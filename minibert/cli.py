"""``minibert`` on the command line: one entry point for the course's chores.

    minibert data list | fetch [NAMES...]        fill data/ from the Hub or a mirror
    minibert pretrain --out DIR [options]       pre-train a BERT (minibert pretrain --help)
    minibert export RUN --out DIR              a pretrain or finetune run as a model folder to ship
    minibert finetune TASK --model M --out DIR  fine-tune on sst2, squad or pos (minibert finetune --help)
    minibert evaluate TASK --model DIR          score a fine-tuned model on its held-out data
    minibert experiment masking --out FILE      the masking ablation of notebook 05
    minibert experiment beyond-bert --out FILE  BERT/RoBERTa/ALBERT on one budget and a small Table 6 (notebook 09)
    minibert release [--out release]            student versions of the notebooks (nbgrader) and their zip
    minibert autograde SUBMISSION_DIR           grade a folder of filled-in notebooks
    minibert slides [NOTEBOOKS...] [--out DIR]  reveal.js slides of the notebooks, offline (default: slides/)
    minibert slides annotate NOTEBOOKS...       write slide metadata into the cells not annotated before
"""
import importlib
import shlex
import sys

# command -> (module, function, its argparse parser, what to call the path it returns when printing it)
RECIPES = {"pretrain": ("recipes", "pretrain", "pretrain_parser", "checkpoint"),
           "export": ("recipes", "export", "export_parser", "model"),
           "finetune": ("finetune", "finetune", "finetune_parser", None),
           "evaluate": ("finetune", "evaluate", "evaluate_parser", None)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "data":
        from .data import main as run
        return run(rest) or 0
    if command in RECIPES:
        module, function, parser, label = RECIPES[command]
        module = importlib.import_module(f".{module}", __package__)
        return _run(lambda: getattr(module, function)(getattr(module, parser)().parse_args(rest)), label)
    if command == "experiment":
        if rest[:1] not in (["masking"], ["beyond-bert"]):
            print("usage: minibert experiment masking|beyond-bert --out FILE [options] "
                  "(see minibert experiment masking --help)", file=sys.stderr)
            return 2
        module = importlib.import_module(".ablation" if rest[0] == "masking" else ".beyond_bert", __package__)
        command_line = shlex.join(["minibert", "experiment", *rest])  # stored with the results
        return _run(lambda: module.experiment(module.experiment_parser().parse_args(rest[1:]), command=command_line), None)
    if command in ("release", "autograde"):
        from .course.grading import main as run
        return run([command, *rest]) or 0
    if command == "slides":
        from .course.slides import main as run
        return run(rest if rest[:1] == ["annotate"] else ["build", *rest]) or 0
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


def _run(recipe, label) -> int:
    """Run a recipe; bad settings, missing data or models end in one line that says what to do."""
    try:
        result = recipe()
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if label:
        print(f"{label}: {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
