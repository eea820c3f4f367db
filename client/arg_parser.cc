#include "client/arg_parser.h"

#include <algorithm>

namespace scantune {

void ArgParser::AddFlag(const std::string& name, const std::string& value_name, const std::string& help) {
  specs_.push_back({name, value_name, help});
}

void ArgParser::AddBool(const std::string& name, const std::string& help) { specs_.push_back({name, "", help}); }

void ArgParser::AddPositional(const std::string& name, const std::string& help) {
  positional_specs_.push_back({name, "", help});
}

const ArgParser::Spec* ArgParser::Find(const std::string& name) const {
  for (const Spec& spec : specs_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

Status ArgParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (!arg.empty() && arg[0] == '-' && arg != "-") return InvalidArgument("unknown flag '" + arg + "'");
      positionals_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const Spec* spec = Find(name);
    if (!spec) return InvalidArgument("unknown flag '--" + name + "'");
    if (spec->value_name.empty()) {
      if (value) return InvalidArgument("--" + name + " takes no value");
      values_[name] = "true";
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) return InvalidArgument("--" + name + " needs a value (" + spec->value_name + ")");
      value = args[++i];
    }
    values_[name] = *value;
  }
  if (positionals_.size() != positional_specs_.size()) {
    if (positional_specs_.empty()) return InvalidArgument("unexpected argument '" + positionals_.front() + "'");
    if (positionals_.size() < positional_specs_.size()) {
      return InvalidArgument("missing " + positional_specs_[positionals_.size()].name);
    }
    return InvalidArgument("unexpected argument '" + positionals_[positional_specs_.size()] + "'");
  }
  return Status::Ok();
}

std::optional<std::string> ArgParser::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ArgParser::GetOr(const std::string& name, const std::string& fallback) const {
  return Get(name).value_or(fallback);
}

std::string ArgParser::Help() const {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const Spec& spec : positional_specs_) lines.push_back({spec.name, spec.help});
  for (const Spec& spec : specs_) {
    lines.push_back({"--" + spec.name + (spec.value_name.empty() ? "" : " " + spec.value_name), spec.help});
  }
  size_t width = 0;
  for (const auto& line : lines) width = std::max(width, line.first.size());
  std::string out;
  for (const auto& [left, right] : lines) {
    out += "  " + left + std::string(width - left.size() + 3, ' ') + right + "\n";
  }
  return out;
}

std::string ArgParser::Synopsis() const {
  std::string out;
  for (const Spec& spec : specs_) {
    out += " [--" + spec.name + (spec.value_name.empty() ? "" : " " + spec.value_name) + "]";
  }
  for (const Spec& spec : positional_specs_) out += " " + spec.name;
  return out;
}

}  // namespace scantune
