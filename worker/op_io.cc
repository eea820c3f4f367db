#include "worker/op_io.h"

namespace scantune {

size_t TensorIndex(const std::vector<TensorSpec>& tensors, std::string_view name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return i;
  }
  return tensors.size();
}

const OpIo& OpIoFor(Op op) {
  switch (op) {
    case Op::kLinearScan: return LinearScanIo();
    case Op::kRgLru: return RgLruIo();
    case Op::kSamu: return SamuIo();
    case Op::kSelectiveScan: return SelectiveScanIo();
  }
  return LinearScanIo();
}

}  // namespace scantune
