"""nodedns.app.upstreams: the hot answers whose second has come are looked at a turn's budget at a time."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from nodedns.app.upstreams import Upstreams
from nodedns.runtime.tasks import TURN_BUDGET

CALL = 0.00002  # seconds a call of SlowStage.stage takes


class SlowStage:
    """A forward cache whose every `stage()` call takes 50 us and which has `calls` of them to do."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.done = 0

    def stage(self) -> bool:
        end = time.perf_counter() + CALL
        while time.perf_counter() < end:
            pass
        self.left -= 1
        self.done += 1
        return self.left > 0


def upstreams_of(cache: SlowStage) -> Upstreams:
    forwarding: Any = SimpleNamespace(forwarder=None, cache=cache, watcher=None, zones=None)
    return Upstreams(SimpleNamespace(), forwarding)  # type: ignore[arg-type]


def calls_by_turn(up: Upstreams, cache: SlowStage) -> list[int]:
    """Stage to the end on a loop; the calls done so far each time another task got the loop."""

    async def main() -> list[int]:
        per_turn: list[int] = []
        up._stage()
        while up._stager is not None:
            per_turn.append(cache.done)
            await asyncio.sleep(0)
        return per_turn

    return asyncio.run(main())


def test_the_hot_answers_due_are_looked_at_a_turn_s_budget_at_a_time_the_loop_running_between() -> None:
    cache = SlowStage(calls=200)  # 4 ms of looking in all
    up = upstreams_of(cache)

    per_turn = calls_by_turn(up, cache)
    assert cache.done == 200  # all rendered in the end
    steps = [b - a for a, b in zip([0, *per_turn], per_turn, strict=False)]
    # each turn stops once its budget is spent: a few calls of 20 us each, never the whole 4 ms at once
    assert len(per_turn) >= 200 * CALL / (TURN_BUDGET + 0.0001) - 1
    assert max(steps) <= TURN_BUDGET / CALL + 2


def test_a_turn_under_its_budget_looks_at_several_answers_before_letting_the_loop_run() -> None:
    cache = SlowStage(calls=200)  # 20 us a call: a turn of TURN_BUDGET has room for several
    up = upstreams_of(cache)

    per_turn = calls_by_turn(up, cache)
    steps = [b - a for a, b in zip([0, *per_turn], per_turn, strict=False)]  # every turn but the last
    assert TURN_BUDGET / CALL >= 3  # the budget holds several calls
    assert len(steps) >= 10
    # a turn goes on while under its budget; a turn the machine preempted in its first call may do one, not most
    assert sum(step >= 2 for step in steps) >= 0.8 * len(steps), steps


# -- the agent's side: what is started, ticked, stopped, probed, dropped and said --------------------------


class FakeTasks:
    """The agent's tasks: what was spawned, by name (the coroutines closed, never run)."""

    def __init__(self) -> None:
        self.names: list[str | None] = []

    def spawn(self, coro: Any, name: str | None = None) -> None:
        coro.close()
        self.names.append(name)


class FakeWatcher:
    async def run(self) -> None:
        raise AssertionError("not run here")

    async def poll_once(self) -> None:
        raise AssertionError("not run here")


class FakeForwarder:
    def __init__(self) -> None:
        self.own: list[Any] | None = None

    def set_own_addresses(self, addresses: list[Any]) -> None:
        self.own = list(addresses)


class TickingCache:
    """A forward cache `delay` seconds before its next second; counts its ticks."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.ticks = 0
        self.staged = 0

    def tick(self) -> float:
        self.ticks += 1
        return self.delay

    def stage(self) -> bool:
        self.staged += 1
        return False


def agent_of(*, forwards: bool = True, state: str = "running", probes_loops: bool = True,
             bound: list[Any] | None = None, resolv_conf: str | None = "/etc/resolv.conf",
             kube_dns: str | None = None) -> Any:
    config = SimpleNamespace(listen_addresses=[("169.254.20.10", 53)], upstream_resolv_conf=resolv_conf,
                             kube_dns_config_dir=kube_dns)
    return SimpleNamespace(config=config, mode=SimpleNamespace(forwards=forwards), state=state, _tasks=FakeTasks(),
                           server=SimpleNamespace(bound=bound or []),
                           listeners=SimpleNamespace(probes_loops=probes_loops),
                           loop_probes=SimpleNamespace(probe_all=FakeWatcher().run))


def wired(agent: Any, *, watcher: bool = True, cache: Any = None) -> tuple[Upstreams, FakeForwarder]:
    forwarder = FakeForwarder()
    forwarding: Any = SimpleNamespace(forwarder=forwarder, cache=cache or TickingCache(0.5),
                                      watcher=FakeWatcher() if watcher else None, zones=None)
    return Upstreams(agent, forwarding), forwarder


def test_a_forwarding_agent_never_forwards_to_its_own_addresses_and_watches_the_upstream_files() -> None:
    async def main() -> tuple[Any, ...]:
        agent = agent_of(bound=[("10.0.0.1", 53)])
        up, forwarder = wired(agent)
        up.start()
        bound_own = forwarder.own
        up.stop()
        unbound = agent_of()  # a predecessor still serves: not bound yet, its configured addresses
        up2, forwarder2 = wired(unbound)
        up2.start()
        up2.stop()
        return bound_own, agent._tasks.names, forwarder2.own, up.forward_cache.ticks

    bound_own, names, configured_own, ticks = asyncio.run(main())
    assert bound_own == [("10.0.0.1", 53)]
    assert configured_own == [("169.254.20.10", 53)]
    assert names == ["upstream-config"]
    assert ticks == 1  # the forward cache's clock started


def test_a_mode_that_does_not_forward_reads_the_upstream_files_but_sends_nothing() -> None:
    async def main() -> tuple[Any, ...]:
        agent = agent_of(forwards=False)
        up, forwarder = wired(agent)
        up.start()
        up.stop()
        return forwarder.own, agent._tasks.names, up.forward_cache.ticks, up._ticker

    own, names, ticks, ticker = asyncio.run(main())
    assert own == []  # every upstream address is "ours": nothing is ever sent
    assert names == ["upstream-config"]
    assert (ticks, ticker) == (0, None)  # no forward cache clock either


def test_without_a_forwarder_nothing_starts() -> None:
    async def main() -> list[str | None]:
        agent = agent_of()
        forwarding: Any = SimpleNamespace(forwarder=None, cache=None, watcher=FakeWatcher(), zones=None)
        Upstreams(agent, forwarding).start()
        return agent._tasks.names

    assert asyncio.run(main()) == []


def test_each_second_the_cache_ticks_and_the_hot_answers_due_are_looked_at_right_after() -> None:
    async def main(delay: float) -> tuple[float, bool, bool, bool]:
        up, _ = wired(agent_of(), cache=TickingCache(delay))
        loop = asyncio.get_running_loop()
        up._tick()
        assert up._ticker is not None and up._stager is not None
        ticker, stager = up._ticker, up._stager
        at = ticker.when() - loop.time()
        soon = not isinstance(stager, asyncio.TimerHandle)  # the look runs in the next turn, not later
        up._tick()  # a second tick while the look is pending: not a second look
        once = up._stager is stager and not stager.cancelled()
        up.stop()
        return at, soon, once, up._ticker.cancelled() and stager.cancelled()

    tick_at, soon, once, stopped = asyncio.run(main(0.6))
    assert 0.6 <= tick_at <= 0.6 + 0.002 + 0.05  # just after the next whole second
    assert soon and once and stopped
    tick_at, _, _, _ = asyncio.run(main(0.0))
    assert 0.005 <= tick_at <= 0.005 + 0.002 + 0.05  # never a busy loop at the second's turn
    tick_at, _, _, _ = asyncio.run(main(5.0))
    assert 1.0 <= tick_at <= 1.0 + 0.002 + 0.05  # a clock jump: looked at again within a second


def test_the_forward_cache_clock_goes_on_second_after_second_looking_each_until_stopped() -> None:
    async def main() -> tuple[int, int, int]:
        cache = TickingCache(0.02)  # a "second" of 20 ms
        up, _ = wired(agent_of(), cache=cache)
        up._tick()
        await asyncio.sleep(0.2)
        up.stop()
        ticks, staged = cache.ticks, cache.staged
        await asyncio.sleep(0.1)
        return ticks, staged, cache.ticks - ticks

    ticks, staged, after_stop = asyncio.run(main())
    assert ticks >= 4 and staged >= 3  # ticked again at each "second", the hot answers due looked at each time
    assert after_stop == 0


@pytest.mark.parametrize(("state", "probes_loops", "probed"), [
    ("running", True, True), ("starting", True, False), ("running", False, False)])
def test_new_routes_are_probed_for_loops_only_by_a_running_agent_whose_listeners_probe(
        state: str, probes_loops: bool, probed: bool) -> None:
    agent = agent_of(state=state, probes_loops=probes_loops)
    up, _ = wired(agent)
    up.reprobe()
    assert agent._tasks.names == (["loop-probe"] if probed else [])


def test_a_reload_drops_the_answers_of_exactly_the_zones_it_changed_old_or_new(
        caplog: pytest.LogCaptureFixture) -> None:
    def table(*zones: str) -> Any:
        def zone_for(qname: str) -> Any:
            return SimpleNamespace(name=next((z for z in zones if qname.endswith("." + z)), ""))
        return SimpleNamespace(zone_for=zone_for)

    cached = ["a.example.com", "b.corp.internal", "c.lab.test", "d.other.org"]
    dropped: list[str] = []

    def zones_changed(match: Any) -> int:
        dropped.extend(q for q in cached if match(q))
        return len(dropped)

    agent = agent_of()
    agent.resolver = SimpleNamespace(zones_changed=zones_changed)
    forwarding: Any = SimpleNamespace(forwarder=None, cache=None, watcher=None,
                                      zones=table("corp.internal", "lab.test"))
    up = Upstreams(agent, forwarding)
    new = table("lab.test", "example.com")  # corp.internal went, example.com came, lab.test unchanged
    with caplog.at_level("INFO", logger="nodedns.app"):
        up.zones_changed(new, {"corp.internal", "example.com"})
    assert dropped == ["a.example.com", "b.corp.internal"]
    assert caplog.records[-1].getMessage() == ("zones reloaded: corp.internal, example.com changed (2 cached answers "
                                               "of theirs dropped; the other zones keep theirs)")
    dropped.clear()
    with caplog.at_level("INFO", logger="nodedns.app"):
        up.zones_changed(table("lab.test"), {"", "example.com"})  # compared with the table the last reload put in
    assert dropped == ["a.example.com", "b.corp.internal", "d.other.org"]
    assert caplog.records[-1].getMessage().startswith("zones reloaded: ., example.com changed (3 cached")


@pytest.mark.parametrize(("resolv_conf", "kube_dns", "said"), [
    ("/etc/resolv.conf", None, "re-reading /etc/resolv.conf now"),
    (None, "/etc/kube-dns", "re-reading /etc/kube-dns now"),
    ("/etc/resolv.conf", "/etc/kube-dns", "re-reading /etc/resolv.conf and /etc/kube-dns now"),
])
def test_sighup_re_reads_the_upstream_files_at_once_and_says_so_in_one_line(
        resolv_conf: str | None, kube_dns: str | None, said: str, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[str | None]:
        agent = agent_of(resolv_conf=resolv_conf, kube_dns=kube_dns)
        up, _ = wired(agent)
        with caplog.at_level("INFO", logger="nodedns.app"):
            up.hangup()
        names: list[str | None] = agent._tasks.names
        return names

    assert asyncio.run(main()) == ["upstream-config-reload"]
    assert [r.getMessage() for r in caplog.records] == [f"SIGHUP: {said}; other settings take a restart"]


def test_sighup_without_upstream_files_says_there_is_nothing_to_re_read(caplog: pytest.LogCaptureFixture) -> None:
    agent = agent_of()
    up, _ = wired(agent, watcher=False)
    with caplog.at_level("INFO", logger="nodedns.app"):
        up.hangup()
    assert agent._tasks.names == []
    assert [r.getMessage() for r in caplog.records] == [
        "SIGHUP: nothing to re-read (no upstream resolv.conf or kube-dns ConfigMap directory); other settings take "
        "a restart"]
