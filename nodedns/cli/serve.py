"""`nodedns serve`: run the agent (filled in by the cluster-zone work)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("serve", help="run the DNS agent")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError
