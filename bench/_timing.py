"""The timing loop the benchmarks share: ``timeit`` batches calibrated to a target length,
the compared variants alternated within each repetition, gc disabled while timing.

The bench scripts run as ``python bench/bench_x.py``, so this folder is on ``sys.path`` and
they ``import _timing``.
"""

from __future__ import annotations

import gc
import platform
import statistics
import timeit
from collections.abc import Iterable, Mapping
from typing import Any, Literal

# A statement that fast (an empty one) would otherwise grow its batch without end.
MAX_CALIBRATION_NUMBER = 1 << 22


#: Untimed runs of each variant before calibrating (``time_variants``).
WARMUP_RUNS = 8


def calibrate(timer: timeit.Timer, batch_s: float) -> int:
    """How many runs of ``timer``'s statement make one batch of about ``batch_s`` seconds:
    trial batches grow fourfold until one takes a quarter of that, then are scaled up."""
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= batch_s / 4 or number >= MAX_CALIBRATION_NUMBER:
            return max(1, int(number * batch_s / max(t, 1e-9)))
        number *= 4


def _pass_order(keys: list[str], n: int, order: Literal["reverse", "rotate"]) -> Iterable[str]:
    if order == "reverse":
        return keys if n % 2 == 0 else reversed(keys)
    shift = n % len(keys)
    return keys[shift:] + keys[:shift]


def time_variants(
    timers: Mapping[str, timeit.Timer],
    reps: int,
    batch_s: float,
    *,
    per: int = 1,
    inner: int = 1,
    order: Literal["reverse", "rotate"] = "reverse",
) -> dict[str, list[float]]:
    """ns per call of each variant (a batch's time divided by its runs and by ``per``), one
    sample per repetition: the best of ``inner`` batches. Each pass times every variant once,
    one after the other; ``order`` says how the order changes from one pass to the next
    (passes counted over all repetitions): ``"reverse"``, reversed on every other pass;
    ``"rotate"``, rotated by one. gc is collected, then disabled while timing."""
    # one untimed warm-up batch each: a variant's first calls may pay one-off work (a
    # structure snapshot retaken after another variant's compile changed a module's
    # globals), which would make calibration pick batches of a few calls
    for t in timers.values():
        t.timeit(WARMUP_RUNS)
    numbers = {k: calibrate(t, batch_s) for k, t in timers.items()}
    keys = list(timers)
    out: dict[str, list[float]] = {k: [] for k in keys}
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for rep in range(reps):
            best = dict.fromkeys(keys, float("inf"))
            for i in range(inner):
                for k in _pass_order(keys, rep * inner + i, order):
                    t = timers[k].timeit(numbers[k]) / numbers[k] / per * 1e9
                    best[k] = min(best[k], t)
            for k in keys:
                out[k].append(best[k])
    finally:
        if was:
            gc.enable()
    return out


def median(xs: Iterable[float]) -> float:
    return float(statistics.median(xs))


def meta(reps: int, batch_s: float, quick: bool) -> dict[str, Any]:
    """A run's settings and machine, as the ``meta`` of a benchmark's JSON."""
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "reps": reps,
        "batch_s": batch_s,
        "quick": quick,
    }
