// Recursive-descent reader for the small XML documents S3 returns.
#include "store/s3/xml.h"

#include "base/error.h"
#include "base/utf8.h"

namespace moerl::store::s3 {

const XmlNode* XmlNode::first(std::string_view n) const {
  for (const auto& c : children) {
    if (c.name == n) return &c;
  }
  return nullptr;
}

std::vector<const XmlNode*> XmlNode::all(std::string_view n) const {
  std::vector<const XmlNode*> out;
  for (const auto& c : children) {
    if (c.name == n) out.push_back(&c);
  }
  return out;
}

std::string XmlNode::text_of(std::string_view n, const std::string& fallback) const {
  const XmlNode* c = first(n);
  return c ? c->text : fallback;
}

const XmlNode* XmlNode::find(std::string_view n) const {
  if (name == n) return this;
  for (const auto& c : children) {
    if (const XmlNode* f = c.find(n)) return f;
  }
  return nullptr;
}

namespace {

class Parser {
 public:
  Parser(std::string_view doc, const std::string& what) : s_(doc), what_(what) {}

  XmlNode document() {
    skip_misc();
    if (pos_ >= s_.size() || s_[pos_] != '<') fail("no root element");
    XmlNode root = element(0);
    skip_misc();
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw Error(what_ + ": malformed XML at byte " + std::to_string(pos_) + ": " + why,
                "the server answered something that is not S3 XML; check the endpoint URL", ErrorCode::kIo);
  }

  bool starts(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }

  void skip_until(std::string_view end) {
    size_t e = s_.find(end, pos_);
    if (e == std::string_view::npos) fail("unterminated construct");
    pos_ = e + end.size();
  }

  // Whitespace, <?...?>, <!-- --> and <!DOCTYPE ...> between elements.
  void skip_misc() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        ++pos_;
      } else if (starts("<?")) {
        skip_until("?>");
      } else if (starts("<!--")) {
        skip_until("-->");
      } else if (starts("<!DOCTYPE")) {
        skip_until(">");
      } else {
        break;
      }
    }
  }

  std::string name() {
    size_t b = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\r' || c == '\t') break;
      ++pos_;
    }
    if (b == pos_) fail("empty tag name");
    std::string n(s_.substr(b, pos_ - b));
    size_t colon = n.find(':');
    return colon == std::string::npos ? n : n.substr(colon + 1);
  }

  void append_text(std::string& out, std::string_view raw) {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out.push_back(raw[i]);
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string_view::npos) fail("unterminated entity");
      std::string_view ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "amp") out.push_back('&');
      else if (ent == "lt") out.push_back('<');
      else if (ent == "gt") out.push_back('>');
      else if (ent == "quot") out.push_back('"');
      else if (ent == "apos") out.push_back('\'');
      else if (!ent.empty() && ent[0] == '#') {
        unsigned long cp = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')
                               ? std::stoul(std::string(ent.substr(2)), nullptr, 16)
                               : std::stoul(std::string(ent.substr(1)), nullptr, 10);
        append_utf8(out, static_cast<char32_t>(cp));
      } else {
        fail("unknown entity &" + std::string(ent) + ";");
      }
      i = semi;
    }
  }

  XmlNode element(int depth) {
    if (depth > 64) fail("nesting deeper than 64");
    ++pos_;  // '<'
    XmlNode node;
    node.name = name();
    // Attributes: skipped, honouring quotes.
    while (pos_ < s_.size() && s_[pos_] != '>' && !starts("/>")) {
      char c = s_[pos_];
      if (c == '"' || c == '\'') {
        size_t e = s_.find(c, pos_ + 1);
        if (e == std::string_view::npos) fail("unterminated attribute");
        pos_ = e + 1;
      } else {
        ++pos_;
      }
    }
    if (pos_ >= s_.size()) fail("unterminated start tag <" + node.name + ">");
    if (starts("/>")) {
      pos_ += 2;
      return node;
    }
    ++pos_;  // '>'
    while (true) {
      if (pos_ >= s_.size()) fail("missing </" + node.name + ">");
      if (starts("</")) {
        pos_ += 2;
        std::string end = name();
        if (end != node.name) fail("</" + end + "> closes <" + node.name + ">");
        while (pos_ < s_.size() && s_[pos_] != '>') ++pos_;
        if (pos_ >= s_.size()) fail("unterminated end tag");
        ++pos_;
        return node;
      }
      if (starts("<![CDATA[")) {
        size_t e = s_.find("]]>", pos_);
        if (e == std::string_view::npos) fail("unterminated CDATA");
        node.text.append(s_.substr(pos_ + 9, e - pos_ - 9));
        pos_ = e + 3;
      } else if (starts("<!--") || starts("<?")) {
        skip_misc();
      } else if (s_[pos_] == '<') {
        node.children.push_back(element(depth + 1));
      } else {
        size_t e = s_.find('<', pos_);
        if (e == std::string_view::npos) fail("missing </" + node.name + ">");
        append_text(node.text, s_.substr(pos_, e - pos_));
        pos_ = e;
      }
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

}  // namespace

XmlNode parse_xml(std::string_view doc, const std::string& what) {
  try {
    return Parser(doc, what).document();
  } catch (const std::invalid_argument&) {
    throw Error(what + ": malformed character reference in XML", "check the endpoint URL", ErrorCode::kIo);
  } catch (const std::out_of_range&) {
    throw Error(what + ": character reference out of range in XML", "check the endpoint URL", ErrorCode::kIo);
  }
}

std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace moerl::store::s3
