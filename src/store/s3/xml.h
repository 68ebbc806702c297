// A minimal XML reader for S3 and STS responses (elements, text, entities, CDATA; attributes
// and namespaces are skipped). Not a general XML parser: enough for ListBucketResult,
// InitiateMultipartUploadResult, CompleteMultipartUploadResult, Error and STS credentials.
//
//   XmlNode root = parse_xml(body);   // root.name == "ListBucketResult"
//   for (const XmlNode* c : root.all("Contents")) c->text_of("Key");
// Stateless; throws Error(kIo) naming `what` on malformed input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moerl::store::s3 {

struct XmlNode {
  std::string name;
  std::string text;  // concatenated character data directly inside this element
  std::vector<XmlNode> children;

  const XmlNode* first(std::string_view child_name) const;
  std::vector<const XmlNode*> all(std::string_view child_name) const;
  // Text of the first child with that name, or fallback when absent.
  std::string text_of(std::string_view child_name, const std::string& fallback = "") const;
  // Depth-first search for a descendant (or this node) with that name.
  const XmlNode* find(std::string_view descendant_name) const;
};

XmlNode parse_xml(std::string_view doc, const std::string& what = "S3 response");
std::string xml_escape(std::string_view s);

}  // namespace moerl::store::s3
