"""The questions the history answers, in SQL over the index: each case and bucket's series over time, the
releases and baseline changes on that time axis, and the margin table with its trend (a bucket's margin is
bound - largest error, ``rules.margin``: what is left before its bound).

A selection (``Selection``) narrows every query the same way: one descriptor's runs (by its name, which stays
while its file is edited; the digest changes with every edit), some cases, runs since a date. The series are
ordered by when a run started, and by its folder's name where two started in the same second.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from typing import Any

from kit.core.noise.drift import t_two_sided_p
from kit.history.rows import Check

# Runs the trend of a bucket's margin is fitted over, and the p-value under which a falling trend is named.
TREND_RUNS = 10
TREND_ALPHA = 0.01


@dataclass(frozen=True)
class Selection:
    name: str | None = None  # the descriptor's name; None: every descriptor
    cases: tuple[str, ...] = ()
    since: _dt.datetime | None = None

    def where(self, runs: str = "r", cases: str = "c") -> tuple[str, list[Any]]:
        """A WHERE clause over the runs table (alias ``runs``) and a table with a case column (``cases``)."""
        terms: list[str] = ["TRUE"]
        args: list[Any] = []
        if self.name is not None:
            terms.append(f"{runs}.name = ?")
            args.append(self.name)
        if self.cases:
            terms.append(f"{cases}.\"case\" IN ({', '.join('?' for _ in self.cases)})")
            args += list(self.cases)
        if self.since is not None:
            terms.append(f"{runs}.started_at >= ?")
            args.append(self.since)
        return " AND ".join(terms), args


@dataclass
class MarginRow:
    """One case and bucket, of its first tokens or (``check`` Check.DECODE) of its worst decode step against that step's
    own bound: where its margin (bound - error) stands now and where it is heading."""

    case: str
    bucket: int
    runs: int
    last_run: str
    last_release: str | None
    max_error: float | None
    bound: float | None
    margin: float | None  # bound - error (rules.margin)
    ratio: float | None  # error / bound (rules.ratio)
    least_margin: float | None
    slope: float | None  # margin per run, least squares over the last TREND_RUNS runs
    p_value: float | None  # of that slope being zero
    shrinking: bool
    flag: str | None = None  # the step a change-point test found in its error, in words
    step_run: str | None = None  # the first run after that step
    new_step: bool = False  # the newest run is the one that made that step significant
    check: Check = Check.FIRST_TOKEN
    # What the change-point test reads, oldest first: its largest errors; of a decode series, its worst step's
    # error / bound (the worst step may be another step, under another bound, from run to run).
    values: list[float] = field(default_factory=list, repr=False)
    run_names: list[str] = field(default_factory=list, repr=False)  # the run of each
    labels: list[str] = field(default_factory=list, repr=False)  # the run (and release) of each, for a reader

    @property
    def series(self) -> str:
        """Its name for a reader: the case, or "<case> decode" for its decode steps."""
        return series_name(self.case, self.check)

    @property
    def trend(self) -> str:
        """Its trend per run for a reader, signed; "—" where none can be computed (a series of one run)."""
        return "—" if self.slope is None else f"{self.slope:+.2g}"

    def to_dict(self) -> dict:
        """The row as `history --json` prints it, less the per-run series the notebook plots."""
        return {k: v for k, v in self.__dict__.items() if k not in ("values", "run_names", "labels")}


def series_name(case: str, check: str) -> str:
    """A series' name for a reader: the case for its first tokens, "<case> decode" for its decode steps."""
    return f"{case} decode" if check == Check.DECODE else case


_SERIES = """
SELECT r.run, r.kind, r.started_at, r.release, r.name, c."case", c.status, c.golden_sha256, c.record_sha256,
       b.bucket, b.prompts, b.max_error, b.mean_error, b.bound, b.margin, b.ratio, b."check"
FROM buckets b JOIN cases c ON b.run = c.run AND b."case" = c."case" JOIN runs r ON r.run = b.run
WHERE {where}
ORDER BY c."case", b."check" DESC, b.bucket, r.started_at NULLS FIRST, r.run
"""


def series(con: Any, sel: Selection) -> Any:
    """Per case, check (first token, decode), bucket and run: the largest and mean error, the bound, the margin
    (a DataFrame)."""
    where, args = sel.where("r", "c")
    return con.execute(_SERIES.format(where=where), args).df()


def changes(con: Any, sel: Selection) -> list[dict]:
    """The points of the time axis where something a reader should see changed: a release (the first run of
    each; ``case`` None, since it is every case's), a case's golden or calibration record (the first run of
    the case that stood on the new one)."""
    where, args = sel.where("r", "c")
    releases = con.execute(f"""
        WITH s AS (
            SELECT DISTINCT r.run, r.started_at, r.release FROM runs r JOIN cases c ON c.run = r.run WHERE {where}),
        t AS (SELECT *, lag(release) OVER w AS prev, row_number() OVER w AS n FROM s
              WINDOW w AS (ORDER BY started_at NULLS FIRST, run))
        SELECT run, started_at, release, prev FROM t WHERE n > 1 AND release IS DISTINCT FROM prev""",
                           args).fetchall()
    out = [{"run": run, "started_at": _iso(at), "case": None, "kind": "release",
            "text": f"release {rel or 'none'} (was {prev or 'none'})"} for run, at, rel, prev in releases]
    baselines = con.execute(f"""
        WITH s AS (
            SELECT r.run, r.started_at, c."case", c.golden_sha256, c.record_sha256,
                   lag(c.golden_sha256) OVER w AS prev_golden, lag(c.record_sha256) OVER w AS prev_record,
                   row_number() OVER w AS n
            FROM cases c JOIN runs r ON r.run = c.run WHERE {where}
            WINDOW w AS (PARTITION BY c."case" ORDER BY r.started_at NULLS FIRST, r.run))
        SELECT run, started_at, "case", golden_sha256, prev_golden, record_sha256, prev_record
        FROM s WHERE n > 1 AND (golden_sha256 IS DISTINCT FROM prev_golden
                                OR record_sha256 IS DISTINCT FROM prev_record)""", args).fetchall()
    for run, at, case, golden, prev_golden, record, prev_record in baselines:
        if golden != prev_golden:
            out.append({"run": run, "started_at": _iso(at), "case": case, "kind": "baseline",
                        "text": f"golden {_short(golden)} (was {_short(prev_golden)})"})
        if record != prev_record:
            out.append({"run": run, "started_at": _iso(at), "case": case, "kind": "baseline",
                        "text": f"calibration record {_short(record)} (was {_short(prev_record)})"})
    return sorted(out, key=lambda c: (c["started_at"] or "", c["run"], c["case"] or ""))


def margins(con: Any, sel: Selection, trend_runs: int = TREND_RUNS) -> list[MarginRow]:
    """Per case, check and bucket with a bound: the last run's margin, the least over all runs, and the
    least-squares slope of the margin over the last ``trend_runs`` runs; shrinking when it falls with
    p < TREND_ALPHA."""
    where, args = sel.where("r", "c")
    rows = con.execute(f"""
        WITH s AS (
            SELECT c."case", b."check", b.bucket, r.run, r.release, b.max_error, b.bound, b.margin, b.ratio,
                   row_number() OVER (PARTITION BY c."case", b."check", b.bucket
                                      ORDER BY r.started_at DESC NULLS LAST, r.run DESC) AS back
            FROM buckets b JOIN cases c ON b.run = c.run AND b."case" = c."case" JOIN runs r ON r.run = b.run
            WHERE {where} AND b.bound IS NOT NULL)
        SELECT "case", "check", bucket, count(*) AS runs,
               arg_min(run, back) AS last_run, arg_min(release, back) AS last_release,
               arg_min(max_error, back), arg_min(bound, back), arg_min(margin, back), arg_min(ratio, back),
               min(margin),
               regr_slope(margin, -back) FILTER (WHERE back <= ?) AS slope,
               regr_r2(margin, -back) FILTER (WHERE back <= ?) AS r2,
               count(margin) FILTER (WHERE back <= ?) AS n,
               list(max_error ORDER BY back DESC), list(ratio ORDER BY back DESC), list(run ORDER BY back DESC),
               list(release ORDER BY back DESC)
        FROM s GROUP BY "case", "check", bucket ORDER BY "case", "check" DESC, bucket""",
                       [*args, trend_runs, trend_runs, trend_runs]).fetchall()
    out = []
    for (case, check, bucket, runs, last_run, last_release, err, bound, margin, ratio, least, slope, r2, n,
         errors, ratios, run_names, releases) in rows:
        slope = fitted_slope(slope, n)
        p = slope_p_value(r2, n) if slope is not None else None
        values = ratios if check == Check.DECODE else errors
        out.append(MarginRow(
            case, bucket, runs, last_run, last_release, err, bound, margin, ratio, least, slope, p,
            shrinking=bool(slope is not None and slope < 0 and p is not None and p < TREND_ALPHA), check=check,
            values=[math.nan if v is None else v for v in values], run_names=list(run_names),
            labels=[f"release {rel} / run {name}" if rel else f"run {name}" for name, rel in zip(run_names, releases)]))
    return out


def fitted_slope(slope: float | None, n: int) -> float | None:
    """A least-squares slope, or None where it cannot be computed: DuckDB's regr_slope of a single point is NaN,
    not NULL, and a NaN would read as a trend ("+nan") in every table and as invalid JSON."""
    return slope if slope is not None and n >= 2 and math.isfinite(slope) else None


def slope_p_value(r2: float | None, n: int) -> float | None:
    """The two-sided p-value of a least-squares slope of ``n`` points being zero, from its R²."""
    if r2 is None or n < 3:
        return None
    if r2 >= 1.0:
        return 0.0
    t = math.sqrt(r2 * (n - 2) / (1.0 - r2))
    return t_two_sided_p(t, n - 2)


def lines(con: Any) -> list[dict]:
    """Every line about what could not be read or was not trusted, in location order."""
    rows = con.execute("SELECT location, kind, text FROM lines ORDER BY location, kind, text").fetchall()
    return [{"location": loc, "kind": kind, "text": text} for loc, kind, text in rows]


def count_runs(con: Any, sel: Selection) -> int:
    """How many runs match the selection: what the history says before its table, and whether a selection matched
    none."""
    where, args = sel.where("r", "c")
    found = con.execute(f"""SELECT count(DISTINCT r.run) FROM runs r LEFT JOIN cases c ON c.run = r.run
                            WHERE {where}""", args).fetchone()
    return int(found[0]) if found else 0


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, _dt.datetime) else (None if value is None else str(value))
