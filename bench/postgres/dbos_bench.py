"""DBOS Transact on PostgreSQL: the anchor's side of CLIO's PostgreSQL bench.

Run by crates/clio-flow/benches/postgres.rs after CLIO's own lines, on the same server, as

    python dbos_bench.py SYSTEM_DATABASE_URL [WORKLOAD ...]

with the Python of the venv that bench/postgres/setup-dbos makes (a pinned dbos). Prints
one JSON line per workload on stdout, each saying what it includes, in the shape of the
Rust bench's lines (bench, n, total_ms, per_op_us):

- W1: one workflow of 1,000 sequential no-op steps (each step's output is one durable
  write to the system database, as each of CLIO's ctx.step is one journal commit);
- W2: one workflow that starts 1,000 child workflows of one no-op step each with
  DBOS.start_workflow, then waits for all of their results (DBOS's fan-out: a step
  cannot be run concurrently inside a sync workflow);
- W2async: one async workflow gathering 1,000 async no-op steps with asyncio.gather
  (the closest to CLIO's ctx.gather; reported only if this DBOS version allows it);
- W2q: the fan-out through a DBOS Queue (enqueue 1,000 one-step workflows, wait for all),
  the pattern DBOS's docs give for fan-out.

Each workload runs once after a small warm-up workflow, so connection set-up is not
counted. Workloads default to all of them; name some to run only those.
"""

import asyncio
import json
import logging
import sys
import time

from dbos import DBOS, DBOSConfig

N = 1_000
QUEUE = "clio_bench_fanout"


@DBOS.step()
def noop(i: int) -> int:
    return i


@DBOS.workflow()
def sequential(n: int) -> int:
    total = 0
    for i in range(n):
        total += noop(i)
    return total


@DBOS.workflow()
def one_step(i: int) -> int:
    return noop(i)


@DBOS.workflow()
def fan_out(n: int) -> int:
    handles = [DBOS.start_workflow(one_step, i) for i in range(n)]
    return sum(h.get_result() for h in handles)


@DBOS.workflow()
def fan_out_queue(n: int) -> int:
    queue = DBOS.retrieve_queue(QUEUE)
    handles = [queue.enqueue(one_step, i) for i in range(n)]
    return sum(h.get_result() for h in handles)


@DBOS.step()
async def noop_async(i: int) -> int:
    return i


@DBOS.workflow()
async def gather_async(n: int) -> int:
    results = await asyncio.gather(*(noop_async(i) for i in range(n)))
    return sum(results)


def report(bench: str, n: int, ms: float, includes: str, **extra) -> None:
    line = {
        "bench": bench,
        "n": n,
        "total_ms": round(ms, 3),
        "per_op_us": round(ms * 1000.0 / n, 1),
        "engine": "dbos",
        "dbos_version": version(),
        "includes": includes,
    }
    line.update(extra)
    print(json.dumps(line), flush=True)


def version() -> str:
    from importlib.metadata import version as pkg_version

    return pkg_version("dbos")


def timed(f, *args) -> float:
    t = time.perf_counter()
    result = f(*args)
    ms = (time.perf_counter() - t) * 1000.0
    expected = sum(range(args[0]))
    if result != expected:
        raise SystemExit(f"{f.__name__}: {result} != {expected}")
    return ms


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: dbos_bench.py SYSTEM_DATABASE_URL [W1 W2 W2async W2q]")
    url = sys.argv[1]
    wanted = set(sys.argv[2:]) or {"W1", "W2", "W2async", "W2q"}
    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: DBOSConfig = {
        "name": "clio-bench",
        "system_database_url": url,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    DBOS.register_queue(QUEUE, polling_interval_sec=0.01)
    try:
        # A warm-up, so that connections and the schema are in place before timing.
        timed(sequential, 10)
        if "W1" in wanted:
            ms = timed(sequential, N)
            report(
                "dbos_W1_sequential_steps",
                N,
                ms,
                "1,000 sequential no-op @DBOS.step in one @DBOS.workflow",
            )
        if "W2" in wanted:
            ms = timed(fan_out, N)
            report(
                "dbos_W2_fanout_child_workflows",
                N,
                ms,
                "one workflow starting 1,000 one-step child workflows (DBOS.start_workflow), then waiting for all",
            )
        if "W2async" in wanted:
            try:
                t = time.perf_counter()
                result = asyncio.run(gather_async(N))
                ms = (time.perf_counter() - t) * 1000.0
                if result != sum(range(N)):
                    raise RuntimeError(f"gather_async: {result}")
                report(
                    "dbos_W2async_gather_steps",
                    N,
                    ms,
                    "one async workflow gathering 1,000 async no-op steps (asyncio.gather)",
                )
            except Exception as err:  # noqa: BLE001 - reported, not fatal
                print(
                    json.dumps(
                        {
                            "bench": "dbos_W2async_gather_steps",
                            "engine": "dbos",
                            "dbos_version": version(),
                            "skipped": f"{type(err).__name__}: {err}",
                        }
                    ),
                    flush=True,
                )
        if "W2q" in wanted:
            ms = timed(fan_out_queue, N)
            report(
                "dbos_W2q_fanout_queue",
                N,
                ms,
                "one workflow enqueueing 1,000 one-step workflows on a DBOS Queue (polled every 10 ms), then waiting for all",
            )
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
