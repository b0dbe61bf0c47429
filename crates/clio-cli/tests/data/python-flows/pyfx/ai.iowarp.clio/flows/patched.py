from clio_agent.sdk import Flow


class Patched(Flow):
    """A call and a question, keyed so that code added between them keeps their
    identities; the test adds a patched branch."""

    id = "patched"

    async def forward(self, task, ctx):
        await ctx.call("tally", {"label": "p1"}, key="p1")
        path = "old path"
        await ctx.ask("Go on?", schema=bool, key="go")
        return path
