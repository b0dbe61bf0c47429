"""Temporal (Python SDK against the Temporal CLI's dev server on SQLite) on W1-W4, one
workload per process.

Usage: peer_temporal.py WORKLOAD DIR ADDRESS, WORKLOAD one of W1, W2, W3, W4-child,
W4-resume. Prints one JSON line {"ms": ...}: the time from starting the workflow to its
result (the worker and the client are up before the clock starts), except W4-resume: from
the new worker's start to the result.

A step is one activity (the history records its scheduling, start and completion before
the workflow goes on). W4: the worker process is killed while activity 900 runs; the
server learns of it only when that attempt's start-to-close timeout (2 s) expires, so W4
includes up to that wait, then the retry on the new worker.
"""

import asyncio
import json
import os
import sys
import time
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

WORKLOAD, DIR, ADDRESS = sys.argv[1], sys.argv[2], sys.argv[3]
MARKER = os.path.join(DIR, "temporal-w4.ready")
TIMEOUT = timedelta(seconds=2)


@activity.defn
async def noop(i: int) -> int:
    if i == 900 and WORKLOAD == "W4-child" and not os.path.exists(MARKER):
        with open(MARKER, "w") as f:
            f.write("ready")
        await asyncio.sleep(3600)
    return i


@workflow.defn
class Chain:
    @workflow.run
    async def run(self, n: int) -> int:
        for i in range(n):
            await workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
        return n


@workflow.defn
class Layers:
    @workflow.run
    async def run(self, args: list[int]) -> int:
        n_layers, width = args
        done = 0
        for _ in range(n_layers):
            res = await asyncio.gather(*(
                workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
                for i in range(width)))
            done += len(res)
        return done


async def main():
    client = await Client.connect(ADDRESS)
    worker = Worker(client, task_queue="bench", workflows=[Chain, Layers], activities=[noop],
                    workflow_runner=UnsandboxedWorkflowRunner())
    if WORKLOAD == "W4-resume":
        t = time.perf_counter()
        async with worker:
            assert await client.get_workflow_handle("w4").result() == 1000
        ms = (time.perf_counter() - t) * 1000
    else:
        async with worker:
            t = time.perf_counter()
            if WORKLOAD in ("W1", "W4-child"):
                wid = "w4" if WORKLOAD == "W4-child" else "w1"
                res = await client.execute_workflow(Chain.run, 1000, id=wid, task_queue="bench")
            elif WORKLOAD == "W2":
                res = await client.execute_workflow(Layers.run, [1, 1000], id="w2",
                                                    task_queue="bench")
            else:
                res = await client.execute_workflow(Layers.run, [10, 100], id="w3",
                                                    task_queue="bench")
            ms = (time.perf_counter() - t) * 1000
            assert res == 1000, res
    print(json.dumps({"ms": ms}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
