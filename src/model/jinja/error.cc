#include "model/jinja/error.h"

#include "base/error.h"

namespace moerl::jinja {

void throw_at(Pos pos, const std::string& what, const std::string& hint) {
  throw Error("chat template line " + std::to_string(pos.line) + " col " + std::to_string(pos.col) + ": " + what,
              hint.empty() ? "the chat template uses Jinja that moerl's interpreter does not support or that "
                             "fails on this input (docs/formats/tokenizer.md lists the subset)"
                           : hint);
}

}  // namespace moerl::jinja
