// The symbol server's API (userspace/serve/symbol_api.h) over the inline_hot fixture (built
// with -O2 -g: helper() inlined into hot_loop()), as the Firefox Profiler calls it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "symbols/elf/elf_file.h"
#include "userspace/output/processed_profile_reader.h"
#include "userspace/output/profile_libraries.h"
#include "userspace/serve/symbol_api.h"

namespace bpfprof {
namespace {

using Json = nlohmann::json;

const std::string kInlineHot = std::string(TEST_FIXTURE_DIR) + "/inline_hot";

std::string hex(uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

class SymbolApiTest : public testing::Test {
 protected:
  void SetUp() override {
    Symbolizer symbolizer;
    lib_ = symbolizer.describe_library(kInlineHot, kInlineHot, "");
    ASSERT_FALSE(lib_.code_id.empty());
    std::unique_ptr<ElfFile> elf = ElfFile::open(kInlineHot, nullptr);
    ASSERT_TRUE(elf);
    for (const Symbol& s : elf->symbols())
      if (s.name == "hot_loop") hot_loop_ = s;
    ASSERT_GT(hot_loop_.size, 0u);
    hot_loop_.address -= elf->base_vaddr();
    // An address of hot_loop where DWARF says helper() runs, inlined.
    for (uint64_t a = hot_loop_.address; a < hot_loop_.address + hot_loop_.size; ++a) {
      std::vector<SymbolizedFrame> frames = symbolizer.symbolize_relative(kInlineHot, a);
      if (frames.size() == 2 && frames[1].name == "helper" && frames[1].file) {
        inlined_at_ = a;
        source_file_ = *frames[1].file;
        break;
      }
    }
    ASSERT_NE(inlined_at_, 0u);
    api_ = std::make_unique<SymbolApi>(std::vector<LibraryDescription>{lib_}, SymbolizerOptions{});
  }

  Json post(const std::string& endpoint, const Json& request, int expected_status = 200) {
    ApiResponse response = api_->handle(endpoint, request.dump());
    EXPECT_EQ(response.status, expected_status) << response.json;
    return Json::parse(response.json);
  }

  Json source_request(const std::string& file, uint64_t offset) {
    return {{"debugName", lib_.debug_name},
            {"debugId", lib_.breakpad_id},
            {"moduleOffset", hex(offset)},
            {"file", file}};
  }

  LibraryDescription lib_;
  Symbol hot_loop_;
  uint64_t inlined_at_ = 0;
  std::string source_file_;
  std::unique_ptr<SymbolApi> api_;
};

TEST_F(SymbolApiTest, SymbolicateGivesFunctionFileLineAndInlinedFrames) {
  Json stack = Json::array({Json::array({0, inlined_at_}), Json::array({1, 0x10})});
  Json memory_map = Json::array(
      {Json::array({lib_.debug_name, lib_.breakpad_id}), Json::array({"other.so", "00"})});
  Json request = {
      {"jobs", Json::array({{{"memoryMap", memory_map}, {"stacks", Json::array({stack})}}})}};
  Json result = post("/symbolicate/v5", request)["results"][0];
  EXPECT_EQ(result["found_modules"][lib_.debug_name + "/" + lib_.breakpad_id], true);
  EXPECT_EQ(result["found_modules"]["other.so/00"], false);
  const Json& frame = result["stacks"][0][0];
  EXPECT_EQ(frame["frame"], 0);
  EXPECT_EQ(frame["module"], lib_.debug_name);
  EXPECT_EQ(frame["module_offset"], hex(inlined_at_));
  EXPECT_EQ(frame["function"], "hot_loop");
  EXPECT_EQ(frame["function_offset"], hex(inlined_at_ - hot_loop_.address));
  EXPECT_EQ(frame["function_size"], hex(hot_loop_.size));
  EXPECT_EQ(frame["file"], source_file_);
  EXPECT_TRUE(frame["line"].is_number());  // where hot_loop calls helper
  ASSERT_EQ(frame["inlines"].size(), 1u);
  EXPECT_EQ(frame["inlines"][0]["function"], "helper");
  EXPECT_EQ(frame["inlines"][0]["file"], source_file_);
  // The line is one of helper's body, between its marker comments in the source.
  std::ifstream in(source_file_);
  std::string line;
  int number = 0, begin = 0, end = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find("helper-body-begin") != std::string::npos) begin = number;
    if (line.find("helper-body-end") != std::string::npos) end = number;
  }
  const int helper_line = frame["inlines"][0]["line"];
  EXPECT_GT(helper_line, begin);
  EXPECT_LT(helper_line, end);
  // A library it does not know: the frame without a function.
  const Json& unknown = result["stacks"][0][1];
  EXPECT_EQ(unknown["module"], "other.so");
  EXPECT_FALSE(unknown.contains("function"));
}

TEST_F(SymbolApiTest, SourceGivesTheFileTheDebugInformationNames) {
  ASSERT_EQ(source_file_.front(), '/') << "DWARF's relative names are joined with comp_dir";
  Json result = post("/source/v1", source_request(source_file_, inlined_at_));
  EXPECT_EQ(result["file"], source_file_);
  EXPECT_NE(result["source"].get<std::string>().find("helper-body-begin"), std::string::npos);
}

TEST_F(SymbolApiTest, SourceRefusesFilesTheDebugInformationDoesNotName) {
  Json shadow = post("/source/v1", source_request("/etc/shadow", inlined_at_), 404);
  EXPECT_NE(shadow["error"].get<std::string>().find("does not name /etc/shadow"),
            std::string::npos);
  EXPECT_FALSE(shadow.contains("source"));
  // Named elsewhere in the library is not enough: at this address, not at another.
  post("/source/v1", source_request("/etc/passwd", hot_loop_.address), 404);
  Json other_lib = source_request(source_file_, inlined_at_);
  other_lib["debugId"] = "0123456789ABCDEF0123456789ABCDEF0";
  Json unknown = post("/source/v1", other_lib, 404);
  EXPECT_NE(unknown["error"].get<std::string>().find("no library"), std::string::npos);
}

TEST_F(SymbolApiTest, AsmDisassemblesTheFunctionFromTheLibrarysBytes) {
  Json request = {{"name", lib_.name},
                  {"codeId", lib_.code_id},
                  {"startAddress", hex(hot_loop_.address)},
                  {"size", hex(hot_loop_.size)}};
  Json result = post("/asm/v1", request);
  EXPECT_EQ(result["startAddress"], hex(hot_loop_.address));
  EXPECT_EQ(result["size"], hex(hot_loop_.size));
  EXPECT_EQ(result["arch"], "x86_64");
  const Json& instructions = result["instructions"];
  ASSERT_GT(instructions.size(), 5u);
  EXPECT_EQ(instructions[0][0], 0);
  bool calls = false, returns = false;
  for (const Json& instruction : instructions) {
    const std::string text = instruction[1];
    calls = calls || text.starts_with("call");  // fixture_now_ns
    returns = returns || text == "ret";
  }
  EXPECT_TRUE(calls);
  EXPECT_TRUE(returns);
  // The size is a lower bound when asked to go on to the function's end.
  request["size"] = "0x1";
  request["continueUntilFunctionEnd"] = true;
  EXPECT_EQ(post("/asm/v1", request)["instructions"].size(), instructions.size());
  request["codeId"] = "00112233";
  post("/asm/v1", request, 404);
}

TEST_F(SymbolApiTest, MalformedRequestsGet400) {
  for (const char* body :
       {"", "{", "not json", "[]", "{\"jobs\": 3}", "{\"jobs\": [{\"memoryMap\": [[1, 2]]}]}",
        "{\"jobs\": [{\"memoryMap\": [], \"stacks\": [[[0, 16]]]}]}",
        "{\"jobs\": [{\"memoryMap\": [[\"a\", \"b\"]], \"stacks\": [[[0, -16]]]}]}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}) {
    ApiResponse response = api_->handle("/symbolicate/v5", body);
    EXPECT_EQ(response.status, 400) << body;
    EXPECT_TRUE(Json::parse(response.json).contains("error"));
  }
  Json bad_offset = source_request(source_file_, 0);
  bad_offset["moduleOffset"] = "0xZZ";
  post("/source/v1", bad_offset, 400);
  EXPECT_EQ(api_->handle("/other/v1", "{}").status, 404);
}

// `serve` later than `record`: the binary is gone (or replaced), its debug file is found by
// the recorded build-id in a --symbol-dir (stripped_buildid: symdir/.build-id/xx/rest.debug).
TEST(SymbolApiLater, ALibraryIsFoundByBuildIdInItsDebugFileWhenTheBinaryIsGone) {
  const std::string binary = std::string(TEST_FIXTURE_DIR) + "/stripped_buildid";
  const std::string symdir = std::string(TEST_FIXTURE_DIR) + "/symdir";
  Symbolizer symbolizer(SymbolizerOptions{{symdir}});
  LibraryDescription lib = symbolizer.describe_library(binary, binary, "");
  ASSERT_FALSE(lib.code_id.empty());
  std::unique_ptr<ElfFile> debug = ElfFile::open(lib.debug_path, nullptr);
  ASSERT_TRUE(debug) << lib.debug_path;
  uint64_t spin = 0;
  for (const Symbol& s : debug->symbols())
    if (s.name == "buildid_spin") spin = s.address - debug->base_vaddr();
  ASSERT_NE(spin, 0u);
  lib.path = "/nonexistent/stripped_buildid";  // removed since the recording
  const std::string frame_request = R"({"jobs": [{"memoryMap": [[")" + lib.debug_name + R"(", ")" +
                                    lib.breakpad_id + R"("]], "stacks": [[[0, )" +
                                    std::to_string(spin + 4) + "]]]}]}";
  {
    SymbolApi api({lib}, SymbolizerOptions{{symdir}});
    ApiResponse response = api.handle("/symbolicate/v5", frame_request);
    ASSERT_EQ(response.status, 200) << response.json;
    const Json frame = Json::parse(response.json)["results"][0]["stacks"][0][0];
    EXPECT_EQ(frame["function"], "buildid_spin");
    EXPECT_TRUE(frame["file"].get<std::string>().ends_with("stripped_buildid.c"));
    // The debug file has no code: no disassembly, a clear refusal.
    const Json asm_request = {
        {"name", lib.name}, {"codeId", lib.code_id}, {"startAddress", hex(spin)}, {"size", "0x10"}};
    EXPECT_EQ(api.handle("/asm/v1", asm_request.dump()).status, 404);
  }
  {
    // Without the directory (and the debug file gone from where the recorder found it),
    // nothing has that build-id: unknown, never another file's names.
    lib.debug_path = "/nonexistent/stripped_buildid.debug";
    SymbolApi api({lib}, SymbolizerOptions{});
    ApiResponse response = api.handle("/symbolicate/v5", frame_request);
    ASSERT_EQ(response.status, 200) << response.json;
    EXPECT_FALSE(Json::parse(response.json)["results"][0]["stacks"][0][0].contains("function"));
  }
  {
    // A file at the recorded path with another build-id (rebuilt since) is not used.
    lib.path = std::string(TEST_FIXTURE_DIR) + "/inline_hot";
    SymbolApi api({lib}, SymbolizerOptions{});
    ApiResponse response = api.handle("/symbolicate/v5", frame_request);
    EXPECT_FALSE(Json::parse(response.json)["results"][0]["found_modules"].begin()->get<bool>());
  }
}

// Compiled as `cc ... inline_hot.c` in tests/fixtures: DWARF names "inline_hot.c" relative to
// the compilation directory; frames (so the profile's sources and /source/v1) get the path
// joined with it.
TEST(SourceFileNames, RelativeDwarfPathsAreJoinedWithTheCompilationDirectory) {
  const std::string binary = std::string(TEST_FIXTURE_DIR) + "/inline_hot_relative";
  std::unique_ptr<ElfFile> elf = ElfFile::open(binary, nullptr);
  ASSERT_TRUE(elf);
  Symbolizer symbolizer;
  std::set<std::string> files;
  for (const Symbol& s : elf->symbols()) {
    if (s.name != "hot_loop") continue;
    for (uint64_t a = s.address; a < s.address + s.size; ++a)
      for (const SymbolizedFrame& f : symbolizer.symbolize_relative(binary, a - elf->base_vaddr()))
        if (f.file) files.insert(*f.file);
  }
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    EXPECT_EQ(file.front(), '/') << file;
    EXPECT_TRUE(file.ends_with("/tests/fixtures/inline_hot.c") ||
                file.ends_with("/tests/fixtures/fixture_common.h"))
        << file;
    EXPECT_TRUE(std::ifstream(file).good()) << file;
  }
}

TEST(ProfileLibraries, ReadsTheLibsOfAProfile) {
  std::vector<LibraryDescription> libs = parse_profile_libraries(
      R"({"meta": {"version": 70}, "libs": [{"arch": "x86_64", "name": "a.so", "path": "/lib/a.so",
          "debugName": "a.so", "debugPath": "/usr/lib/debug/a.so", "breakpadId": "AB0",
          "codeId": "ab"}, {"name": "[anon]", "codeId": null}], "threads": [{"samples": {}}]})");
  ASSERT_EQ(libs.size(), 2u);
  EXPECT_EQ(libs[0].path, "/lib/a.so");
  EXPECT_EQ(libs[0].debug_path, "/usr/lib/debug/a.so");
  EXPECT_EQ(libs[0].breakpad_id, "AB0");
  EXPECT_EQ(libs[0].code_id, "ab");
  EXPECT_TRUE(libs[1].code_id.empty());
  EXPECT_THROW(parse_profile_libraries("{\"threads\": []}"), std::invalid_argument);
  EXPECT_THROW(parse_profile_libraries("{"), std::invalid_argument);
  // An entry that is not a library refuses the profile (skipped, it would move every later
  // library's index), for serve and convert alike.
  EXPECT_THROW(parse_profile_libraries(R"({"libs": [{"name": "a.so"}, 7, {"name": "b.so"}]})"),
               std::invalid_argument);
  EXPECT_THROW(parse_profile_libraries(R"({"libs": {"name": "a.so"}})"), std::invalid_argument);
  try {
    parse_processed_profile(R"({"libs": [7], "threads": [], "shared": {}, "meta": {}})");
    ADD_FAILURE() << "a lib that is not an object was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("an entry of libs is not an object"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bpfprof
