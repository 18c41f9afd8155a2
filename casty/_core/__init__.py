"""The runtime's internals: actor types, activations, the actor system, state pages, schedules.

Private: what a user may import is re-exported from ``casty`` (see its ``__all__``; an exports
test pins the list). The modules here import the protocol cores below them (``casty.protocol``)
and the ports, never the cluster drivers above them (``casty.cluster``): a cluster plugs into
an ``ActorSystem`` through the interface the runtime names, not by being imported from it.
"""
