"""`nodedns shadow`, whole: check nodedns against the node's current DNS without answering a query (docs/shadow.md).

`command`: the command line (serve's options, `--report`); `agent`: the shadow's agent, the one Agent
with a packet capture as its listeners (`Capture`) and the wiring that makes it (`shadow`); `judge`:
pairs captured queries and responses and compares each with the resolver's own answer (`Shadow`);
`sniff`: the capture's AF_PACKET socket, its BPF filter and the packet parser. It sits above the CLI
(the command takes serve's options and reaches a running shadow as the CLI's clients do), which loads
the command by name; nothing below imports it.
"""
