"""The process runtime: the event loop and HTTP protocol `gateway serve` runs on, the front (the
app's one middleware), the SSE writer with its slow-reader bound, problem+json answers, the
event loop's lag monitor and the drain at shutdown. It imports nothing above `runs/`: the checks
the front asks (development mode's guard, the door, the key lookup) are handed to it by the app."""
