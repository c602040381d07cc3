"""What an operator sees of a running gateway: Prometheus metrics and structured logs."""
