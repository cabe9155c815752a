"""Where a lone flow's time goes, from the packets on the loopback
(BENCHMARKS.md, "Where a lone flow's time goes"; run by bench/lone_flow.sh).

    python3 bench/lone_flow.py CAPTURE API_PORT

CAPTURE is `tcpdump -i lo -tt -nn -A` output of `load api --alone N`
driving a `tartan serve` on API_PORT. Each lone flow runs from its
`POST /engine/flow` to the answer of its status wait; between them, by
port: Postgres (5432) round trips, the step server's calls and the API's
answers. A Postgres message of more than 1,000 bytes is a batch commit
(the decisions' rows), its answer the next message back of 100 bytes or
more (a notice's is smaller). Prints the median flow and the median of
each segment per flow. Packets only: what a segment costs inside a
process (a decision, a thread waking) shows as the gap around it.
"""

import re
import statistics
import sys

HEADER = re.compile(
    r"^(\d+\.\d+) IP 127\.0\.0\.1\.(\d+) > 127\.0\.0\.1\.(\d+): Flags \[[^\]]*\].*length (\d+)"
)
PG = 5432
NAMES = {
    ("start", "commit>"): "API request to first commit sent (parse, plan, decide)",
    ("commit>", "commit<"): "commit round trip (Postgres: execute, WAL flush, wire)",
    ("commit<", "call>"): "commit answered to step called (dispatch)",
    ("call>", "call<"): "step call (the step server)",
    ("call<", "commit>"): "step answered to commit sent (record, decide)",
    ("commit<", "answer"): "last commit answered to status answer",
    ("start", "call>"): "API request to first step called (decide, commit, dispatch)",
    ("call<", "call>"): "step answered to next step called (record, decide, commit, dispatch)",
    ("call<", "answer"): "last step answered to status answer (record, commit, answer)",
}


def packets(path):
    """(time, source port, destination port, length, text) of each packet
    that carries data."""
    out, cur = [], None
    with open(path, errors="replace") as f:
        for line in f:
            m = HEADER.match(line)
            if m:
                if cur:
                    out.append(cur)
                t, s, d, n = m.groups()
                cur = [float(t), int(s), int(d), int(n), ""]
            elif cur is not None:
                cur[4] += line.strip()
    if cur:
        out.append(cur)
    return [p for p in out if p[3] > 0]


def lone_flows(pkts, api):
    """Each flow's packets, from its start to its status answer."""
    flows, i = [], 0
    while i < len(pkts):
        p = pkts[i]
        if p[2] == api and "POST /engine/flow " in p[4]:
            j, waiting = i, False
            while j < len(pkts):
                q = pkts[j]
                waiting |= q[2] == api and "/status" in q[4]
                if waiting and q[1] == api and "HTTP/1.1 200" in q[4]:
                    break
                j += 1
            flows.append(pkts[i : j + 1])
            i = j + 1
        else:
            i += 1
    return flows


def milestones(flow, api):
    out, committing = [], False
    for t, s, d, n, text in flow:
        step = s not in (api, PG) and d not in (api, PG)
        if d == api and "POST /engine/flow" in text:
            out.append(("start", t))
        elif d == PG and n > 1000:
            out.append(("commit>", t))
            committing = True
        elif s == PG and committing and n >= 100:
            out.append(("commit<", t))
            committing = False
        elif step and "POST /" in text:
            out.append(("call>", t))
        elif step and "HTTP/1.1" in text:
            out.append(("call<", t))
        elif s == api and "HTTP/1.1 200" in text:
            out.append(("answer", t))
    return out


def main():
    path, api = sys.argv[1], int(sys.argv[2])
    totals, segments = [], {}
    for flow in lone_flows(packets(path), api):
        m = milestones(flow, api)
        # Only flows run alone: one start, its calls, one answer.
        if not m or m[0][0] != "start" or m[-1][0] != "answer":
            continue
        if sum(1 for k, _ in m if k == "start") != 1:
            continue
        totals.append((m[-1][1] - m[0][1]) * 1e3)
        per = {}
        for (a, ta), (b, tb) in zip(m, m[1:]):
            per[(a, b)] = per.get((a, b), 0.0) + (tb - ta) * 1e3
        for k, v in per.items():
            segments.setdefault(k, []).append(v)
    if not totals:
        sys.exit("no lone flow in the capture")
    print(f"lone flows: {len(totals)}, median {statistics.median(totals):.2f} ms")
    common = [(k, v) for k, v in segments.items() if len(v) >= len(totals) // 2]
    for k, v in sorted(common, key=lambda kv: -statistics.median(kv[1])):
        print(f"{statistics.median(v):6.2f} ms  {NAMES.get(k, k)}")


if __name__ == "__main__":
    main()
