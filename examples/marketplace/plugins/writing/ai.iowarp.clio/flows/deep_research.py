"""Research, verify, close the gaps: shaped like the seeds' deep-research flow."""

import json

from clio_agent.flows.outcomes import FlowStall
from clio_agent.sdk import Flow


def parse_json(text, default):
    try:
        return json.loads(text)
    except ValueError:
        return default


class DeepResearch(Flow):
    """Plans directions, researches each in parallel, has a critic verify every claim,
    researches the gaps it names for a bounded number of rounds, and writes a report
    from verified claims only."""

    id = "deep-research"
    description = (
        "Plan research directions, send a researcher after each in parallel, have a critic "
        "verify the claims, research the gaps for at most max_gap_rounds rounds, then report. "
        "Options: max_directions, max_gap_rounds, researcher, critic, writer."
    )
    shape = (
        "sequence(terminal('plan'), oneOrMore(sequence(terminal('research'), terminal('verify'))), "
        "terminal('report'))"
    )
    max_directions: int = 4
    max_gap_rounds: int = 2
    researcher: str = "researcher"
    critic: str = "critic"
    writer: str = "writer"

    async def forward(self, task, ctx):
        plan = await ctx.call("planner", {"task": task, "max_directions": self.max_directions})
        directions = parse_json(plan.answer, {}).get("directions", [])[: self.max_directions]
        if not directions:
            raise FlowStall(
                "planner_no_directions", "the planner returned no directions", step="plan", observed=plan.answer
            )
        verified = []
        for round_no in range(self.max_gap_rounds + 1):
            found = await ctx.gather(
                [ctx.call(self.researcher, {"task": task, "direction": d}, key=f"research-{round_no}-{i}")
                 for i, d in enumerate(directions)],
                return_exceptions=True,
            )
            claims = [r.answer for r in found if not isinstance(r, Exception)]
            review = await ctx.call(self.critic, {"task": task, "claims": claims}, key=f"verify-{round_no}")
            verdict = parse_json(review.answer, {})
            verified += verdict.get("verified", [])
            await ctx.record_event({"round": round_no, "claims": len(claims), "verified": len(verified)})
            directions = verdict.get("gaps", [])
            if not directions:
                break
        return await ctx.call(self.writer, {"task": task, "verified": verified}, key="report")
