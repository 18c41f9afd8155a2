"""The runtime's internals: actor types, activations, the actor system, state pages, schedules.

Private: what a user may import is re-exported from ``casty`` (see its ``__all__``; an exports
test pins the list). The modules here import the ports, the errors and the observer below them (and name
``casty.protocol``'s member views in type hints only), never the cluster drivers above them
(``casty.cluster``): a cluster plugs into
an ``ActorSystem`` through the interface the runtime names, not by being imported from it.
"""
