// A small JSON reader for the test data (golden meta.json, index.json, tolerances.json): objects,
// arrays, strings (with the usual escapes; \u escapes beyond ASCII are kept as '?'), numbers,
// true/false/null. No external dependency; not a general-purpose or fast parser.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kda::test {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;  // in file order

  bool is_null() const { return type == Type::Null; }
  bool is_number() const { return type == Type::Number; }
  bool is_string() const { return type == Type::String; }
  bool is_array() const { return type == Type::Array; }
  bool is_object() const { return type == Type::Object; }
  // Member `key` of an object, or nullptr (also when this is not an object).
  const Json* get(const std::string& key) const;
};

// Parses `text`; on failure returns false and says where in *error.
bool parse_json(const std::string& text, Json* out, std::string* error);

// Reads a whole file; false when it cannot be opened.
bool read_file(const std::string& path, std::string* contents);

}  // namespace kda::test
