from clio_agent.sdk import Flow


class Edits(Flow):
    """A call, a question, a call: the run waits at the question while a test edits
    this file."""

    id = "edits"

    async def forward(self, task, ctx):
        await ctx.call("tally", {"label": "e1"})
        await ctx.ask("Go on?", schema=bool)
        await ctx.call("tally", {"label": "e2"})
        return "edited"
