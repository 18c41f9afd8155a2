"""The cluster layer: protocol cores (sans-I/O), their wire codec and drivers, and the TCP transport.

Cluster v0 is wired into ``ActorSystem(cluster=Cluster(...), transport=...)``: ``config``
(``Cluster``), ``routing`` (channel "d": Deliver/Reply/WrongOwner, retries until the write
timeout) and ``runtime`` (membership + routing + placement of one node). NOT DONE YET:
replication (a key's state is a single copy on its owner), epochs/fencing, handoff.
The parts: ``placement`` (consistent-hash ring per actor type, owner and quorum rules),
``membership`` (heartbeat-gossip failure detector with incarnations, orderly leave),
``replication`` (per-key owner epochs by prepare/promise, epoch-fenced quorum writes,
tombstones, export/import for handoff), ``wire`` (typed frame codec, no imports on
decode), ``driver`` (asyncio driver for any core, a dispatcher per transport), ``tcp``
(length-prefixed frames, handshake by cluster name) and ``node`` (``python -m casty node``:
an ActorSystem beside membership over TCP).
"""
