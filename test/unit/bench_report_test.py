"""bench_report_test.py - bench/report.py's merge of a cell's trials (ctest
unit_bench_report): every figure the median over the complete trials, and
the event streams' latencies (dicts of percentiles) merged percentile by
percentile; the teams table's p50 and p99 ratios to the limit, each the
median of the per-trial paired ratios. A full run has three or more trials; the quick mode's single
trial never exercised the merge, and sorting dicts crashed the report of
the first full run that held streams."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import report  # noqa: E402


def trial(t, converge, delivery_p99, answer_p50):
    return {"workload": "challenges", "n": 100, "operator": "kopc", "phase": "warm",
            "trial": t, "done": 100, "converge_s": converge,
            "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
            "streams": {"streams": 100, "renewed": 100, "delivered": 100, "within_1s": 100,
                        "delivery_ms": {"p50": 5.0, "p99": delivery_p99, "max": 20.0},
                        "answer_ms": {"p50": answer_p50, "p99": 8.0, "max": 9.0}}}


class MergeTrials(unittest.TestCase):
    def test_streams_merged_per_percentile(self):
        results = {"runs": [trial(1, 5.0, 9.0, 6.0), trial(2, 7.0, 30.0, 2.0),
                            trial(3, 6.0, 12.0, 4.0)]}
        m = report.find(results, "challenges", 100, "kopc", "warm")
        self.assertEqual(m["trials"], 3)
        self.assertEqual(m["converge_s"], 6.0)
        self.assertEqual(m["spread"]["converge_s"], (5.0, 7.0))
        self.assertEqual(m["streams"]["delivery_ms"]["p99"], 12.0)
        self.assertEqual(m["streams"]["answer_ms"]["p50"], 4.0)
        self.assertEqual(m["streams"]["delivered"], 100)
        self.assertEqual(m["streams"]["trials"], 3)

    def test_incomplete_trial_left_out(self):
        bad = trial(4, 60.0, 900.0, 900.0)
        bad["done"] = 99
        results = {"runs": [trial(1, 5.0, 9.0, 6.0), bad]}
        m = report.find(results, "challenges", 100, "kopc", "warm")
        self.assertEqual(m["trials"], 1)
        self.assertEqual(m["converge_s"], 5.0)
        self.assertEqual(m["streams"]["delivery_ms"]["p99"], 9.0)


def claims(op, t, p50, p99):
    return {"workload": "teams", "n": 10, "operator": op, "phase": "claims-fresh", "trial": t,
            "done": 10, "claim_ms" if op == "kopc" else "latency_ms":
            {"p50": p50, "p90": p99, "p99": p99, "max": p99}}


class ClaimsTable(unittest.TestCase):
    def test_p50_and_p99_paired_with_the_limit(self):
        # Per-trial ratios: p50 2.0, 1.0, 4.0 -> median 2.0; p99 1.5, 4.0, 3.0 -> median 3.0.
        # The ratios of the medians would be 25/25 = 1.0 and 40/20 = 2.0.
        results = {"runs": [claims("limit", 1, 10.0, 20.0), claims("kopc", 1, 20.0, 30.0),
                            claims("limit", 2, 25.0, 10.0), claims("kopc", 2, 25.0, 40.0),
                            claims("limit", 3, 40.0, 30.0), claims("kopc", 3, 160.0, 90.0)]}
        row = next(line for line in report.claims_table(results, 10).splitlines()
                   if line.startswith("| kopc, no pool"))
        cells = [c.strip() for c in row.split("|")]
        self.assertEqual(cells[7], "2.00 (1.00–4.00)")  # p50 × the limit's
        self.assertEqual(cells[8], "3.00 (1.50–4.00)")  # p99 × the limit's


if __name__ == "__main__":
    unittest.main()
