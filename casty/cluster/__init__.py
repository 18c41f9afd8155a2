"""The cluster drivers: the layer that runs the protocol cores (``casty.protocol``) for real.

``ActorSystem(cluster=Cluster(...), transport=...)`` runs a ``runtime.ClusterNode`` beside its
activations. The cores take frames and timer firings and return outputs; the modules here feed
them and carry their outputs out, so the simulator, TCP and unit tests drive the same objects:

``driver`` (asyncio driver for any core, a dispatcher per transport), ``replicas`` (the node's
replica store and owner slots, batching, the rejoin grace), ``routing`` (messages to the key's
owner, replies and failures back), ``runtime`` (placement, sweeps, handoff of activations),
``claims`` (the cron claim per tick of node schedules in cluster mode, as an actor), ``config``
(``Cluster``), ``viewstore`` (the remembered view on disk), ``frames`` (facts about single
frames), ``tcp`` (length-prefixed frames, handshake by cluster name and secret), ``node`` and
``client`` (``python -m casty node|ask|tell|placement|members``).
"""
