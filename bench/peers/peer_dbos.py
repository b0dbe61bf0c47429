"""DBOS Transact (Python) on W1-W4, in-process, one workload per process.

Usage: peer_dbos.py WORKLOAD DIR URL, WORKLOAD one of W1, W2, W3, W4-child, W4-resume;
URL the system database (sqlite:///DIR/x.sqlite or a postgresql:// URL). Prints one JSON
line {"ms": ...}: the time of the workflow call alone (DBOS is launched before the clock
starts), except W4-resume, whose time includes DBOS.launch(), which starts the recovery.

Every step is a @DBOS.step whose output DBOS checkpoints before the workflow goes on.
"""

import asyncio
import json
import os
import sys
import time

from dbos import DBOS, SetWorkflowID

WORKLOAD, DIR, URL = sys.argv[1], sys.argv[2], sys.argv[3]
MARKER = os.path.join(DIR, "dbos-w4.ready")

DBOS(config={"name": "clio-peers", "system_database_url": URL, "log_level": "WARNING"})


@DBOS.step()
def noop(i):
    if i == 900 and WORKLOAD == "W4-child":
        with open(MARKER, "w") as f:
            f.write("ready")
        time.sleep(3600)
    return i


@DBOS.step()
async def anoop(i):
    return i


@DBOS.workflow()
def chain(n):
    for i in range(n):
        noop(i)
    return n


@DBOS.workflow()
async def fanout(n):
    res = await asyncio.gather(*(anoop(i) for i in range(n)))
    return len(res)


@DBOS.workflow()
async def layers(n_layers, width):
    # Each layer waits for the whole layer before (a barrier: at least the 2 parents the
    # CLIO DAG gives each step).
    done = 0
    for _ in range(n_layers):
        done += len(await asyncio.gather(*(anoop(i) for i in range(width))))
    return done


def main():
    if WORKLOAD == "W4-resume":
        t = time.perf_counter()
        DBOS.launch()
        DBOS.retrieve_workflow("w4").get_result()
        ms = (time.perf_counter() - t) * 1000
    else:
        DBOS.launch()
        t = time.perf_counter()
        if WORKLOAD == "W1":
            chain(1000)
        elif WORKLOAD == "W2":
            asyncio.run(fanout(1000))
        elif WORKLOAD == "W3":
            asyncio.run(layers(10, 100))
        elif WORKLOAD == "W4-child":
            with SetWorkflowID("w4"):
                chain(1000)
        ms = (time.perf_counter() - t) * 1000
    print(json.dumps({"ms": ms}), flush=True)
    DBOS.destroy()


main()
