"""The protocol cores: sans-I/O state machines that take inputs and return outputs, and nothing else.

Each core is a plain object: a driver hands it a frame that arrived or a timer that fired and
gets back the frames to send, the timers to arm and the events to report (the vocabulary is
``sansio``). No core reads a clock, opens a socket, touches a disk or imports anything of casty but
``casty.errors``, ``casty.observer`` and ``casty._durations`` (the import-linter contract in
``pyproject.toml`` holds it to that), so the simulator, the asyncio drivers over TCP and the
unit tests drive the very same objects, and a core's rules can be read and tested alone:

* ``sansio``: the outputs (``Send``, ``SetTimer``, ``CancelTimer``, ``Report``) and ``perform``,
  the one dispatch of them onto a driver's ``Performer``;
* ``membership``: heartbeat-gossip failure detector with incarnations, orderly leave, the
  remembered view and the news of a node's previous life: its named rules and vocabulary
  (statuses, timing, frames, events); ``gossip``: the state machine, ``Membership``;
* ``placement``: the consistent-hash ring per actor type, owner and quorum rules;
* ``replication``: per-key owner epochs by prepare/promise, epoch-fenced quorum writes,
  tombstones, readiness and blank promises: its numbered rules (at the top) and vocabulary
  (epochs, stamps, frames, reports); ``replica_store``: the replica side, ``ReplicaStore``;
  ``key_owner``: the owner side, ``KeyOwner``;
* ``handoff``: sync rounds in which a replica pulls the other nodes' stores before it counts;
* ``tick_claim``: the claim rule of a cron tick in a cluster (first writer wins, expiry, the TTL);
* ``wire``: the typed frame codec (a decoder builds only the types it was given, never imports);
* ``limits``: the one frame limit every transport shares;
* ``framing``: TCP's length-prefixed frames and the connection handshake (cluster name, secret
  challenge, the shared byte budget), an ``Acceptor`` and a ``Dialer`` fed with bytes.

The layers above: ``casty._core`` (the runtime: activations, the actor system) and
``casty.cluster`` (the drivers, the node, the client, TCP).
"""
