"""`nodedns serve`: run the agent. Flags come from the option table in nodedns.config."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from nodedns.config import GROUPS, OPTIONS_BY_KEY, Option


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the DNS agent",
        description="Run the node-local DNS agent. Every flag is also a key of the YAML --config file "
                    "(examples/config.yaml lists them all); flags win over the file.",
        argument_default=argparse.SUPPRESS,
    )
    add_config_options(p)
    p.set_defaults(run=run)


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """One flag per key of the option table (`serve`'s flags; `shadow` takes them too), under the headings
    examples/config.yaml groups its keys by (config.GROUPS); --config among the general options."""
    _add(parser, OPTIONS_BY_KEY["config"])
    grouped = {"config"}
    for title, keys in GROUPS:
        group = parser.add_argument_group(title)
        for key in keys:
            _add(group, OPTIONS_BY_KEY[key])
            grouped.add(key)
    for opt in OPTIONS_BY_KEY.values():  # a key no group names yet is a flag still (a test says: group it)
        if opt.key not in grouped:
            _add(parser, opt)


def _add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, opt: Option) -> None:
    flag = f"--{opt.key}"
    text = help_text(opt).replace("%", "%%")  # argparse %-formats help texts ("1%" would break --help)
    if opt.flag:
        parser.add_argument(flag, action="store_true", help=text)
    elif opt.repeat:
        parser.add_argument(flag, action="append", metavar=opt.metavar, help=text)
    else:
        parser.add_argument(flag, metavar=opt.metavar, help=text)


def help_text(opt: Option) -> str:
    """The option's help with its default (a choice option's metavar lists its choices)."""
    return f"{opt.help} (default: {opt.default})"


def run(args: argparse.Namespace) -> int:
    from nodedns import config as cfgmod
    from nodedns.errors import ConfigError
    from nodedns.runtime import logutil

    flags = {k: v for k, v in vars(args).items() if k not in ("run", "command")}
    try:
        config = cfgmod.from_sources(flags)
    except ConfigError as exc:
        print(f"nodedns: config error: {exc}", file=sys.stderr)
        return 2
    if config.manifests is not None:
        problem = _unreadable(config.manifests)
        if problem:  # found before anything starts, so the error is the only line
            print(f"nodedns: config error: manifests: {problem}", file=sys.stderr)
            return 2
    logutil.setup(config.log_level, config.log_format)

    from nodedns.workers.launch import serve

    return serve(config)


def _unreadable(path: str) -> str | None:
    """Why the file cannot be read, or None when it can."""
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None
