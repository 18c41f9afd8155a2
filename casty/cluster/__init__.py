"""The cluster layer (membership, placement, replication, handoff): see the cluster issue.

Only the Transport port (``casty.ports.Transport``) exists so far.
"""
