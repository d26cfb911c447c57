"""--hosts files as they change, as a sequence of events checked against a model after every poll: several
files, each edited, emptied, removed and put back in any order; the table answers what each file last held
while it was readable (a file that cannot be read keeps its last good text), and a new table is made exactly
when some file's text changed."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodedns.dns.wire import QT
from nodedns.serve.hostswatch import HostsFiles

FILES = 3
EVENTS = st.lists(st.tuples(
    st.integers(0, FILES - 1),
    st.sampled_from(["edit", "same", "touch", "remove", "empty"]),
    st.dictionaries(st.integers(0, 3), st.integers(1, 254), max_size=4),  # name number -> last octet
), min_size=1, max_size=25)


ALL_NAMES = [f"h{j}-{k}.corp.example" for j in range(FILES) for k in range(4)]  # every name a file may hold


def text_of(i: int, entries: dict[int, int]) -> str:
    return "".join(f"10.{i}.0.{octet} h{i}-{k}.corp.example\n" for k, octet in sorted(entries.items()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS)
def test_every_file_is_answered_as_it_last_read(tmp_path_factory: pytest.TempPathFactory,
                                                events: list[tuple[int, str, dict[int, int]]]) -> None:
    root = tmp_path_factory.mktemp("hosts")
    paths = [root / f"hosts{i}" for i in range(FILES)]
    model: list[dict[int, int] | None] = [{0: i + 1} for i in range(FILES)]  # the last good contents
    on_disk: list[dict[int, int] | None] = list(model)
    stamp = [1_700_000_000_000_000_000]

    def write(i: int, entries: dict[int, int]) -> None:
        paths[i].write_text(text_of(i, entries))
        stamp[0] += 1_000_000_000
        os.utime(paths[i], ns=(stamp[0], stamp[0]))  # every write seen as one, however fast they come

    for i in range(FILES):
        write(i, model[i] or {})
    files = HostsFiles([str(p) for p in paths], excluded=lambda _name: False)

    async def drive() -> None:
        assert await files.poll_once()
        for i, what, entries in events:
            changed = False
            if what == "edit":
                write(i, entries)
                changed = model[i] != entries
                model[i] = on_disk[i] = dict(entries)
            elif what == "empty":
                write(i, {})
                changed = model[i] != {}
                model[i] = on_disk[i] = {}
            elif what == "same" and on_disk[i] is not None:
                write(i, on_disk[i] or {})  # rewritten as it was: a new mtime, the same text
            elif what == "touch" and on_disk[i] is not None:
                stamp[0] += 1_000_000_000
                os.utime(paths[i], ns=(stamp[0], stamp[0]))
            elif what == "remove" and on_disk[i] is not None:
                paths[i].unlink()
                on_disk[i] = None  # unreadable: its last good text stays
            elif on_disk[i] is None:  # "same"/"touch"/"remove" of a missing file: it comes back as it was
                write(i, model[i] or {})
                on_disk[i] = model[i]
            reloads = files.reloads
            assert await files.poll_once() == changed, (i, what, entries)
            assert files.reloads == reloads + changed
            expected = {f"h{j}-{k}.corp.example": [f"10.{j}.0.{octet}"]
                        for j, held in enumerate(model) for k, octet in (held or {}).items()}
            got = {}
            for name in ALL_NAMES:
                found = files.table.lookup(name, QT.A, 0)
                if found is not None:
                    got[name] = [rr.data for rr in found.records]
            assert got == expected and files.table.names == len(expected), (i, what)

    asyncio.run(drive())
