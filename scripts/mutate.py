#!/usr/bin/env python3
"""Hand-made mutations of the code, each reintroduced in a scratch copy of the tree: do the named tests kill it?

A mutation is a bug the suite must catch: a file, a piece of its text (found exactly once), what
replaces it, and the tests that must fail with it in place. For each mutation chosen, this script
copies the tree (the files git tracks, plus the built C hit path) to a scratch directory, applies
the mutation (rebuilding the C hit path when the file is C), runs the named tests there with this
interpreter (`sys.executable -m pytest`) and prints one line:

    killed    resolv-conf-never-reread  (4 failed) tests/test_upstream_default.py::test_...
    survived  ...                        the named tests all passed: the suite no longer protects this

First the named tests run on the tree as it is: a test that fails there kills nothing (`error`). A
mutation whose text is no longer in the file is reported `stale` (the code moved: update the table).
docs/testing.md lists every mutation with the test that kills it; keep the two in step.

    scripts/mutate.py                       # every mutation, one at a time
    scripts/mutate.py --list                # names, files and tests, nothing run
    scripts/mutate.py python-hit-path-skips-allow-list dns-key-z-bit-as-do
    scripts/mutate.py --check               # only that every mutation applies to today's tree (no tests run)
    CI=true scripts/mutate.py               # as root: the network-namespace tests run too, as in CI

Exit status: 0 when every mutation run was killed, 1 otherwise (survived, stale or a run error).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    what: str  # the behaviour the mutation breaks, in words


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "resolv-conf-never-reread",
        "nodedns/app.py",
        "if config.kube_dns_config_dir or config.upstream_resolv_conf:",
        "if config.kube_dns_config_dir:",
        ("tests/test_forward.py::test_a_changed_resolv_conf_is_read_again_and_its_nameservers_used",
         "tests/test_upstream_default.py::test_when_the_nodes_resolv_conf_changes_the_agent_forwards_to_its_new_"
         "nameservers"),
        "the node's resolv.conf upstreams are read once and never again when the file changes",
    ),
    Mutation(
        "python-hit-path-skips-allow-list",
        "nodedns/server.py",
        """            if addr[0] not in allowed:
                self.slow(data, addr)  # the resolver admits (and remembers) the client, or refuses it
                continue
            # the same steps as datagram_received""",
        """            # the same steps as datagram_received""",
        ("tests/test_hostile.py::test_clients_outside_the_allow_list_are_refused_even_for_stored_answers",),
        "the Python hit path answers stored answers to clients the allow list refuses",
    ),
    Mutation(
        "old-agent-tears-down-successors-node",
        "nodedns/app.py",
        "                await self.node.teardown(retry=retry, keep=True)",
        "                await self.node.teardown(retry=retry, keep=False)",
        ("tests/test_handover.py::test_a_restart_keeps_the_interface_and_the_rules_the_successor_uses",),
        "an agent that stops beside its successor removes the interface and rules the successor uses",
    ),
    Mutation(
        "c-hit-path-skips-allow-list",
        "nodedns/_hitpath.c",
        "w = ok ? lookup(table, data, n, max_udp, &qend, &limit) : NULL;",
        "w = lookup(table, data, n, max_udp, &qend, &limit);",
        ("tests/test_hostile.py::test_clients_outside_the_allow_list_are_refused_even_for_stored_answers",),
        "the C hit path answers stored answers to clients the allow list refuses",
    ),
    Mutation(
        "invalidation-forgets-the-old-record",
        "nodedns/records.py",
        "    for record in (old, new):\n        if record is None:",
        "    for record in (new,):\n        if record is None:",
        ("tests/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",
         "tests/test_invalidation.py::test_a_change_names_the_tags_of_its_old_and_new_record"),
        "targeted invalidation drops too little: the tags of the record before the change are not named "
        "(a deleted Service keeps answering)",
    ),
    Mutation(
        "invalidation-forgets-endpoint-addresses",
        "nodedns/records.py",
        '            tags.update(f"i:{ip}" for ep in record.endpoints for ip in ep.addresses)\n',
        "",
        ("tests/test_invalidation.py::test_answers_served_through_the_table_equal_answers_computed_fresh",),
        "targeted invalidation drops too little: an EndpointSlice change keeps the PTR answers of its addresses",
    ),
    Mutation(
        "worker-keeps-invalidated-answers",
        "nodedns/fleet.py",
        """        elif tag == "inv":
            self.resolver.invalidate(message[1])""",
        """        elif tag == "inv":
            pass""",
        ("tests/test_fleet.py::test_workers_share_one_api_watch_and_every_worker_sees_each_change",),
        "a --workers worker keeps serving a stored answer after the owner invalidated its tags",
    ),
    Mutation(
        "guard-counts-failures-across-answered-rounds",
        "nodedns/guard.py",
        """        if not failed:
            self.unanswered = 0
            self.answered += 1""",
        """        if not failed:
            self.answered += 1""",
        ("tests/test_guard.py::test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row",),
        "the guard acts on a live agent: scattered lost probes add up to a fallback though the agent answers",
    ),
    Mutation(
        "guard-acts-before-the-agent-ever-answered",
        "nodedns/guard.py",
        """        if not self.armed:
            log.debug("not armed (the agent has not answered yet): %s", why)
            return
""",
        "",
        ("tests/test_guard.py::test_the_guard_falls_back_only_after_seeing_the_agent_answer_and_then_fail_in_a_row",),
        "the guard removes the addresses of an agent that is still starting (it never answered yet)",
    ),
    Mutation(
        "truncation-keeps-a-partial-record",
        "nodedns/wire.py",
        "    return head + response[12:cut] + opt\n",
        "    return head + response[12:max(cut, budget)] + opt\n",
        ("tests/test_wire.py", "tests/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_"
         "every_hit_path"),
        "a UDP answer cut for the client keeps the bytes of a record that did not fit whole",
    ),
    Mutation(
        "c-truncation-overruns-the-limit",
        "nodedns/_hitpath.c",
        "        if (end > budget)\n            break;",
        "        if (end > budget + 16)\n            break;",
        ("tests/test_hitpath_c.py", "tests/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_"
         "fit_on_every_hit_path"),
        "the C hit path keeps one record more than the client's UDP size holds",
    ),
    Mutation(
        "dns-key-z-bit-as-do",
        "nodedns/wire.py",
        "        if data[qend + 7] & 0x80:\n            flags |= KF_DO",
        "        if data[qend + 7] & 0x80 or data[3] & 0x40:\n            flags |= KF_DO",
        ("tests/test_interop.py::test_a_z_bit_query_gets_the_answer_of_its_own_do_bit_on_every_hit_path",
         "tests/test_wire_key.py"),
        "the header's Z bit is taken for DO (RFC 3225 section 3: it must be ignored)",
    ),
    Mutation(
        "dns-key-ignores-do",
        "nodedns/wire.py",
        "        if data[qend + 7] & 0x80:\n            flags |= KF_DO",
        "        if False:\n            flags |= KF_DO",
        ("tests/test_wire_key.py", "tests/test_forward.py::test_dnssec_ok_queries_get_their_own_entry_and_edns_options_"
         "share_one"),
        "a DO query shares the stored answer of a query without DO",
    ),
    Mutation(
        "edns-fallback-never-expires",
        "nodedns/upstream.py",
        "        if kflags & KF_EDNS and server.plain_until > self.clock():",
        "        if kflags & KF_EDNS and server.plain_until:",
        ("tests/test_interop.py::test_an_edns_intolerant_upstream_gets_edns_again_after_a_while",),
        "an upstream once found EDNS-intolerant is never asked with EDNS again",
    ),
    Mutation(
        "explainer-asks-as-an-empty-client",
        "nodedns/explain.py",
        "else self.resolver.answer(q, query, None)",
        'else self.resolver.handle(query, "")',
        ("tests/test_explain_allowed.py",),
        "the explainer asks its questions as client \"\", which the shipped allow list refuses",
    ),
    Mutation(
        "debug-routes-on-the-status-listener",
        "nodedns/status.py",
        "            if role is None or route.listener == role:",
        "            if True:",
        ("tests/test_status.py::test_every_route_answers_over_http_on_its_own_listener",
         "tests/test_status.py::test_unknown_routes_and_methods"),
        "/status and /debug/* answer on the status listener (every Pod can reach it)",
    ),
    Mutation(
        "optional-resource-403-blocks-readiness",
        "nodedns/kube.py",
        "        if all(st.synced or (not st.required and st.forbidden) for st in states):",
        "        if all(st.synced for st in states):",
        ("tests/test_sync_degraded.py::test_an_agent_without_its_node_or_pods_is_ready_and_answers_nxdomain",),
        "an API server that refuses an optional resource (403) keeps the agent unsynced and unready",
    ),
    Mutation(
        "python-hit-path-sends-big-answers-whole",
        "nodedns/server.py",
        """                    w = get(data[2:])
                    if w is not None and len(w) > 512:
                        w = None""",
        """                    w = get(data[2:])""",
        ("tests/test_interop.py::test_a_big_headless_answer_keeps_the_whole_records_that_fit_on_every_hit_path",),
        "the Python hit path sends a stored answer over 512 bytes whole to a client without EDNS",
    ),
    Mutation(
        "ready-before-the-index-synced",
        "nodedns/app.py",
        """        if not self.index.synced:
            reasons.append("the cluster index has not synced yet")""",
        """        if False:
            reasons.append("the cluster index has not synced yet")""",
        ("tests/test_kube_agent.py::test_unsynced_index_answers_servfail_until_the_first_sync",),
        "/readyz says ready before the cluster index has synced",
    ),
    Mutation(
        "ready-before-the-roster-says-serving",
        "nodedns/app.py",
        """        elif self.handover is not None and self.state == "running" and not self.handover.announced:
            reasons.append(NOT_ANNOUNCED)
""",
        "",
        ("tests/test_handover.py::test_readyz_says_ready_only_once_the_roster_says_serving",),
        "/readyz says ready before the agent's roster entry says serving (a successor started then thinks "
        "itself alone)",
    ),
    Mutation(
        "upstream-answer-of-another-question-accepted",
        "nodedns/wire.py",
        "    return got[-4:] == question[-4:] and got[:-4].lower() == question[:-4].lower()",
        "    return True",
        ("tests/test_forward.py::test_a_spoofed_answer_is_ignored",),
        "an upstream reply with our ID but another question (a spoof) is accepted",
    ),
    Mutation(
        "rate-limit-never-limits",
        "nodedns/limits.py",
        "        if n <= self.rate:\n            return 0  # PASS",
        "        if True:\n            return 0  # PASS",
        ("tests/test_hostile.py::test_rate_limited_clients_get_every_second_reply_truncated_and_the_rest_dropped",),
        "--rate-limit lets every reply through",
    ),
    Mutation(
        "tcp-drip-keeps-the-connection-open",
        "nodedns/server.py",
        "        if queries:\n            self._touch()  # only whole queries",
        "        if True:\n            self._touch()  # only whole queries",
        ("tests/test_hostile.py::test_a_tcp_client_dripping_bytes_is_closed_at_the_idle_timeout",),
        "a TCP client sending a byte at a time keeps its connection open forever",
    ),
    Mutation(
        "forward-cache-ttl-uncapped",
        "nodedns/cache.py",
        "min(t.min_ttl or 0, self.success_ttl)",
        "(t.min_ttl or 0)",
        ("tests/test_forward.py::test_ttls_count_down_on_hits_and_the_entry_expires",),
        "forwarded answers are kept for their whole TTL, not capped at --cache-success-ttl (30 s)",
    ),
    Mutation(
        "loop-route-still-forwarded",
        "nodedns/upstream.py",
        "        return group is not None and group.loop is not None",
        "        return False",
        ("tests/test_forward.py",),
        "a route whose loop probe came back is still forwarded to (queries circle until they time out)",
    ),
    Mutation(
        "duplicate-agent-not-refused",
        "nodedns/app.py",
        "            await self._refuse_duplicates()  # before the node is touched: its rules may be the other's",
        "            pass",
        ("tests/test_duplicates.py",),
        "a second agent starts on an address another server (not its predecessor) already serves",
    ),
    Mutation(
        "tcp-takes-frames-whatever-is-unsent",
        "nodedns/server.py",
        "return self.transport.get_write_buffer_size() + self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        "return self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        ("tests/test_tcp_bounds.py::test_a_pipelining_client_that_never_reads_stays_within_a_bound_and_other_pods_"
         "udp_is_all_answered",),
        "a TCP connection takes its next frame however much it is owed: a client that pipelines and never reads "
        "has all its answers buffered in the agent",
    ),
    Mutation(
        "tcp-idle-closes-a-connection-that-does-not-read",
        "nodedns/server.py",
        """            self.abort("not_reading")  # answers it never took: close() would wait for them forever""",
        """            self.close()""",
        ("tests/test_tcp_bounds.py::test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_"
         "full_send_buffer",),
        "a connection still owed answers is closed at the idle timeout, which waits forever for a client that "
        "does not read: it holds its slot and its buffers",
    ),
    Mutation(
        "tcp-abort-without-a-reset",
        "nodedns/server.py",
        "            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)",
        "            pass",
        ("tests/test_tcp_bounds.py::test_a_connection_that_never_reads_is_reset_at_the_idle_timeout_even_with_a_"
         "full_send_buffer",),
        "an aborted connection leaves its unsent answers queued in the kernel behind a FIN its client never gets",
    ),
    Mutation(
        "tcp-in-flight-cap-off-by-one",
        "nodedns/server.py",
        "self.pending * TCP_QUERY_COST >= TCP_OWED_PAUSE",
        "self.pending * TCP_QUERY_COST > TCP_OWED_PAUSE",
        ("tests/test_tcp_bounds.py::test_a_connection_has_at_most_four_queries_worked_on_at_once_and_every_answer_"
         "comes",),
        "a fifth query of a connection worked on at once: its answers landing together can exceed what it may hold",
    ),
    Mutation(
        "tcp-per-client-cap-off-by-one",
        "nodedns/server.py",
        "if held >= server.tcp_max_per_client:",
        "if held > server.tcp_max_per_client:",
        ("tests/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "one address gets one connection more than --tcp-max-connections-per-client",
    ),
    Mutation(
        "tcp-per-client-count-never-released",
        "nodedns/server.py",
        """            if mine is not None:
                mine.pop(self, None)
                if not mine:
                    del server.tcp_by_client[self.client]""",
        """            pass""",
        ("tests/test_tcp_bounds.py::test_the_per_client_cap_refuses_the_connection_after_the_nth_from_one_address_"
         "while_another_address_connects",),
        "closed connections still count against their address: a client that reconnected N times is refused "
        "for good",
    ),
    Mutation(
        "tcp-cap-never-makes-room",
        "nodedns/server.py",
        "if len(conns) < held + 2 or victim is None:",
        "if True:",
        ("tests/test_tcp_bounds.py::test_at_the_connection_cap_a_client_holding_fewer_gets_in_and_the_largest_"
         "holder_loses_its_oldest",),
        "once attacker Pods fill --tcp-max-connections, every other client's TCP connection is refused",
    ),
    Mutation(
        "silent-worker-waits-its-start-timeout",
        "nodedns/fleet.py",
        "if silent > (HEARTBEAT_TIMEOUT if worker.served else START_TIMEOUT):",
        "if silent > START_TIMEOUT:",
        ("tests/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker that served and went silent is killed only after 30 s: its share of the queries is lost "
        "meanwhile",
    ),
    Mutation(
        "supervisor-pause-kills-its-workers",
        "nodedns/fleet.py",
        "        if now - self._last_round > SUPERVISOR_LAG:",
        "        if False:",
        ("tests/test_worker_watch.py::test_a_late_watch_round_counts_every_worker_as_heard_from",),
        "a supervisor that was itself stopped or busy kills every worker whose beats wait unread in its channels",
    ),
    Mutation(
        "restart-reason-always-died",
        "nodedns/fleet.py",
        'reason = worker.killed or "died"',
        'reason = "died"',
        ("tests/test_worker_watch.py::test_a_stopped_worker_is_killed_and_restarted_within_seconds_and_readyz_says_"
         "why_meanwhile",),
        "a worker killed for its silence is counted as one that died",
    ),
    Mutation(
        "hold-forgets-a-worker-restarting-after-silence",
        "nodedns/fleet.py",
        """out.append((number, f"worker {number} restarting: {why}", why.startswith("silent")))""",
        """out.append((number, f"worker {number} restarting: {why}", False))""",
        ("tests/test_worker_watch.py::test_the_supervisor_holds_the_put_back_while_a_worker_is_silent_or_restarting_"
         "after_it",),
        "the local IPs go back while the killed worker's successor is not serving yet",
    ),
    Mutation(
        "put-back-ignores-the-hold",
        "nodedns/netif.py",
        "held = self.hold() if lost or not self.rules_installed else None",
        "held = None",
        ("tests/test_netif.py::test_local_ips_taken_away_are_not_put_back_while_a_worker_is_silent",),
        "the local IPs and rules go back once any worker answers the probe, while another one is silent",
    ),
    Mutation(
        "heap-trim-when-the-heap-grows",
        "nodedns/heap.py",
        "return held - self.baseline >= self.threshold",
        "return self.baseline - held >= self.threshold",
        ("tests/test_heap.py",),
        "the heap is trimmed when it grows, never after a burst was freed",
    ),
    Mutation(
        "heap-never-trimmed-by-an-agent",
        "nodedns/app.py",
        "        if self.TRIM_HEAP:\n",
        "        if not self.TRIM_HEAP:\n",
        ("tests/test_heap.py::test_a_running_agent_gives_back_the_heap_a_burst_left_free",),
        "an answering process keeps the heap a burst left free: the next burst starts near the memory limit",
    ),
    Mutation(
        "sighup-ends-the-zygote",
        "nodedns/zygote.py",
        "    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hang-up of the group (a terminal closing) is not "
        "ours to end",
        "    pass",
        ("tests/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads",),
        "SIGHUP kills the zygote, and with it every worker (they are started again from a new one)",
    ),
    Mutation(
        "sighup-not-passed-to-the-workers",
        "nodedns/fleet.py",
        """                worker.channel.send(("reload",))""",
        """                pass""",
        ("tests/test_sighup.py::test_sighup_to_any_process_of_the_shipped_agent_stops_none_and_every_worker_rereads",),
        "the supervisor's SIGHUP re-reads the upstream files in the supervisor only: the workers, which forward, "
        "keep the old upstreams for up to --kube-dns-config-period",
    ),
    Mutation(
        "externalname-not-validated",
        "nodedns/objects.py",
        "        problem = name_problem(normalized)",
        "        problem = None",
        ("tests/test_unusable_names.py::test_a_service_with_no_usable_target_answers_nxdomain_for_every_type",
         "tests/test_unusable_names.py::test_the_shipped_agent_answers_nxdomain_for_unusable_externalnames_and_no_worker_restarts"),
        "an ExternalName with a 64-octet or empty label is kept as a target: every query for it fails to encode",
    ),
    Mutation(
        "label-limit-off-by-one",
        "nodedns/names.py",
        "        if len(label) > MAX_LABEL:",
        "        if len(label) > MAX_LABEL + 1:",
        ("tests/test_unusable_names.py::test_a_name_fits_the_wire_only_with_labels_of_1_to_63_octets_and_253_characters",),
        "a 64-octet label passes as a DNS label",
    ),
    Mutation(
        "unencodable-answer-raises",
        "nodedns/resolver.py",
        "        except EncodeError as exc:\n            unencodable.report(",
        "        except KeyError as exc:\n            unencodable.report(",
        ("tests/test_unusable_names.py::test_an_answer_the_wire_cannot_carry_is_servfail_counted_not_an_exception",),
        "an answer the wire cannot carry escapes the index owner as an exception (a dead channel, a panic)",
    ),
    Mutation(
        "unsendable-reply-closes-the-channel",
        "nodedns/fleet.py",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        pass",
        "    except Exception:  # noqa: BLE001 - find the reply that cannot go, below\n        raise",
        ("tests/test_unusable_names.py::test_a_reply_that_cannot_be_sent_to_a_worker_is_servfail_for_that_query_only",),
        "a reply that cannot be pickled takes the whole answer message (and the worker's channel) with it",
    ),
    Mutation(
        "supervisor-channel-closes-on-a-handler-error",
        "nodedns/fleet.py",
        "                    if not self.keep_on_error:",
        "                    if True:",
        ("tests/test_unusable_names.py::test_a_message_the_receiver_fails_on_is_counted_and_only_a_worker_closes_its_channel",),
        "one message a handler fails on closes the supervisor's channel to that worker (the worker restarts)",
    ),
    Mutation(
        "config-file-decoded-loosely",
        "nodedns/upstream.py",
        '        return data.decode("utf-8")',
        '        return data.decode("utf-8", "replace")',
        ("tests/test_config_readers.py::test_a_non_utf8_byte_names_the_file_the_byte_and_its_offset",
         "tests/test_config_readers.py::test_the_agents_upstream_config_survives_a_non_utf8_byte_and_takes_the_next_good_file"),
        "an upstream config file that is not UTF-8 is taken (its bad bytes replaced) instead of reported",
    ),
    Mutation(
        "upstream-config-task-dies-on-a-bug",
        "nodedns/upstream.py",
        "        except Exception as exc:  # noqa: BLE001 - the task must outlive any file and any bug reading it",
        "        except ConfigError as exc:  # noqa: BLE001 - the task must outlive any file and any bug reading it",
        ("tests/test_config_readers.py::test_an_unexpected_failure_while_reading_is_counted_and_the_task_goes_on",),
        "an unexpected error while reading the upstream config ends the task: later changes are never applied",
    ),
    Mutation(
        "host-resolv-conf-read-once",
        "nodedns/app.py",
        '            self._tasks.spawn(self.host_file.run(), "host-resolv-conf")',
        "            self.host_file.text  # noqa: B018",
        ("tests/test_config_readers.py::test_the_agent_renders_pod_resolv_conf_from_the_hosts_file_as_it_changes",),
        "the node's resolv.conf is read once: Pod resolv.conf files are rendered from a stale copy",
    ),
    Mutation(
        "cache-budget-overrun-by-one-entry",
        "nodedns/cache.py",
        "        while self.bytes_used() + size > self.max_bytes:",
        "        while self.bytes_used() > self.max_bytes:",
        ("tests/test_cache_bytes.py::test_the_two_stores_share_one_budget",),
        "the forward cache makes room for a new entry only once it is already over its byte budget",
    ),
    Mutation(
        "big-answers-stored",
        "nodedns/cache.py",
        "        if len(wire) > self.max_entry:",
        "        if len(wire) > 4 * self.max_entry:",
        ("tests/test_cache_bytes.py::test_an_answer_over_the_entry_limit_is_served_but_not_stored",
         "tests/test_cache_bytes.py::test_the_shipped_agent_splits_the_budget_over_its_workers_and_keeps_no_60kb_answer"),
        "a 60 KB forwarded answer is stored (a few hundred of them push every usual answer out)",
    ),
    Mutation(
        "answer-held-twice",
        "nodedns/cache.py",
        "        self.wire = bytes(buf)\n        return self.wire",
        "        return bytes(buf)",
        ("tests/test_cache_bytes.py::test_each_answer_is_held_once_the_hot_copy_is_the_entrys_own_bytes",),
        "a rendered answer is a second copy beside the stored one (twice the memory for the hot entries)",
    ),
    Mutation(
        "client-share-one-too-many",
        "nodedns/resolver.py",
        "        if not self.client_share or self._by_client.get(client, 0) < self.client_share:",
        "        if not self.client_share or self._by_client.get(client, 0) <= self.client_share:",
        ("tests/test_upstream_share.py::test_a_client_over_its_share_is_refused_while_another_clients_new_names_are_asked",),
        "a client may hold one upstream query more than its share",
    ),
    Mutation(
        "client-share-min-for-max",
        "nodedns/resolver.py",
        "    share = max(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)",
        "    share = min(CLIENT_SHARE_FLOOR, max_concurrent // CLIENT_SHARE_FRACTION)",
        ("tests/test_upstream_share.py::test_a_clients_share_is_an_eighth_of_max_concurrent_at_least_16",),
        "a client's share is at most 16 upstream queries whatever --max-concurrent is",
    ),
    Mutation(
        "client-share-never-applies",
        "nodedns/app.py",
        "            client_share=client_share(config.max_concurrent),",
        "            client_share=0,",
        ("tests/test_upstream_share.py::test_a_pods_flood_of_slow_names_leaves_another_pods_new_names_answered",),
        "one Pod's flood of slow names takes every upstream slot: another Pod's new names are REFUSED",
    ),
    Mutation(
        "healthz-paced",
        "nodedns/status.py",
        '            if request.path == "/healthz" and request.method == "GET":',
        '            if request.path == "/livez" and request.method == "GET":',
        ("tests/test_liveness_under_load.py::test_the_liveness_probe_is_answered_through_a_flood_of_healthz_scrapes_and_idle_connections",),
        "GET /healthz waits for its turn behind the other requests: a flood fails the kubelet's probe",
    ),
    Mutation(
        "healthz-over-the-caps-aborted",
        "nodedns/status.py",
        "        liveness = self.source.liveness if role == STATUS else None  # /healthz is the status listener's",
        "        liveness = None",
        ("tests/test_liveness_under_load.py::test_the_liveness_probe_is_answered_through_a_flood_of_healthz_scrapes_and_idle_connections",
         "tests/test_status_limits.py::test_connections_over_the_clients_cap_are_closed_at_once_and_counted"),
        "a probe's connection over the caps is closed: a flood from the kubelet's address fails its probe",
    ),
    Mutation(
        "malformed-http-logged-each-time",
        "nodedns/status.py",
        '        self.malformed.report(f"{exc.__class__.__name__}: {text}")',
        '        log.error("malformed HTTP request: %s", text, exc_info=exc)',
        ("tests/test_liveness_under_load.py::test_malformed_requests_are_counted_and_logged_once_never_a_traceback_each",),
        "every malformed HTTP request logs a traceback (megabytes of log in seconds)",
    ),
    Mutation(
        "manifest-list-built-whole",
        "nodedns/manifests.py",
        '            if key == "items" and loader.check_event(y.SequenceStartEvent) and not streamed:',
        "            if False:",
        ("tests/test_manifest_stream.py::test_reading_a_big_list_holds_one_item_at_a_time_not_the_file",),
        "kubectl's one List document is built whole before its first object is shrunk (a big dump OOMs)",
    ),
    Mutation(
        "successor-gone-never-noticed",
        "nodedns/handover.py",
        "                elif told:\n                    gone = self.superseded",
        "                elif told and not told:\n                    gone = self.superseded",
        ("tests/test_handover.py::test_an_agent_whose_successor_was_killed_takes_the_status_port_back_and_is_ready_"
         "again",),
        "an agent whose successor was SIGKILLed stays unready, without a status listener, while it serves",
    ),
    Mutation(
        "unusable-name-logged-every-time",
        "nodedns/index.py",
        "        if self.unusable.get(key) != problem:",
        "        if True:",
        ("tests/test_unusable_names.py::test_the_index_logs_an_unusable_externalname_once_and_forgets_it_when_fixed",),
        "an unusable externalName is logged again on every resync of its Service",
    ),
    Mutation(
        "mcs-ptr-missing",
        "nodedns/records.py",
        "            targets = self.clusterset_ptr_targets(ip)  # the cluster-local PTR wins (spec: Limitations)",
        "            targets = []",
        ("tests/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",
         "tests/test_clusterset_ptr.py::test_clusterset_ptrs_follow_imports_and_yield_to_the_cluster_zone"),
        "a clusterset IP or an imported headless endpoint has no PTR (MCS DNS spec 2.3.3, 2.4.3)",
    ),
    Mutation(
        "mcs-ptr-wins-over-the-cluster-local-one",
        "nodedns/records.py",
        "        if not targets and ip is not None:\n            targets = self.clusterset_ptr_targets(ip)",
        "        if ip is not None:\n            targets = self.clusterset_ptr_targets(ip) or targets",
        ("tests/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an address with a cluster-local PTR answers the clusterset one instead (the spec's Limitations)",
    ),
    Mutation(
        "mcs-ptr-for-an-endpoint-not-ready",
        "nodedns/records.py",
        "                if ep.ready:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        "                if True:\n                    for name, addr in self._endpoint_names(ep):\n"
        "                        if addr == ip:\n                            targets[f\"{name}.{base}\"] = None",
        ("tests/test_clusterset.py::test_clusterset_records_answer_as_the_mcs_spec_says",),
        "an imported endpoint that is not ready keeps a PTR",
    ),
    Mutation(
        "mcs-ptr-kept-after-its-import-changed",
        "nodedns/records.py",
        '            tags.update(f"i:{ip}" for ip in record.ips)\n',
        "",
        ("tests/test_clusterset.py::test_a_multicluster_change_names_its_import_and_its_addresses",
         "tests/test_clusterset_ptr.py::test_without_an_authoritative_reverse_zone_an_import_turns_a_forwarded_ptr_"
         "into_ours"),
        "a ServiceImport's change keeps the stored reverse answers of its clusterset IPs (a removed import's PTR "
        "stays, a new one stays forwarded)",
    ),
    Mutation(
        "mcs-index-keeps-a-deleted-imports-address",
        "nodedns/index.py",
        "            if gone_import is not None:\n                for ip in gone_import.ips:\n"
        "                    _drop_ref(self._imports_by_ip, ip, key)",
        "            if gone_import is not None:\n                for ip in ():\n"
        "                    _drop_ref(self._imports_by_ip, ip, key)",
        ("tests/test_clusterset.py::test_the_index_finds_imports_and_imported_slices_by_address",),
        "the index still finds a deleted ServiceImport by its clusterset IP (a KeyError on the next PTR)",
    ),
    Mutation(
        "tally-drops-names-of-a-fast-walker",
        "nodedns/tally.py",
        "        elif len(self.sealed) < MAX_SEALED:",
        "        elif False:",
        ("tests/test_tally.py::test_a_client_asking_many_names_in_an_interval_is_counted_name_by_name_in_pieces",
         "tests/test_insight_hitpath.py::test_a_fast_walk_of_50_external_names_counts_every_search_list_miss"),
        "a client asking more than 64 names a second loses their names: insight undercounts its search-list misses",
    ),
    Mutation(
        "c-hit-path-counts-past-a-full-piece",
        "nodedns/_hitpath.c",
        "    if (!old && PyDict_GET_SIZE(cd) >= TALLY_ANSWERS)\n        return 1;",
        "    if (!old && PyDict_GET_SIZE(cd) >= TALLY_ANSWERS)\n        return 0;",
        ("tests/test_insight_hitpath.py::test_the_c_hit_path_counts_each_hit_as_tally_hit_does",),
        "the C hit path counts past a client's full piece instead of handing the hit to the Python path",
    ),
    Mutation(
        "walks-forget-a-walk-split-between-workers",
        "nodedns/insight.py",
        "MAX_NAMES = 2048  # names per client",
        "MAX_NAMES = 64  # names per client",
        ("tests/test_insight.py::test_a_fast_walk_split_between_two_workers_counts_every_miss",),
        "the search-list state forgets the first half of walks split between two workers' batches",
    ),
    Mutation(
        "walks-never-confirm-a-pending-miss",
        "nodedns/insight.py",
        "                waiting = pending.pop(other, None)",
        "                waiting = None",
        ("tests/test_insight.py::test_search_list_misses_are_the_nxdomains_followed_by_another_suffix",),
        "an NXDOMAIN asked before the rest of its walk is never counted as a miss",
    ),
    Mutation(
        "ready-logged-before-readyz",
        "nodedns/app.py",
        "        while reasons := self.observer.readiness():",
        "        while False:",
        ("tests/test_kube_agent.py::test_the_log_says_ready_only_when_readyz_does_and_says_why_not_before",),
        "the log says `ready:` while /readyz says 503",
    ),
    Mutation(
        "iptables-permission-taken-for-a-lock",
        "nodedns/firewall.py",
        "    if is_permission_error(r):\n        return False\n    return r.returncode == LOCK_EXIT_STATUS",
        "    return r.returncode == LOCK_EXIT_STATUS",
        ("tests/test_firewall.py::test_permission_denied_is_no_lock_it_is_not_retried_and_it_names_net_admin",),
        "iptables refused for lack of NET_ADMIN is reported as a busy xtables lock and retried",
    ),
    Mutation(
        "node-setup-refused-not-fatal",
        "nodedns/netif.py",
        "            if refused:\n",
        "            if False:\n",
        ("tests/test_netif.py::test_a_node_setup_refused_for_lack_of_net_admin_stops_the_start",),
        "without NET_ADMIN the agent starts, never ready, instead of exiting with the reason",
    ),
    Mutation(
        "privileged-bind-message-names-nothing",
        "nodedns/errors.py",
        "    if exc.errno == errno.EACCES and port is not None:",
        "    if False:",
        ("tests/test_cli_serve.py::test_a_privileged_port_refused_names_the_address_and_what_is_missing",),
        "a bind refused below port 1024 says only 'permission denied', not NET_BIND_SERVICE or a port >= 1024",
    ),
    Mutation(
        "config-file-paths-from-the-current-directory",
        "nodedns/config.py",
        "            merged[norm] = _from_folder(folder, value) if norm in PATH_KEYS else value",
        "            merged[norm] = value",
        ("tests/test_cli_args.py::test_a_relative_path_in_a_config_file_is_relative_to_its_folder",
         "tests/test_cli_serve.py::test_relative_paths_in_a_config_file_are_read_from_its_folder"),
        "a relative path in a --config file is read from the current directory, not from the file's folder",
    ),
    Mutation(
        "abbreviated-flags-accepted",
        "nodedns/cli/__init__.py",
        '        kwargs["allow_abbrev"] = False',
        '        kwargs["allow_abbrev"] = True',
        ("tests/test_cli_args.py::test_every_parser_of_every_command_refuses_abbreviations",
         "tests/test_cli_args.py::test_an_abbreviated_flag_is_refused_naming_the_flag_it_may_mean"),
        "a flag with its last letter missing quietly runs as the flag (`--manifests`)",
    ),
    Mutation(
        "host-sysctl-changed-without-an-interface",
        "nodedns/app.py",
        "                             set_sysctl=config.setup_interface is not None)",
        "                             set_sysctl=True)",
        ("tests/test_handover.py::test_only_an_agent_managing_a_node_interface_changes_a_host_sysctl",),
        "an agent that manages no node interface (--firewall alone) sets net.ipv4.tcp_migrate_req",
    ),
    Mutation(
        "node-cache-holder-not-awaited",
        "nodedns/app.py",
        "            found = await self._let_go(found)",
        "            pass",
        ("tests/test_duplicates.py::test_an_agent_managing_the_node_waits_for_a_foreign_holder_of_its_address_to_let_go",),
        "nodedns refuses to start (exit 2) while node-cache's terminating Pod still holds 169.254.20.10:53",
    ),
    Mutation(
        "leaving-agent-takes-node-caches-interface",
        "nodedns/app.py",
        "        foreign = [o for o in found if not o.is_nodedns]",
        "        foreign = []",
        ("tests/test_duplicates.py::test_on_the_way_back_a_leaving_agent_leaves_the_interface_to_node_cache",),
        "on the way back nodedns removes the interface node-cache already serves on (its addresses gone for up to "
        "its -syncinterval)",
    ),
    Mutation(
        "page-says-no-queries-beside-the-nodes-own",
        "nodedns/page.py",
        '    rows = pods + [_insight_row(f"<i>{e(name)}</i>", g) for name, g in groups]',
        "    rows = pods",
        ("tests/test_page.py::test_the_insight_section_says_what_the_pods_asked",),
        "the status page says no queries were seen beside the node's own queries",
    ),
    Mutation(
        "cli-answers-name-another-agent",
        "nodedns/app.py",
        '"pid": os.getpid(),',
        '"pid": 1,',
        ("tests/test_cli_serve.py::test_a_taken_debug_port_is_a_warning_and_the_cli_names_the_agent_that_answers",),
        "`nodedns lookup`/`explain`/`top` name a process that did not answer them",
    ),
    Mutation(
        "a-doc-restates-a-measured-figure",
        "docs/restarts.md",
        "What it measured (queries sent and lost over the restarts,",
        "0 of 899,998 queries lost. What it measured (queries sent and lost over the restarts,",
        ("tests/test_measured.py::test_no_other_document_repeats_a_measured_figure",),
        "a document outside the README's Measured section states a figure again (and drifts from it)",
    ),
    Mutation(
        "c-hit-path-passes-one-over-the-rate-limit",
        "nodedns/_hitpath.c",
        "            if (rl_full || rl_n >= rate) {",
        "            if (rl_full || rl_n > rate) {",
        ("tests/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_neighbour_its_own_budget",
         "tests/test_hitpath_c.py::test_a_client_under_its_rate_limit_is_answered_and_counted_and_the_rest_handed_to_the_"
         "limiter"),
        "the C hit path answers one query a second more than a client's --rate-limit budget",
    ),
    Mutation(
        "python-hit-path-passes-one-over-the-rate-limit",
        "nodedns/server.py",
        "                elif seen >= rate:",
        "                elif seen > rate:",
        ("tests/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_neighbour_its_own_budget",),
        "the inlined Python hit path answers one query a second more than a client's --rate-limit budget",
    ),
    Mutation(
        "c-hit-path-rate-limit-window-never-turns",
        "nodedns/server.py",
        "                limiter.tick()  # a new second: its counts cleared in place\n                limit = (",
        "                limit = (",
        ("tests/test_hostile.py::test_a_rate_limited_client_gets_its_budget_again_the_next_second_and_no_more",),
        "the C hit path counts a new second against the last one's budget until a client over it turns the window",
    ),
    Mutation(
        "python-hit-path-rate-limit-window-never-turns",
        "nodedns/server.py",
        "            limiter.tick()  # a new second: its counts cleared in place\n            rl, rate,",
        "            rl, rate,",
        ("tests/test_hostile.py::test_a_rate_limited_client_gets_its_budget_again_the_next_second_and_no_more",),
        "the inlined Python hit path counts a new second against the last one's budget",
    ),
    Mutation(
        "c-hit-path-rate-limit-count-not-written-back",
        "nodedns/_hitpath.c",
        "    if (rl_dirty && rl_write(rl, who, rl_n) < 0)\n        goto fail;\n    while (sent < hits) {",
        "    while (sent < hits) {",
        ("tests/test_hostile.py::test_rate_limited_clients_get_every_second_reply_truncated_and_the_rest_dropped",
         "tests/test_hitpath_c.py::test_a_client_under_its_rate_limit_is_answered_and_counted_and_the_rest_handed_to_the_"
         "limiter"),
        "the C hit path forgets the count of the last run of datagrams of a batch: that client's answers go uncounted",
    ),
    Mutation(
        "c-hit-path-rate-limit-run-count-not-written-back",
        "nodedns/_hitpath.c",
        "            if (rl_dirty && rl_write(rl, who, rl_n) < 0)\n"
        "                goto fail;\n            rl_dirty = 0;",
        "            rl_dirty = 0;",
        ("tests/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_neighbour_its_own_budget",
         "tests/test_hitpath_c.py::test_each_client_in_a_batch_has_its_own_rate_limit_count"),
        "the C hit path forgets a client's count when another address's datagrams follow in the batch",
    ),
    Mutation(
        "c-hit-path-rate-limit-rate-and-table-size-swapped",
        "nodedns/server.py",
        "limit = (limiter.counts, limiter.rate, limiter.max_clients, over)",
        "limit = (limiter.counts, limiter.max_clients, limiter.rate, over)",
        ("tests/test_hostile.py::test_a_client_flooding_a_stored_name_gets_take_s_verdicts_query_for_query_and_its_neighbour_its_own_budget",),
        "the C hit path takes the rate limit table's size for the budget and the budget for its size",
    ),
    Mutation(
        "c-hit-path-rate-limit-table-grows-past-full",
        "nodedns/_hitpath.c",
        "        *full = PyDict_GET_SIZE(rl) >= max_clients;",
        "        *full = PyDict_GET_SIZE(rl) > max_clients;",
        ("tests/test_hostile.py::test_clients_beyond_the_rate_limit_table_share_one_budget_on_the_hit_path",
         "tests/test_hitpath_c.py::test_a_new_client_when_the_rate_limit_table_is_full_is_handed_to_the_limiter"),
        "the C hit path gives one client more than --rate-limit's table holds a budget of its own",
    ),
    Mutation(
        "python-hit-path-rate-limit-table-grows-past-full",
        "nodedns/server.py",
        "                    if len(rl) >= max_clients:",
        "                    if len(rl) > max_clients:",
        ("tests/test_hostile.py::test_clients_beyond_the_rate_limit_table_share_one_budget_on_the_hit_path",),
        "the inlined Python hit path gives one client more than --rate-limit's table holds a budget of its own",
    ),
)


@dataclass
class Outcome:
    verdict: str  # killed, survived, stale, error
    detail: str
    seconds: float


def copy_tree(dest: Path) -> None:
    """The files git tracks (as they are in the work tree) and the built C hit path."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if not src.is_file():
            continue  # deleted in the work tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    for built in (ROOT / "nodedns").glob("_hitpath*.so"):
        shutil.copy2(built, dest / "nodedns" / built.name)


def apply(tree: Path, m: Mutation) -> bool:
    """Apply the mutation in `tree`; False when its text is not there exactly once (stale)."""
    path = tree / m.file
    text = path.read_text(encoding="utf-8")
    if text.count(m.original) != 1:
        return False
    path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
    return True


def applies(m: Mutation) -> bool:
    return (ROOT / m.file).read_text(encoding="utf-8").count(m.original) == 1


# setup.py's extension, built in place with the flags it gives, without reading pyproject.toml (the
# setuptools of a venv may be older than the one pip builds with, and refuse its license field)
BUILD = """
import runpy, setuptools, sys
from setuptools.dist import Distribution
given = {}
setuptools.setup = lambda **kw: given.update(kw)
runpy.run_path("setup.py")
dist = Distribution({"ext_modules": given["ext_modules"], "script_args": ["build_ext", "--inplace", "--force"]})
dist.parse_command_line()
for ext in dist.ext_modules:
    ext.optional = False  # a mutant that does not compile is an error, not the Python hit path
dist.run_commands()
"""


def rebuild(tree: Path) -> str | None:
    """Build the C hit path in the scratch tree; the error output, or None."""
    r = subprocess.run([sys.executable, "-c", BUILD], cwd=tree, capture_output=True, text=True, timeout=600)
    return None if r.returncode == 0 else r.stdout + r.stderr


def pytest_run(tree: Path, tests: tuple[str, ...], timeout: float, verbose: bool) -> tuple[int, str]:
    """Run `tests` in `tree` with this interpreter: (exit status, pytest's last line); -1 on a timeout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)  # the scratch tree's nodedns, not the installed one
    env.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    try:
        r = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"the tests ran over {timeout:g}s"
    out = r.stdout + r.stderr
    if verbose:
        print(out)
    lines = [line.strip("= ") for line in out.splitlines() if line.strip()]
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error|skipped)", line)),
                   lines[-1] if lines else "")
    return r.returncode, summary


def run(m: Mutation, *, keep: bool, timeout: float, verbose: bool, baseline: dict[tuple[str, ...], str]) -> Outcome:
    """Copy the tree, check the named tests pass on it (once per set of tests), apply the mutation, run them."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"nodedns-mutant-{m.name}-"))
    try:
        copy_tree(scratch)
        if m.tests not in baseline:
            code, summary = pytest_run(scratch, m.tests, timeout, verbose)
            baseline[m.tests] = "" if code == 0 and "passed" in summary else f"exit {code}: {summary}"
        if baseline[m.tests]:
            return Outcome("error", f"the named tests fail without the mutation ({baseline[m.tests]})",
                           time.monotonic() - started)
        if not apply(scratch, m):
            return Outcome("stale", f"the original text is not in {m.file} exactly once", time.monotonic() - started)
        if m.file.endswith(".c"):
            failed = rebuild(scratch)
            if failed is not None:
                return Outcome("error", f"the mutant does not build: {failed[-500:]}", time.monotonic() - started)
        code, summary = pytest_run(scratch, m.tests, timeout, verbose)
        verdict = {0: "survived", 1: "killed"}.get(code, "error")
        if verdict == "survived" and "passed" not in summary:
            verdict = "error"  # every named test skipped here: nothing was checked
        return Outcome(verdict, summary if verdict != "error" else f"pytest exit {code}: {summary}",
                       time.monotonic() - started)
    finally:
        if keep:
            print(f"  (scratch tree kept: {scratch})")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="mutations to run (default: every one)")
    ap.add_argument("--list", action="store_true", help="list the mutations and their tests; run nothing")
    ap.add_argument("--check", action="store_true", help="only check that every mutation applies to this tree")
    ap.add_argument("--keep", action="store_true", help="keep each scratch tree (its path is printed)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutation's test run (default 900)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each test run's output")
    args = ap.parse_args(argv)

    by_name = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        ap.error(f"unknown mutation(s): {', '.join(unknown)} (see --list)")
    chosen = [by_name[n] for n in args.names] if args.names else list(MUTATIONS)

    if args.list:
        for m in chosen:
            print(f"{m.name}\n  {m.what}\n  in {m.file}; killed by: {' '.join(m.tests)}")
        return 0
    if args.check:
        stale = [m for m in chosen if not applies(m)]
        for m in chosen:
            print(f"{'stale' if m in stale else 'applies':9} {m.name}  ({m.file})")
        return 1 if stale else 0

    width = max(len(m.name) for m in chosen)
    results: dict[str, int] = {}
    baseline: dict[tuple[str, ...], str] = {}  # named tests -> why they fail on the tree as it is ("": they pass)
    for m in chosen:
        o = run(m, keep=args.keep, timeout=args.timeout, verbose=args.verbose, baseline=baseline)
        results[o.verdict] = results.get(o.verdict, 0) + 1
        print(f"{o.verdict:9} {m.name:{width}}  {o.seconds:5.0f}s  {o.detail}", flush=True)
    print("total: " + ", ".join(f"{n} {v}" for v, n in sorted(results.items())) + f" of {len(chosen)}")
    return 0 if results.get("killed", 0) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
