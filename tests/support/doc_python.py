"""Runs the Python examples of one document in one interpreter, one block at a time, in one
namespace (a later block may use what an earlier one made, as a reader's session would).

Reads one JSON request a line on stdin (`{"name": "docs/x.md:12", "code": "..."}`) and answers
each with one line on stdout that starts with `REPLY`: `{"ok", "output", "error"}`. What a
block prints goes into its `output`, never onto the protocol's lines.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback

REPLY = "\x00doc-example-reply "


def main() -> None:
    protocol = sys.stdout
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line in sys.stdin:
        request = json.loads(line)
        output = io.StringIO()
        reply: dict[str, object] = {"ok": True}
        try:
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                exec(compile(request["code"], request["name"], "exec"), namespace)  # noqa: S102
        except BaseException:  # noqa: BLE001  (the block's failure is the answer)
            reply = {"ok": False, "error": traceback.format_exc(limit=8)}
        reply["output"] = output.getvalue()
        protocol.write(REPLY + json.dumps(reply) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
