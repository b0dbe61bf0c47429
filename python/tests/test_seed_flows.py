"""The seeds' flows, copied unchanged, run against the fake runtime."""

from fakehost import Runtime, TargetError, run


def writer(x):
    if isinstance(x, dict):
        return f"final({x['draft']}|{'+'.join(x['reviews'])})"
    return f"draft of {x}"


def test_review_runs_as_the_seed_writes_it(plugin):
    file = plugin.copy("review.py")
    rt = Runtime({"writer": writer, "critic": lambda d: f"critic on {d}", "fact-checker": lambda d: f"facts on {d}"})
    end = run(rt.run(plugin.root, file, "a poem", flow="review"))
    assert "ok" in end, end
    assert end["ok"]["form"] == "result"
    result = end["ok"]["result"]
    assert result["answer"] == "final(draft of a poem|critic on draft of a poem+facts on draft of a poem)"
    kinds = [m["type"] for m in rt.log]
    assert kinds == ["call", "gather", "call", "end"]
    gather = rt.log[1]
    assert [c["target"] for c in gather["calls"]] == ["critic", "fact-checker"]
    # A single result passed as input travels as its public text.
    assert gather["calls"][0]["input"] == "draft of a poem"
    assert rt.tally == {"writer": 2, "critic": 1, "fact-checker": 1}
    assert rt.status == 0


def test_three_models_calls_the_council_on_several_models(plugin):
    file = plugin.copy("three_models.py")
    rt = Runtime({"council": lambda x: f"synthesis of {x['input']} on {x['options']['models']}"})
    end = run(rt.run(plugin.root, file, "why?", flow="three-models", options={"models": ["a/1", "b/2", "c/3"]}))
    assert end["ok"]["result"]["answer"] == "synthesis of why? on ['a/1', 'b/2', 'c/3']"
    assert rt.log[0]["target"] == {"id": "council", "options": {"models": ["a/1", "b/2", "c/3"]}}


def test_batch7_hands_a_workflow_to_the_workflow_flow(plugin):
    file = plugin.copy("batch7.py")
    rt = Runtime({"workflow": lambda x: f"ran {len(x['workflow']['steps'])} steps"})
    end = run(rt.run(plugin.root, file, "batch 7", flow="batch7"))
    assert end["ok"]["result"]["answer"] == "ran 3 steps"
    sent = rt.log[0]["input"]
    assert sent["editors"] == ["independent_reviewer"] and sent["approve_edits"] is True
    assert sent["workflow"]["steps"][1] == {"id": "relate", "target": "data_analysis_expert", "after": ["survey"]}


def test_review_resumed_runs_nothing_twice(plugin):
    file = plugin.copy("review.py")
    rt = Runtime({"writer": writer, "critic": lambda d: "c", "fact-checker": lambda d: "f"})
    first = run(rt.run(plugin.root, file, "a poem", flow="review"))
    ran = dict(rt.tally)
    second = run(rt.run(plugin.root, file, "a poem", flow="review"))
    assert second["ok"] == first["ok"] and dict(rt.tally) == ran


def test_a_failing_reviewer_fails_the_gather(plugin):
    file = plugin.copy("review.py")

    def critic(d):
        raise TargetError("call_stopped", "provider timeout")

    rt = Runtime({"writer": writer, "critic": critic, "fact-checker": lambda d: "f"})
    end = run(rt.run(plugin.root, file, "a poem", flow="review"))
    err = end["error"]
    assert err["reason"] == "gather_failed"
    assert err["details"]["results"][0]["reason"] == "call_stopped"
    assert err["python"]["file"] == "ai.iowarp.clio/flows/review.py" and err["python"]["line"] == 12


def test_deep_research_plans_researches_verifies_and_reports(plugin):
    import json

    file = plugin.copy("deep_research.py")
    rounds = iter(
        [
            {"verified": ["a1", "b1"], "gaps": ["c"]},
            {"verified": ["c1"], "gaps": ["d"]},
            {"verified": ["d1"], "gaps": ["e"]},
        ]
    )
    rt = Runtime(
        {
            "planner": lambda x: json.dumps({"directions": ["a", "b"]}),
            "researcher": lambda x: x["direction"] + "1",
            "critic": lambda x: json.dumps(next(rounds)),
            "writer": lambda x: "report: " + ", ".join(x["verified"]),
        }
    )
    end = run(rt.run(plugin.root, file, "why is the sky blue", flow="deep-research", options={"max_gap_rounds": 2}))
    assert end["ok"]["result"]["answer"] == "report: a1, b1, c1, d1"
    # Two gap rounds at most: a, b, then c, then d.
    assert rt.tally == {"planner": 1, "researcher": 4, "critic": 3, "writer": 1}
    ran = dict(rt.tally)
    again = run(rt.run(plugin.root, file, "why is the sky blue", flow="deep-research", options={"max_gap_rounds": 2}))
    assert again["ok"] == end["ok"] and dict(rt.tally) == ran


def test_deep_research_stalls_without_directions(plugin):
    file = plugin.copy("deep_research.py")
    rt = Runtime({"planner": lambda x: '{"directions": []}'})
    end = run(rt.run(plugin.root, file, "t", flow="deep-research"))
    assert end["error"]["reason"] == "flow_stall"
    assert end["error"]["details"]["stall"] == "planner_no_directions"
