"""dmp: train, configure, fetch data, build tables and figures of the DMP reproduction suite.

Also run as `python -m dmp`; `python -m dmp.tables`, `python -m dmp.figures` and `python -m dmp.suite` are the same
as `dmp tables`, `dmp figures` and `dmp suite`. Every error ends the command with one line `error: ...` on stderr
and exit status 2; --debug (anywhere on the command line) shows the traceback instead."""
from __future__ import annotations

import argparse
import sys

from . import suite
from .commands import DEBUG_HELP, dispatch, finish
from .data import cli as data_cli
from .figures import cli as figures_cli
from .models import extract
from .tables import cli as tables_cli


def user_config(args) -> dict:
    """The run config of the command line: ``--config`` YAML, then ``key=value`` overrides; ``source``/``target``
    given as the paper's domain letters (``source=S``) become the registry's domain names, so a run records (and
    resumes under) one name per domain."""
    import yaml

    from .config import ConfigError, load_yaml, parse_overrides

    user = load_yaml(args.config) if args.config else {}
    for item in args.overrides:
        try:
            user.update(parse_overrides([item]))
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or exc
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({problem})") from None
    if "dataset" in user:
        from .data.registry import get_dataset

        spec = get_dataset(str(user["dataset"]))
        for key in ("source", "target"):
            if isinstance(user.get(key), str):
                user[key] = spec.domain(user[key]).name
    return user


def _train(args):
    from .train.devices import gpu_slot

    with gpu_slot():  # one GPU per job on a multi-GPU machine (DMP_GPU_SLOTS), before anything initialises CUDA
        _train_on_device(args)


def _train_on_device(args):
    from pathlib import Path

    from .config import ConfigError, resolve
    from .train import train

    user = user_config(args)
    if user.get("weights_path") is not None:  # its file is there, before any work (and before --out is made)
        resolve(user, check_files=True)
    if user.get("device") == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("device=cuda, but torch finds no usable CUDA GPU here (torch.cuda.is_available() is "
                              "False): use device=cpu, or device=auto to take a GPU only where there is one")
    if args.seeds:
        _train_stacked(user, args)
        return
    new = not Path(args.out).exists()
    try:
        metrics = train(user, args.out, progress=not args.quiet)
    except BaseException:
        if new:  # refused before it wrote anything (the data not in place, ...): no folder of only the lock file
            _drop_lock_only_folder(Path(args.out))
        raise
    print(f"{args.out}: target accuracy {metrics['accuracy']:.2f} %, "
          f"mean class accuracy {metrics['mean_class_accuracy']:.2f} %")


def _seed_list(text: str) -> list[int]:
    """``--seeds 0,1,2``: the seeds, comma-separated (a list of words would swallow the key=value overrides)."""
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integer seeds (e.g. 0,1,2)")
    return seeds


def _train_stacked(user, args):
    from pathlib import Path

    from .train import train_stacked

    outs = [Path(args.out.replace("{seed}", str(s))) for s in args.seeds]
    new = [not out.exists() for out in outs]
    try:
        results = train_stacked(user, args.seeds, args.out, progress=not args.quiet)
    except BaseException:
        for out, fresh in zip(outs, new):
            if fresh:
                _drop_lock_only_folder(out)
        raise
    for out, metrics in zip(outs, results):
        print(f"{out}: target accuracy {metrics['accuracy']:.2f} %, "
              f"mean class accuracy {metrics['mean_class_accuracy']:.2f} %")


def _drop_lock_only_folder(out) -> None:
    """Remove ``out`` where it holds nothing but the run folder's lock file (this process's refused run), under
    that lock: a process opening it now is refused as it would be by a run in progress."""
    from .run_lock import LOCK_FILE, run_lock

    try:
        if [p.name for p in out.iterdir()] != [LOCK_FILE]:
            return
        with run_lock(out):
            (out / LOCK_FILE).unlink()
        out.rmdir()
    except (OSError, ValueError):  # another process holds it now (RunFolderBusy), or not ours to remove: kept
        pass


def _config(args):
    from .config import describe, resolve

    if args.show:
        print(describe())
        return
    import yaml
    cfg = resolve(user_config(args), check_files=True)
    if args.schedule:
        import json

        from .data.registry import get_dataset
        from .data.splits import split_size
        from .train.schedule import schedule
        n_source = split_size(get_dataset(cfg["dataset"]), cfg["source"], cfg["source_split"])
        print(json.dumps(dict(schedule(cfg, n_source), source_samples=n_source), indent=1))
        return
    print(yaml.safe_dump(cfg, sort_keys=True), end="")


def _pretrain_demo(args):
    from .train.pretrain import pretrain_backbone
    info = pretrain_backbone(args.out, args.recipe, progress=not args.quiet)
    print(f"{info['path']}: {args.recipe} backbone pre-trained on {info['classes']} generated classes "
          f"({info['iterations']} iterations, training accuracy over the last 100 steps "
          f"{info['train_accuracy']:.1f} %)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dmp", description=__doc__)
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("train", help="train one task (resumes from OUT/checkpoint.pt)")
    p.add_argument("--config", help="run config YAML")
    p.add_argument("--out", required=True, help="output folder (with --seeds: one per seed, {seed} in its name)")
    p.add_argument("--seeds", type=_seed_list, metavar="S,S,...", help="train these seeds of the config stacked "
                   "into one batched step in one process (each into its own --out folder, as alone; not for methods "
                   "with a domain discriminator); their seconds are the shared step's")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="override any config key")
    p.set_defaults(func=_train)
    p = sub.add_parser("config", help="print the resolved config (or --show every key and default)")
    p.add_argument("--config", help="run config YAML (its keys, then the key=value overrides)")
    p.add_argument("--show", action="store_true", help="list every key with its default and meaning")
    p.add_argument("--schedule", action="store_true", help="print the run's schedule (iterations, epochs, "
                   "warm-ups, anchor refreshes) as JSON; needs no data")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="override any config key")
    p.set_defaults(func=_config)
    p = sub.add_parser("pretrain-demo", help="pre-train a small CNN once on the demo's generated shapes (the demo's "
                       "stand-in for ImageNet weights) and write its weights file")
    p.add_argument("--recipe", choices=["demo", "digits"], default="demo", help="demo: the RGB BatchNorm CNN of "
                   "the demo (smallcnn); digits: the grey 16 x 16 GroupNorm CNN of mnist_usps (smallcnn_gn)")
    p.add_argument("--out", required=True, help="weights file to write (then pass weights_path=FILE)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (the recipe fixes the thread count, so "
                   "every machine writes the same file)")
    p.set_defaults(func=_pretrain_demo)
    data_cli.add_subparsers(sub, extensions=(extract.add_parser,))
    for module in (tables_cli, figures_cli, suite):
        module.add_subparsers(sub)
    finish(parser)
    return parser


def main(argv=None):
    """`dmp ARGV`."""
    dispatch(build_parser(), sys.argv[1:] if argv is None else list(argv))


if __name__ == "__main__":
    main()
