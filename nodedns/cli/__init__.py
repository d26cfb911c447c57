"""Command line entry: `nodedns <command> ...`; each command lives in its own module here.

A command module exposes `register(subparsers)`, which adds its parser and sets `run` as the
parser's default: `run(args) -> int` is the exit code. Heavy imports (the server, the Kubernetes
client, aiohttp) happen inside `run`, so `nodedns resolv-conf` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from nodedns import __version__

# Module names under nodedns.cli, in the order `nodedns --help` lists them.
COMMANDS: tuple[str, ...] = ("serve", "guard", "resolv_conf", "lookup", "explain")


class _Parser(argparse.ArgumentParser):
    """argparse reporting a usage error as one line that names the flag, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nodedns",
        description="Node-local caching DNS agent for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"nodedns {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"nodedns.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout closed by `| head`; not an error of ours
        sys.stderr.close()
        return 0
    return code
