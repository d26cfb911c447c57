"""What the Pods of this node get their resolv.conf from: the kubelet's settings (--cluster-dns, else the
agent's own addresses, known once the listeners are bound) and the node's resolv.conf (--host-resolv-conf,
read again as it changes). Their search lists go to the explainer, autopath, insight and the followers
(the supervisor forms its workers' autopath plans again); the /v1/resolv-conf route renders from both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from nodedns.app.parts import Followers
from nodedns.config import Config
from nodedns.observe.explain import Explainer
from nodedns.podconf import resolvconf
from nodedns.podconf.noderesolv import HostFile, host_searches
from nodedns.podconf.searchpath import Autopath, renderer_search_list
from nodedns.serve.server import DNSServer

if TYPE_CHECKING:  # a --workers process holds no Insight
    from nodedns.observe.insight import Insight


class Host(Protocol):
    """What the Pods' DNS settings read of the agent (a mode may set its followers after it is built)."""

    config: Config
    server: DNSServer
    explainer: Explainer
    autopath: Autopath | None
    insight: Insight | None
    followers: Followers | None
    host_file: HostFile | None


class PodDns:
    """The kubelet settings (`kubelet`, None before the listeners are bound) and the node's resolv.conf text
    (`host_text`, None: none) the Pods here get."""

    def __init__(self, agent: Host) -> None:
        self.agent = agent
        self.kubelet: resolvconf.KubeletDNS | None = None
        self.host_text: str | None = None

    async def learn(self) -> None:
        """The kubelet settings and host resolv.conf the Pods here get their resolv.conf from (after the
        listeners are bound: without --cluster-dns they are our own addresses), for the explainer and
        autopath. The host file is read again as it changes (`HostFile.run`)."""
        self.kubelet = self.kubelet_dns()
        host_file = self.agent.host_file
        self.use_host_text(await host_file.load() if host_file is not None else None)

    def use_host_text(self, host_text: str | None) -> None:
        """The node's resolv.conf text (None: none) for the search lists and the /v1/resolv-conf renderer."""
        agent = self.agent
        settings = self.kubelet or self.kubelet_dns()
        self.host_text = host_text
        search_list = renderer_search_list(settings, host_text)
        agent.explainer.search_list = search_list
        if agent.autopath is not None:
            agent.autopath.search_list = search_list
        if agent.insight is not None:
            agent.insight.search_list = search_list
            agent.insight.host_searches = host_searches(host_text)
        if agent.followers is not None:
            agent.followers.search_lists_changed()  # the supervisor forms its workers' autopath plans again

    def kubelet_dns(self) -> resolvconf.KubeletDNS:
        """The kubelet settings pods on this node get: --cluster-dns, else this agent's own addresses."""
        config = self.agent.config
        bound = self.agent.server.bound or config.listen_addresses
        cluster_dns = config.cluster_dns or config.local_ip or tuple(h for h, _ in bound)
        return resolvconf.KubeletDNS(cluster_dns=cluster_dns, cluster_domain=config.cluster_domain)
