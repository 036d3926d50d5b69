"""perf/benchlib's run files (perf/results/<script>/<run id>.jsonl): an old appended results file
split by run id keeps every line and its order, rotation compresses old runs without changing what
a reader loads, and a report reads a split file as it read the appended one. Standard library only;
no server is started (the runner passes one; it is not used)."""
import gzip
import json
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "perf"))
import benchlib  # noqa: E402

ROWS = [{"run": "20261130T042027-700a", "workload": "get64", "v": 1},
        {"run": "20261130T042027-700a", "workload": "put16", "v": 2},
        {"run": "20261202T064850-aacd", "workload": "get64", "v": 3},
        {"run": "20261203T014241-78dc", "workload": "get64", "v": 4.5}]


class RunFiles(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="percore-results-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def old_file(self, rows, name="compare.jsonl"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return path

    def test_a_split_file_loads_the_same_rows_in_the_same_order(self):
        benchlib.split(self.old_file(ROWS))
        self.assertEqual(benchlib.load_rows("compare", self.dir), ROWS)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "compare.jsonl")))

    def test_a_split_file_gives_each_run_a_file_and_compresses_all_but_the_newest_two(self):
        benchlib.split(self.old_file(ROWS))
        names = sorted(os.listdir(os.path.join(self.dir, "compare")))
        self.assertEqual(names, ["20261130T042027-700a.jsonl.gz", "20261202T064850-aacd.jsonl",
                                 "20261203T014241-78dc.jsonl"])

    def test_rows_without_a_run_id_go_together_under_the_first_ones_time(self):
        rows = [{"time": "2026-12-03T08:18:27Z", "v": 1}, {"time": "2026-12-03T08:23:36Z", "v": 2}]
        benchlib.split(self.old_file(rows, "backup.jsonl"))
        self.assertEqual(os.listdir(os.path.join(self.dir, "backup")),
                         ["20261203T081827-before-run-ids.jsonl"])
        self.assertEqual(benchlib.load_rows("backup", self.dir), rows)

    def test_compression_gives_the_same_bytes_for_the_same_rows(self):
        for sub in ("a", "b"):
            os.makedirs(os.path.join(self.dir, sub))
            for run in ("20261201T000000-0000", "20261202T000000-0000", "20261203T000000-0000"):
                with open(benchlib.run_file("compare", run, os.path.join(self.dir, sub)), "w") as f:
                    f.write(json.dumps(ROWS[0]) + "\n")
            benchlib.rotate("compare", os.path.join(self.dir, sub))
        old = [os.path.join(self.dir, sub, "compare", "20261201T000000-0000.jsonl.gz") for sub in ("a", "b")]
        self.assertEqual(open(old[0], "rb").read(), open(old[1], "rb").read())
        with gzip.open(old[0], "rt") as f:
            self.assertEqual(json.loads(f.read()), ROWS[0])

    def test_a_new_run_id_sorts_after_every_recorded_one(self):
        self.assertGreater(benchlib.new_run_id(), max(r["run"] for r in ROWS))

    def test_the_report_picks_the_newest_run_of_each_workload_from_run_files(self):
        import report
        benchlib.split(self.old_file(ROWS))
        picked = report.pick_run(benchlib.load_rows("compare", self.dir), None)
        self.assertEqual(picked, [ROWS[1], ROWS[3]])


if __name__ == "__main__":
    unittest.main()
