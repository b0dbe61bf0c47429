"""The seeds' flows, copied unchanged, run against the fake runtime."""

from fakehost import Runtime, run


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
