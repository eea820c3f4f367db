// `scantune plot`'s bars: which records become bars, their order and marks,
// and both renderings.
#include "client/plot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace scantune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Problem SamuProblem(bool h0 = false) {
  v1::Problem p;
  p.set_op("samu");
  p.mutable_shape()->set_batch(4);
  p.mutable_shape()->set_length(2048);
  p.mutable_shape()->set_width(2048);
  p.set_dtype(v1::BF16);
  p.set_mode(v1::FWD_BWD);
  p.set_has_h0(h0);
  return p;
}

// Records are given newest first (ids descending), as ListRecords lists them.
v1::Record Rec(int64_t id, const std::string& variant, double median_ms, v1::ResultState state = v1::OK,
               const std::string& model = "NVIDIA H200", const v1::Problem& problem = SamuProblem()) {
  v1::Record r;
  r.set_id(id);
  r.mutable_device()->set_name(model);
  *r.mutable_problem() = problem;
  r.set_variant(variant);
  r.set_state(state);
  r.mutable_fwd_bwd()->set_median_ms(median_ms);
  r.mutable_fwd_bwd()->set_q1_ms(median_ms * 0.98);
  r.mutable_fwd_bwd()->set_q3_ms(median_ms * 1.03);
  r.mutable_fwd()->set_median_ms(median_ms / 3);  // not the ranked mode: never plotted
  r.set_pct_of_copy(0.0553 / median_ms * 100.0);  // one floor, 0.0553 ms
  return r;
}

v1::Selection Sel(const std::string& variant, bool deterministic, const std::string& model = "NVIDIA H200") {
  v1::Selection s;
  s.set_device_model(model);
  *s.mutable_problem() = SamuProblem();
  s.set_variant(variant);
  s.set_deterministic(deterministic);
  return s;
}

std::vector<std::string> Labels(const BarPlot& plot) {
  std::vector<std::string> labels;
  for (const PlotBar& bar : plot.bars) labels.push_back(bar.label);
  return labels;
}

TEST(CandidatePlot, NewestOkRecordOfEachVariantOfOneModelFastestFirst) {
  const std::vector<v1::Record> records = {
      Rec(9, "b", 0.140),                                         // newest b: plotted
      Rec(8, "c", 0.090, v1::WRONG_RESULT),                       // not OK: never a bar
      Rec(7, "a", 0.110, v1::OK, "NVIDIA H800"),                  // another model
      Rec(6, "a", 0.105),
      Rec(5, "b", 0.100),                                         // an older b: not plotted
      Rec(4, "d", 0.120, v1::OK, "NVIDIA H200", SamuProblem(true)),  // with h0: another problem
  };
  BarPlot plot = CandidatePlot(SamuProblem(), "", records, {Sel("a", false), Sel("b", true)}, 30);
  EXPECT_EQ(plot.device_model, "NVIDIA H200") << "the newest matching record's model";
  EXPECT_EQ(Labels(plot), (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(plot.bars[0].median_ms, 0.105);
  EXPECT_EQ(plot.bars[0].record_id, 6);
  EXPECT_DOUBLE_EQ(plot.bars[1].median_ms, 0.140);
  EXPECT_EQ(plot.bars[1].record_id, 9);
  EXPECT_EQ(plot.bars[0].marks, std::vector<std::string>{"fastest"});
  EXPECT_EQ(plot.bars[1].marks, std::vector<std::string>{"deterministic"});
  EXPECT_NEAR(plot.floor_ms, 0.0553, 1e-12);
  EXPECT_NEAR(plot.bars[1].floor_ms, 0.0553, 1e-12);

  BarPlot h800 = CandidatePlot(SamuProblem(), "NVIDIA H800", records, {Sel("a", false)}, 30);
  EXPECT_EQ(Labels(h800), std::vector<std::string>{"a"});
  EXPECT_DOUBLE_EQ(h800.bars[0].median_ms, 0.110);
  EXPECT_TRUE(h800.bars[0].marks.empty()) << "an H200 selection does not mark an H800 bar";

  BarPlot top1 = CandidatePlot(SamuProblem(), "", records, {}, 1);
  EXPECT_EQ(Labels(top1), std::vector<std::string>{"a"});
  EXPECT_EQ(top1.left_out, 1);
}

TEST(CandidatePlot, OneVariantSelectedTwiceCarriesBothMarks) {
  BarPlot plot = CandidatePlot(SamuProblem(), "", {Rec(1, "a", 0.1)}, {Sel("a", true), Sel("a", false)}, 30);
  ASSERT_EQ(plot.bars.size(), 1u);
  EXPECT_EQ(plot.bars[0].marks, (std::vector<std::string>{"fastest", "deterministic"}));
}

TEST(SelectionPlot, OneBarPerSelectionSmallestShapeFirstEachWithItsOwnFloor) {
  auto at = [](uint32_t batch, uint32_t length) {
    v1::Problem p = SamuProblem();
    p.mutable_shape()->set_batch(batch);
    p.mutable_shape()->set_length(length);
    return p;
  };
  std::vector<v1::Selection> selections = {Sel("big", false), Sel("small", false), Sel("lost", false)};
  *selections[0].mutable_problem() = at(1, 32768);
  selections[0].set_record_id(11);
  *selections[1].mutable_problem() = at(4, 2048);
  selections[1].set_record_id(12);
  selections[1].set_stale(true);
  selections[2].set_record_id(99);  // its record is not given: no bar
  std::vector<v1::Record> winners = {Rec(11, "big", 0.317, v1::OK, "NVIDIA H200", at(1, 32768)),
                                     Rec(12, "small", 0.105, v1::OK, "NVIDIA H200", at(4, 2048))};
  winners[0].set_pct_of_copy(50.0);
  BarPlot plot = SelectionPlot(selections, winners);
  EXPECT_EQ(Labels(plot), (std::vector<std::string>{"4x2048x2048  small", "1x32768x2048  big"}));
  EXPECT_EQ(plot.bars[0].marks, std::vector<std::string>{"stale"});
  EXPECT_TRUE(plot.bars[1].marks.empty());
  EXPECT_NEAR(plot.bars[1].floor_ms, 0.1585, 1e-12);
  EXPECT_NEAR(plot.bars[0].floor_ms, 0.0553, 1e-12);
  EXPECT_EQ(plot.floor_ms, 0.0) << "no one floor";
  const std::string text = RenderText(plot, 20);
  EXPECT_THAT(text, HasSubstr("shape  variant"));
  EXPECT_THAT(text, HasSubstr("'|' each bar's floor"));
  // The scale ends at the largest q3 (0.3265 ms): 0.317 ms is 19 columns, its floor (0.1585) sits at 10.
  EXPECT_THAT(text, HasSubstr("1x32768x2048  big   ##########|######## "));
  EXPECT_THAT(text, HasSubstr("2.00x"));
}

TEST(SameProblem, SelectiveScanStateZeroIsSixteenAndOptionsCount) {
  v1::Problem a;
  a.set_op("selective_scan");
  a.set_state_dim(0);
  v1::Problem b = a;
  b.set_state_dim(16);
  EXPECT_TRUE(SameProblem(a, b));
  b.set_state_dim(32);
  EXPECT_FALSE(SameProblem(a, b));
  b = a;
  b.set_z_gate(true);
  EXPECT_FALSE(SameProblem(a, b));
}

TEST(RenderText, BarsAreProportionalAndTheFloorIsMarked) {
  BarPlot plot;
  plot.title = "samu 4x2048x2048 bf16 fwd_bwd on NVIDIA H200";
  plot.bars = {{"fast", 0.05, 0.049, 0.051, 0.025, 1, {"fastest"}}, {"slow", 0.1, 0.09, 0.1, 0.025, 2, {}}};
  plot.floor_ms = 0.025;
  const std::string text = RenderText(plot, 40);
  EXPECT_THAT(text, HasSubstr(plot.title));
  EXPECT_THAT(text, HasSubstr("'|' floor 0.0250 ms"));
  // "slow" spans the whole scale (40), "fast" half of it; the floor sits at 10
  // (labels padded to the header's "variant").
  EXPECT_THAT(text, HasSubstr("fast     ##########|#########" + std::string(21, ' ') + "     0.0500     2.00x"));
  EXPECT_THAT(text, HasSubstr("slow     ##########|#############################      0.1000     4.00x"));
  EXPECT_THAT(text, HasSubstr("[0.0490, 0.0510]  <- fastest"));
  EXPECT_THAT(text, Not(HasSubstr("not shown")));
  plot.left_out = 3;
  EXPECT_THAT(RenderText(plot, 40), HasSubstr("(3 slower variants not shown)"));
  EXPECT_THAT(RenderText(BarPlot{}, 40), HasSubstr("no OK records to plot"));
}

TEST(RenderSvg, OneBarPerVariantEscapedWithTheFloorLine) {
  BarPlot plot;
  plot.title = "a <b> & 'c'";
  plot.bars = {{"v<1>", 0.05, 0.049, 0.051, 0.025, 1, {"fastest"}}, {"v2", 0.1, 0.09, 0.1, 0.025, 2, {}}};
  plot.floor_ms = 0.025;
  const std::string svg = RenderSvg(plot);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("a &lt;b&gt; &amp; &apos;c&apos;"));
  EXPECT_THAT(svg, HasSubstr(">v&lt;1&gt;</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("v<1>")));
  size_t bars = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1)) ++bars;
  EXPECT_EQ(bars, 2u);
  EXPECT_THAT(svg, HasSubstr("stroke-dasharray"));  // the floor
  EXPECT_THAT(svg, HasSubstr("floor 0.0250 ms"));
  EXPECT_THAT(svg, HasSubstr("fill=\"#d62728\""));  // the selected bar
}

}  // namespace
}  // namespace scantune
