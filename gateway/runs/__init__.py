"""Run lifecycle: the manager, the per-run log and its subscribers, cancel, leases."""
