"""Admission: whether and how a run starts. The one door every start and every new thread goes
through (`submit`), deciding in one order with agent choice and prompt authority (`agents`),
the request's checks (`checks`), embedded resources (`embedding`), the rules of new threads
(`threads`) and forks (`forks`), quotas and idempotency; the start's transaction (`admit`); the
start gate and its pace and the loop's lateness (refusing fast when the process is busy); what
a request does on a busy thread (`multitask`)."""
