// Shared by the plan tests of linear_scan (plan_test.cc) and the gated
// operators (plan_gated_test.cc): `_k1` points are enumerated only as twins.
#pragma once

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/plan.h"

namespace scantune {

// How many `_k1` points the operator enumerates; each must be the twin (the same point unbaked) of an enumerated
// point.
inline int EnumeratedBakedTwins(Op op) {
  const std::vector<Variant> all = EnumerateVariants(op, false);
  int baked = 0;
  for (const Variant& v : all) {
    if (v.baked == 0) continue;
    ++baked;
    Variant twin = v;
    twin.baked = 0;
    EXPECT_NE(std::find(all.begin(), all.end(), twin), all.end()) << v.Name();
  }
  return baked;
}

}  // namespace scantune
