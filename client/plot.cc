#include "client/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>
#include <utility>

namespace scantune {
namespace {

const v1::Stats& RankedStats(const v1::Record& record) {
  switch (record.problem().mode()) {
    case v1::FWD: return record.fwd();
    case v1::BWD: return record.bwd();
    default: return record.fwd_bwd();
  }
}

std::string Format(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string Pad(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// The end of the scale: the largest time any bar shows.
double ScaleMs(const BarPlot& plot) {
  double top = plot.floor_ms;
  for (const PlotBar& bar : plot.bars) top = std::max({top, bar.median_ms, bar.q3_ms, bar.floor_ms});
  return top > 0 ? top : 1.0;
}

// A bar of the ranked mode's statistics of one OK record.
PlotBar BarOf(const v1::Record& r, std::string label) {
  const v1::Stats& stats = RankedStats(r);
  PlotBar bar;
  bar.label = std::move(label);
  bar.median_ms = stats.median_ms();
  bar.q1_ms = stats.q1_ms();
  bar.q3_ms = stats.q3_ms();
  // pct_of_copy is the bytes the operator must move over the median at the
  // copy bandwidth, so the floor is the median scaled by it.
  bar.floor_ms = bar.median_ms * r.pct_of_copy() / 100.0;
  bar.record_id = r.id();
  return bar;
}

std::string ShapeLabel(const v1::Shape& s) {
  return std::to_string(s.batch()) + "x" + std::to_string(s.length()) + "x" + std::to_string(s.width());
}

}  // namespace

bool SameProblem(const v1::Problem& a, const v1::Problem& b) {
  auto state = [](const v1::Problem& p) { return p.state_dim() == 0 ? 16u : p.state_dim(); };
  const bool ssm = a.op() == "selective_scan";
  return a.op() == b.op() && a.shape().batch() == b.shape().batch() && a.shape().length() == b.shape().length() &&
         a.shape().width() == b.shape().width() && a.dtype() == b.dtype() && a.mode() == b.mode() &&
         a.has_h0() == b.has_h0() && (!ssm || state(a) == state(b)) && a.delta_bias() == b.delta_bias() &&
         a.delta_softplus() == b.delta_softplus() && a.z_gate() == b.z_gate();
}

BarPlot CandidatePlot(const v1::Problem& problem, const std::string& device_model,
                      const std::vector<v1::Record>& records, const std::vector<v1::Selection>& selections,
                      int max_bars) {
  BarPlot plot;
  plot.device_model = device_model;
  std::set<std::string> seen;
  for (const v1::Record& r : records) {
    if (r.state() != v1::OK || !SameProblem(r.problem(), problem)) continue;
    if (plot.device_model.empty()) plot.device_model = r.device().name();
    if (r.device().name() != plot.device_model || RankedStats(r).median_ms() <= 0) continue;
    if (seen.insert(r.variant()).second) plot.bars.push_back(BarOf(r, r.variant()));
  }
  std::stable_sort(plot.bars.begin(), plot.bars.end(),
                   [](const PlotBar& a, const PlotBar& b) { return a.median_ms < b.median_ms; });
  for (const v1::Selection& s : selections) {
    if (s.device_model() != plot.device_model || !SameProblem(s.problem(), problem)) continue;
    for (PlotBar& bar : plot.bars) {
      if (bar.label == s.variant()) bar.marks.push_back(s.deterministic() ? "deterministic" : "fastest");
    }
  }
  for (PlotBar& bar : plot.bars) std::sort(bar.marks.rbegin(), bar.marks.rend());  // "fastest" first
  if (max_bars > 0 && static_cast<int>(plot.bars.size()) > max_bars) {
    plot.left_out = static_cast<int>(plot.bars.size()) - max_bars;
    plot.bars.resize(max_bars);
  }
  for (const PlotBar& bar : plot.bars) {
    if (bar.floor_ms > 0) {
      plot.floor_ms = bar.floor_ms;
      break;
    }
  }
  return plot;
}

BarPlot SelectionPlot(const std::vector<v1::Selection>& selections, const std::vector<v1::Record>& winners) {
  BarPlot plot;
  plot.label_header = "shape  variant";
  std::vector<std::pair<const v1::Selection*, const v1::Record*>> rows;
  for (const v1::Selection& s : selections) {
    for (const v1::Record& r : winners) {
      if (r.id() == s.record_id() && r.state() == v1::OK && RankedStats(r).median_ms() > 0) rows.emplace_back(&s, &r);
    }
  }
  auto size = [](const v1::Shape& s) {
    return std::make_tuple(uint64_t{s.batch()} * s.length() * s.width(), s.batch(), s.length(), s.width());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return size(a.first->problem().shape()) < size(b.first->problem().shape());
  });
  for (const auto& [s, r] : rows) {
    PlotBar bar = BarOf(*r, ShapeLabel(s->problem().shape()) + "  " + s->variant());
    if (s->stale()) bar.marks.push_back("stale");
    plot.bars.push_back(std::move(bar));
    if (plot.device_model.empty()) plot.device_model = s->device_model();
  }
  return plot;
}

std::string RenderText(const BarPlot& plot, int bar_chars) {
  std::string out = plot.title + "\n";
  if (plot.bars.empty()) return out + "no OK records to plot\n";
  bar_chars = std::max(bar_chars, 10);
  const double scale = ScaleMs(plot);
  auto column = [&](double ms) { return static_cast<int>(std::lround(ms / scale * bar_chars)); };
  if (plot.floor_ms > 0) {
    out += "'|' floor " + Format("%.4f", plot.floor_ms) +
           " ms: the bytes the operator must move at the device's copy bandwidth\n";
  } else {
    out += "'|' each bar's floor: the bytes its problem must move at the device's copy bandwidth\n";
  }
  size_t label_width = plot.label_header.size();
  for (const PlotBar& bar : plot.bars) label_width = std::max(label_width, bar.label.size());
  out += Pad(plot.label_header, label_width) + "  " + Pad("", bar_chars + 1) + "  median ms   x floor  [q1, q3] ms\n";
  for (const PlotBar& bar : plot.bars) {
    std::string cells(bar_chars + 1, ' ');
    const int length = std::min(column(bar.median_ms), bar_chars);
    for (int i = 0; i < length; ++i) cells[i] = '#';
    if (bar.floor_ms > 0) cells[std::min(column(bar.floor_ms), bar_chars)] = '|';
    out += Pad(bar.label, label_width) + "  " + cells + "  " + Format("%9.4f", bar.median_ms) + "  " +
           (bar.floor_ms > 0 ? Format("%7.2fx", bar.median_ms / bar.floor_ms) : std::string("       -")) + "  [" +
           Format("%.4f", bar.q1_ms) + ", " + Format("%.4f", bar.q3_ms) + "]";
    if (!bar.marks.empty()) out += "  <- " + Join(bar.marks, ", ");
    out += "\n";
  }
  if (plot.left_out > 0) out += "(" + std::to_string(plot.left_out) + " slower variants not shown)\n";
  return out;
}

std::string RenderSvg(const BarPlot& plot) {
  constexpr int kRow = 20, kTop = 50, kRight = 120, kPlotWidth = 560;
  size_t label_chars = 7;
  for (const PlotBar& bar : plot.bars) label_chars = std::max(label_chars, bar.label.size());
  const int left = 20 + static_cast<int>(label_chars) * 7;
  const int width = left + kPlotWidth + kRight;
  const int rows = static_cast<int>(plot.bars.size());
  const int height = kTop + std::max(rows, 1) * kRow + 40;
  const double scale = ScaleMs(plot);
  auto x = [&](double ms) { return left + ms / scale * kPlotWidth; };
  std::string svg;
  auto add = [&](const std::string& text) { svg += text + "\n"; };
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
      std::to_string(height) + "\" font-family=\"monospace\" font-size=\"12\">");
  add("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
  add("<text x=\"10\" y=\"20\" font-size=\"14\">" + XmlEscape(plot.title) + "</text>");
  add("<text x=\"10\" y=\"38\" fill=\"#555\">median ms (bar), q1..q3 (whisker); " +
      std::string(plot.floor_ms > 0 ? "dashed: the floor, the operator's bytes at the copy bandwidth"
                                    : "tick: each bar's floor, its bytes at the copy bandwidth") +
      "</text>");
  if (plot.bars.empty()) add("<text x=\"10\" y=\"70\">no OK records to plot</text>");
  for (int i = 0; i < rows; ++i) {
    const PlotBar& bar = plot.bars[i];
    const int y = kTop + i * kRow;
    const bool fastest = std::find(bar.marks.begin(), bar.marks.end(), "fastest") != bar.marks.end();
    const char* fill = fastest ? "#d62728" : !bar.marks.empty() ? "#2ca02c" : "#4c72b0";
    add("<text x=\"" + std::to_string(left - 6) + "\" y=\"" + std::to_string(y + 14) + "\" text-anchor=\"end\">" +
        XmlEscape(bar.label) + "</text>");
    add("<rect x=\"" + std::to_string(left) + "\" y=\"" + std::to_string(y + 3) + "\" width=\"" +
        Format("%.1f", x(bar.median_ms) - left) + "\" height=\"" + std::to_string(kRow - 6) + "\" fill=\"" + fill +
        "\"><title>" + XmlEscape(bar.label + ": " + Format("%.4f", bar.median_ms) + " ms, record " +
                                 std::to_string(bar.record_id)) +
        "</title></rect>");
    if (bar.q3_ms > bar.q1_ms) {
      add("<line x1=\"" + Format("%.1f", x(bar.q1_ms)) + "\" x2=\"" + Format("%.1f", x(bar.q3_ms)) + "\" y1=\"" +
          std::to_string(y + kRow / 2) + "\" y2=\"" + std::to_string(y + kRow / 2) +
          "\" stroke=\"black\" stroke-width=\"1.5\"/>");
    }
    if (plot.floor_ms <= 0 && bar.floor_ms > 0) {
      const std::string fx = Format("%.1f", x(bar.floor_ms));
      add("<line x1=\"" + fx + "\" x2=\"" + fx + "\" y1=\"" + std::to_string(y) + "\" y2=\"" + std::to_string(y + kRow) +
          "\" stroke=\"black\" stroke-width=\"2\"/>");
    }
    add("<text x=\"" + Format("%.1f", x(bar.median_ms) + 6) + "\" y=\"" + std::to_string(y + 14) + "\">" +
        Format("%.4f", bar.median_ms) + (bar.marks.empty() ? "" : " " + XmlEscape(Join(bar.marks, ", "))) +
        "</text>");
  }
  if (plot.floor_ms > 0) {
    const std::string fx = Format("%.1f", x(plot.floor_ms));
    add("<line x1=\"" + fx + "\" x2=\"" + fx + "\" y1=\"" + std::to_string(kTop - 4) + "\" y2=\"" +
        std::to_string(kTop + rows * kRow + 4) + "\" stroke=\"#444\" stroke-dasharray=\"4 3\"/>");
    add("<text x=\"" + fx + "\" y=\"" + std::to_string(kTop + rows * kRow + 18) + "\" text-anchor=\"middle\">floor " +
        Format("%.4f", plot.floor_ms) + " ms</text>");
  }
  if (plot.left_out > 0) {
    add("<text x=\"10\" y=\"" + std::to_string(height - 6) + "\" fill=\"#555\">(" + std::to_string(plot.left_out) +
        " slower variants not shown)</text>");
  }
  add("</svg>");
  return svg;
}

}  // namespace scantune
