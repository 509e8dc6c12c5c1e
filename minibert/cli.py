"""``minibert`` on the command line: one entry point for the course's chores.

    minibert data list | fetch [NAMES...]        fill data/ from the Hub or a mirror
    minibert pretrain --out DIR [options]       pre-train a BERT (minibert pretrain --help)
    minibert release [--out release]            student versions of the notebooks (nbgrader)
    minibert autograde SUBMISSION_DIR           grade a folder of filled-in notebooks
"""
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "data":
        from .data import main as run
        return run(rest) or 0
    if command == "pretrain":
        from .recipes import pretrain, pretrain_parser
        try:
            print(f"checkpoint: {pretrain(pretrain_parser().parse_args(rest))}")
        except (ValueError, OSError) as e:  # bad settings, missing data or model: the message says what to do
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if command in ("release", "autograde"):
        from .grading import main as run
        return run([command, *rest]) or 0
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
