"""Benchmark: the GLOBAL_STATE guard with torch loaded, alone and inside a whole
``jitguard.specialize`` cache hit on a one-tensor function, with the "torch" group
([Note: The torch state group]) and, in the same process, without it.

Run by hand (not a timed test):

    .venv/bin/python bench/bench_global_state.py            # full run
    .venv/bin/python bench/bench_global_state.py --quick    # short run
    .venv/bin/python bench/bench_global_state.py --json     # last line: one JSON object

Method: ``torch.set_num_threads(1)``; each figure is a ``timeit`` batch of about 10 ms (3 ms
with ``--quick``) with gc disabled, repeated 41 times (11 with ``--quick``); the variants are
timed one after the other within each repetition, in a rotating order; figures are medians
over the repetitions, in nanoseconds per call. The clock is the thread's CPU time
(``time.thread_time``), so time the process spends descheduled on a shared machine does not
count; ``--wall`` uses ``time.perf_counter`` instead.

* ``check, group``: the generated check of one GLOBAL_STATE guard (the group's checker);
* ``check, per-state (14 states)``: the same guard built against a registry holding only the
  fourteen torch states registered before the group existed, and no group: one Python read
  and compare per state, which is what GLOBAL_STATE emitted before;
* ``check, per-state (all states)``: every registered state read one by one (what the check
  falls back to when the group is not usable);
* ``check, old TORCH_GLOBAL_STATE``: a replica of the retired TORCH_GLOBAL_STATE kind's
  generated check (``GlobalStateGuard().check() and extras() == expected``: no autocast dtype
  reads, so a looser meaning), for comparison;
* ``reference``: the kind's ``holds`` (one read per state, in a loop);
* ``hit``: ``jitguard.specialize(f)`` with ``f = lambda x: x`` (the default compiler: the
  artifact is ``f``) called on one tensor, minus the plain call ``f(x)``; ``group`` /
  ``per-state (14 states)`` as above, and ``global_state=False`` without the ambient guard.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import timeit
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
from _timing import meta, time_variants  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch  # noqa: E402
from jitguard import GlobalStateSource, GuardBuilder, compile_guards, global_states  # noqa: E402
from jitguard._src.compiler import global_state_kind  # noqa: E402
from jitguard._src.compiler.kinds import EmitContext, GuardKind, register_guard_kind  # noqa: E402
from jitguard._src.global_state import GlobalStateRegistry  # noqa: E402

# The torch states registered before the group and the states it added.
BEFORE = (
    "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_gpu_dtype",
    "autocast_cpu_dtype", "autocast_cache_enabled", "deterministic_algorithms",
    "deterministic_algorithms_warn_only", "default_dtype", "inference_mode",
    "torch_function_enabled", "torch_function_all_disabled", "torch_function_mode_stack",
    "default_device",
)


_is_inference = torch.is_inference_mode_enabled
_len_stack = torch._C._len_torch_function_stack


def _extras() -> tuple[Any, ...]:
    if not _len_stack():
        return (_is_inference(),)
    return (_is_inference(), jitguard.torch.torch_function_mode_types(), jitguard.torch.default_device())


class OldTorchGlobalState(GuardKind):
    """The retired TORCH_GLOBAL_STATE kind's check, for timing only."""

    name = "BENCH_OLD_TORCH_GLOBAL_STATE"
    reads_value = False

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        from torch._C._dynamo.guards import GlobalStateGuard

        return (GlobalStateGuard(), _extras())

    def holds(self, value: Any, params: Any) -> bool:
        return bool(params[0].check() and _extras() == params[1])

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        return (
            f"{ctx.const(params[0].check, 'global_state_guard')}() "
            f"and {ctx.const(_extras, 'ambient_extras')}() == {ctx.const(params[1], 'extras')}"
        )

    def code(self, name: Any, params: Any) -> str:
        return "old TORCH_GLOBAL_STATE unchanged"


OLD_TORCH_GLOBAL_STATE = register_guard_kind(OldTorchGlobalState(), replace=True)


@contextmanager
def registry(names: tuple[str, ...] | None) -> Iterator[None]:
    """GLOBAL_STATE guards built inside read a registry of these states and no group (all
    registered states when None)."""
    reg = GlobalStateRegistry()
    for s in global_states.states():
        if names is None or s.name in names:
            reg.register(s.name, s.read, write=s.write, guarded=s.guarded, describe=s.describe)
    saved = global_state_kind.global_states
    global_state_kind.global_states = reg  # type: ignore[attr-defined]
    try:
        yield
    finally:
        global_state_kind.global_states = saved  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--wall", action="store_true", help="time with perf_counter")
    ap.add_argument("--json", action="store_true", help="end with one JSON line")
    args = ap.parse_args()
    clock = time.perf_counter if args.wall else time.thread_time
    reps, target = (11, 0.003) if args.quick else (41, 0.01)
    torch.set_num_threads(1)

    def state_check(kind: Any = GuardBuilder.GLOBAL_STATE) -> Any:
        guard = GlobalStateSource().make_guard(kind)
        return compile_guards([guard], f_locals={}, arg_names=[])

    def f(x: Any) -> Any:
        return x

    x = torch.ones(3)
    group = state_check()
    hit_group = jitguard.specialize(f)
    hit_group(x)
    with registry(BEFORE):
        before = state_check()
        hit_before = jitguard.specialize(f)
        hit_before(x)
    with registry(None):
        per_state = state_check()
    old_torch = state_check(OLD_TORCH_GLOBAL_STATE)
    hit_none = jitguard.specialize(f, global_state=False)
    hit_none(x)
    assert "___check_torch" in group.source and "___check_torch" not in before.source
    assert "___check_torch" not in per_state.source
    for c in (group, before, per_state, old_torch):
        assert c() and c.reference()
    assert all(sf.cache.stats().compiles == 1 for sf in (hit_group, hit_before, hit_none))

    timed: dict[str, Callable[[], Any]] = {
        "check, group": group,
        "check, per-state (14 states)": before,
        "check, per-state (all states)": per_state,
        "check, old TORCH_GLOBAL_STATE": old_torch,
        "reference": group.reference,
        "plain call": lambda: f(x),
        "hit, group": lambda: hit_group(x),
        "hit, per-state (14 states)": lambda: hit_before(x),
        "hit, global_state=False": lambda: hit_none(x),
    }
    timers = {k: timeit.Timer(v, timer=clock) for k, v in timed.items()}
    results = time_variants(timers, reps, target, order="rotate")
    names = list(timed)
    assert all(sf.cache.stats().compiles == 1 for sf in (hit_group, hit_before, hit_none))
    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"torch {torch.__version__}  python {sys.version.split()[0]}  reps={reps}  "
        f"clock={'perf_counter' if args.wall else 'thread_time'}"
    )
    print(f"guarded states: {len(global_states.guarded())} (before: {len(BEFORE)})")
    for k in names:
        if k.startswith(("check", "reference")):
            print(f"{k:36s} {med[k]:8.0f} ns")
    plain = med["plain call"]
    for k in names:
        if k.startswith("hit"):
            print(f"{k:36s} {med[k] - plain:8.0f} ns  (call {med[k]:.0f}, plain {plain:.0f})")
    if args.json:
        print(json.dumps({
            "meta": {
                **meta(reps, target, args.quick), "torch": torch.__version__,
                "clock": "perf_counter" if args.wall else "thread_time",
                "guarded_states": len(global_states.guarded()),
            },
            # ns per call: medians of the checks; for the hits, the whole call minus the
            # plain call of f.
            "check_ns": {k: med[k] for k in names if k.startswith(("check", "reference"))},
            "hit_overhead_ns": {k: med[k] - plain for k in names if k.startswith("hit")},
            "plain_call_ns": plain,
        }, sort_keys=True))


if __name__ == "__main__":
    main()
