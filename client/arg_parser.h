// ArgParser: the flags of one `scantune` subcommand. Each subcommand declares
// the flags it takes; anything else is a usage error, so a typo is never
// silently ignored. Accepts --name value, --name=value and bare booleans.
// Not thread-safe (used once per process).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace scantune {

class ArgParser {
 public:
  void AddFlag(const std::string& name, const std::string& value_name, const std::string& help);
  void AddBool(const std::string& name, const std::string& help);
  // Positional arguments the subcommand takes, in order (all required).
  void AddPositional(const std::string& name, const std::string& help);

  // INVALID_ARGUMENT naming the offending argument.
  Status Parse(const std::vector<std::string>& args);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  bool GetBool(const std::string& name) const { return Has(name); }
  const std::vector<std::string>& positionals() const { return positionals_; }

  // One line per flag: "  --shape BxLxW   problem shape".
  std::string Help() const;
  // "--op NAME --shape BxLxW ... ID"
  std::string Synopsis() const;

 private:
  struct Spec {
    std::string name;
    std::string value_name;  // empty for booleans
    std::string help;
  };
  const Spec* Find(const std::string& name) const;

  std::vector<Spec> specs_;
  std::vector<Spec> positional_specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace scantune
