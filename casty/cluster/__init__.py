"""The cluster layer: protocol cores (sans-I/O), their wire codec and drivers, and the TCP transport.

``ActorSystem(cluster=Cluster(...), transport=...)`` runs a ``runtime.ClusterNode`` beside its
activations. The cores take frames and timer firings and return outputs (``sansio``), so the
simulator, TCP and unit tests drive the very same objects:

* ``membership``: heartbeat-gossip failure detector with incarnations, orderly leave, and the
  news of a node's previous life;
* ``placement``: consistent-hash ring per actor type, owner and quorum rules;
* ``replication``: per-key owner epochs by prepare/promise, epoch-fenced quorum writes,
  tombstones, readiness and blank promises;
* ``handoff``: sync rounds in which a replica pulls the other nodes' stores before it counts;
* ``claims``: the cron claim per tick of node schedules in cluster mode.

Their drivers and the rest: ``wire`` (typed frame codec, no imports on decode), ``driver``
(asyncio driver for any core, a dispatcher per transport), ``replicas`` (the node's replica
store and owner slots, batching, the rejoin grace), ``routing`` (messages to the key's owner,
replies and failures back), ``runtime`` (placement, sweeps, handoff of activations), ``config``
(``Cluster``), ``tcp`` (length-prefixed frames, handshake by cluster name), ``node`` and
``client`` (``python -m casty node|ask|tell|placement|members``).
"""
