// The S3 XML reader on the response shapes moerl parses, and on malformed input.
#include "store/s3/xml.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moerl::store::s3 {
namespace {

TEST(Xml, ListBucketResult) {
  XmlNode r = parse_xml(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<IsTruncated>true</IsTruncated><Contents><Key>a&amp;b/&lt;c&gt;</Key><Size>12</Size>"
      "<ETag>&quot;abc&quot;</ETag></Contents><Contents><Key>d&#xe9;</Key></Contents>"
      "<NextContinuationToken><![CDATA[tok+/=]]></NextContinuationToken></ListBucketResult>");
  EXPECT_EQ(r.name, "ListBucketResult");
  auto contents = r.all("Contents");
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_EQ(contents[0]->text_of("Key"), "a&b/<c>");
  EXPECT_EQ(contents[0]->text_of("Size"), "12");
  EXPECT_EQ(contents[0]->text_of("ETag"), "\"abc\"");
  EXPECT_EQ(contents[1]->text_of("Key"), "d\xc3\xa9");
  EXPECT_EQ(r.text_of("NextContinuationToken"), "tok+/=");
  EXPECT_EQ(r.text_of("Missing", "fb"), "fb");
}

TEST(Xml, ErrorInsideOkBodyAndNamespaces) {
  XmlNode r = parse_xml("<Error><Code>InternalError</Code><Message>x &#233; y</Message><a:B x='>'/></Error>");
  EXPECT_EQ(r.text_of("Code"), "InternalError");
  EXPECT_EQ(r.text_of("Message"), "x \xc3\xa9 y");
  ASSERT_NE(r.find("B"), nullptr);
}

TEST(Xml, MalformedIsAnError) {
  EXPECT_THROW(parse_xml("<a><b></a>"), Error);
  EXPECT_THROW(parse_xml("<a>"), Error);
  EXPECT_THROW(parse_xml("not xml"), Error);
  EXPECT_THROW(parse_xml("<a>&bogus;</a>"), Error);
  EXPECT_EQ(xml_escape("<a&'\">"), "&lt;a&amp;&apos;&quot;&gt;");
}

}  // namespace
}  // namespace moerl::store::s3
