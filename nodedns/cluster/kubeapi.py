"""The Kubernetes API over HTTP: credentials (kubeconfig or in-cluster), requests, the errors of a response.

Blocking HTTP through the `kubernetes` package's configuration loaders and its urllib3 pool; raw JSON
streams, never client model objects. Used from the watch threads (nodedns.cluster.watcher).
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import ssl
import sys
import threading
import types
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import urllib3

from nodedns.errors import ApiError, ApiGone, ApiUnauthorized, ConfigError

log = logging.getLogger("nodedns.kube")


SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
USER_AGENT = "nodedns"


ERROR_BODY_MAX = 64 * 1024


RETRY_AFTER_MAX = 600.0  # seconds: a larger Retry-After is taken as this


# ----------------------------------------------------------------------------------------------
# Where the API server is, and the credentials


def _kubernetes_package() -> None:
    """Make `kubernetes` importable without its package `__init__`, unless something imported it already.

    The agent uses the package's configuration loaders (`kubernetes.config`), its `Configuration` and its
    REST client's urllib3 pool (`kubernetes.client`); the package's `__init__` also imports the dynamic
    client, watch, stream, informer and leader-election modules (and what they import), which the process
    that holds the node's index would carry for nothing. An empty package module with the real search path
    lets the subpackages import as they are, each running its own `__init__`.
    """
    if "kubernetes" in sys.modules:
        return
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        return  # not installed: the import below says so
    package = types.ModuleType("kubernetes")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    package.__package__ = "kubernetes"
    sys.modules["kubernetes"] = package


class _ApiClientOnDemand:
    """`kubernetes.client.ApiClient`, imported when one is made rather than when the loaders import its name.

    The kubeconfig loader imports `ApiClient` at its top for `new_client_from_config`, which the agent never
    calls; the real class brings the REST client, the package's utils (YAML object creation, metrics) and
    pydantic, none of which the process that holds the node's index needs.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.api_client import ApiClient

        return ApiClient(*args, **kwargs)


def _api_client_on_demand() -> None:
    """Give `kubernetes.client` its `ApiClient` name as `_ApiClientOnDemand`, unless the real one is loaded."""
    import kubernetes.client

    if "ApiClient" not in vars(kubernetes.client) and "kubernetes.client.api_client" not in sys.modules:
        setattr(kubernetes.client, "ApiClient", _ApiClientOnDemand)  # noqa: B010 - the name is typed as the real class


def pool_of(cfg: Any) -> urllib3.PoolManager:
    """The urllib3 pool the package's REST client (`kubernetes.client.rest.RESTClientObject`) makes of `cfg`.

    Built here with the same arguments for the common case, so that the REST client and the package utils it
    imports stay out of the process; a proxy or the TCP keep-alive option goes through the REST client itself.
    """
    if cfg.proxy or cfg.socket_options is not None or getattr(cfg, "keep_alive", False):
        from kubernetes.client import rest

        return rest.RESTClientObject(cfg).pool_manager
    args: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if cfg.verify_ssl else ssl.CERT_NONE,
        "ca_certs": cfg.ssl_ca_cert,
        "cert_file": cfg.cert_file,
        "key_file": cfg.key_file,
        "ca_cert_data": cfg.ca_cert_data,
    }
    if cfg.assert_hostname is not None:
        args["assert_hostname"] = cfg.assert_hostname
    if cfg.retries is not None:
        args["retries"] = cfg.retries
    if cfg.tls_server_name:
        args["server_hostname"] = cfg.tls_server_name
    if cfg.connection_pool_maxsize is not None:
        args["maxsize"] = cfg.connection_pool_maxsize
    return urllib3.PoolManager(**args)


class ApiSource:
    """A kubeconfig file, or the in-cluster service account; `load()` (re)reads it into a Configuration."""

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        service_account_dir: str = SERVICE_ACCOUNT_DIR,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.service_account_dir = service_account_dir
        self.environ = os.environ if environ is None else environ

    def describe(self) -> str:
        if self.kubeconfig:
            return f"kubeconfig {self.kubeconfig}"
        return f"in-cluster service account ({self.service_account_dir})"

    def load(self) -> Any:
        """A fresh `kubernetes.client.Configuration`; raises ConfigError naming the source."""
        _kubernetes_package()
        _api_client_on_demand()
        from kubernetes import client, config
        from kubernetes.config import incluster_config

        load_kube_config: Any = config.load_kube_config  # the loaders are untyped
        in_cluster_loader: Any = incluster_config.InClusterConfigLoader
        cfg = client.Configuration()
        try:
            if self.kubeconfig:
                if not os.path.isfile(self.kubeconfig):
                    raise ConfigError("kubeconfig", f"{self.kubeconfig}: no such file")
                load_kube_config(config_file=self.kubeconfig, client_configuration=cfg, persist_config=False)
            else:
                if not self.environ.get("KUBERNETES_SERVICE_HOST"):
                    raise ConfigError(
                        "kubeconfig",
                        "no cluster source: not in a cluster (KUBERNETES_SERVICE_HOST is unset); "
                        "give --kubeconfig FILE or --manifests FILE",
                    )
                in_cluster_loader(
                    token_filename=os.path.join(self.service_account_dir, "token"),
                    cert_filename=os.path.join(self.service_account_dir, "ca.crt"),
                    environ=self.environ,
                ).load_and_set(cfg)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the loaders raise many kinds; all mean "unusable"
            raise ConfigError("kubeconfig", f"{self.describe()}: {exc}") from None
        if not getattr(cfg, "host", ""):
            raise ConfigError("kubeconfig", f"{self.describe()}: no API server address")
        return cfg


class Http:
    """Blocking requests to the API server from threads (never the loop): the watchers' GETs (raw responses),
    the status writer's PATCHes; the auth header."""

    def __init__(self, source: ApiSource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self.generation = 0
        self.reloads = 0
        self._set(source.load())

    def _set(self, cfg: Any) -> None:
        self.cfg = cfg
        self.base = str(cfg.host).rstrip("/")
        self.pool: urllib3.PoolManager = pool_of(cfg)
        self.generation += 1

    def reload(self, seen: int) -> None:
        """Re-read the source (a rotated token) unless another thread already did since generation `seen`."""
        with self._lock:
            if self.generation != seen:
                return
            old = self.pool
            try:
                self._set(self.source.load())
            except ConfigError as exc:
                log.warning("cannot reload API credentials: %s", exc)
                return
            self.reloads += 1
            old.clear()

    def headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "User-Agent": USER_AGENT}
        # auth_settings() runs the loaders' refresh hook: in-cluster it re-reads the token file each minute
        for setting in self.cfg.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                out[str(setting["key"])] = str(setting["value"])
        return out

    def get(self, path: str, params: Mapping[str, str], *, connect: float, read: float) -> Any:
        """The open response (status 200, body unread), or ApiError/ApiGone/ApiUnauthorized."""
        url = f"{self.base}{path}?{urlencode(params)}"
        resp = self.pool.request(
            "GET",
            url,
            headers=self.headers(),
            preload_content=False,
            timeout=urllib3.Timeout(connect=connect, read=read),
            retries=False,
            redirect=False,
        )
        if resp.status == 200:
            return resp
        try:
            body = resp.read(ERROR_BODY_MAX)
        finally:
            resp.release_conn()
        raise status_error(resp.status, body, retry_after=retry_after_of(resp.headers.get("Retry-After")))

    def patch(self, path: str, body: bytes, *, timeout: float = 10.0) -> None:
        """A JSON merge patch (a policy's status subresource); raises ApiError on any status but 2xx."""
        headers = {**self.headers(), "Content-Type": "application/merge-patch+json"}
        resp = self.pool.request("PATCH", f"{self.base}{path}", body=body, headers=headers,
                                 timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False, redirect=False)
        if 200 <= resp.status < 300:
            return
        raise status_error(resp.status, resp.data[:ERROR_BODY_MAX])

    def close(self) -> None:
        self.pool.clear()


def retry_after_of(value: str | None) -> float | None:
    """A Retry-After header in seconds (the API server sends delta-seconds); None when absent or a date."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX) if seconds == seconds else None


def status_error(code: int, body: bytes | Mapping[str, Any], *, retry_after: float | None = None) -> ApiError:
    """The exception for an HTTP error or an ERROR watch event carrying a Status object."""
    status: Any = body
    if isinstance(body, bytes):
        try:
            status = json.loads(body)
        except ValueError:
            status = {}
    message = ""
    reason = ""
    if isinstance(status, Mapping):
        message = str(status.get("message") or "")
        reason = str(status.get("reason") or "")
        details = status.get("details")
        if retry_after is None and isinstance(details, Mapping) and isinstance(details.get("retryAfterSeconds"), int):
            retry_after = min(max(float(details["retryAfterSeconds"]), 0.0), RETRY_AFTER_MAX)
    text = f"{code} {reason or 'error'}" + (f": {message}" if message else "")
    if code == 410 or reason in ("Expired", "Gone"):
        return ApiGone(text, code=410)
    if code == 401:
        return ApiUnauthorized(text, code=401)
    return ApiError(text, code=code, retry_after=retry_after)
