#include "bench/common/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace scantune::bench {

std::string JsonWriter::Escape(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 passes through
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonWriter::FormatNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);  // shortest round-trip form
  assert(ec == std::errc());
  return std::string(buf, end);
}

void JsonWriter::Newline() {
  out_ += '\n';
  out_.append(2 * stack_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    assert(out_.empty() && "one top-level value per document");
    return;
  }
  Level& top = stack_.back();
  if (top.object) {
    assert(top.key_pending && "a value inside an object needs a key first");
    top.key_pending = false;
    return;
  }
  if (top.items++ > 0) out_ += ',';
  Newline();
}

void JsonWriter::Key(std::string_view key) {
  assert(!stack_.empty() && stack_.back().object && !stack_.back().key_pending);
  Level& top = stack_.back();
  if (top.items++ > 0) out_ += ',';
  Newline();
  out_ += Escape(key);
  out_ += ": ";
  top.key_pending = true;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  stack_.push_back({true, 0, false});
}

void JsonWriter::EndObject() {
  assert(!stack_.empty() && stack_.back().object && !stack_.back().key_pending);
  const bool empty = stack_.back().items == 0;
  stack_.pop_back();
  if (!empty) Newline();
  out_ += '}';
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  stack_.push_back({false, 0, false});
}

void JsonWriter::EndArray() {
  assert(!stack_.empty() && !stack_.back().object);
  const bool empty = stack_.back().items == 0;
  stack_.pop_back();
  if (!empty) Newline();
  out_ += ']';
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += Escape(value);
}

void JsonWriter::Number(double value) {
  BeforeValue();
  out_ += FormatNumber(value);
}

void JsonWriter::Integer(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::Unsigned(uint64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
}

void JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
}

void JsonWriter::FieldNumbers(std::string_view key, const std::vector<double>& values) {
  Key(key);
  BeginArray();
  for (double v : values) Number(v);
  EndArray();
}

}  // namespace scantune::bench
