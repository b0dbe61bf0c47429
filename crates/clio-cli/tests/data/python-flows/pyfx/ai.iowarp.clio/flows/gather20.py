from clio_agent.sdk import Flow


class Gather20(Flow):
    """A gather of 20 side-effecting calls, one at a time, then one more."""

    id = "gather20"

    async def forward(self, task, ctx):
        calls = [ctx.call("tally", {"label": f"g{i:02d}"}) for i in range(20)]
        results = await ctx.gather(calls, limit=1, return_exceptions=True)
        await ctx.call("tally", {"label": "after"})
        return f"{task}: gathered {len(results)} calls"
