"""The cluster drivers: the layer that runs the protocol cores (``casty.protocol``) for real.

``ActorSystem(cluster=Cluster(...), transport=...)`` runs a ``runtime.ClusterNode`` beside its
activations. The cores take frames and timer firings and return outputs; the modules here feed
them and carry their outputs out, so the simulator, TCP and unit tests drive the same objects:

``driver`` (asyncio driver for any core, a dispatcher per transport), ``replicas`` (the node's
replica store and the rejoin grace) with ``owner_slot`` (one key's owner core on the loop) and
``replicated_pages`` (the activation's page writer over the key's replicas), ``routing`` (messages
to the key's owner, replies and failures back), ``runtime`` (``ClusterNode``: placement, sweeps,
handoff of activations) with ``resume`` (the resume rule) and ``delivery`` (messages between nodes,
the request rule), ``claims`` (the cron claim per tick of node schedules in cluster mode, an actor
applying ``casty.protocol.tick_claim``), ``config`` (``Cluster``), ``viewstore`` (the remembered
view on disk), ``frames`` (facts about single frames), ``tcp`` with ``tcp_incoming``, ``tcp_types``
and ``tcp_streams`` (the asyncio TCP transport around ``casty.protocol.framing``: queues, dialing,
the listener's caps and timeouts), ``node`` (``python -m casty node``) with ``addresses`` (its
``HOST:PORT`` ids) and ``gateway`` (a node serving outside clients), and ``client`` with
``client_wire`` (``ClusterClient``, ``python -m casty ask|tell|placement|members``).
"""
