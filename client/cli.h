// Cli: the `scantune` command line tool. Subcommands mirror the RPCs of
// scantune.v1.Scantune (devices, tune, select, kernel, bench, records, record,
// selections, export, import, plus health and plot); each parses its own flags, calls ScantuneClient and prints an
// aligned table, or with --json the RPC's response as one protobuf-JSON
// object per line.
//
// Exit codes: 0 success, 1 the daemon answered with an error (its gRPC code
// and message are printed), 2 usage error (unknown subcommand or flag, bad
// value). Not thread-safe; one Cli per process.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "client/arg_parser.h"
#include "client/plot.h"
#include "client/scantune_client.h"

namespace scantune {

class Cli {
 public:
  Cli(std::ostream& out, std::ostream& err);
  ~Cli();

  // args excludes the program name.
  int Run(const std::vector<std::string>& args);

  static constexpr int kExitOk = 0;
  static constexpr int kExitRpcError = 1;
  static constexpr int kExitUsage = 2;

 private:
  struct Command;
  static const std::vector<Command>& Commands();

  void PrintUsage(std::ostream& out) const;
  // Prints the message and the current subcommand's usage; returns kExitUsage.
  int UsageError(const std::string& message);
  int RpcError(const char* what, const Status& status);
  void PrintJson(const google::protobuf::Message& message);

  int Health(const ArgParser& args);
  int Devices(const ArgParser& args);
  int Tune(const ArgParser& args);
  int Select(const ArgParser& args);
  int Kernel(const ArgParser& args);
  int Bench(const ArgParser& args);
  int Records(const ArgParser& args);
  int Selections(const ArgParser& args);
  int Plot(const ArgParser& args);
  int PlotSelections(const ArgParser& args, const v1::Problem& problem, const v1::RecordFilter& filter,
                     int bar_width);
  int DrawPlot(const ArgParser& args, const BarPlot& plot, int bar_width);
  int Record(const ArgParser& args);
  int Export(const ArgParser& args);
  int Import(const ArgParser& args);

  void PrintSelection(const v1::Selection& selection);
  void PrintRecordTable(const google::protobuf::RepeatedPtrField<v1::Record>& records);
  void PrintRecordDetail(const v1::Record& record);

  std::ostream& out_;
  std::ostream& err_;
  bool json_ = false;
  std::string address_;
  std::string tls_ca_file_;  // --tls-ca, --token-file: a daemon with TLS and tokens
  std::string token_file_;
  std::unique_ptr<ScantuneClient> client_;
  const Command* command_ = nullptr;      // the subcommand being run
  const ArgParser* parser_ = nullptr;     // its flags
};

}  // namespace scantune
