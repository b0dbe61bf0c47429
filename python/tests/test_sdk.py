"""The flow API: options, selections, results, outcomes and workflows."""

import pytest

from clio_agent.flows.outcomes import (
    CallAwaitingInput,
    CallFailed,
    CallRefused,
    FlowLimitExceeded,
    FlowNotTrusted,
    FlowOutcome,
    FlowReplayMismatch,
    FlowStall,
    FlowTargetUnknown,
    GatherFailed,
    outcome_from_dict,
)
from clio_agent.sdk import CallResult, Flow, FlowOptionsInvalid, Step, Workflow, WorkflowError


class Campaign(Flow):
    id = "campaign"
    max_depth = 3
    max_cycles: int = 3
    reviewers: tuple[str, ...] = ("independent_reviewer",)
    ratio: float = 0.5
    free = "anything"


def test_checked_options_convert_and_fill_defaults():
    out = Campaign.checked_options({"max_cycles": 5.0, "reviewers": ["a", "b"], "ratio": 2, "max_model_calls": 9})
    assert out == {"max_cycles": 5, "reviewers": ("a", "b"), "ratio": 2.0, "free": "anything", "max_model_calls": 9}
    assert isinstance(out["reviewers"], tuple)


def test_checked_options_name_every_bad_one():
    with pytest.raises(FlowOptionsInvalid) as info:
        Campaign.checked_options({"max_cycles": True, "reviewers": "a", "nope": 1, "max_depth": -1})
    err = info.value
    assert err.reason == "flow_options_invalid"
    assert {p["option"]: p["needs"] for p in err.problems} == {
        "max_cycles": "an integer",
        "reviewers": "a list of text",
        "nope": "no such option",
        "max_depth": "an integer >= 0",
    }
    assert "max_cycles needs an integer (got true)" in str(err)


def test_a_selection_references_and_limits():
    council = Flow("council", models=["a", "b"], max_concurrency=2)
    assert council.reference() == {"id": "council", "options": {"models": ["a", "b"], "max_concurrency": 2}}
    assert council.limits() == {"max_depth": 0, "max_concurrency": 2, "max_model_calls": 0, "budget_tokens": 0}
    chosen = Campaign(max_cycles=5, budget_tokens=1000)
    assert chosen.max_cycles == 5 and chosen.reviewers == ("independent_reviewer",)
    assert chosen.reference() == {"id": "campaign", "options": {"max_cycles": 5, "budget_tokens": 1000}}
    assert chosen.limits() == {"max_depth": 3, "max_concurrency": 0, "max_model_calls": 0, "budget_tokens": 1000}
    with pytest.raises(FlowOptionsInvalid):
        Campaign(max_cycles="x")
    with pytest.raises(TypeError):
        Flow()


def test_call_result_reads_like_the_seed():
    r = CallResult.from_dict(
        {
            "answer": "done",
            "value": {"answer": "done", "report": "R"},
            "response_text": "done, and more",
            "handle": 12,
            "target": "writer",
            "kind": "subagent",
            "model": "acct/m",
            "workflow_state": {"plan": [1]},
        },
        index=2,
    )
    assert str(r) == "done" and r.report == "R" and r["report"] == "R" and r.plan == [1]
    assert len(r) == 1 and list(r) == ["report"] and r.index == 2 and r.handle == 12
    with pytest.raises(AttributeError):
        _ = r.missing
    assert repr(r) == "CallResult(target='writer', handle=12)"
    tool = CallResult.from_dict({"answer": "", "value": {"n": 1}, "kind": "tool"})
    assert tool.public_text() == '{"n":1}'


def test_outcomes_map_from_reasons():
    cases = {
        "call_failed": CallFailed,
        "call_awaiting_input": CallAwaitingInput,
        "call_refused": CallRefused,
        "flow_target_unknown": FlowTargetUnknown,
        "flow_not_trusted": FlowNotTrusted,
        "flow_limit_exceeded": FlowLimitExceeded,
        "flow_replay_mismatch": FlowReplayMismatch,
    }
    for reason, cls in cases.items():
        err = outcome_from_dict({"reason": reason, "handle": 4, "message": "m", "details": {"limit": "max_depth"}})
        assert type(err) is cls and err.reason == reason and err.handle == 4
        assert err.to_dict() == {"reason": reason, "handle": 4, "message": "m", "details": {"limit": "max_depth"}}
    assert isinstance(outcome_from_dict({"reason": "call_awaiting_input", "details": {"answer": "a"}}), CallFailed)
    assert outcome_from_dict({"reason": "call_awaiting_input", "details": {"answer": "a"}}).answer == "a"
    other = outcome_from_dict({"reason": "journal_error", "message": "disk"})
    assert type(other) is FlowOutcome and other.reason == "journal_error"
    stall = outcome_from_dict(
        {"reason": "flow_stall", "details": {"stall": "step_failed", "message": "m", "step": "s", "observed": 1}}
    )
    assert isinstance(stall, FlowStall) and stall.stall == "step_failed" and stall.step == "s"
    gathered = outcome_from_dict(
        {"reason": "gather_failed", "details": {"results": [{"answer": "a", "handle": 1}, {"reason": "call_failed"}]}}
    )
    assert isinstance(gathered, GatherFailed)
    assert gathered.results[0].answer == "a" and isinstance(gathered.results[1], CallFailed)
    assert gathered.results[1].details["index"] == 1


def test_flow_stall_as_the_seed_raises_it():
    err = FlowStall("planner_no_directions", "the planner returned no directions", step="plan", observed={"d": []})
    assert err.reason == "flow_stall" and err.handle is None
    assert err.to_dict()["details"] == {
        "stall": "planner_no_directions",
        "message": "the planner returned no directions",
        "step": "plan",
        "predicate": None,
        "observed": {"d": []},
    }


def test_workflow_checks_its_steps():
    wf = Workflow(
        steps=[
            Step("survey", "evidence_researcher", input="$task"),
            Step("relate", "data_analysis_expert", after=["survey"]),
        ]
    )
    assert wf.to_dict() == {
        "steps": [
            {"id": "survey", "target": "evidence_researcher", "input": "$task"},
            {"id": "relate", "target": "data_analysis_expert", "after": ["survey"]},
        ]
    }
    assert Workflow.from_dict(wf.to_dict()).to_dict() == wf.to_dict()
    bad = [
        ([Step("Bad Id", "x")], "invalid"),
        ([Step("a", "x"), Step("a", "y")], "used twice"),
        ([Step("a", " ")], "empty target"),
        ([Step("a", "x", after=["b"])], "not a step"),
        ([Step("a", "x", after=["b"]), Step("b", "x", after=["a"])], "cycle"),
        ([Step("task", "x")], "reserved"),
    ]
    for steps, words in bad:
        with pytest.raises(WorkflowError, match=words):
            Workflow(steps=steps)


def test_limits_and_reference_on_the_class():
    assert Campaign.limits() == {"max_depth": 3, "max_concurrency": 0, "max_model_calls": 0, "budget_tokens": 0}
    assert Campaign.reference() == {"id": "campaign", "options": {}}
