"""A run's log: the live tail in memory (`live`), the recorder a run writes its frames to, the
one writer that persists every run's batches (`writer`), and the subscriptions that read it."""
