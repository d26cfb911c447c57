"""Mutations of nodedns/workers/fleet.py (--workers: the supervisor, its channel to the workers, the workers)."""

from mutate import Mutation

TESTS = ("tests/e2e/test_operators.py",
         "tests/e2e/test_fleet.py", "tests/e2e/test_worker_watch.py", "tests/e2e/test_sighup.py",
         "tests/e2e/test_unusable_names.py",
         "tests/e2e/test_handover.py",
         "tests/unit/observe/test_looplag.py")

MUTATIONS = (
    Mutation(
        "channel-drops-a-partly-read-frame",
        "nodedns/workers/fleet.py",
        "        if pos:\n            del buf[:pos]",
        "        if pos:\n            buf.clear()",
        ("tests/e2e/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "the bytes of a frame read only in part are thrown away with the whole frames before it (the worker "
        "channel then reads garbage)",
        found="yes",
    ),
    Mutation(
        "channel-holds-a-whole-frame-back",
        "nodedns/workers/fleet.py",
        "                if n - pos - 4 < size:",
        "                if n - pos - 4 <= size:",
        ("tests/e2e/test_fleet.py::test_the_channel_delivers_every_message_in_order_however_the_stream_is_split",),
        "a frame that ends exactly where a read ends waits for the next message (a reply the worker waits for "
        "arrives only with the next change)",
    ),
    Mutation(
        "fleet-invalidates-only-the-last-change-of-a-turn",
        "nodedns/workers/fleet.py",
        "                self._tags.update(tags)",
        "                self._tags = set(tags)",
        ("tests/e2e/test_fleet.py::test_several_changes_in_one_loop_turn_drop_the_answers_of_every_one_in_every_worker",),
        "of several index changes in one event-loop turn, the workers drop only the answers of the last one",
        found="yes",
    ),
    Mutation(
        "silent-worker-waits-its-start-timeout",
        "nodedns/workers/fleet.py",
        "if silent > (HEARTBEAT_TIMEOUT if worker.served else START_TIMEOUT):",
        "if silent > START_TIMEOUT:",
        ("tests/e2e/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker that served and went silent is killed only after 30 s: its share of the queries is lost "
        "meanwhile",
        found="yes",
    ),
    Mutation(
        "supervisor-pause-kills-its-workers",
        "nodedns/workers/fleet.py",
        "        if now - self._last_round > SUPERVISOR_LAG:",
        "        if False:",
        ("tests/e2e/test_worker_watch.py::test_a_late_watch_round_counts_every_worker_as_heard_from",),
        "a supervisor that was itself stopped or busy kills every worker whose beats wait unread in its channels",
        found="yes",
    ),
    Mutation(
        "restart-reason-always-died",
        "nodedns/workers/fleet.py",
        'reason = worker.killed or "died"',
        'reason = "died"',
        ("tests/e2e/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker killed for its silence is counted as one that died",
        found="yes",
    ),
    Mutation(
        "hold-forgets-a-worker-restarting-after-silence",
        "nodedns/workers/fleet.py",
        """out.append((number, f"worker {number} restarting: {why}", why.startswith("silent")))""",
        """out.append((number, f"worker {number} restarting: {why}", False))""",
        ("tests/e2e/test_worker_watch.py::test_the_supervisor_holds_the_put_back_while_a_worker_is_silent_or_"
         "restarting_"
         "after_it",),
        "the local IPs go back while the killed worker's successor is not serving yet",
        found="yes",
    ),
    Mutation(
        "sighup-not-passed-to-the-workers",
        "nodedns/workers/fleet.py",
        """                worker.channel.send(("reload",))""",
        """                pass""",
        ("tests/e2e/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads",),
        "the supervisor's SIGHUP re-reads the upstream files in the supervisor only: the workers, which forward, "
        "keep the old upstreams for up to --kube-dns-config-period",
        found="yes",
    ),
    Mutation(
        "unsendable-reply-closes-the-channel",
        "nodedns/workers/fleet.py",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        pass",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        raise",
        ("tests/e2e/test_unusable_names.py::test_a_reply_that_cannot_be_sent_to_a_worker_is_servfail_for_that_query_"
         "only",),
        "a reply that cannot be pickled takes the whole answer message (and the worker's channel) with it",
        found="yes",
    ),
    Mutation(
        "supervisor-channel-closes-on-a-handler-error",
        "nodedns/workers/fleet.py",
        "                    if not self.keep_on_error:",
        "                    if True:",
        ("tests/e2e/test_unusable_names.py::test_a_message_the_receiver_fails_on_is_counted_and_only_a_worker_closes_"
         "its_channel",),
        "one message a handler fails on closes the supervisor's channel to that worker (the worker restarts)",
        found="yes",
    ),
    Mutation(
        "filter-aaaa-workers-never-told",
        "nodedns/workers/fleet.py",
        """        elif tag == "aaaa":
            self.resolver.set_aaaa_filter(message[1], message[2])""",
        """        elif tag == "aaaa":
            pass""",
        ("tests/e2e/test_operators.py::test_as_shipped_with_workers_auto_is_decided_by_the_supervisor_and_every_worker_"
         "follows",),
        "with --workers, the workers never learn the auto decision: they never filter",
    ),
    Mutation(
        "warm-workers-not-asked-for-their-caches",
        "nodedns/workers/fleet.py",
        "            if worker.channel is not None and worker.serving:",
        "            if worker.channel is not None and not worker.serving:",
        ("tests/e2e/test_handover.py::test_the_successor_answers_from_the_predecessors_forward_cache",),
        "with --workers, the supervisor leaves the successor an empty forward cache",
    ),
    Mutation(
        "supervisor-drops-the-workers-loop-lag",
        "nodedns/workers/fleet.py",
        '                out[name] = {"processes": [*out[name].get("processes", ()), *section.get("processes", ())]}',
        '                out[name] = {"processes": [*out[name].get("processes", ())]}',
        ("tests/unit/observe/test_looplag.py::test_the_shipped_agent_shows_each_process_loop_lag_and_a_stopped_workers_"
         "stall",),
        "with --workers only the supervisor's loop lag shows: the workers that answer DNS are not measured",
    ),
)
