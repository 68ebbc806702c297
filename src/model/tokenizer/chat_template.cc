#include "model/tokenizer/chat_template.h"

#include "base/error.h"
#include "model/tokenizer/tokenize_jsonl.h"

namespace moerl::model {

namespace {

const std::string& require_template(const Tokenizer::ChatTemplateInfo& info, const std::string& source) {
  if (info.template_text.empty()) {
    throw Error("the tokenizer" + (source.empty() ? std::string() : " in " + source) + " has no chat template",
                "a model directory carries its template as \"chat_template\" in tokenizer_config.json or as "
                "chat_template.jinja; use the instruct/chat model's tokenizer files, or add the template there");
  }
  return info.template_text;
}

}  // namespace

ChatTemplate::ChatTemplate(const Tokenizer::ChatTemplateInfo& info, const std::string& source)
    : info_(info), template_(require_template(info, source)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_vars) const {
  if (!messages.is_array()) throw Error("chat messages must be a JSON list, got " + messages.dump(), "pass [{\"role\": ..., \"content\": ...}, ...]");
  if (!extra_vars.is_null() && !extra_vars.is_object()) {
    throw Error("chat template variables must be a JSON object, got " + extra_vars.dump(), "pass e.g. {\"enable_thinking\": false}");
  }
  // As transformers: render(messages=, tools=None, documents=None, add_generation_prompt=,
  // **special_tokens_map, **kwargs).
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  for (const auto& [name, value] : {std::pair{"bos_token", &info_.bos_token}, std::pair{"eos_token", &info_.eos_token},
                                    std::pair{"pad_token", &info_.pad_token}}) {
    if (!value->empty()) ctx[name] = *value;
  }
  if (extra_vars.is_object()) {
    for (const auto& [k, v] : extra_vars.items()) ctx[k] = v;
  }
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  return template_.render(ctx);
}

std::string render_chat(const Tokenizer::ChatTemplateInfo& info, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const nlohmann::ordered_json& extra_vars) {
  return ChatTemplate(info).render(messages, add_generation_prompt, extra_vars);
}

int64_t chat_jsonl(const Tokenizer& tok, const std::string& model_dir, const std::string& input,
                   const std::string& output) {
  const ChatTemplate tmpl(tok.chat_template(), model_dir);
  const std::string hint =
      "each line of the input must be one JSON object {\"messages\": [{\"role\": ..., \"content\": ...}, ...], "
      "\"add_generation_prompt\": BOOL, ...template variables}";
  return map_jsonl_objects(input, output, hint, [&](const nlohmann::ordered_json& j, const std::string& where) {
    const auto m = j.find("messages");
    if (m == j.end() || !m->is_array()) throw Error(where + " has no list field \"messages\"", hint);
    bool add_generation_prompt = false;
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    for (const auto& [k, v] : j.items()) {
      if (k == "messages") continue;
      if (k == "add_generation_prompt") {
        if (!v.is_boolean()) throw Error(where + ": \"add_generation_prompt\" must be true or false, found " + v.dump(), hint);
        add_generation_prompt = v.get<bool>();
        continue;
      }
      vars[k] = v;
    }
    try {
      const std::string text = tmpl.render(*m, add_generation_prompt, vars);
      return nlohmann::ordered_json{{"text", text}, {"ids", tok.encode(text, /*add_bos=*/false)}}.dump();
    } catch (const Error& e) {
      throw Error(where + ": " + e.message(), e.hint(), e.code());
    }
  });
}

}  // namespace moerl::model
