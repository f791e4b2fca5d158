"""The fake model server (``app.testing.fake_model``) for ``bench.negotiation``, in a process
of its own, answering at once.

``python -m bench.negotiation_fake --peer URL``: an agent-loop call (it offers tools) opens a
negotiation with ``URL``'s tenant ``seller`` on the intent the user's message names, then,
once the tool answered, says ``done``; a negotiator call (no tools) always counters, so a
negotiation runs to its ``max_turns``. Prints its base URL on the first line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

from app.testing.fake_model import FakeModelServer, Recorded, Step, text, tool_call


class NegotiatingFake(FakeModelServer):
    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer
        self._amounts = itertools.count(400)

    def _next(self, recorded: Recorded) -> Step | None:
        messages = recorded.body.get("messages") or []
        if not recorded.body.get("tools"):
            with self._lock:
                amount = next(self._amounts)
            move = {"action": "counter", "message": f"${amount}?", "terms": {"amount": amount}}
            return text(json.dumps(move))
        if messages and messages[-1].get("role") == "tool":
            return text("done")
        intent = str(messages[-1].get("content") or "bench") if messages else "bench"
        args = {
            "counterparty": {"url": self.peer, "tenant": "seller"},
            "intent": intent,
            "opening": "Open at $400.",
        }
        return tool_call("negotiate", args, call_id=f"n-{len(intent)}-{abs(hash(intent))}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.negotiation_fake")
    parser.add_argument("--peer", default="http://127.0.0.1:1")
    args = parser.parse_args()
    fake = NegotiatingFake(args.peer).start()
    print(fake.base_url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    fake.stop()


if __name__ == "__main__":
    main()
