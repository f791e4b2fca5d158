"""The fake model server (``app.testing.fake_model``) in a process of its own for
``bench.llm_loop``, so its threads do not share the measured process's interpreter.

``python -m bench.llm_fake --steps K [--delay S]`` answers every turn with ``K - 1`` tool calls
to ``noop`` and then a text, over and over (one caller at a time keeps the cycle aligned with
the turns); ``--steps 1`` answers text only. A request with no tools (the edge's compaction
summary) gets a text and leaves the cycle alone. Prints its base URL on the first line.
"""

from __future__ import annotations

import argparse
import itertools
import sys

from app.testing.fake_model import FakeModelServer, Recorded, Step, text, tool_call

SUMMARY = text("an earlier conversation about the benchmark")


class CyclingFake(FakeModelServer):
    def __init__(self, steps: list[Step]) -> None:
        super().__init__()
        self._cycle = itertools.cycle(steps)

    def _next(self, recorded: Recorded) -> Step | None:
        if not recorded.body.get("tools"):
            # A call with no tools (the edge's compaction summary) takes no place in the cycle.
            return SUMMARY
        with self._lock:
            return next(self._cycle)  # nothing recorded: a long run would only grow


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.llm_fake")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    steps = [
        tool_call("noop", {"n": i}, call_id=f"c{i}", delay=args.delay)
        for i in range(args.steps - 1)
    ]
    steps.append(text("done", delay=args.delay))
    fake = CyclingFake(steps).start()
    print(fake.base_url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    fake.stop()


if __name__ == "__main__":
    main()
