"""LangGraph with SqliteSaver in sync durability on W1-W4, in-process, one workload per
process.

Usage: peer_langgraph.py WORKLOAD DIR, WORKLOAD one of W1, W2, W3, W4-child, W4-resume.
Prints one JSON line {"ms": ...}: the time of the graph's invoke alone (the graph is
compiled and the checkpointer opened before the clock starts).

A step is one node execution: W1 a node that loops to itself 1,000 times (a checkpoint per
super-step); W2 1,000 Send tasks in one super-step (each task's writes saved, then the
checkpoint); W3 10 super-steps of 100 Send tasks. `durability="sync"` writes each
checkpoint before the next step starts. The SQLite connection keeps SQLite's default
`synchronous` (FULL: each commit is fsynced); SqliteSaver sets WAL mode.
"""

import json
import operator
import os
import sqlite3
import sys
import time
from typing import Annotated, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

WORKLOAD, DIR = sys.argv[1], sys.argv[2]
MARKER = os.path.join(DIR, "langgraph-w4.ready")


class Chain(TypedDict):
    i: int


class Fan(TypedDict):
    done: Annotated[int, operator.add]
    layer: int


def step(state: Chain):
    i = state["i"]
    if i == 900 and WORKLOAD == "W4-child":
        with open(MARKER, "w") as f:
            f.write("ready")
        time.sleep(3600)
    return {"i": i + 1}


def chain_graph(n):
    g = StateGraph(Chain)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_conditional_edges("step", lambda s: END if s["i"] >= n else "step")
    return g


def work(_arg):
    return {"done": 1}


def fan_graph(n_layers, width):
    def dispatch(state: Fan):
        return {"layer": state["layer"] + 1}

    def route(state: Fan):
        if state["layer"] > n_layers:
            return END
        return [Send("work", {"i": i}) for i in range(width)]

    g = StateGraph(Fan)
    g.add_node("dispatch", dispatch)
    g.add_node("work", work)
    g.add_edge(START, "dispatch")
    g.add_conditional_edges("dispatch", route, ["work", END])
    g.add_edge("work", "dispatch")
    return g


def main():
    conn = sqlite3.connect(os.path.join(DIR, "langgraph.sqlite"), check_same_thread=False)
    saver = SqliteSaver(conn)
    config = {"configurable": {"thread_id": "w4" if WORKLOAD.startswith("W4") else WORKLOAD},
              "recursion_limit": 5000}
    if WORKLOAD in ("W1", "W4-child", "W4-resume"):
        graph = chain_graph(1000).compile(checkpointer=saver)
        state = None if WORKLOAD == "W4-resume" else {"i": 0}
    elif WORKLOAD == "W2":
        graph = fan_graph(1, 1000).compile(checkpointer=saver)
        state = {"done": 0, "layer": 0}
    else:
        graph = fan_graph(10, 100).compile(checkpointer=saver)
        state = {"done": 0, "layer": 0}
    t = time.perf_counter()
    out = graph.invoke(state, config, durability="sync")
    ms = (time.perf_counter() - t) * 1000
    expect = {"W2": 1000, "W3": 1000}.get(WORKLOAD)
    got = out.get("done") if expect else out.get("i")
    assert got == (expect or 1000), out
    print(json.dumps({"ms": ms}), flush=True)


main()
