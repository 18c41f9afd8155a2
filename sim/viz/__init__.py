"""Views drawn from traces (see the sim issue)."""
