"""Each mode's agent built from its parts: one process, the --workers supervisor, a worker (`nodedns shadow`'s:
nodedns.shadow.agent).

Where a mode chooses its parts (their contracts: nodedns.app.parts). The agent
(nodedns.app.agent) is the same lifecycle in every mode; what it holds:

  mode          listeners                  index source     warm state   followers; on the watch path
  one process   OwnSockets                 IndexOwner       LocalWarm    -
  supervisor    Fleet (its workers)        IndexOwner       Fleet        Fleet; Fleet.index_changed
  worker        OwnSockets (binds as told, IndexClient      LocalWarm    -
                says when bound)

and what answers differently (`Answering`): the supervisor keeps 1 MiB of the forward cache and no
tally (its workers answer and count); a worker takes its share of the cache, the allow list and the
autopath plans pushed by the supervisor, asks it about cluster misses, keeps no Insight. The values a
mode sets (`Mode`): signals, the name in the "event_loop" section, whether it logs "ready", trims the
heap, refuses a duplicate, watches the node's resolv.conf, decides --filter-aaaa auto, forwards.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from nodedns.app.agent import Agent
from nodedns.app.build import own_addresses
from nodedns.app.parts import Answering, Mode, OwnSockets, own_answering
from nodedns.app.sections import FilterReport, HostsReport
from nodedns.cluster.index import Index
from nodedns.config import Config
from nodedns.serve.tally import Tally
from nodedns.workers.fleetstatus import FleetObserver, WorkersReport
from nodedns.workers.messages import Start
from nodedns.workers.pushed import PushedAllowList, PushedAutopath
from nodedns.workers.supervisor import SUPERVISOR_CACHE_BYTES, Fleet
from nodedns.workers.worker import IndexClient, OwnerLink, worker_config

# it answers no DNS (its watch threads trim after each list: nodedns.cluster.apisync); its row of the
# "event_loop" section (the workers' rows come with their counters)
SUPERVISOR = Mode(process="supervisor", trim_heap=False)


def worker_mode(number: int) -> Mode:
    """A worker: SIGTERM and SIGINT ignored (worker_main; the supervisor decides when it stops), "worker N
    serving" said instead of "ready", its siblings serve the same addresses (the supervisor checked before
    spawning), autopath plans and --filter-aaaa auto come from the supervisor (it renders no resolv.conf)."""
    return Mode(process=f"worker {number}", signals=(), log_ready=False, refuse_duplicates=False,
                watches_host_file=False, decides_aaaa=False, reads_hosts=False)


def one_process(config: Config, *, clock: Callable[[], float] = time.monotonic, index: Index | None = None) -> Agent:
    """`nodedns serve` without --workers: the agent's own sockets, its own index (the Agent's defaults)."""
    return Agent(config, clock=clock, index=index)


def supervisor(config: Config, *, count: int) -> Agent:
    """The --workers supervisor: the index owner, whose listeners are `count` worker processes."""
    index = Index()
    agent = Agent(config, index=index, mode=SUPERVISOR,
                  answering=own_answering(config, index, tally=False, cache_bytes=SUPERVISOR_CACHE_BYTES))
    fleet = Fleet(agent, count=count)
    agent.listeners = fleet
    agent.warm = fleet  # the workers' forward caches
    agent.followers = fleet
    agent.on_hangup = fleet.hangup  # the workers re-read the upstream files too
    agent.changes.add(fleet.index_changed)  # the workers hold no index: told what exists and what changed
    agent.policy.on_clients.append(fleet.flush_soon)  # the clients under a policy changed: the workers told
    # the workers' caches and forwarders report through their counters, not the supervisor's own
    agent.observer = FleetObserver(agent, fleet)
    add = agent.add_provider
    add("workers", WorkersReport(fleet))
    # the files the supervisor reads too (the same files as its workers): its own view, not their sum
    if agent.config_watcher is not None:
        add("upstream_config", agent.config_watcher)
    if agent.host_file is not None:
        add("host_resolv_conf", agent.host_file)
    if agent.hosts_files is not None:  # its reading (for lookup); the answers are the workers'
        add("hosts", HostsReport(files=agent.hosts_files, resolver=agent.resolver))
    add("limits", agent.limits)  # its settings; the counts are the workers' (worker_limits)
    add("policy", agent.policy)  # its book (pushed to the workers); the decisions are the workers'
    add("event_loop", agent.looplag)  # its own row; each worker's comes with its counters
    if agent.insight is not None:
        add("insight", agent.insight)  # the figures per Pod are the supervisor's
    if agent.resolver.aaaa is not None:  # its decision; the count is the workers'
        add("filter_aaaa", FilterReport(resolver=agent.resolver, slots=agent.slots, server=agent.server))
    return agent


def worker(config: Config, start: Start, sock: socket.socket, tables: socket.socket | None = None) -> Agent:
    """A worker process (`start`: what its supervisor sent first, `sock`: the channel to it, `tables`: where
    the --hosts table's memfd comes): an agent without an index, answering DNS on its own sockets, asking the
    supervisor about cluster misses."""
    link = OwnerLink()
    own = worker_config(config)
    index = Index()
    answering = Answering(
        cache_bytes=start.cache_bytes,  # its share of --cache-max-bytes, as the supervisor gave it
        autopath=PushedAutopath(index=index, zone=own.cluster_domain) if own.autopath else None,
        # own addresses as the supervisor's (the worker's config has the same listen and local IPs)
        allow=PushedAllowList(explicit=own.allow_from, own_addresses=own_addresses(own)),
        remote=link.ask,
        tally=Tally() if own.insight == "on" else None,  # it counts; the supervisor keeps the figures per Pod
        insight=None,
    )
    agent = Agent(own, index=index, mode=worker_mode(start.number), answering=answering)
    client = IndexClient(agent, number=start.number, sock=sock, link=link, tables=tables)
    link.keep = agent.resolver.answers.keep
    agent.resolver.answers.existence = client.existence
    agent.server.freebind = config.setup_interface is not None  # the supervisor ensures the local IPs
    agent.listeners = OwnSockets(agent.server, config=own, defer=start.defer, on_bound=client.report)
    agent.source = client
    agent.openers.append(client.open)  # the channel before the agent starts
    agent.closers.append(client.close)  # the last counters once it stopped
    agent.on_hangup = client.hangup
    if own.hosts:  # the table is the supervisor's (mapped when it says so); the answers are counted here
        agent.add_provider("hosts", HostsReport(files=None, resolver=agent.resolver))
    return agent
