"""Command line entry: `nodedns <command> ...`; each command lives in its own module here (`shadow` in its own
package: nodedns.shadow.command, loaded by name like the others).

A command module exposes `register(subparsers)`, which adds its parser and sets `run` as the
parser's default: `run(args) -> int` is the exit code. Heavy imports (the server, the Kubernetes
client, aiohttp) happen inside `run`, so `nodedns resolv-conf` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from nodedns import __version__

# Module names under nodedns.cli, in the order `nodedns --help` lists them.
COMMANDS: tuple[str, ...] = ("serve", "shadow", "guard", "resolv_conf", "lookup", "explain", "top")
# commands whose module is not under nodedns.cli
ELSEWHERE = {"shadow": "nodedns.shadow.command"}


class _Parser(argparse.ArgumentParser):
    """argparse reporting a usage error as one line that names the flag, not the whole usage, and
    never taking an abbreviation for a flag (`--manifest` is no `--manifests`: a typo must not quietly
    mean another flag). Every command's parser is one: subparsers are made of the parser's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}{self._hint(message)} (see {self.prog} --help)\n")

    def _hint(self, message: str) -> str:
        """For a flag that is not one: the flags it may have meant (a flag it begins, else a close one)."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        from nodedns.config import near  # noqa: PLC0415 - only for a wrong flag: the CLI starts without it
        flags = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        meant: dict[str, None] = {}
        for word in message.split(":", 1)[1].split():
            given = word.split("=", 1)[0]
            if given.startswith("--"):
                meant.update(dict.fromkeys(near(given, flags)))
        if not meant:
            return ""
        return f"; did you mean {' or '.join(meant)}? (flags are never abbreviated)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nodedns",
        description="Node-local caching DNS agent for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"nodedns {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(ELSEWHERE.get(name, f"nodedns.cli.{name}")).register(sub)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, options and operands in any order (`nodedns lookup NAME --debug URL AAAA`):
    the command's own parser reads what follows the command with parse_intermixed_args."""
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        return parser.parse_args(args)  # --help, --version, or no command: argparse says what is wrong
    commands = _subcommands(parser)
    command = commands.get(args[0])
    if command is None:
        return parser.parse_args(args)  # an unknown command: argparse lists the known ones
    ns = command.parse_intermixed_args(args[1:])
    ns.command = args[0]
    return ns


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # stdout closed by `| head`; not an error of ours
        sys.stderr.close()
        return 0
    return code
