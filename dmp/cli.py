"""Command line: ``python -m dmp {train, config, data, ...}``."""
from __future__ import annotations

import argparse
import sys


def _train(args):
    from .config import load_yaml, parse_overrides
    from .train import train

    user = load_yaml(args.config) if args.config else {}
    user.update(parse_overrides(args.overrides))
    metrics = train(user, args.out, progress=not args.quiet)
    print(f"{args.out}: target accuracy {metrics['accuracy']:.2f} %, "
          f"mean class accuracy {metrics['mean_class_accuracy']:.2f} %")


def _config(args):
    from .config import describe, load_yaml, parse_overrides, resolve

    if args.show:
        print(describe())
        return
    import yaml
    user = load_yaml(args.config) if args.config else {}
    user.update(parse_overrides(args.overrides))
    print(yaml.safe_dump(resolve(user), sort_keys=True), end="")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dmp", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train one task (resumes from OUT/checkpoint.pt)")
    p.add_argument("--config", help="run config YAML")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="override any config key")
    p.set_defaults(func=_train)
    p = sub.add_parser("config", help="print the resolved config (or --show every key and default)")
    p.add_argument("--config")
    p.add_argument("--show", action="store_true")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.set_defaults(func=_config)
    try:
        from .data import cli as data_cli
        data_cli.add_subparsers(sub)
    except ImportError:
        pass
    for mod in ("tables", "suite"):
        try:
            module = __import__(f"dmp.{mod}.cli" if mod == "tables" else f"dmp.{mod}", fromlist=["x"])
        except ImportError:
            continue
        if hasattr(module, "add_subparsers"):
            module.add_subparsers(sub)
    return parser


def main(argv=None):
    from .config import ConfigError

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    bad = [e for e in extra if "=" not in e or e.startswith("-")]
    if bad or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(bad or extra)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    try:
        code = args.func(args)
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
