"""Run profiles: how long and how big each benchmark is (``--quick`` vs the full run)."""

from __future__ import annotations

from dataclasses import dataclass

TENANT = "bench"
GROWTH_TENANT = "growth"
HOT_IDENTITIES = 10  # identities owning the GetTask / ListTasks working set
HOT_TASKS_PER_IDENTITY = 100  # a full first ListTasks page (50) at every table size

# PUBLIC_URL of every edge process of a run, so one token pool serves them all: the audience
# (PUBLIC_URL + /a2a) comes from configuration, never from the port a process listens on.
PUBLIC_URL = "http://127.0.0.1:8080"
AUDIENCE = PUBLIC_URL + "/a2a"


@dataclass(frozen=True)
class Profile:
    name: str
    http_seconds: float  # measured window per server and concurrency (all rounds together)
    http_rounds: int  # servers compared in a benchmark take turns, this many rounds each
    warmup_seconds: float  # unmeasured run before each server's first measurement
    concurrencies: tuple[int, ...]
    server_workers: tuple[int, ...]  # uvicorn processes per server (1, and 2 in full runs)
    token_pool: int  # pre-minted distinct tokens per pool (> the verifier's 256-entry memo)
    verify_tokens: int
    verify_rounds: int
    turn_seconds: float
    turn_identities: int
    turn_worker_processes: tuple[int, ...]
    growth_sizes: tuple[int, ...]
    growth_seconds: float
    memory_identities: int
    memory_concurrency: int
    roundtrip_seconds: float  # benchmark 2's PostgreSQL round trip (bench/roundtrip.py)


QUICK = Profile(
    name="quick",
    http_seconds=0.6,
    http_rounds=1,
    warmup_seconds=0.0,
    # c = 16 runs the same code as c = 64; wrk's shortest run is a whole second, and the
    # five loads c = 16 added took --quick past its minute on a slower host.
    concurrencies=(1, 64),
    server_workers=(1,),
    token_pool=5_000,
    verify_tokens=2_000,
    verify_rounds=3,
    turn_seconds=1.2,
    turn_identities=20,
    turn_worker_processes=(1,),
    growth_sizes=(1_000, 10_000),
    growth_seconds=0.4,
    memory_identities=60,
    memory_concurrency=32,
    roundtrip_seconds=0.3,
)

FULL = Profile(
    name="full",
    http_seconds=8.0,
    http_rounds=4,
    warmup_seconds=2.0,
    concurrencies=(1, 16, 64),
    server_workers=(1, 2),
    token_pool=40_000,
    verify_tokens=20_000,
    verify_rounds=5,
    turn_seconds=20.0,
    turn_identities=100,
    turn_worker_processes=(1, 2),
    growth_sizes=(1_000, 100_000, 1_000_000),
    growth_seconds=8.0,
    memory_identities=10_000,
    memory_concurrency=32,
    roundtrip_seconds=4.0,
)
