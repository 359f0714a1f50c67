"""``jitguard.explain(f)``: everything known about a specialized function's cache, as text
and as JSON.

May import: cache.decorators, cache.observe, cache.specialize, cache.stats (and what they may import).

# [Note: Explaining a cache]
# ``explain(f)`` reads, without compiling or calling anything: the live entries in dispatch
# order, each with its hits, specificity, the sources it compiled as dynamic, its checks
# (each one's ``code``, ``kind``, ``sources`` and, when its kind gives one, ``detail``:
# dtype, device, sizes, strides and requires_grad of a tensor guard), how often each check
# failed on a recompile, its check's measured cost and its compile time; the function's
# counters (hits, misses, compiles, fallbacks, ...); every compile, kept or not, with its
# time and outcome; the guard that rejected calls most often; every recompile's reasons;
# with a store, its key, which tier each loaded entry came from, and every stored entry's
# fate: loaded, rejected, stale, saved, not stored ([Note: Persistent entries]); the
# advice, one per source that churns ([Note: Recompile advice]). ``str()`` is a readable report (at most ``max_guards`` checks per entry, the
# rest counted), ``as_dict()``/``to_json()`` the whole of it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any, Optional, Union

from .decorators import cache_of
from .observe import guard_report, leaf_key
from .specialize import FunctionCache

__all__ = ["Explanation", "explain"]


def _us(ns: Optional[float]) -> str:
    return "not measured" if ns is None else f"{ns / 1000:.2f} us"


def _ms(seconds: Optional[float]) -> str:
    return "?" if seconds is None else f"{seconds * 1000:.1f} ms"


def _fields(detail: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in detail.items())


class Explanation:
    """What ``jitguard.explain(f)`` returns: ``as_dict()``, ``to_json()``, ``str()``.
    See [Note: Explaining a cache]."""

    def __init__(self, data: dict[str, Any], max_guards: int) -> None:
        self.data = data
        self.max_guards = max_guards

    def as_dict(self) -> dict[str, Any]:
        """The whole report as plain JSON-ready data."""
        return self.data

    def to_json(self, **kwargs: Any) -> str:
        """The report as JSON (keyword arguments go to ``json.dumps``; default indent 2)."""
        kwargs.setdefault("indent", 2)
        return json.dumps(self.data, default=str, **kwargs)

    @property
    def entries(self) -> list[dict[str, Any]]:
        return list(self.data["entries"])

    def __str__(self) -> str:
        d = self.data
        s = d["stats"]
        out = [f"jitguard.explain: {d['function']}"]
        out.append(
            f"  entries {s['entries']}; hits {s['hits']}, misses {s['misses']}, compiles "
            f"{s['compiles']} (recompiles {s['recompiles']}, failed {s['failures']}), "
            f"fallbacks {s['fallbacks']}, invalidated {s['invalidations']}"
        )
        if s.get("capture_failures") or s.get("backend_failures"):
            out.append(f"  capture failures {s['capture_failures']} (served by Dynamo's frame "
                       f"path: {s['frame_path']} entries), backend failures "
                       f"{s['backend_failures']}")
        top = d["most_rejecting_guard"]
        if top is not None:
            out.append(
                f"  guard that rejects most: {top['guard']} "
                f"({top['failures']} of {d['rejections']} rejections)"
            )
        for e in d["entries"]:
            state = "" if e["valid"] else f", invalid: {e['invalid_reason']}"
            dynamic = f", dynamic: {', '.join(e['dynamic'])}" if e["dynamic"] else ""
            made = (f"loaded from {e['stored']['tier']} ({e['stored']['entry']})"
                    if e.get("stored") else f"compiled in {_ms(e['compile_time_s'])}")
            out.append(
                f"  entry {e['compile_id']}: {e['hits']} hits, {e['guard_count']} checks, "
                f"check {_us(e['check_cost_ns'])} per call, {made}, "
                f"specificity {e['specificity']}{dynamic}{state}"
            )
            layer = e.get("guard_layer")
            if layer:
                out.append(f"    guards: {layer['layer']}: {layer['why']}")
                if layer.get("pieces"):
                    out.append(f"    pieces: {layer['pieces']}")
            guards = e["guards"]
            for g in guards[: self.max_guards]:
                failed = g.get("failures", 0)
                tail = f"   [failed {failed}x]" if failed else ""
                detail = g.get("detail")
                per_source = detail.get("per_source") if detail is not None else None
                if detail is None:
                    out.append(f"    {g['kind']}: {g['code']}{tail}")
                elif isinstance(per_source, list):
                    out.append(f"    {g['kind']} on {len(g['sources'])} sources{tail}")
                    for name, fields in zip(g["sources"], per_source, strict=False):
                        out.append(f"      {name}: {_fields(fields)}")
                else:
                    names = ", ".join(g["sources"])
                    out.append(f"    {g['kind']} {names}: {_fields(detail)}{tail}")
            if len(guards) > self.max_guards:
                out.append(
                    f"    ... and {len(guards) - self.max_guards:,} more checks "
                    f"(explain(f).as_dict() has them all)"
                )
        if d["compiles"]:
            out.append("  compiles:")
            for c in d["compiles"]:
                extra = f": {c['error']}" if c["error"] else ""
                out.append(
                    f"    {c['compile_id']}: {c['outcome']} in {_ms(c['compile_time_s'])}, "
                    f"{c['guard_count']} checks, check {_us(c['check_cost_ns'])}{extra}"
                )
        if d.get("store"):
            out.append(f"  store {d['store']['key']}:")
            out.extend(f"    {line}" for line in d["store"]["events"])
        if d.get("advice"):
            out.append("  advice:")
            for a in d["advice"]:
                out.append(f"    {a['source']}: {a['message']}")
                ev = a["evidence"]
                values = f"; values seen: {', '.join(ev['values'])}" if ev["values"] else ""
                limit = (f" (recompile limit {ev['limit']} hit)"
                         if ev["limit"] is not None else "")
                n = ev["recompiles"]
                out.append(f"      evidence: {n} recompile{'' if n == 1 else 's'}{limit}{values}")
                if a["fix"]:
                    fix = a["fix"].splitlines()
                    out.append(f"      fix: {fix[0]}")
                    out.extend(f"           {line}" for line in fix[1:])
        if d["recompiles"]:
            out.append("  recompiles:")
            for r in d["recompiles"]:
                made = r["compile_id"] or f"refused ({r['outcome']})"
                out.append(f"    {made}:")
                out.extend(f"      - {line}" for line in r["reasons"])
                if r["made_dynamic"]:
                    out.append(f"      now dynamic: {', '.join(r['made_dynamic'])}")
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<Explanation {self.data['function']}: {len(self.data['entries'])} entries>"


def _entry(entry: Any, info: Any, loaded: dict[Optional[str], Any],
           layer: Optional[dict[str, str]] = None) -> dict[str, Any]:
    counts = dict(entry.failure_counts)
    guards = []
    for leaf in entry.check.leaves:
        report = guard_report(leaf)
        failed = counts.get(leaf_key(leaf), 0)
        if failed:
            report["failures"] = failed
        guards.append(report)
    return {
        "compile_id": str(entry.compile_id),
        "hits": entry.hits,
        "specificity": entry.specificity,
        "valid": entry.valid,
        "invalid_reason": entry.invalid_reason,
        "dynamic": sorted(s.name() for s in entry.dynamic),
        "guard_count": len(entry.check.leaves),
        "check_cost_ns": info.check_cost_ns if info is not None else None,
        "compile_time_s": info.compile_time_s if info is not None else None,
        "stored": (
            {"entry": loaded[str(entry.compile_id)].entry,
             "tier": loaded[str(entry.compile_id)].tier}
            if str(entry.compile_id) in loaded else None
        ),
        "failure_counts": counts,
        "guards": guards,
        "guard_layer": layer,
    }


def explain(f: Union[Callable[..., Any], FunctionCache], *, max_guards: int = 50) -> Explanation:
    """Explain the cache of ``f`` (a function returned by ``specialize`` or
    ``jitguard.torch.compile``, or a ``FunctionCache``): its entries and their guards,
    hits, failure counts, the check's cost, fallbacks, compile times and recompile reasons.
    ``str()`` of the result is a report (``max_guards`` checks shown per entry);
    ``.as_dict()``/``.to_json()`` hold everything. See [Note: Explaining a cache]."""
    cache = f if isinstance(f, FunctionCache) else cache_of(f)
    events = cache.store_events()
    loaded = {e.compile_id: e for e in events if e.outcome == "loaded"}
    stats = cache.stats()
    counts = cache.guard_failure_counts()
    rejections = sum(
        len(e.entries) for e in cache.recompiles  # one rejection per entry per miss explained
    )
    # The most failures; among equals, the one that failed first.
    top = Counter(counts).most_common(1)[0] if counts else None
    data: dict[str, Any] = {
        "function": cache.where,
        "stats": {
            "hits": stats.hits, "misses": stats.misses, "compiles": stats.compiles,
            "recompiles": stats.recompiles, "restarts": stats.restarts,
            "failures": stats.failures, "fallbacks": stats.fallbacks,
            "invalidations": stats.invalidations, "entries": stats.entries,
            "capture_failures": stats.capture_failures,
            "backend_failures": stats.backend_failures, "frame_path": stats.frame_path,
        },
        "entries": [_entry(e, cache.compile_info(e), loaded, cache.guard_layer(e))
                    for e in cache.entries()],
        "compiles": [info.as_dict() for info in cache.compile_infos()],
        "guard_failure_counts": counts,
        "rejections": rejections,
        "most_rejecting_guard": None if top is None else {"guard": top[0], "failures": top[1]},
        "store": None if cache.store_key is None else {
            "key": cache.store_key, "events": [str(e) for e in events],
        },
        "advice": [a.as_dict() for a in cache.advice()],
        "recompiles": [
            {
                "compile_id": None if r.compile_id is None else str(r.compile_id),
                "outcome": r.outcome,
                "reasons": r.reasons(),
                "made_dynamic": list(r.made_dynamic),
            }
            for r in cache.recompiles
        ],
    }
    return Explanation(data, max_guards)
