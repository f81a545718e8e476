"""``busbar route --dry-run`` and ``busbar hooks test|calibrate``: try a pool's routing from the shell.

- ``busbar route --dry-run --pool P --data @req.json [--protocol openai] [--header 'Name: value' ...]
  [--config F] [--providers F] [--json] [--no-model]``: boots the gateway (no listener), builds the
  projection of the request as the data plane would, fires the pool's gates and prints every
  gate's reply (or its failure and the ``on_error`` taken), what a router explained
  (probabilities, thresholds, fallback hops), the reconcile and the final walk order. No upstream
  call is made, except a generative AI router's own calls through the gateway (counted in
  ``upstream_calls``). ``--data`` is ``@file`` or inline JSON; a JSON string is a prompt.
  ``--header`` (repeatable) adds a request header as a client would send it (a hook sees it when
  its settings allowlist it: ``request.headers``). ``--no-model``: routers that would call a model
  serve from their fallback chain instead (``BUSBAR_ROUTER_NO_MODEL=1`` in the plugins'
  environment).
- ``busbar hooks test --pool P --cases cases.yaml [--min-accuracy 0.9] [--json]``: runs labelled
  cases (``{data, expect: [member or tag, ...], protocol?, headers?: {name: value}}``) through the
  pool's gates and prints accuracy, a confusion matrix, reliability bins with ECE, and decision
  latency p50/p99; exit 1 below ``--min-accuracy``.
- ``busbar hooks calibrate --pool P --cases cases.yaml [--write]``: fits the temperature of the
  pool's AI router (its ``explain.scores``) on the labelled cases by minimum negative
  log-likelihood, prints it, and with ``--write`` writes it into the hook's ``settings.temperature``
  in the config file (PyYAML round trip: comments are not kept).

Exit status: 0 done; 1 below ``--min-accuracy`` (test) or nothing to calibrate; 2 bad config,
arguments or input.

Source: docs/router.md#try-a-route-before-it-goes-live.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from busbar.routecli.scoring import Scored, summary
from busbar.routecli.session import Decision, Session, SessionError, open_session, request_body

__all__ = ["hooks_main", "route_main"]

EXIT_LOW, EXIT_INVALID = 1, 2


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="config.yaml path (env BUSBAR_CONFIG)")
    p.add_argument("--providers", help="providers.yaml path (env BUSBAR_PROVIDERS)")
    p.add_argument("--pool", required=True, help="the pool whose gates decide")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-model", action="store_true",
                   help="routers that would call a model serve from their fallback chain instead")


def _quiet() -> None:
    """Per-decision INFO lines (the AI router logs each one) would drown the report: warnings only."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.WARNING)


def _fail(faults: list[str]) -> int:
    for line in faults:
        print(line, file=sys.stderr)
    return EXIT_INVALID


def _read_data(arg: str) -> Any:
    text = Path(arg[1:]).read_text("utf-8") if arg.startswith("@") else arg
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if arg.startswith("@"):
            raise SessionError([f"--data: {arg[1:]} is not JSON"]) from None
        return text                 # a bare prompt on the command line


def route_main(argv: list[str]) -> int:
    """``busbar route --dry-run ...`` (see the module docstring)."""
    p = argparse.ArgumentParser(prog="busbar route", description="Show how a pool would route a request.")
    p.add_argument("--dry-run", action="store_true", required=True, help="decide without calling upstream")
    p.add_argument("--data", required=True, help="@file.json, inline JSON, or a prompt")
    p.add_argument("--protocol", default="openai", help="the request's protocol (default openai)")
    p.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="a request header the client sends (repeatable)")
    _common(p)
    args = p.parse_args(argv)
    _quiet()
    if args.no_model:
        os.environ["BUSBAR_ROUTER_NO_MODEL"] = "1"
    try:
        headers = parse_headers(args.header)
        data = _read_data(args.data)
        session = open_session(args.config, args.providers)
    except (SessionError, OSError) as e:
        return _fail(list(e.faults) if isinstance(e, SessionError) else [f"--data: {e}"])
    try:
        decision = asyncio.run(session.decide(args.pool, request_body(data, args.protocol, args.pool), args.protocol,
                                              headers=headers))
    except SessionError as e:
        return _fail(list(e.faults))
    finally:
        session.close()
    if args.json:
        print(json.dumps({**decision.to_json(), "upstream_calls": decision.model_calls}, indent=2))
    else:
        print("\n".join(render(decision, args.protocol)))
    return 0


def parse_headers(raw: list[str]) -> dict[str, str]:
    """``--header 'Name: value'`` arguments -> ``{lower-cased name: value}`` (the last of a repeated
    name wins, as on the data plane). Raises :class:`SessionError` for one without a colon or a name."""
    out: dict[str, str] = {}
    for h in raw:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise SessionError([f"--header: {h!r} must be 'Name: value'"])
        out[name.strip().lower()] = value.strip()
    return out


def render(d: Decision, protocol: str) -> list[str]:
    """The human report of one dry run."""
    lines = [f"pool: {d.pool} ({protocol} request)"]
    if not d.gates:
        lines.append("gates: none fired (the pool has no gate: SWRR)" if not d.policy else "gates: none")
    else:
        lines.append("gates:")
        for g in d.gates:
            tag = f"{g['gate']} ({g['path']}{', shadow: not applied' if g['shadow'] else ''})"
            if "failure" in g:
                taken = f"; on_error: {g['on_error']}" if "on_error" in g else ""
                lines.append(f"  {tag}: failed ({g['failure']}: {g['detail']}){taken}")
            else:
                lines.append(f"  {tag}: {_arm_text(g['reply'])}")
            for k, v in (g.get("explain") or {}).items():
                lines.append(f"      {k}: {_compact(v)}")
    if d.reject is not None:
        lines.append(f"reconcile: reject {d.reject['status']} by {d.policy or '-'}: {d.reject['message']}")
        lines.append("walk: none (the request is refused)")
    else:
        lines.append(f"reconcile: policy {d.policy or 'weighted (SWRR)'}; order {', '.join(d.order) or '-'}; "
                     f"excluded {', '.join(d.excluded) or '-'}")
        lines.append(f"walk: {', '.join(d.walk) or '-'}" + (" (members after the ranked ones: SWRR)" if d.walk else ""))
    calls = d.model_calls
    lines.append(f"decision: {d.latency_us:.0f} µs; " + (f"{calls} call(s) by a generative router through the "
                                                         f"gateway (--no-model skips them); no other upstream call"
                                                         if calls else "no upstream call was made"))
    return lines


def _arm_text(reply: dict[str, Any]) -> str:
    arm = reply.get("arm")
    if arm == "order":
        return f"order [{', '.join(reply.get('order', []))}]"
    if arm == "restrict":
        extra = f" order [{', '.join(reply['order'])}]" if reply.get("order") else ""
        return f"restrict tags_any [{', '.join(reply.get('tags_any', []))}]{extra}"
    if arm == "reject":
        return f"reject {reply.get('status')}: {reply.get('message')}"
    return str(arm)


def _compact(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {_compact(x)}" for k, x in v.items()) or "-"
    if isinstance(v, list):
        return "; ".join(_compact(x) for x in v) or "-"
    return str(v)


# ------------------------------------------------------------------------------ hooks test / calibrate

def load_cases(path: str) -> list[dict[str, Any]]:
    """The cases of a YAML (or JSON) file: a list, or ``{cases: [...]}``; each ``{data, expect}``.
    Raises :class:`SessionError` naming the first bad case."""
    try:
        raw = yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise SessionError([f"--cases: {path}: {e}"]) from None
    cases = raw.get("cases") if isinstance(raw, dict) else raw
    if not isinstance(cases, list) or not cases:
        raise SessionError([f"--cases: {path}: expected a list of {{data, expect}} cases (or cases: [...])"])
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or "data" not in c or not isinstance(c.get("expect"), list) or not c["expect"]:
            raise SessionError([f"--cases: {path}: cases[{i}]: needs data: <request or prompt> and expect: "
                                f"[member or tag, ...]"])
        h = c.get("headers", {})
        if not isinstance(h, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in h.items()):
            raise SessionError([f"--cases: {path}: cases[{i}].headers: must be a map of header name to string "
                                f"value"])
    return cases


def _label(member: str, labels: set[str], tags: dict[str, tuple[str, ...]], expect: tuple[str, ...] = ()) -> str:
    """The label a predicted member shows as: the case's own expected name it matches, else its model
    or first tag among every case's labels, else its model name."""
    hit = next((e for e in expect if e == member or e in tags.get(member, ())), None)
    if hit is not None:
        return hit
    if member in labels:
        return member
    return next((t for t in tags.get(member, ()) if t in labels), member)


async def _run_cases(session: Session, pool: str, cases: list[dict[str, Any]]) -> tuple[list[Scored], list[Decision]]:
    labels = {str(n) for c in cases for n in c["expect"]}
    p = session.gw.pools.get(pool)
    tags = {m.lane.name: tuple(m.tags) for m in p.members} if p is not None else {}
    rows: list[Scored] = []
    decisions: list[Decision] = []
    for c in cases:
        protocol = str(c.get("protocol", "openai"))
        d = await session.decide(pool, request_body(c["data"], protocol, pool), protocol,
                                 headers=c.get("headers") or None)
        expect = tuple(str(n) for n in c["expect"])
        explain = d.explain or {}
        if d.reject is not None:
            got, correct = "(reject)", "(reject)" in expect
        elif d.order:
            got = _label(d.order[0], labels, tags, expect)
            correct = d.order[0] in expect or any(t in expect for t in tags.get(d.order[0], ()))
        elif d.excluded:
            allowed = list(d.walk)
            got = "+".join(sorted({_label(m, labels, tags, expect) for m in allowed}))
            correct = bool(allowed) and all(m in expect or any(t in expect for t in tags.get(m, ())) for m in allowed)
        else:
            got, correct = "(swrr)", False
        if isinstance(explain.get("confidence"), (int, float)):
            conf = float(explain["confidence"])
        else:
            conf = 1.0 if (d.order or d.excluded or d.reject) else 0.0
        rows.append(Scored(expect, got, correct, conf, d.latency_us))
        decisions.append(d)
    return rows, decisions


def hooks_main(argv: list[str]) -> int:
    """``busbar hooks test|calibrate ...`` (see the module docstring)."""
    p = argparse.ArgumentParser(prog="busbar hooks", description="Score and calibrate a pool's routing gates.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("test", help="accuracy, confusion matrix, reliability bins, latency on labelled cases")
    t.add_argument("--cases", required=True, help="cases YAML: [{data, expect: [member or tag, ...]}, ...]")
    t.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this accuracy (0..1)")
    t.add_argument("--bins", type=int, default=10, help="reliability bins (default 10)")
    _common(t)
    c = sub.add_parser("calibrate", help="fit the AI router's temperature on labelled cases")
    c.add_argument("--cases", required=True, help="cases YAML: [{data, expect: [member or tag, ...]}, ...]")
    c.add_argument("--write", action="store_true", help="write settings.temperature into the config file")
    _common(c)
    args = p.parse_args(argv)
    _quiet()
    if args.no_model:
        os.environ["BUSBAR_ROUTER_NO_MODEL"] = "1"
    try:
        cases = load_cases(args.cases)
        session = open_session(args.config, args.providers)
    except SessionError as e:
        return _fail(list(e.faults))
    try:
        rows, decisions = asyncio.run(_run_cases(session, args.pool, cases))
    except SessionError as e:
        return _fail(list(e.faults))
    finally:
        session.close()
    if args.command == "calibrate":
        return _calibrate(args, cases, decisions)
    report = summary(rows, args.bins)
    report["min_accuracy"] = args.min_accuracy
    report["passed"] = report["accuracy"] >= args.min_accuracy
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(render_report(report)))
    return 0 if report["passed"] else EXIT_LOW


def render_report(r: dict[str, Any]) -> list[str]:
    """The human report of ``hooks test``."""
    verdict = "ok" if r["passed"] else "BELOW --min-accuracy"
    lines = [f"cases: {r['cases']}  accuracy: {r['accuracy']:.4f} ({r['correct']}/{r['cases']})  "
             f"min-accuracy: {r['min_accuracy']:g}  {verdict}",
             f"decision latency: p50 {r['latency_us']['p50']:.1f} µs  p99 {r['latency_us']['p99']:.1f} µs",
             "confusion (rows: expected, columns: predicted):"]
    conf = r["confusion"]
    cols = sorted({g for row in conf.values() for g in row})
    width = max([len(c) for c in cols + list(conf)] + [5]) + 2
    lines.append(" " * width + "".join(c.rjust(width) for c in cols))
    for exp in sorted(conf):
        lines.append(exp.ljust(width) + "".join(str(conf[exp].get(c, 0)).rjust(width) for c in cols))
    lines.append(f"reliability (ECE {r['ece']:.4f}):")
    for b in r["reliability"]:
        if b["count"]:
            lines.append(f"  [{b['lo']:.1f}, {b['hi']:.1f}{']' if b['hi'] == 1.0 else ')'}  n={b['count']:<4} "
                         f"accuracy {b['accuracy']:.3f}  confidence {b['confidence']:.3f}")
    return lines


def fit_temperature(samples: list[tuple[dict[str, float], str]]) -> float:
    """The temperature ``T`` minimizing the mean negative log-likelihood of ``softmax(scores / T)``
    at the expected label, over a log grid 0.001..10 then refined; ``samples``: (scores, label)."""
    def nll(temp: float) -> float:
        total = 0.0
        for scores, label in samples:
            top = max(scores.values())
            z = sum(math.exp((s - top) / temp) for s in scores.values())
            total -= (scores[label] - top) / temp - math.log(z)
        return total / len(samples)
    grid = [10 ** (k / 20.0) for k in range(-60, 21)]
    best = min(grid, key=nll)
    lo, hi = best / 10 ** 0.05, best * 10 ** 0.05
    for _ in range(40):                      # golden-section refinement inside the best grid cell
        a, b = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
        if nll(a) < nll(b):
            hi = b
        else:
            lo = a
    return round((lo + hi) / 2, 5)


def _calibrate(args: argparse.Namespace, cases: list[dict[str, Any]], decisions: list[Decision]) -> int:
    samples: list[tuple[dict[str, float], str]] = []
    gate = None
    for case, d in zip(cases, decisions):
        for g in d.gates:
            scores = (g.get("explain") or {}).get("scores")
            if isinstance(scores, dict) and scores:
                gate = gate or g
                label = next((str(n) for n in case["expect"] if str(n) in scores), None)
                if label is not None:
                    samples.append(({k: float(v) for k, v in scores.items()}, label))
                break
    if gate is None or not samples:
        print(f"busbar hooks calibrate: no gate of pool '{args.pool}' reported scores for a case whose expect names "
              f"one of its candidates (an AI router with engine: decision does)", file=sys.stderr)
        return EXIT_LOW
    temp = fit_temperature(samples)
    print(f"{gate['path']}.settings.temperature: {temp} (fitted on {len(samples)} case(s))")
    if args.write:
        _write_temperature(args.config, gate["path"], temp)
        print(f"written to {args.config or os.environ.get('BUSBAR_CONFIG') or 'config.yaml'}")
    return 0


def _write_temperature(config: str | None, path: str, temp: float) -> None:
    from busbar.config.load import resolve_paths

    cfg_path, _ = resolve_paths(config, None)
    doc = yaml.safe_load(cfg_path.read_text("utf-8"))
    _, pname, hooks = path.split(".", 2)
    index = int(hooks[len("hooks["):-1])
    ref = doc["pools"][pname]["hooks"][index]
    ref.setdefault("settings", {})["temperature"] = temp
    cfg_path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
