"""nodedns: a node-local caching DNS agent for Kubernetes."""

__version__ = "0.1.0"
