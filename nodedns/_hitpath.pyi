from typing import Any

BATCH: int

def serve(
    fd: int, table: dict[bytes, bytes], allowed: set[str], counts: list[int], max_udp: int, /
) -> tuple[int, list[tuple[bytes, Any]] | None, int]: ...
