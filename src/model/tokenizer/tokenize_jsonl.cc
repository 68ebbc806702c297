#include "model/tokenizer/tokenize_jsonl.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/files.h"

namespace moerl::model {

namespace {

std::string convert_line(const Tokenizer& tok, const nlohmann::ordered_json& j, TokenizeDirection direction,
                         const std::string& where, const std::string& hint) {
  if (direction == TokenizeDirection::kEncode) {
    auto it = j.find("text");
    if (it == j.end() || !it->is_string()) throw Error(where + " has no string field \"text\"", hint);
    try {
      return nlohmann::json{{"ids", tok.encode(it->get<std::string>(), /*add_bos=*/false)}}.dump();
    } catch (const Error& e) {
      throw Error(where + ": " + e.message(), e.hint(), e.code());
    }
  }
  auto it = j.find("ids");
  if (it == j.end() || !it->is_array()) throw Error(where + " has no list field \"ids\"", hint);
  std::vector<int64_t> ids;
  ids.reserve(it->size());
  for (const auto& v : *it) {
    if (!v.is_number_integer()) throw Error(where + ": ids must be integers, found " + v.dump(), hint);
    ids.push_back(v.get<int64_t>());
  }
  try {
    return nlohmann::json{{"text", tok.decode(ids, SpecialTokens::kKeep)}}.dump();
  } catch (const Error& e) {
    throw Error(where + ": " + e.message(), e.hint(), e.code());
  }
}

}  // namespace

int64_t tokenize_jsonl(const Tokenizer& tok, const std::string& input, const std::string& output,
                       TokenizeDirection direction) {
  const char* expected = direction == TokenizeDirection::kEncode ? "{\"text\": STRING}" : "{\"ids\": [INT, ...]}";
  const std::string hint = std::string("each line of the input must be one JSON object ") + expected;
  return map_jsonl_objects(input, output, hint, [&](const nlohmann::ordered_json& j, const std::string& where) {
    return convert_line(tok, j, direction, where, hint);
  });
}

int64_t map_jsonl_objects(const std::string& input, const std::string& output, const std::string& hint,
                          const std::function<std::string(const nlohmann::ordered_json&, const std::string&)>& fn) {
  std::ifstream in(input, std::ios::binary);
  if (!in) throw Error("cannot read " + input, "check the --input path", ErrorCode::kNotFound);
  AtomicFile out(output, {.mode = 0644, .parent_dirs = ParentDirs::kCreate});
  int64_t n = 0;
  std::string line, buffer;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = input + " line " + std::to_string(n);
    if (line.find_first_not_of(" \t\r") == std::string::npos) throw Error(where + " is blank", hint);
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(where + " is not valid JSON (" + e.what() + ")", hint);
    }
    if (!j.is_object()) throw Error(where + " is not a JSON object", hint);
    buffer += fn(j, where);
    buffer += '\n';
    if (buffer.size() > (1 << 20)) {
      out.write(buffer);
      buffer.clear();
    }
  }
  if (in.bad()) throw Error("reading " + input + " failed", "check the file", ErrorCode::kIo);
  out.write(buffer);
  out.commit();
  return n;
}

}  // namespace moerl::model
