from clio_agent.sdk import Flow


class Review(Flow):
    """Draft, have two reviewers read the draft, then revise."""

    id = "review"
    description = "A writer drafts, a critic and a fact-checker review, the writer revises."

    async def forward(self, task, ctx):
        draft = await ctx.call("writer", task)
        reviews = await ctx.gather(
            [ctx.call(reviewer, draft) for reviewer in ("critic", "fact-checker")]
        )
        return await ctx.call(
            "writer",
            {"task": task, "draft": draft.answer, "reviews": [r.answer for r in reviews]},
        )
