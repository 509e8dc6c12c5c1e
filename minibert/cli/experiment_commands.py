"""``minibert experiment ...``: the flags of the course's experiment grids (notebooks 04, 05, 08, 11).

Each grid takes a settings object from `minibert.experiments` with a shared `GridSetup`; the flags of
that setup are added once here (`_add_grid_flags`) and split back out of the given flags (`_split`).
"""
import argparse
from dataclasses import fields

from .recipe_commands import _add_training_flags, _parser


def masking_parser() -> argparse.ArgumentParser:
    from ..experiments.masking import RATES, STRATEGIES, UNITS, AblationSetup

    p = _parser("minibert experiment masking",
                "The masking ablation (BERT Table 8 strategies and masking rates): pre-train one small BERT per "
                "strategy, rate and seed, then measure held-out MLM and a POS probe. Finished runs are kept in "
                "--out; run it again to go on after an interruption.")
    add = p.add_argument
    add("--out", required=True, help="results file (JSON) to write, and to go on from")
    add("--strategies", nargs="+", choices=list(STRATEGIES),
        help="MASK/SAME/RND splits, at 15%% (default: all six of Table 8)")
    add("--rates", nargs="+", type=float,
        help="masking rates run with 80/10/10 (default " + " ".join(map(str, RATES)) + ")")
    add("--seeds", nargs="+", type=int, help="seeds per configuration (default 0 1 2)")
    add("--units", nargs="+", choices=list(UNITS), help="what one masking decision covers, each run at 80/10/10 and "
                                                         "15%% (default: token; whole-word; span: SpanBERT's runs of words)")
    _add_probe_flags(p, AblationSetup)
    _add_grid_flags(p, AblationSetup)
    return p


def beyond_bert_parser() -> argparse.ArgumentParser:
    from ..experiments.beyond_bert import SIZE_VARIANTS, SIZES, VARIANTS

    p = _parser("minibert experiment beyond-bert",
                "BERT, RoBERTa and ALBERT pre-training on the same budget, and BERT at several sizes (a small "
                "Table 6): one small model per configuration and seed, measured on held-out MLM. Finished runs "
                "are kept in --out; run it again to go on after an interruption.")
    add = p.add_argument
    add("--out", required=True, help="results file (JSON) to write, and to go on from")
    add("--sizes", nargs="+", help="LxHxA sizes pre-trained with each size variant's objective (default: "
                                   + " ".join("x".join(map(str, s)) for s in SIZES) + ")")
    add("--variants", nargs="+", choices=list(VARIANTS), help="objectives compared at 2x128x2")
    add("--size-variants", nargs="+", choices=list(VARIANTS),
        help="objectives pre-trained at every size (default: " + " ".join(SIZE_VARIANTS) + ")")
    add("--seeds", nargs="+", type=int, help="seeds per configuration (default 0 1 2)")
    _add_grid_flags(p)
    return p


def bidirectionality_parser() -> argparse.ArgumentParser:
    from ..experiments.bidirectionality import OBJECTIVES, BidirectionalitySetup

    p = _parser("minibert experiment bidirectionality",
                "Deep bidirectionality measured (BERT Table 5 / Figure 3 in miniature): the same small encoder "
                "pre-trained with a masked LM, a left-to-right LM and a bidirectional LM that sees its answers, "
                "then measured on held-out loss and by frozen-feature probes (UD POS, SST-2). Finished runs are "
                "kept in --out; run it again to go on after an interruption.")
    add = p.add_argument
    add("--out", required=True, help="results file (JSON) to write, and to go on from")
    add("--objectives", nargs="+", choices=list(OBJECTIVES), help="which (default: all three)")
    add("--seeds", nargs="+", type=int, help="seeds per objective (default 0 1 2)")
    _add_probe_flags(p, BidirectionalitySetup)
    add("--curve-points", type=int, help="also measure every run at this many checkpoints along its training, for "
                                         "curves (default 0: at the end only)")
    _add_grid_flags(p, BidirectionalitySetup)
    return p


def electra_parser() -> argparse.ArgumentParser:
    from ..experiments.electra import ARMS, ElectraSetup

    p = _parser("minibert experiment electra",
                "ELECTRA's replaced token detection against the masked LM at equal compute (FLOPs, CPU time): the same "
                "encoder and text, then frozen-feature probes (UD POS, SST-2). Finished runs are kept in --out; run it "
                "again to go on after an interruption.")
    add, setup = p.add_argument, ElectraSetup
    add("--out", required=True, help="results file (JSON) to write, and to go on from")
    add("--arms", nargs="+", choices=list(ARMS), help="which (default: mlm electra electra-time; electra: at the "
                                                       "masked LM's FLOPs, electra-time: its CPU time, electra-steps: "
                                                       "its steps)")
    add("--seeds", nargs="+", type=int, help="seeds per arm (default 0 1 2)")
    _add_probe_flags(p, ElectraSetup)
    add("--generator-fraction", type=float,
        help=f"generator / discriminator hidden size (default {setup.generator_fraction})")
    add("--rtd-weight", type=float, help=f"λ, the discriminator loss's weight (default {setup.rtd_weight:g})")
    add("--timing-steps", type=int,
        help=f"steps timed per model to set electra-time's steps (default {setup.timing_steps})")
    _add_grid_flags(p, ElectraSetup)
    return p


def modern_parser() -> argparse.ArgumentParser:
    from ..experiments.modern import ROWS, ModernGridSetup

    p = _parser("minibert experiment modern",
                "2018 -> 2024 at the course's budget: BERT with ModernBERT's changes added one at a time, and "
                "ModernBERT with each taken back, every run at the same CPU time (its steps set from a timed "
                "calibration), measured on held-out fill-in-the-blank and a POS probe. Finished runs are kept in "
                "--out; run it again to go on after an interruption.")
    add, setup = p.add_argument, ModernGridSetup
    add("--out", required=True, help="results file (JSON) to write, and to go on from")
    rows = "; ".join(f"{name}: {row.label}" for name, row in ROWS.items()).replace("%", "%%")
    add("--rows", nargs="+", choices=list(ROWS), metavar="ROW", help=f"which (default: all): {rows}")
    add("--seeds", nargs="+", type=int, help="seeds per row (default 0 1 2)")
    add("--budget-minutes", type=float, help=f"CPU-minutes of training per run (default {setup.budget_minutes:g})")
    add("--local-attention", type=int, help=f"ModernBERT's sliding window in tokens (default {setup.local_attention})")
    _add_probe_flags(p, ModernGridSetup)
    _add_grid_flags(p, ModernGridSetup, without=("steps",))  # each row's steps come from its budget
    return p


def glue_parser() -> argparse.ArgumentParser:
    from ..experiments.glue import TASKS, GlueSettings

    p = _parser("minibert experiment glue",
                "The paper's table of fine-tuning results (Table 1: MRPC, STS-B, RTE, SST-2, QNLI; Table 7: "
                "CoNLL-2003 NER) for one model: a `minibert finetune --preset paper` run per task in --runs "
                "(a finished run is read, an interrupted one resumed), then a results file beside the paper's "
                "figures.")
    add = p.add_argument
    add("--out", required=True, help="results file (JSON) to write")
    add("--runs", required=True, help="folder of the fine-tuning runs, one sub-folder per task")
    add("--model", help=f"the pre-trained BERT (default {GlueSettings.model})")
    add("--tasks", nargs="+", choices=list(TASKS), help="which (default: all)")
    add("--lr", type=float, help=f"peak learning rate (default {GlueSettings.lr:g})")
    add("--steps", type=int, help="updates per task (default: the paper's epochs)")
    add("--seed", type=int, help="seed of every run (default 0)")
    add("--device", help="auto, cpu, cuda, mps")
    add("--reuse", nargs="+", metavar="TASK=FOLDER", default=[],
        help="use a finished `minibert finetune` run for a task instead of running one, e.g. "
             "sst2=notebooks/pretrained/minilm-sst2")
    return p


def _add_probe_flags(parser: argparse.ArgumentParser, setup_class) -> None:
    """The encoder's size and the frozen-feature probes of a grid whose setup has them (the help gives
    ``setup_class``'s defaults); the sentiment probe only where the setup has one."""
    from ..config import PRESETS

    add = parser.add_argument
    add("--preset", choices=list(PRESETS), help=f"encoder size (default {setup_class.preset})")
    add("--probe-sentences", type=int, help="UD EWT sentences per probe split (default: all)")
    if hasattr(setup_class, "sst2_train_sentences"):
        add("--sst2-train-sentences", type=int,
            help=f"SST-2 training sentences of the sentiment probe (default {setup_class.sst2_train_sentences}; "
                 "0: no sentiment probe, and no need of the datasets package)")


def _add_grid_flags(parser: argparse.ArgumentParser, setup_class=None, without: tuple[str, ...] = ()) -> None:
    """The flags of `GridSetup`, shared by every pre-training grid; the help gives ``setup_class``'s defaults.
    ``without``: flags the grid sets itself (`_add_training_flags`)."""
    from ..experiments.grid import GridSetup

    setup_class = setup_class or GridSetup
    _add_training_flags(parser, setup_class, held_out_optional=False, without=without)
    parser.add_argument("--eval-examples", type=int,
                        help=f"held-out sequences scored (default {setup_class.__dataclass_fields__['eval_examples'].default})")


def _split(given: dict, setup_class) -> dict:
    """The grid settings: the experiment's own flags, and ``setup``, made of the setup class's fields."""
    setup = setup_class(**{f.name: given.pop(f.name) for f in fields(setup_class) if f.name in given})
    return {**given, "setup": setup}


def _masking(given: dict, command: str):
    from ..experiments.masking import AblationSetup, MaskingSettings, experiment
    return experiment(MaskingSettings(**_split(given, AblationSetup)), command=command)


def _beyond_bert(given: dict, command: str):
    from ..experiments.beyond_bert import BeyondBertSettings, experiment
    from ..experiments.grid import GridSetup
    return experiment(BeyondBertSettings(**_split(given, GridSetup)), command=command)


def _bidirectionality(given: dict, command: str):
    from ..experiments.bidirectionality import BidirectionalitySettings, BidirectionalitySetup, experiment
    return experiment(BidirectionalitySettings(**_split(given, BidirectionalitySetup)), command=command)


def _electra(given: dict, command: str):
    from ..experiments.electra import ElectraSettings, ElectraSetup, experiment
    return experiment(ElectraSettings(**_split(given, ElectraSetup)), command=command)


def _modern(given: dict, command: str):
    from ..experiments.modern import ModernGridSetup, ModernSettings, experiment
    return experiment(ModernSettings(**_split(given, ModernGridSetup)), command=command)


def _glue(given: dict, command: str):
    from ..experiments.glue import GlueSettings, experiment
    reuse = {}
    for item in given.pop("reuse"):
        task, sep, folder = item.partition("=")
        if not sep or not folder:
            raise ValueError(f"--reuse takes TASK=FOLDER, got {item!r}")
        reuse[task] = folder
    if given.get("tasks"):
        given["tasks"] = tuple(given["tasks"])
    return experiment(GlueSettings(**{k: v for k, v in given.items() if v is not None}, reuse=reuse), command=command)


# name -> (its parser, what runs it on the given flags and the command line, stored with the results)
EXPERIMENTS = {"masking": (masking_parser, _masking), "beyond-bert": (beyond_bert_parser, _beyond_bert),
               "bidirectionality": (bidirectionality_parser, _bidirectionality), "glue": (glue_parser, _glue),
               "electra": (electra_parser, _electra), "modern": (modern_parser, _modern)}
