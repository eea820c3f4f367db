"""bench/block/seed000.py without a GPU or torch: the block's parameter count
against every row of seed 000 (the architecture is the seed's only if each
count matches), the statistics against the seed's own samples, the AB/BA
order, the report's fields against the seed's, and the table's ratios."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.environ["SCANTUNE_BLOCK_DIR"])
import seed000  # noqa: E402

SEED = seed000.load_seed(os.environ["SCANTUNE_SEED_000"])


def fake_samples(base):
    return [base + 0.01 * k for k in range(5)]


class Seed000Test(unittest.TestCase):
    def test_the_cases_are_the_seeds(self):
        self.assertEqual([c[0] for c in seed000.CASES], [c["case"] for c in SEED["cases"]])
        for (name, batch, length, width, rnn_width, depth), theirs in zip(seed000.CASES, SEED["cases"]):
            self.assertEqual((batch, length), (theirs["batch"], theirs["length"]), name)
            self.assertEqual({"width": width, "rnn_width": rnn_width, "depth": depth}, theirs["config"], name)
        with self.assertRaises(ValueError):
            seed000.case("state4096_huge")

    def test_parameter_counts_match_every_seed_row(self):
        for c in SEED["cases"]:
            width, rnn_width = c["config"]["width"], c["config"]["rnn_width"]
            self.assertEqual(seed000.shared_parameters(width, rnn_width), c["shared_parameters_copied"], c["case"])
            for row in c["rows"]:
                self.assertEqual(seed000.block_parameters(row["architecture"], width, rnn_width), row["parameters"],
                                 (c["case"], row["architecture"]))
        # seed 001's mixer counts at W = 2048: 530,432 (RG-LRU) and 6,148 (SAMU)
        self.assertEqual(seed000.mixer_parameters("rglru", 2048), 530432)
        self.assertEqual(seed000.mixer_parameters("samu", 2048), 6148)
        with self.assertRaises(ValueError):
            seed000.mixer_parameters("mamba", 2048)

    def test_statistics_reproduce_the_seeds_from_its_samples(self):
        for c in SEED["cases"]:
            for row in c["rows"]:
                for field, _ in seed000.MODES:
                    theirs = row[field]
                    ours = seed000.sample_stats(theirs["samples_ms"])
                    self.assertEqual(set(ours), set(theirs))
                    for key, value in theirs.items():
                        if key != "samples_ms":
                            self.assertAlmostEqual(ours[key], value, places=12, msg=(c["case"], field, key))

    def test_rounds_alternate_ab_and_ba(self):
        self.assertEqual([seed000.round_order(k) for k in range(4)],
                         [("rglru", "samu"), ("samu", "rglru"), ("rglru", "samu"), ("samu", "rglru")])

    def make_report(self):
        memory = {"baseline_allocated": 100, "baseline_reserved": 200, "peak_allocated": 1100, "peak_reserved": 1700}
        rows = [seed000.make_row("rglru", "lookback_v2_t256_s8_i16_o3", None,
                                 {"forward": fake_samples(2.0), "backward": fake_samples(4.0),
                                  "forward_backward": fake_samples(6.0)}, memory, 50896896),
                seed000.make_row("samu", "chunked_v8_t256_c32_l64_y1", "fp32_mean_sigmoid_coords_in_backend",
                                 {"forward": fake_samples(1.0), "backward": fake_samples(3.0),
                                  "forward_backward": fake_samples(3.0)}, memory, 50372612)]
        case = seed000.make_case("state2048_short", 50366464, rows)
        return seed000.make_report({"torch": "2.11", "cuda": "13.0", "gpu": "NVIDIA H200"}, [case])

    def test_the_report_has_every_field_of_the_seed(self):
        report = json.loads(json.dumps(self.make_report()))  # it serialises
        self.assertEqual(set(report), set(SEED))
        self.assertEqual(report["protocol"], SEED["protocol"])
        self.assertEqual(set(report["environment"]), set(SEED["environment"]))
        ours, theirs = report["cases"][0], SEED["cases"][0]
        self.assertEqual(set(ours), set(theirs))
        self.assertEqual(ours["config"], theirs["config"])
        for mine, seeds in zip(ours["rows"], theirs["rows"]):
            self.assertEqual(set(mine), set(seeds))
            self.assertEqual(mine["architecture"], seeds["architecture"])
        row = ours["rows"][0]
        self.assertEqual(row["peak_allocated_delta_bytes"], 1000)
        self.assertEqual(row["peak_reserved_delta_bytes"], 1500)
        self.assertAlmostEqual(row["forward"]["median_ms"], 2.02)

    def test_the_table_puts_our_ratio_beside_the_seeds(self):
        ratios = seed000.samu_ratios(self.make_report())["state2048_short"]
        self.assertAlmostEqual(ratios["forward"], 1.02 / 2.02)
        self.assertAlmostEqual(ratios["forward_backward"], 3.02 / 6.02)
        table = seed000.format_table(self.make_report(), SEED)
        self.assertIn("lookback_v2_t256_s8_i16_o3", table)
        self.assertIn("SAMU / RG-LRU (fwd / bwd / fwd_bwd): 0.505 / 0.751 / 0.502", table)
        self.assertIn("seed: 0.915 / 0.954 / 0.932", table)  # seed 000's state2048_short (H800)
        self.assertNotIn("seed:", seed000.format_table(self.make_report()))


if __name__ == "__main__":
    unittest.main()
