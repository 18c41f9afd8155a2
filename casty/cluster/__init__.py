"""The cluster layer: protocol cores (sans-I/O), their wire codec and drivers, and the TCP transport.

Built and tested on their own, not yet wired into ``ActorSystem`` (``cluster=`` still
refuses): ``placement`` (consistent-hash ring per actor type, owner and quorum rules),
``membership`` (heartbeat-gossip failure detector with incarnations, orderly leave),
``replication`` (per-key owner epochs by prepare/promise, epoch-fenced quorum writes,
tombstones, export/import for handoff), ``wire`` (typed frame codec, no imports on
decode), ``driver`` (asyncio driver for any core, a dispatcher per transport), ``tcp``
(length-prefixed frames, handshake by cluster name) and ``node`` (``python -m casty node``:
an ActorSystem beside membership over TCP).
"""
