// Plots of the calibration database for `scantune plot`: one problem's
// candidates as horizontal bars of their median time (the newest OK record of
// each variant, one device model), with the q1..q3 spread, the selections
// marked and the memory floor (the record's bytes at the device's copy
// bandwidth) as a line. Rendered as text for the terminal or as an SVG file.
// Pure functions over records; no I/O. Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "proto/scantune.pb.h"

namespace scantune {

struct PlotBar {
  std::string label;        // the variant
  double median_ms = 0;
  double q1_ms = 0;
  double q3_ms = 0;
  double floor_ms = 0;      // 0: unknown
  int64_t record_id = 0;
  std::vector<std::string> marks;  // "fastest", "deterministic": the selections it is
};

struct BarPlot {
  std::string title;
  std::string label_header = "variant";
  std::string device_model;
  std::vector<PlotBar> bars;  // fastest first
  double floor_ms = 0;        // the one floor of every bar (0: unknown, or each bar its own)
  int left_out = 0;           // variants beyond the plotted ones
};

// The bars of `problem` (op, shape, dtype, mode, h0 and selective_scan's
// options must all match) from `records` given newest first, as ListRecords
// gives them: for each variant its newest OK record of `device_model` (empty:
// the model of the newest matching OK record), the ranked mode's statistics.
// At most `max_bars`, fastest first; the selections of that model and problem
// mark their bars.
BarPlot CandidatePlot(const v1::Problem& problem, const std::string& device_model,
                      const std::vector<v1::Record>& records, const std::vector<v1::Selection>& selections,
                      int max_bars);

// The selections (of one device model, op, dtype and mode: the caller's
// filter) across their shapes, smallest first: one bar per selection from its
// winning record (`winners`, by record id), labelled "shape  variant", each with
// its own floor; a stale selection marked so.
BarPlot SelectionPlot(const std::vector<v1::Selection>& selections, const std::vector<v1::Record>& winners);

// Same problem, field by field (selective_scan's N: 0 means 16).
bool SameProblem(const v1::Problem& a, const v1::Problem& b);

// Rows of `label  bar  median  x floor  [q1, q3]  marks`, bars of at most
// `bar_chars` characters on one linear scale from 0, each bar's floor as '|'.
std::string RenderText(const BarPlot& plot, int bar_chars);

// A standalone SVG document of the same plot.
std::string RenderSvg(const BarPlot& plot);

}  // namespace scantune
