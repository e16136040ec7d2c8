// record --embed-sources (userspace/output/embedded_sources.h): the sampled source files'
// text in the profile's sources table, heaviest first, within the size bounds.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "userspace/output/embedded_sources.h"
#include "userspace/output/json_writer.h"
#include "userspace/output/output_file.h"

namespace bpfprof {
namespace {

std::string write_file(const std::string& name, size_t size) {
  const std::string path = testing::TempDir() + "/bpfprof-embed-" + name;
  std::ofstream(path) << std::string(size, 'x');
  return path;
}

nlohmann::json sources_json(const SharedTables& tables) {
  StringSink sink;
  {
    JsonWriter w(sink);
    w.begin_object();
    tables.sources.write_json(w);
    w.end_object();
    w.flush();
  }
  return nlohmann::json::parse(sink.take())["sources"];
}

TEST(EmbeddedSources, TheHeaviestFilesGoInWhileTheyFit) {
  SharedTables t;
  const SourceIndex small = t.sources.add(t.strings, write_file("small.c", 100));
  const SourceIndex large = t.sources.add(t.strings, write_file("large.c", 300));
  const SourceIndex medium = t.sources.add(t.strings, write_file("medium.c", 200));
  const SourceIndex missing = t.sources.add(t.strings, "/nonexistent/build/tree/lib.c");
  const SourceIndex cold = t.sources.add(t.strings, write_file("cold.c", 10));
  std::vector<double> weights(5);
  weights[small.value] = 1;
  weights[large.value] = 5;   // over the 250-byte bound for one file
  weights[medium.value] = 3;  // the heaviest that fits: in
  weights[missing.value] = 10;
  weights[cold.value] = 0;  // never sampled: never embedded
  const EmbeddedSources e = embed_sources(t, weights, EmbedLimits{250, 250});
  EXPECT_EQ(e.files, 1u);
  EXPECT_EQ(e.bytes, 200u);
  EXPECT_EQ(e.unreadable, 2u);  // missing, large
  EXPECT_EQ(e.left_out, 1u);    // small: 200 + 100 > 250
  const nlohmann::json sources = sources_json(t);
  ASSERT_EQ(sources["content"].size(), 5u);
  EXPECT_EQ(sources["content"][medium.value], std::string(200, 'x'));
  for (SourceIndex none : {small, large, missing, cold})
    EXPECT_TRUE(sources["content"][none.value].is_null());
}

TEST(EmbeddedSources, WithoutEmbeddingEveryContentIsNull) {
  SharedTables t;
  t.sources.add(t.strings, "/a.c");
  t.sources.add(t.strings, "/b.c");
  const nlohmann::json sources = sources_json(t);
  EXPECT_EQ(sources["content"], nlohmann::json::array({nullptr, nullptr}));
  EXPECT_EQ(sources["length"], 2);
}

}  // namespace
}  // namespace bpfprof
