"""The LLVM worker process behind `isolate`: JSON requests on stdin, replies on stdout."""

from __future__ import annotations

import json
import sys

from .llvm import emit_ptx


def serve() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        try:
            llir, ptx = emit_ptx(request["llir"], request["arch"], request["opt"], request.get("libdevice"))
            reply = {"ok": True, "llir": llir, "ptx": ptx}
        except Exception as e:  # every failure goes back to the caller
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
