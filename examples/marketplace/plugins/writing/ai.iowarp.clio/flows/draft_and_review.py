from clio_agent.sdk import Flow


class DraftAndReview(Flow):
    id = "draft-and-review"
    description = "Draft, have the reviewer comment, and revise until the person accepts."
    max_rounds: int = 3

    async def forward(self, task, ctx):
        draft = await ctx.call("self", task)
        for _ in range(self.max_rounds):
            notes = await ctx.call("reviewer", draft)
            choice = await ctx.ask(
                f"The reviewer's notes:\n\n{notes.answer}\n\nAccept the draft, or revise it?",
                options=["Accept", "Revise"],
            )
            if choice == "accept":  # options come back in lowercase
                break
            draft = await ctx.call(
                "self", {"task": task, "draft": draft.answer, "notes": notes.answer}
            )
        return draft
