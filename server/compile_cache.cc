#include "server/compile_cache.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/log.h"
#include "common/variant.h"

namespace scantune {
namespace {

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Consume('"')) return false;
    out->clear();
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      char e = s_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return false;
          out->push_back(static_cast<char>(std::stoi(s_.substr(pos_, 4), nullptr, 16)));
          pos_ += 4;
          break;
        }
        default: return false;
      }
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == s_.size();
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::string LoweredNamesToJson(const std::map<std::string, std::string>& names) {
  std::string out = "{";
  bool first = true;
  for (const auto& [expression, lowered] : names) {
    if (!first) out += ", ";
    first = false;
    AppendJsonString(expression, &out);
    out += ": ";
    AppendJsonString(lowered, &out);
  }
  out += "}";
  return out;
}

StatusOr<std::map<std::string, std::string>> LoweredNamesFromJson(const std::string& json) {
  std::map<std::string, std::string> names;
  JsonReader r(json);
  if (!r.Consume('{')) return InvalidArgument("lowered names: expected a JSON object");
  if (r.Consume('}')) {
    if (!r.AtEnd()) return InvalidArgument("lowered names: trailing text");
    return names;
  }
  while (true) {
    std::string key, value;
    if (!r.String(&key) || !r.Consume(':') || !r.String(&value)) {
      return InvalidArgument("lowered names: expected \"expression\": \"lowered name\"");
    }
    names[key] = value;
    if (r.Consume(',')) continue;
    if (r.Consume('}')) break;
    return InvalidArgument("lowered names: expected ',' or '}'");
  }
  if (!r.AtEnd()) return InvalidArgument("lowered names: trailing text");
  return names;
}

StatusOr<CompileResult> CompileCache::Compile(const CompileRequest& request) {
  std::vector<StatusOr<CompileResult>> results = CompileAll({request}, 1);
  return std::move(results[0]);
}

std::vector<StatusOr<CompileResult>> CompileCache::CompileAll(const std::vector<CompileRequest>& requests,
                                                              int threads) {
  auto log = Logger("server");
  std::vector<std::optional<StatusOr<CompileResult>>> results(requests.size());
  std::vector<CompileRequest> misses;
  std::vector<size_t> miss_index;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string key = compiler_->CacheKey(requests[i]);
    StatusOr<std::optional<CachedCompile>> cached = store_->GetCompiled(key);
    if (!cached.ok()) log->warn("compile cache lookup failed (compiling instead): {}", cached.status().ToString());
    if (cached.ok() && cached->has_value()) {
      const CachedCompile& entry = **cached;
      StatusOr<std::map<std::string, std::string>> names = LoweredNamesFromJson(entry.lowered_names_json);
      if (names.ok()) {
        CompileResult hit;
        hit.state = static_cast<v1::ResultState>(entry.state);
        hit.cubin = entry.cubin;
        hit.lowered_names = std::move(*names);
        hit.log = entry.log;
        hit.compile_ms = entry.compile_ms;
        hit.cache_key = key;
        hit.arch = entry.arch;
        results[i] = std::move(hit);
        continue;
      }
      log->warn("compile cache entry {} unreadable (compiling again): {}", key, names.status().ToString());
    }
    misses.push_back(requests[i]);
    miss_index.push_back(i);
  }
  if (!misses.empty()) {
    std::vector<StatusOr<CompileResult>> compiled = scantune::CompileAll(*compiler_, misses, std::max(1, threads));
    for (size_t k = 0; k < compiled.size(); ++k) {
      StatusOr<CompileResult>& result = compiled[k];
      if (result.ok() && (result->state == v1::OK || result->state == v1::COMPILE_FAILED)) {
        CachedCompile entry;
        entry.cache_key = result->cache_key.empty() ? compiler_->CacheKey(misses[k]) : result->cache_key;
        entry.variant = misses[k].variant.Name();
        entry.arch = result->arch;
        entry.cubin = result->cubin;
        entry.lowered_names_json = LoweredNamesToJson(result->lowered_names);
        entry.log = result->log;
        entry.compile_ms = result->compile_ms;
        entry.state = result->state;
        Status put = store_->PutCompiled(entry);
        if (!put.ok()) log->warn("compile cache store failed for {}: {}", entry.variant, put.ToString());
      }
      results[miss_index[k]] = std::move(result);
    }
  }
  std::vector<StatusOr<CompileResult>> out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(std::move(*r));
  return out;
}

}  // namespace scantune
