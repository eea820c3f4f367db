// STUB until the operator's OpIo lands: tensors none, nothing to run.
#include "worker/op_io.h"

namespace scantune {
namespace {

class StubIo final : public OpIo {
 public:
  std::vector<TensorSpec> Tensors(const Problem&) const override { return {}; }
  OpCase Prepare(const Problem&, uint64_t, bool) const override { return {}; }
  std::vector<uint8_t> Params(const Problem&, const std::vector<CUdeviceptr>&, CUdeviceptr) const override { return {}; }
};

}  // namespace

const OpIo& SelectiveScanIo() {
  static const StubIo io;
  return io;
}

}  // namespace scantune
