from clio_agent.flows.outcomes import CallInterrupted
from clio_agent.sdk import Flow


class Effects(Flow):
    """Three side-effecting calls, each followed by a read-only checkpoint."""

    id = "effects"

    async def forward(self, task, ctx):
        done = []
        for label in ("one", "two", "three"):
            try:
                await ctx.call("tally", {"label": label})
            except CallInterrupted:
                # Cut short by a crash: done at most once, never run again.
                pass
            done.append(label)
            await ctx.call("checkpoint", {"label": f"after-{label}"})
        count = await ctx.step(lambda: len(done))
        return f"{task}: tallied {', '.join(done)} ({count} calls)"
