"""Picking the two runs: which run of an input ``--runs`` names, and the newest by default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..pipeline import SourceResult
from ..run import Run


class CompareError(ValueError):
    """Two runs cannot be compared as asked (too few runs, the same run twice): a one-line
    message for the command line."""


@dataclass
class RunRef:
    """One run picked from an input: its source's result, the run, the input's name, the number
    ``--runs`` calls it and how many runs the input holds."""

    result: SourceResult
    run: Run
    input: str
    number: int
    of: int


def input_runs(results: Sequence[SourceResult]) -> List[Tuple[SourceResult, Run]]:
    """The runs of one input, in the order ``--runs`` numbers them.

    An input of one source (a file, stdin, one journald process): its runs as the verdict
    numbers them (1, 2, ...). An input of several sources (a journald restart gets a new PID,
    so the verdict lists it as a source of its own; pods of ``kubectl logs --prefix``): every
    run of every source, in the order they start in the input."""
    if len(results) == 1:
        return [(results[0], run) for run in results[0].tracker.runs]
    pairs = [(res, run) for res in results for run in res.tracker.runs if run.records]
    return sorted(pairs, key=lambda p: _first_line(p[1]))


def _first_line(run: Run) -> int:
    """The first line a run's source printed for it (a source's first run opens at line 1 of
    the input, whatever line its process first printed)."""
    if run.index > 1:
        return run.start_line
    lines = [*run.phase_lines.values(), *run.config_lines.values(), *run.fact_lines.values(), *run.markers.values()]
    lines += [f.lines[0] for f in run.failures if f.lines] + [c.line for c in run.consequences]
    if run.stats.first is not None:
        lines.append(run.stats.first)
    return min((line.lineno for line in lines), default=run.start_line)


def _describe_runs(pairs: Sequence[Tuple[SourceResult, Run]], multi: bool) -> str:
    if not multi:
        return ""
    return " (" + "; ".join(f"{i} = {run.source} run {run.index}" for i, (_, run) in enumerate(pairs, 1)) + ")"


def pick_run(results: Sequence[SourceResult], input_name: str, number: Optional[int]) -> RunRef:
    """Run ``number`` of an input (see :func:`input_runs`); None picks its newest run.
    Raises :class:`CompareError` when the input holds no such run, or nothing that is vLLM's."""
    if not any(r.summary.vllm_output for r in results):
        raise CompareError(f"{input_name}: nothing recognisable as vLLM output")
    pairs = input_runs(results)
    multi = len(results) > 1
    dropped = 0 if multi else results[0].tracker.dropped_runs
    total = len(pairs) + dropped
    if number is None:
        number = total
    if multi:
        found = pairs[number - 1] if 1 <= number <= len(pairs) else None
    else:  # the verdict's own numbers: runs past the tracker's cap were dropped, oldest first
        found = next((p for p in pairs if p[1].index == number), None)
    if found is None:
        if 1 <= number <= dropped:
            why = f"only the newest {len(pairs)} runs are kept, runs 1 to {dropped} were dropped"
        else:
            why = (
                "a new run starts at each 'vLLM API server version' / 'non-default args' / engine config "
                "line once the previous run got past its configuration"
            )
        raise CompareError(
            f"{input_name} holds {total} server run{'' if total == 1 else 's'}{_describe_runs(pairs, multi)}, "
            f"so it has no run {number}: {why}"
        )
    res, run = found
    return RunRef(res, run, input_name, number, total)
