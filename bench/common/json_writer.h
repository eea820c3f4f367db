// JsonWriter: a small streaming writer of pretty-printed JSON that keeps keys
// in the order they are written (seed 001's field order), escapes strings and
// writes doubles in their shortest round-trip form (non-finite as null).
// Misuse (a value where a key is due, unbalanced ends) is a programming error
// caught by assert. Not thread-safe; one document per writer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace scantune::bench {

class JsonWriter {
 public:
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view value);
  void Number(double value);
  void Integer(int64_t value);
  void Unsigned(uint64_t value);
  void Bool(bool value);
  void Null();

  // Key + value in one call.
  void Field(std::string_view key, std::string_view value) { Key(key), String(value); }
  void Field(std::string_view key, const char* value) { Key(key), String(value); }
  void Field(std::string_view key, double value) { Key(key), Number(value); }
  void Field(std::string_view key, bool value) { Key(key), Bool(value); }
  void FieldInt(std::string_view key, int64_t value) { Key(key), Integer(value); }
  void FieldUint(std::string_view key, uint64_t value) { Key(key), Unsigned(value); }
  void FieldNumbers(std::string_view key, const std::vector<double>& values);

  // The document; complete once every object and array is closed.
  const std::string& str() const { return out_; }
  bool complete() const { return stack_.empty() && !out_.empty(); }

  static std::string Escape(std::string_view s);
  static std::string FormatNumber(double value);

 private:
  struct Level {
    bool object = false;
    int items = 0;
    bool key_pending = false;
  };
  void BeforeValue();
  void Newline();

  std::string out_;
  std::vector<Level> stack_;
};

}  // namespace scantune::bench
