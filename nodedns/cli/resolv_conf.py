"""`nodedns resolv-conf`: print the /etc/resolv.conf the kubelet would give a Pod, or lint a node's file.

    nodedns resolv-conf --pod FILE --resolv-conf FILE --cluster-dns IP[,IP] --cluster-domain DOMAIN
                        [--node-ips IP[,IP]] [-o FILE]
    nodedns resolv-conf --check-host FILE [--cluster-domain DOMAIN]

This module does the I/O (read the files, parse YAML/JSON, write the output atomically) and maps
errors to exit codes; every decision about the file's content is in nodedns.podconf.resolvconf.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from typing import Any

from nodedns.errors import ConfigError, HostResolvConfError, ManifestError, PodSpecError
from nodedns.podconf.resolvconf import MAX_HTTP_BODY_BYTES, MAX_RESOLV_CONF_BYTES, KubeletDNS, check_host, pod_dns

EXIT_OK = 0
EXIT_PROBLEMS = 1  # --check-host found problems, or -o FILE could not be written
EXIT_INPUT = 2  # bad flags, unreadable or unparseable input, a Pod the API server would reject

_EPILOG = """\
--resolv-conf "" means the kubelet's --resolv-conf="" (no host file: pods under Default get
127.0.0.1/::1 and "search ."); --cluster-dns "" means no cluster DNS configured.
--pod - reads the Pod (YAML or JSON) from stdin. Warnings go to stderr as "warning: <Kind>: <text>".

--check-host lints a node's resolv.conf as the kubelet does at start (search entries over 29, or 32
with --cluster-domain "", an entry over 253 characters, a search line over 2048, a nameserver line
without an address); it assumes a cluster domain is configured unless --cluster-domain "" is given.

exit status: 0 ok (warnings included); 1 --check-host found problems, or -o FILE could not be
written; 2 bad flags, unreadable or unparseable input, or a Pod the API server would reject.
"""


class Fail(Exception):
    """Stop with this message on stderr and this exit status."""

    def __init__(self, message: str, status: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.status = status


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "resolv-conf",
        help="render a Pod's /etc/resolv.conf as the kubelet would, or lint a node's",
        description="Render the /etc/resolv.conf the kubelet gives a Pod, with its warnings,\n"
        "or lint a node's resolv.conf with --check-host.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pod", metavar="FILE", help="the Pod manifest, YAML or JSON; - for stdin")
    p.add_argument("--resolv-conf", metavar="FILE", help='the kubelet\'s --resolv-conf; "" for none')
    p.add_argument("--cluster-dns", metavar="IP[,IP]", help='the kubelet\'s --cluster-dns; "" for none')
    p.add_argument("--cluster-domain", metavar="DOMAIN", help="the kubelet's --cluster-domain")
    p.add_argument("--node-ips", metavar="IP[,IP]", help='the node\'s IPs (used with --resolv-conf "")')
    p.add_argument("-o", dest="output", metavar="FILE", help="write here atomically (mode 0644), not stdout")
    p.add_argument("--check-host", metavar="FILE", help="lint this resolv.conf as the kubelet does at start")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.check_host is not None:
            return _check_host(args)
        return _render(args)
    except Fail as fail:
        for line in str(fail).splitlines():
            print(f"nodedns resolv-conf: error: {line}", file=sys.stderr)
        return fail.status


def _render(args: argparse.Namespace) -> int:
    missing = [
        flag
        for flag, value in (
            ("--pod", args.pod),
            ("--resolv-conf", args.resolv_conf),
            ("--cluster-dns", args.cluster_dns),
            ("--cluster-domain", args.cluster_domain),
        )
        if value is None
    ]
    if missing:
        raise Fail(f"the following arguments are required: {', '.join(missing)} (or use --check-host FILE)")
    try:
        settings = KubeletDNS.from_flags(
            cluster_dns=args.cluster_dns, cluster_domain=args.cluster_domain, node_ips=args.node_ips or ""
        )
    except ConfigError as exc:
        raise Fail(str(exc)) from None
    if args.pod == "-" and args.resolv_conf == "-":
        raise Fail("--pod and --resolv-conf cannot both read stdin")
    pod = load_pod(args.pod)
    host_text = None
    if args.resolv_conf != "":
        # Over 10 MiB is refused by nodedns.podconf.resolvconf, as by the kubelet.
        host_text = _decode(_read(args.resolv_conf, "--resolv-conf", MAX_RESOLV_CONF_BYTES))
    try:
        result = pod_dns(pod, settings, host_text)
    except ManifestError as exc:
        raise Fail(f"--pod {_name(args.pod)}: {exc}") from None
    except PodSpecError as exc:
        raise Fail(
            "\n".join(
                [f"--pod {_name(args.pod)}: the API server would reject this Pod:"]
                + [f"{path}: {message}" for path, message in exc.errors]
            )
        ) from None
    except HostResolvConfError as exc:
        raise Fail(f"--resolv-conf {_name(args.resolv_conf)}: {exc}") from None
    for warning in result.warnings:
        print(f"warning: {warning.line()}", file=sys.stderr)
    data = result.render().encode("utf-8", "surrogateescape")
    if args.output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return EXIT_OK
    try:
        write_atomic(args.output, data)
    except OSError as exc:
        raise Fail(f"-o {args.output}: cannot write: {exc.strerror or exc}", EXIT_PROBLEMS) from None
    return EXIT_OK


def _check_host(args: argparse.Namespace) -> int:
    extra = [
        flag
        for flag, value in (
            ("--pod", args.pod),
            ("--resolv-conf", args.resolv_conf),
            ("--cluster-dns", args.cluster_dns),
            ("--node-ips", args.node_ips),
            ("-o", args.output),
        )
        if value is not None
    ]
    if extra:
        raise Fail(f"--check-host does not take {', '.join(extra)}")
    path = args.check_host
    text = _decode(_read(path, "--check-host", MAX_RESOLV_CONF_BYTES))
    problems = check_host(text, path, cluster_domain_set=args.cluster_domain != "")
    for problem in problems:
        print(problem.message)
    return EXIT_PROBLEMS if problems else EXIT_OK


# --- input --------------------------------------------------------------------------------------------


def _read(path: str, flag: str, limit: int) -> bytes:
    """The file (stdin for `-`), cut at `limit` + 1 bytes: the caller tells "too large" from that, and a
    huge or endless input (/dev/zero) is not read to its end."""
    try:
        if path == "-":
            return sys.stdin.buffer.read(limit + 1)
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except OSError as exc:
        raise Fail(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None


def _decode(data: bytes) -> str:
    # The kubelet reads bytes; keep any non-UTF-8 byte as a surrogate escape and write it back as is.
    return data.decode("utf-8", "surrogateescape")


def load_pod(path: str) -> object:
    """The one document of the --pod file: JSON if it parses as JSON, else YAML."""
    data = _read(path, "--pod", MAX_HTTP_BODY_BYTES)
    if len(data) > MAX_HTTP_BODY_BYTES:
        raise Fail(
            f"--pod {_name(path)}: larger than the {MAX_HTTP_BODY_BYTES >> 20} MiB the API server accepts"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Fail(f"--pod {_name(path)}: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    import yaml  # only here: the pure module and `nodedns --help` stay free of it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise Fail(f"--pod {_name(path)}: not YAML or JSON: {exc.problem or exc.context}{where}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise Fail(f"--pod {_name(path)}: not YAML or JSON: {exc}") from None
    if not documents:
        raise Fail(f"--pod {_name(path)}: no Pod in it (empty)")
    if len(documents) > 1:
        raise Fail(f"--pod {_name(path)}: expected one Pod, found {len(documents)} documents")
    return documents[0]


def _name(path: str) -> str:
    return "<stdin>" if path == "-" else path


# --- output -------------------------------------------------------------------------------------------


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` so that readers see the old file or the new one, never a part.

    A temporary file in the same directory is written, given `mode` (whatever the umask), fsync'ed and
    renamed over `path`; then the directory is fsync'ed. On any failure the temporary file is removed
    and `path` is left as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # best effort: some filesystems refuse to fsync a directory
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
