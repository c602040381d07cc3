"""Admission: whether and how a run starts. The start's transaction (`admit`), the start gate and
its pace and the loop's lateness (refusing fast when the process is busy), quotas,
idempotency, and what a request does on a busy thread (`multitask`)."""
