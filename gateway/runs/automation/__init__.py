"""Work that starts without a client waiting: schedules (crons) and completion webhooks."""
