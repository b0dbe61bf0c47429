"""The flow bench's workloads written in Python (crates/clio-flow/benches/flow.rs).

Each mirrors a Rust flow of the bench with no-op work inside, so that the lines compare the
Python front end (the child process and its line protocol) with a Rust flow on the same
runtime and journal: W1 and W7 (sequential ``ctx.step``), W2 (a gather of read-only no-op
tool calls) and W3 (the 10 x 100 DAG, each call waiting on 2 of the layer before).
"""

import asyncio

from clio_agent.sdk import Flow


def noop(i):
    return i


class Steps(Flow):
    id = "py-steps"
    description = "n sequential no-op ctx.step calls (W1: 1,000; W7: 10 per run)."
    n: int = 1000

    async def forward(self, task, ctx):
        for i in range(self.n):
            await ctx.step(noop, i)
        return str(self.n)


class Fan(Flow):
    id = "py-fan"
    description = "ctx.gather of n read-only no-op tool calls (W2)."
    n: int = 1000

    async def forward(self, task, ctx):
        results = await ctx.gather([ctx.call("noop", {"i": i}) for i in range(self.n)])
        return str(len(results))


class Dag(Flow):
    id = "py-dag"
    description = (
        "The 10 x 100 DAG of read-only no-op tool calls (W3): with exact, each call starts once "
        "its 2 calls of the layer before are done (an asyncio task per node); else a gather "
        "per layer (a barrier, as the peers run it)."
    )
    layers: int = 10
    width: int = 100
    exact: bool = True

    async def forward(self, task, ctx):
        width = self.width
        if not self.exact:
            n = 0
            for layer in range(self.layers):
                done = await ctx.gather([ctx.call("noop", {"layer": layer, "i": i}) for i in range(width)])
                n += len(done)
            return str(n)

        nodes = {}

        async def node(layer, i):
            if layer > 0:
                await nodes[(layer - 1, i)]
                await nodes[(layer - 1, (i + 1) % width)]
            return await ctx.call("noop", {"layer": layer, "i": i})

        for layer in range(self.layers):
            for i in range(width):
                nodes[(layer, i)] = asyncio.ensure_future(node(layer, i))
        done = await asyncio.gather(*nodes.values())
        return str(len(done))
