"""sim: a deterministic world (simpy) that drives the real casty runtime through its ports (see the sim issue)."""
