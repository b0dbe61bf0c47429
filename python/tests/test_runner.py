"""The child-side runner against the fake runtime: the protocol, replay and errors."""

import itertools
import json
import sys
import textwrap

import pytest
from fakehost import Runtime, TargetError, run


def COLUMN(col):
    """The column a site reports: Python 3.10 keeps no columns and reports 0."""
    return col if sys.version_info >= (3, 11) else 0


HEAD = "from clio_agent.sdk import Flow\nfrom clio_agent.flows.outcomes import FlowOutcome, CallFailed, GatherFailed, StepFailed\n"


def flow_file(plugin, name, body):
    return plugin.write(name, HEAD + textwrap.dedent(body))


# The person decides -------------------------------------------------------------------


def test_person_decides_loop_across_processes(plugin):
    file = plugin.copy("draft_and_review.py")

    def self_agent(x):
        return f"draft:{x['notes']}" if isinstance(x, dict) else "draft:0"

    notes = iter(["notes 1", "notes 2", "notes 3"])
    rt = Runtime({"self": self_agent, "reviewer": lambda d: next(notes)})
    # First process: the question has no answer yet, so the run waits and the process ends.
    first = run(rt.run(plugin.root, file, "write it", flow="draft-and-review"))
    assert first.get("awaiting_input") and first.get("cancelled"), first
    ask = next(m for m in rt.log if m["type"] == "ask")
    assert ask["schema"] == "options" and ask["options"] == ["accept", "revise"]
    # Answered "Revise" (with the person's capitals): the second process replays the draft,
    # the notes and the answer, revises, and waits on the next question.
    rt.answers = ["Revise"]
    second = run(rt.run(plugin.root, file, "write it", flow="draft-and-review"))
    assert second.get("awaiting_input"), second
    assert rt.tally == {"self": 2, "reviewer": 2}
    rt.answers = ["Accept"]
    third = run(rt.run(plugin.root, file, "write it", flow="draft-and-review"))
    assert "ok" in third, third
    assert third["ok"]["result"]["answer"] == "draft:notes 1"
    # Nothing ran twice across the three processes.
    assert rt.tally == {"self": 2, "reviewer": 2}


def test_ask_bool_text_and_reason(plugin):
    file = flow_file(
        plugin,
        "asks.py",
        """
        class Asks(Flow):
            id = "asks"

            async def forward(self, task, ctx):
                go = await ctx.ask("Send it?", schema=bool, reason="it costs")
                note = await ctx.ask("Anything to add?", key="note")
                pick = await ctx.ask("Which mesh?", options=["Coarse", "FINE"])
                return {"answer": f"{go}|{note}|{pick}", "go": go}
        """,
    )
    rt = Runtime(answers=[True, "more", "Fine"])
    end = run(rt.run(plugin.root, file, flow="asks"))
    assert end["ok"] == {"form": "mapping", "value": {"answer": "True|more|fine", "go": True}}
    asks = [m for m in rt.log if m["type"] == "ask"]
    assert [a["schema"] for a in asks] == ["bool", "text", "options"]
    assert asks[0]["reason"] == "it costs" and asks[1]["key"] == "note"
    assert asks[2]["options"] == ["coarse", "fine"]


# Gather and as_completed ----------------------------------------------------------------


def work(i):
    if i == 3:
        raise TargetError("call_failed", "three is bad")
    return f"w{i}"


def test_gather_limit_and_return_exceptions(plugin):
    file = flow_file(
        plugin,
        "g.py",
        """
        class G(Flow):
            id = "g"

            async def forward(self, task, ctx):
                calls = [ctx.call("work", i) for i in range(5)]
                results = await ctx.gather(calls, limit=2, return_exceptions=True)
                out = []
                for r in results:
                    if isinstance(r, CallFailed):
                        out.append(f"failed:{r.details['index']}:{r.reason}:{r.handle is not None}")
                    else:
                        out.append(f"{r.index}:{r.answer}")
                try:
                    await ctx.gather([ctx.call("work", i) for i in (10, 3)])
                except GatherFailed as e:
                    out.append("gather_failed:" + ",".join(
                        "err" if isinstance(x, FlowOutcome) else x.answer for x in e.results))
                first = await ctx.gather([ctx.call("work", i) for i in (20, 21)], return_when="any")
                out.append("any:" + ",".join("-" if r is None else r.answer for r in first))
                return {"answer": "; ".join(out)}
        """,
    )
    rt = Runtime({"work": work}, order=lambda n: list(reversed(range(n))))
    end = run(rt.run(plugin.root, file, flow="g"))
    assert end["ok"]["value"]["answer"] == (
        "0:w0; 1:w1; 2:w2; failed:3:call_failed:True; 4:w4; gather_failed:w10,err; any:-,w21"
    )
    gathers = [m for m in rt.log if m["type"] == "gather"]
    assert gathers[0]["limit"] == 2 and gathers[0]["return_exceptions"] is True
    assert gathers[0]["return_when"] == "all" and len(gathers[0]["calls"]) == 5
    assert gathers[1]["limit"] is None and gathers[1]["return_exceptions"] is False
    assert gathers[2]["return_when"] == "any"
    # Each gather has its own site, and its calls theirs.
    assert len({json.dumps(g["site"]) for g in gathers}) == 3
    assert {c["site"]["line"] for c in gathers[0]["calls"]} == {gathers[0]["calls"][0]["site"]["line"]}


AS_COMPLETED = """
class A(Flow):
    id = "a"

    async def forward(self, task, ctx):
        seen = []
        async for r in ctx.as_completed([ctx.call("work", i) for i in range(4)], limit=16):
            if isinstance(r, FlowOutcome):
                seen.append(f"e{r.details['index']}")
            else:
                seen.append(r.index)
        # What comes next depends on the order: a resume must see the same one.
        last = await ctx.call("work", seen[0] if isinstance(seen[0], int) else 9)
        return {"answer": json.dumps(seen), "last": last.answer}
"""


@pytest.mark.parametrize("order", list(itertools.permutations(range(4)))[::5])
def test_as_completed_replays_the_recorded_order(plugin, order):
    file = flow_file(plugin, "a.py", "import json\n" + AS_COMPLETED)
    rt = Runtime({"work": work}, order=lambda n: list(order))
    first = run(rt.run(plugin.root, file, flow="a"))
    expected = [f"e{i}" if i == 3 else i for i in order]
    assert json.loads(first["ok"]["value"]["answer"]) == expected
    ran = dict(rt.tally)
    # Resumed with the calls finishing in another order: the recorded order is delivered,
    # and nothing runs again.
    rt.order = lambda n: sorted(range(n), key=lambda i: -order.index(i))
    second = run(rt.run(plugin.root, file, flow="a"))
    assert second["ok"] == first["ok"]
    assert dict(rt.tally) == ran


def test_as_completed_stopped_early_drops_the_stream(plugin):
    file = flow_file(
        plugin,
        "early.py",
        """
        class Early(Flow):
            id = "early"

            async def forward(self, task, ctx):
                stream = ctx.as_completed([ctx.call("work", i) for i in range(3)])
                async for r in stream:
                    first = r.answer
                    break
                await stream.aclose()
                return first
        """,
    )
    rt = Runtime({"work": work})
    end = run(rt.run(plugin.root, file, flow="early"))
    assert end["ok"] == {"form": "text", "value": "w0"}


# Steps ---------------------------------------------------------------------------------


def test_step_runs_once_and_replays_its_record(plugin, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    file = flow_file(
        plugin,
        "s.py",
        """
        import asyncio

        def boom():
            raise KeyError("no such thing")

        async def slow_double(x):
            await asyncio.sleep(0)
            return x * 2

        class S(Flow):
            id = "s"

            async def forward(self, task, ctx):
                path = await ctx.step(ctx.workspace.append, "log.txt", {"n": 1})
                lines = await ctx.step(lambda: len(ctx.workspace.read("log.txt").splitlines()))
                doubled = await ctx.step(slow_double, 21)
                try:
                    await ctx.step(boom)
                except StepFailed as e:
                    failed = e.details["type"]
                return {"answer": f"{path}:{lines}:{doubled}:{failed}", "root": ctx.workspace.root}
        """,
    )
    rt = Runtime()
    first = run(rt.run(plugin.root, file, flow="s", workspace=str(workspace)))
    assert first["ok"]["value"]["answer"] == "log.txt:1:42:KeyError", first
    assert (workspace / "log.txt").read_text() == '{"n":1}\n'
    steps = [m for m in rt.log if m["type"] == "step"]
    assert [s["name"] for s in steps] == ["Workspace.append", "S.forward.<locals>.<lambda>", "slow_double", "boom"]
    # A new run has no history: each step runs at once and reports with its request.
    assert all(s.get("ran") for s in steps) and steps[2]["ok"] == 42
    assert steps[3]["error"]["reason"] == "step_failed" and "KeyError" in steps[3]["error"]["message"]
    assert "Traceback" in steps[3]["error"]["details"]["traceback"]
    # The resume answers every step from its record: the file gets no second line.
    rt.log.clear()
    second = run(rt.run(plugin.root, file, flow="s", workspace=str(workspace)))
    assert second["ok"] == first["ok"]
    assert (workspace / "log.txt").read_text() == '{"n":1}\n'
    assert not [m for m in rt.log if m["type"] == "step_done" or m.get("ran")]
    assert rt.tally["steps"] == 4


def test_a_step_with_history_asks_first_until_the_frontier(plugin):
    file = flow_file(
        plugin,
        "two.py",
        """
        class Two(Flow):
            id = "two"

            async def forward(self, task, ctx):
                a = await ctx.step(len, "abc")
                b = await ctx.step(len, "abcd")
                return {"answer": f"{a}{b}"}
        """,
    )

    def script(msg, rt):
        if msg["type"] == "step_done":
            # Past the history now: the runtime says so, and the next step runs at once.
            rt.send({"type": "frontier", "instance": msg["instance"]})
        return False

    rt = Runtime()
    rt.journal["key:patch:elsewhere"] = {"kind": "patch", "outcome": {"ok": True}}
    end = run(rt.run(plugin.root, file, flow="two", script=script))
    assert end["ok"]["value"] == {"answer": "34"}
    kinds = [(m["type"], bool(m.get("ran"))) for m in rt.log]
    assert kinds == [("step", False), ("step_done", False), ("step", True), ("end", False)]


def test_workspace_refuses_without_a_root_and_outside_it(plugin, tmp_path):
    file = flow_file(
        plugin,
        "ws.py",
        """
        from clio_agent.flows.outcomes import CallRefused

        class W(Flow):
            id = "w"

            async def forward(self, task, ctx):
                out = []
                for path in ("../escape.txt", "ok.txt"):
                    try:
                        await ctx.step(ctx.workspace.write, path, "x")
                        out.append("wrote")
                    except CallRefused as e:
                        out.append(e.refusal)
                return ",".join(out)
        """,
    )
    end = run(Runtime().run(plugin.root, file, flow="w", workspace=str(tmp_path / "ws")))
    assert end["ok"]["value"] == "outside_workspace,wrote"
    end = run(Runtime().run(plugin.root, file, flow="w", workspace=None))
    assert end["ok"]["value"] == "no_workspace,no_workspace"


# Identity sites --------------------------------------------------------------------------

SITE_FLOW = """from clio_agent.sdk import Flow


class Site(Flow):
    id = "site"

    async def forward(self, task, ctx):
        a = await ctx.call("writer", task)
        b = await ctx.call("writer", task, key="second")
        return a.answer + b.answer
"""


def test_a_line_added_above_a_call_changes_its_site_and_stops_the_resume(plugin):
    file = plugin.write("site.py", SITE_FLOW)
    rt = Runtime({"writer": lambda x: "w"})
    end = run(rt.run(plugin.root, file, flow="site"))
    assert end["ok"]["value"] == "ww"
    call = rt.log[0]
    col = COLUMN(19)
    assert call["site"] == {"file": "ai.iowarp.clio/flows/site.py", "line": 8, "column": col}
    assert call["occurrence"] == 0 and call["key"] == ""
    assert rt.log[1]["key"] == "second"
    ran = dict(rt.tally)
    # The same code resumes cleanly, running nothing.
    rt.log.clear()
    assert run(rt.run(plugin.root, file, flow="site"))["ok"]["value"] == "ww"
    assert dict(rt.tally) == ran
    # A line added above the first call moves it: the resume stops with the mismatch,
    # naming both sites, and nothing runs.
    plugin.write("site.py", SITE_FLOW.replace("        a = await", "        # a new comment\n        a = await"))
    rt.log.clear()
    end = run(rt.run(plugin.root, file, flow="site"))
    assert rt.log[0]["site"]["line"] == 9
    err = end["error"]
    assert err["reason"] == "flow_replay_mismatch", err
    assert f"ai.iowarp.clio/flows/site.py:9:{col}:" in err["message"]
    assert f"ai.iowarp.clio/flows/site.py:8:{col}:" in err["message"]
    assert dict(rt.tally) == ran


def test_occurrences_are_counted_when_calls_are_built(plugin):
    file = flow_file(
        plugin,
        "occ.py",
        """
        class Occ(Flow):
            id = "occ"

            async def forward(self, task, ctx):
                calls = [ctx.call("x", 1) for _ in range(3)]
                other = ctx.call("x", 2)
                await ctx.gather(list(reversed(calls)) + [other])
                return "done"
        """,
    )
    rt = Runtime({"x": lambda i: "y"})
    run(rt.run(plugin.root, file, flow="occ"))
    calls = rt.log[0]["calls"]
    assert [c["occurrence"] for c in calls] == [2, 1, 0, 0]
    assert calls[0]["site"] == calls[1]["site"] and calls[3]["site"]["line"] == calls[0]["site"]["line"] + 1


def test_patched_lets_new_code_take_a_new_path(plugin):
    old = """from clio_agent.sdk import Flow


class P(Flow):
    id = "p"

    async def forward(self, task, ctx):
        review = await ctx.call("reviewer", task, key="review")
        return review.answer
"""
    new = old.replace(
        '        review = await ctx.call("reviewer", task, key="review")',
        '        if await ctx.patched("check-units"):\n'
        '            await ctx.call("unit_checker", task, key="units")\n'
        '        review = await ctx.call("reviewer", task, key="review")',
    )
    file = plugin.write("p.py", old)
    rt = Runtime({"reviewer": lambda x: "fine", "unit_checker": lambda x: "units ok"})
    old_end = run(rt.run(plugin.root, file, flow="p"))
    assert old_end["ok"]["value"] == "fine"
    # The old run resumes under the new code and keeps the old path.
    plugin.write("p.py", new)
    again = run(rt.run(plugin.root, file, flow="p"))
    assert again["ok"]["value"] == "fine" and rt.tally["unit_checker"] == 0
    # A new run takes the new path.
    fresh = Runtime({"reviewer": lambda x: "fine", "unit_checker": lambda x: "units ok"})
    run(fresh.run(plugin.root, file, flow="p"))
    assert fresh.tally["unit_checker"] == 1


# The rest of ctx -------------------------------------------------------------------------


def test_every_ctx_member_sends_its_command(plugin):
    file = flow_file(
        plugin,
        "members.py",
        """
        class Council(Flow):
            id = "local-council"
            members: tuple[str, ...] = ()

            async def forward(self, task, ctx):
                return "unused"

        class M(Flow):
            id = "members"
            model = "acct/m1"

            async def forward(self, task, ctx):
                out = [str(ctx.run_id), str(ctx.depth)]
                draft = await ctx.call("writer", evidence=[5], model="acct/m2", label="Writer")
                out.append(draft.answer)
                out.append((await ctx.call(Flow("council", models=["a", "b"]), "q")).answer)
                out.append((await ctx.call(Council, "q")).answer)
                out.append((await ctx.call(Council(members=["x"]), "q")).answer)
                out.append((await ctx.react("think")).answer)
                handle = await ctx.start("writer", "bg")
                states = [s["status"] async for s in handle.follow()]
                out.append(",".join(states))
                out.append((await handle).answer)
                await handle.cancel()
                await ctx.record_event({"kind": "note", "n": 1})
                await ctx.publish({"steps": [1, 2]})
                receipts = await ctx.permission_receipts()
                out.append(receipts[0]["decision"])
                tools = await ctx.tool_results(handle)
                out.append(str(tools[0]["value"]))
                out.append(str(await ctx.patched("p1")))
                return {"answer": "|".join(out), "n": len(out)}
        """,
    )

    def echo(x):
        return f"<{x}>" if not isinstance(x, dict) else f"<{x['input']}:{x['options']}>"

    targets = {n: echo for n in ("writer", "council", "local-council", "self")}
    rt = Runtime(targets)
    end = run(rt.run(plugin.root, file, "the task", flow="members", run_id=41, depth=2))
    assert end["ok"]["value"]["answer"] == (
        "41|2|<the task>|<q:{'models': ['a', 'b']}>|<q:{}>|<q:{'members': ['x']}>|<think>"
        "|running,succeeded|<bg>|allow|[1, 2]|True"
    ), end
    calls = [m for m in rt.log if m["type"] == "call"]
    assert calls[0]["input"] == "the task" and calls[0]["evidence"] == [5]
    assert calls[0]["model"] == "acct/m2" and calls[0]["label"] == "Writer"
    assert calls[1]["target"] == {"id": "council", "options": {"models": ["a", "b"]}}
    assert calls[2]["target"] == {"id": "local-council", "options": {}}
    assert calls[4]["target"] == "self"
    assert calls[5]["wait"] is False
    kinds = [m["type"] for m in rt.log]
    for kind in ("follow", "wait", "cancel_task", "event", "publish", "permission_receipts", "tool_results", "patched"):
        assert kind in kinds
    event = next(m for m in rt.log if m["type"] == "event")
    assert event["event"] == {"kind": "note", "n": 1} and "site" in event


def test_results_nested_in_data_do_not_convert(plugin):
    file = flow_file(
        plugin,
        "nested.py",
        """
        class N(Flow):
            id = "n"

            async def forward(self, task, ctx):
                r = await ctx.call("writer", "x")
                await ctx.call("writer", {"views": [r]})
                await ctx.call("writer", {"views": [r.answer]})
                try:
                    ctx.call("writer", {"bad": {1, 2}})
                except TypeError as e:
                    return str(e)
        """,
    )
    rt = Runtime({"writer": lambda x: "a"})
    end = run(rt.run(plugin.root, file, flow="n"))
    calls = [m for m in rt.log if m["type"] == "call"]
    assert calls[1]["input"] == {"views": ["CallResult(target='writer', handle=101)"]}
    assert calls[2]["input"] == {"views": ["a"]}
    assert "set is not JSON" in end["ok"]["value"]


# Errors ------------------------------------------------------------------------------------


def test_an_exception_ends_the_flow_with_its_traceback(plugin):
    file = plugin.write(
        "bad.py",
        "from clio_agent.sdk import Flow\n"
        "\n"
        "\n"
        "def check(x):\n"
        "    raise ValueError(f'bad input {x}')\n"
        "\n"
        "\n"
        "class Bad(Flow):\n"
        "    id = 'bad'\n"
        "\n"
        "    async def forward(self, task, ctx):\n"
        "        await ctx.call('writer', task)\n"
        "        check(task)\n",
    )
    rt = Runtime({"writer": lambda x: "w"})
    end = run(rt.run(plugin.root, file, "t", flow="bad"))
    err = end["error"]
    assert err["reason"] == "flow_exception"
    assert err["python"]["file"] == "ai.iowarp.clio/flows/bad.py" and err["python"]["line"] == 5
    assert err["python"]["type"] == "ValueError"
    assert err["message"] == "flow bad raised ValueError at ai.iowarp.clio/flows/bad.py:5: bad input t"
    tb = err["python"]["traceback"]
    assert 'bad.py", line 13, in forward' in tb and 'bad.py", line 5, in check' in tb
    assert "_flow_host" not in tb
    assert err["details"]["line"] == 5 and err["details"]["flow"] == "bad"


def test_an_outcome_raised_by_the_flow_keeps_its_reason(plugin):
    file = flow_file(
        plugin,
        "stall.py",
        """
        from clio_agent.flows.outcomes import FlowStall

        class St(Flow):
            id = "st"

            async def forward(self, task, ctx):
                raise FlowStall("planner_no_directions", "the planner returned no directions", step="plan", observed={"d": []})
        """,
    )
    end = run(Runtime().run(plugin.root, file, flow="st"))
    err = end["error"]
    assert err["reason"] == "flow_stall"
    assert err["details"]["stall"] == "planner_no_directions" and err["details"]["observed"] == {"d": []}
    assert err["python"]["file"] == "ai.iowarp.clio/flows/stall.py" and err["python"]["line"] == 10


def test_a_call_error_uncaught_ends_the_flow_with_that_error(plugin):
    file = flow_file(
        plugin,
        "unk.py",
        """
        class U(Flow):
            id = "u"

            async def forward(self, task, ctx):
                return await ctx.call("nobody", task)
        """,
    )
    end = run(Runtime().run(plugin.root, file, flow="u"))
    assert end["error"]["reason"] == "flow_target_unknown"
    assert end["error"]["details"]["target"] == "nobody"


@pytest.mark.parametrize(
    "source, kind, line",
    [
        ("from clio_agent.sdk import Flow\n\nclass X(Flow)\n    id = 'x'\n", "SyntaxError", 3),
        ("from clio_agent.sdk import Flow\nimport no_such_module_anywhere\n", "ModuleNotFoundError", 2),
        ("from clio_agent.sdk import Flow\n\n\nraise RuntimeError('at import')\n", "RuntimeError", 4),
    ],
)
def test_a_flow_file_that_does_not_load_names_file_and_line(plugin, source, kind, line):
    file = plugin.write("broken.py", source)
    end = run(Runtime().run(plugin.root, file, flow="x"))
    err = end["error"]
    assert err["reason"] == "flow_exception" and err["details"]["phase"] == "import"
    assert err["python"]["type"] == kind
    assert err["python"]["file"] == "ai.iowarp.clio/flows/broken.py" and err["python"]["line"] == line
    assert "ai.iowarp.clio/flows/broken.py" in err["message"]


def test_no_such_flow_class_and_bad_options(plugin):
    file = plugin.copy("draft_and_review.py")
    end = run(Runtime().run(plugin.root, file, flow="other"))
    assert end["error"]["reason"] == "flow_target_unknown"
    assert "DraftAndReview ('draft-and-review')" in end["error"]["message"]
    end = run(Runtime().run(plugin.root, file, flow="draft-and-review", options={"max_rounds": True}))
    assert end["error"]["reason"] == "flow_options_invalid"
    assert end["error"]["details"]["problems"] == [{"option": "max_rounds", "needs": "an integer", "got": True}]


def test_a_return_value_that_is_not_json(plugin):
    file = flow_file(
        plugin,
        "ret.py",
        """
        class R(Flow):
            id = "r"

            async def forward(self, task, ctx):
                return {"answer": "x", "bad": object()}
        """,
    )
    end = run(Runtime().run(plugin.root, file, flow="r"))
    assert end["error"]["reason"] == "flow_exception" and end["error"]["details"]["phase"] == "return"
    assert "not JSON" in end["error"]["message"]


def test_cancel_ends_the_flow_cancelled(plugin):
    file = plugin.copy("review.py")

    def script(msg, rt):
        if msg["type"] == "call":
            rt.send({"type": "cancel", "instance": msg["instance"]})
            return True
        return False

    end = run(Runtime().run(plugin.root, file, flow="review", script=script))
    assert end == {"type": "end", "instance": "r1/f0", "cancelled": True}


# Garbage on the protocol -----------------------------------------------------------------


def test_garbage_from_the_runtime_is_a_protocol_error_naming_the_flow(plugin):
    file = plugin.copy("review.py")

    def script(msg, rt):
        if msg["type"] == "call":
            rt.send(b"this is not json\n")
            return True
        return False

    rt = Runtime()
    end = run(rt.run(plugin.root, file, flow="review", script=script))
    assert end["type"] == "protocol_error"
    assert "is not JSON" in end["message"] and "review (ai.iowarp.clio/flows/review.py)" in end["message"]
    assert rt.status == 3
    assert b"protocol error" in rt.stderr


def test_a_reply_to_no_request_fails_that_flow(plugin):
    file = plugin.copy("review.py")

    def script(msg, rt):
        if msg["type"] == "call":
            rt.send({"type": "result", "instance": msg["instance"], "id": 999, "ok": {}})
            return True
        return False

    end = run(Runtime().run(plugin.root, file, flow="review", script=script))
    err = end["error"]
    assert err["reason"] == "flow_protocol_error"
    assert "flow review (ai.iowarp.clio/flows/review.py)" in err["message"] and "999" in err["message"]


def test_a_malformed_reply_fails_that_flow(plugin):
    file = plugin.copy("review.py")

    def script(msg, rt):
        if msg["type"] == "call":
            rt.send({"type": "result", "instance": msg["instance"], "id": msg["id"]})
            return True
        return False

    end = run(Runtime().run(plugin.root, file, flow="review", script=script))
    assert end["error"]["reason"] == "flow_protocol_error"
    assert "exactly one of ok and error" in end["error"]["message"]


def test_print_and_input_in_a_flow_do_not_touch_the_protocol(plugin):
    file = flow_file(
        plugin,
        "noisy.py",
        """
        import os

        class Noisy(Flow):
            id = "noisy"

            async def forward(self, task, ctx):
                print("hello from the flow")
                os.write(1, b"raw bytes on fd 1\\n")
                try:
                    input()
                except EOFError:
                    pass
                return (await ctx.call("writer", task)).answer
        """,
    )
    rt = Runtime({"writer": lambda x: "w"})
    end = run(rt.run(plugin.root, file, flow="noisy"))
    assert end["ok"]["value"] == "w"
    assert b"hello from the flow" in rt.stderr and b"raw bytes on fd 1" in rt.stderr


def test_a_start_message_of_another_protocol_is_refused(plugin):
    file = plugin.copy("review.py")
    start = {"type": "start", "instance": 3, "protocol": 99, "root": plugin.root, "file": file, "task": "t"}
    end = run(Runtime().run(plugin.root, file, start=start))
    assert end["error"]["reason"] == "flow_protocol_error" and "protocol 99" in end["error"]["message"]


def test_a_run_reply_to_a_call_fails_that_flow(plugin):
    file = plugin.copy("review.py")

    def script(msg, rt):
        if msg["type"] == "call":
            rt.send({"type": "run", "instance": msg["instance"], "id": msg["id"]})
            return True
        return False

    end = run(Runtime().run(plugin.root, file, flow="review", script=script))
    assert end["error"]["reason"] == "flow_protocol_error"
    assert "no step asking whether to run" in end["error"]["message"]


def test_ctx_inside_a_step_function_is_refused(plugin):
    file = flow_file(
        plugin,
        "nest.py",
        """
        import asyncio

        class Nest(Flow):
            id = "nest"

            async def forward(self, task, ctx):
                async def inner():
                    return (await ctx.call("writer", "x")).answer

                async def other():
                    await asyncio.sleep(0)
                    return (await ctx.call("writer", "y")).answer

                # A branch running beside the step may still call.
                side = asyncio.ensure_future(other())
                try:
                    await ctx.step(inner)
                except StepFailed as e:
                    return {"answer": e.details["type"] + ": " + e.message, "side": await side}
        """,
    )
    rt = Runtime({"writer": lambda x: "w"})
    end = run(rt.run(plugin.root, file, flow="nest"))
    value = end["ok"]["value"]
    assert value["answer"].startswith(
        "RuntimeError: step Nest.forward.<locals>.inner raised RuntimeError: ctx.call inside"
    )
    assert value["side"] == "w"
    assert rt.tally["writer"] == 1
