#include "model/tokenizer/pattern.h"

namespace moerl::model::hf {

Pattern Pattern::literal(std::string text) {
  Pattern p;
  p.literal_ = std::move(text);
  return p;
}

Pattern Pattern::regex(const std::string& pattern, const std::string& where) {
  Pattern p;
  p.regex_ = std::make_shared<const Regex>(pattern, where);
  return p;
}

void Pattern::find_all(std::string_view text, std::vector<Span>& out) const {
  if (regex_) {
    regex_->find_all(text, out);
    return;
  }
  out.clear();
  if (literal_.empty()) return;
  for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size())) {
    out.push_back({at, at + literal_.size()});
  }
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  thread_local std::vector<Span> spans;
  find_all(text, spans);
  if (spans.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + spans.size() * content.size());
  size_t last = 0;
  for (const Span& s : spans) {
    out.append(text.substr(last, s.begin - last));
    out.append(content);
    last = s.end;
  }
  out.append(text.substr(last));
  return out;
}

Pattern parse_pattern(const nlohmann::json& j, const JsonPlace& at) {
  if (!j.is_object() || j.size() != 1) bad_json(at, "expected {\"String\": ...} or {\"Regex\": ...}, found " + j.dump());
  if (j.contains("String")) return Pattern::literal(string_field(j, "String", at));
  if (j.contains("Regex")) return Pattern::regex(string_field(j, "Regex", at), at.child("Regex").where());
  bad_json(at, "expected {\"String\": ...} or {\"Regex\": ...}, found " + j.dump());
}

}  // namespace moerl::model::hf
