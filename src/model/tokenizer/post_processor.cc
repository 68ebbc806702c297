#include "model/tokenizer/post_processor.h"

namespace moerl::model::hf {

namespace {

void add_ids(const nlohmann::json& specials, const std::string& name, const JsonPlace& at, std::vector<int64_t>& out) {
  if (!specials.is_object() || !specials.contains(name)) {
    bad_json(at, "special token \"" + name + "\" is not listed in special_tokens");
  }
  const JsonPlace s_at = at.child("special_tokens").child(name);
  const nlohmann::json& ids = object_field(specials[name], "ids", s_at);
  if (!ids.is_array()) bad_json(s_at.child("ids"), "expected a list of ids");
  for (const auto& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) bad_json(s_at.child("ids"), "expected ids >= 0, found " + id.dump());
    out.push_back(id.get<int64_t>());
  }
}

void parse_into(const nlohmann::json& j, const JsonPlace& at, SpecialTokensAround& out) {
  if (j.is_null()) return;
  const std::string type = component_type(j, at);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const nlohmann::json& list = object_field(j, "processors", at);
    if (!list.is_array()) bad_json(at.child("processors"), "expected a list of post-processors");
    for (size_t i = 0; i < list.size(); ++i) parse_into(list[i], at.child("processors").index(i), out);
    return;
  }
  if (type == "TemplateProcessing") {
    const nlohmann::json& single = object_field(j, "single", at);
    const nlohmann::json specials = j.value("special_tokens", nlohmann::json::object());
    if (!single.is_array()) bad_json(at.child("single"), "expected a list of template pieces");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const JsonPlace p_at = at.child("single").index(i);
      const nlohmann::json& piece = single[i];
      if (piece.is_object() && piece.contains("Sequence")) {
        seen_sequence = true;
      } else if (piece.is_object() && piece.contains("SpecialToken")) {
        const std::string name = string_field(object_field(piece, "SpecialToken", p_at), "id", p_at.child("SpecialToken"));
        add_ids(specials, name, at, seen_sequence ? out.after : out.before);
      } else {
        bad_json(p_at, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, found " + piece.dump());
      }
    }
    if (!seen_sequence) bad_json(at.child("single"), "the template has no {\"Sequence\": {\"id\": \"A\"}} piece");
    return;
  }
  unsupported_component(at, type, "TemplateProcessing, ByteLevel, Sequence");
}

}  // namespace

SpecialTokensAround parse_post_processor(const nlohmann::json& j, const JsonPlace& at) {
  SpecialTokensAround out;
  parse_into(j, at, out);
  return out;
}

}  // namespace moerl::model::hf
