from collections.abc import Callable
from typing import Any

BATCH: int
TALLY_CLIENTS: int
TALLY_ANSWERS: int

def serve(
    fd: int,
    table: dict[bytes, bytes],
    allowed: set[str],
    counts: list[int],
    max_udp: int,
    tally: dict[str, dict[bytes | int | None, int]] | None = None,
    rate_limit: tuple[dict[str, int], int, int, list[tuple[bytes, Any]]] | None = None,
    on_full: Callable[[str, bytes], None] | None = None,
    /,
) -> tuple[int, list[tuple[bytes, Any]] | None, int]: ...
