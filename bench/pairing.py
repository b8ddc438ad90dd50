"""Ours against a reference, timed in rounds: in each round a batch of ours, then a batch of the reference,
back to back, so that both see the same moment of a shared machine. One ratio per round (ours / reference
of that round); a ratio is reported as the median of the rounds' ratios with their interquartile range,
printed `0.62 [0.58-0.71]` (median [25th percentile - 75th percentile]). bench.py, bench_derivatives.py and
compare.py use it; no assertion anywhere: this only measures."""
from __future__ import annotations

import statistics
import time
import timeit

RATIO_HEADER = "ratio = median [interquartile range] of the per-round ratios ours/reference"


class Rounds:
    """Seconds per call of ours and of the reference, one pair per round (both measured in that round)."""

    def __init__(self, ours, ref):
        self.ours, self.ref = list(ours), list(ref)

    @property
    def ratios(self):
        return [o / r for o, r in zip(self.ours, self.ref)]

    def ratio(self):
        """(median, 25th percentile, 75th percentile) of the per-round ratios."""
        return spread(self.ratios)

    def fmt(self):
        return fmt_spread(self.ratios)

    def scaled(self, k):
        """The same rounds with every time divided by k (per state of a batch of k)."""
        return Rounds([o / k for o in self.ours], [r / k for r in self.ref])

    @property
    def ours_median(self):
        return statistics.median(self.ours)

    @property
    def ref_median(self):
        return statistics.median(self.ref)


def paired_rounds(fo, fp, target=0.4, rounds=9, timer=time.perf_counter):
    """fo and fp called in alternating batches (fo's batch, then fp's, `rounds` times), after a warm-up and
    a calibration that sizes a batch so that all rounds together take about `target` seconds. timer: the
    clock, wall time (time.perf_counter) or this process's CPU time (time.process_time: what the process
    computed, without the time it waited for a core)."""
    for _ in range(3):
        fo()
        fp()
    to, tp = timeit.Timer(fo, timer=timer), timeit.Timer(fp, timer=timer)
    n = 1
    while to.timeit(n) + tp.timeit(n) < 0.02:
        n *= 2
    per = (to.timeit(n) + tp.timeit(n)) / n
    n = max(1, int(target / rounds / per))
    bo, bp = [], []
    for _ in range(rounds):
        bo.append(to.timeit(n) / n)
        bp.append(tp.timeit(n) / n)
    return Rounds(bo, bp)


def spread(values):
    """(median, 25th percentile, 75th percentile) of values (the quartiles interpolated between the
    sorted values, min and max included: statistics.quantiles' "inclusive" method)."""
    values = list(values)
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return med, q1, q3


def fmt_spread(values, digits=2):
    med, q1, q3 = spread(values)
    return f"{med:.{digits}f} [{q1:.{digits}f}-{q3:.{digits}f}]"
