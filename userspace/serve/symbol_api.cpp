#include "userspace/serve/symbol_api.h"

#include <fcntl.h>

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "symbols/elf/elf_file.h"
#include "symbols/util/text.h"
#include "symbols/util/unique_handle.h"
#include "symbols/util/untrusted_file.h"
#include "userspace/serve/disassembler.h"

namespace bpfprof {

namespace {

using Json = nlohmann::json;

// A request the API refuses, with its HTTP status.
struct RequestError : std::runtime_error {
  RequestError(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;
};

RequestError malformed(const std::string& message) { return RequestError(400, message); }

// Requests are small: a deeper nesting is no request of this API (and would only cost stack).
constexpr int kMaxNesting = 16;

int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

const Json& member(const Json& object, const char* name) {
  if (!object.is_object())
    throw malformed("expected an object holding \"" + std::string(name) + "\"");
  auto it = object.find(name);
  if (it == object.end()) throw malformed("missing \"" + std::string(name) + "\"");
  return *it;
}

std::string string_member(const Json& object, const char* name) {
  const Json& value = member(object, name);
  if (!value.is_string()) throw malformed("\"" + std::string(name) + "\" is not a string");
  return value.get<std::string>();
}

uint64_t unsigned_value(const Json& value, const char* what) {
  if (!value.is_number_unsigned())
    throw malformed(std::string(what) + " is not an unsigned integer");
  return value.get<uint64_t>();
}

// "0x1a2b" (the API's form for addresses and sizes); a plain number is taken too.
uint64_t hex_member(const Json& object, const char* name) {
  const Json& value = member(object, name);
  if (value.is_number()) return unsigned_value(value, name);
  const std::string text = value.is_string() ? value.get<std::string>() : std::string();
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X') ||
      text.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos)
    throw malformed("\"" + std::string(name) + "\" is not a hex number (\"0x...\")");
  return std::stoull(text.substr(2), nullptr, 16);
}

}  // namespace

// The endpoints, with the API's members (a friend: no JSON type in the header).
struct SymbolApiHandlers {
  SymbolApi& api;

  std::vector<SymbolizedFrame> frames_at(const FoundLibrary& library, uint64_t relative) {
    switch (library.kind) {
      case LibraryKind::kKernel:
        return api.symbolizer_.symbolize_kernel_relative("", relative);
      case LibraryKind::kKernelModule:
        return api.symbolizer_.symbolize_kernel_relative(library.kernel_module, relative);
      case LibraryKind::kFile:
        break;
    }
    return api.symbolizer_.symbolize_relative(library.files.front(), relative);
  }

  // One frame of /symbolicate/v5: the outer function, its file and line, and the functions
  // inlined at the address, innermost first.
  Json frame_json(size_t index, const std::string& module, uint64_t offset,
                  const std::vector<SymbolizedFrame>& frames) {
    Json out = {{"frame", index}, {"module", module}, {"module_offset", hex_address(offset)}};
    if (frames.empty()) return out;
    const SymbolizedFrame& outer = frames.front();
    if (!outer.name.empty() && outer.symbol && offset >= outer.symbol->relative_address) {
      out["function"] = outer.name;
      out["function_offset"] = hex_address(offset - outer.symbol->relative_address);
      if (outer.symbol->size > 0) out["function_size"] = hex_address(outer.symbol->size);
    }
    if (outer.file) out["file"] = *outer.file;
    if (outer.line) out["line"] = *outer.line;
    if (frames.size() > 1) {
      Json inlines = Json::array();
      for (size_t i = frames.size() - 1; i > 0; --i) {
        Json inlined = {{"function", frames[i].name}};
        if (frames[i].file) inlined["file"] = *frames[i].file;
        if (frames[i].line) inlined["line"] = *frames[i].line;
        inlines.push_back(std::move(inlined));
      }
      out["inlines"] = std::move(inlines);
    }
    return out;
  }

  Json symbolicate_job(const Json& job) {
    const Json& memory_map = member(job, "memoryMap");
    const Json& stacks = member(job, "stacks");
    if (!memory_map.is_array() || !stacks.is_array())
      throw malformed("memoryMap and stacks must be arrays");
    std::vector<std::string> names;
    std::vector<std::optional<FoundLibrary>> libraries;
    Json found_modules = Json::object();
    for (const Json& entry : memory_map) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_string())
        throw malformed("a memoryMap entry is not [debugName, breakpadId]");
      names.push_back(entry[0].get<std::string>());
      const std::string id = entry[1].get<std::string>();
      libraries.push_back(api.finder_.by_debug_id(names.back(), id));
      found_modules[names.back() + "/" + id] = libraries.back().has_value();
    }
    Json out_stacks = Json::array();
    for (const Json& stack : stacks) {
      if (!stack.is_array()) throw malformed("a stack is not an array");
      Json out_stack = Json::array();
      for (const Json& frame : stack) {
        if (!frame.is_array() || frame.size() != 2 || !frame[0].is_number_integer())
          throw malformed("a frame is not [moduleIndex, offset]");
        const int64_t module = frame[0].get<int64_t>();
        const uint64_t offset = unsigned_value(frame[1], "a frame's offset");
        if (module < -1 || module >= static_cast<int64_t>(names.size()))
          throw malformed("a frame's module index is not in the memoryMap");
        const bool known = module >= 0 && libraries[module];
        out_stack.push_back(frame_json(
            out_stack.size(), module >= 0 ? names[module] : "", offset,
            known ? frames_at(*libraries[module], offset) : std::vector<SymbolizedFrame>{}));
      }
      out_stacks.push_back(std::move(out_stack));
    }
    return {{"stacks", std::move(out_stacks)}, {"found_modules", std::move(found_modules)}};
  }

  Json symbolicate(const Json& request) {
    const Json& jobs = member(request, "jobs");
    if (!jobs.is_array()) throw malformed("jobs must be an array");
    Json results = Json::array();
    for (const Json& job : jobs) results.push_back(symbolicate_job(job));
    return {{"results", std::move(results)}};
  }

  FoundLibrary library_by_debug_id(const Json& request) {
    const std::string debug_name = string_member(request, "debugName");
    const std::string debug_id = string_member(request, "debugId");
    std::optional<FoundLibrary> library = api.finder_.by_debug_id(debug_name, debug_id);
    if (!library)
      throw RequestError(404, "no library " + debug_name + "/" + debug_id + " in this profile " +
                                  "(or its file, with that build-id, is not found)");
    return *library;
  }

  // Only a file that the library's debug information names at that address: the server
  // must not be a way to read any file of the machine.
  Json source(const Json& request) {
    const FoundLibrary library = library_by_debug_id(request);
    const uint64_t offset = hex_member(request, "moduleOffset");
    const std::string file = string_member(request, "file");
    if (library.kind != LibraryKind::kFile)
      throw RequestError(404, "no source files for the kernel (only kallsyms names)");
    bool named = false;
    for (const SymbolizedFrame& frame : frames_at(library, offset))
      named = named || (frame.file && *frame.file == file);
    if (!named)
      throw RequestError(404, "the debug information of " + library.description->debug_name +
                                  " does not name " + file + " at " + hex_address(offset));
    std::optional<std::string> text = read_regular_file(file, SymbolApi::kMaxSourceBytes);
    if (!text) throw RequestError(404, "cannot read " + file);
    return {{"symbolsLastModified", nullptr},
            {"sourceLastModified", nullptr},
            {"file", file},
            {"source", std::move(*text)}};
  }

  FoundLibrary library_for_code(const Json& request) {
    if (request.contains("name") && request.contains("codeId") && request["codeId"].is_string()) {
      const std::string name = string_member(request, "name");
      const std::string code_id = string_member(request, "codeId");
      if (std::optional<FoundLibrary> library = api.finder_.by_code_id(name, code_id))
        return *library;
      if (!request.contains("debugName"))
        throw RequestError(404, "no library " + name + " with code id " + code_id +
                                    " in this profile (or its file is not found)");
    }
    return library_by_debug_id(request);
  }

  Json assembly(const Json& request) {
    const FoundLibrary library = library_for_code(request);
    const uint64_t start = hex_member(request, "startAddress");
    uint64_t size = hex_member(request, "size");
    if (library.kind != LibraryKind::kFile)
      throw RequestError(404, "no machine code of the kernel here (only kallsyms names)");
    const auto until_end = request.find("continueUntilFunctionEnd");
    if (until_end != request.end() && until_end->is_boolean() && until_end->get<bool>()) {
      const std::vector<SymbolizedFrame> frames = frames_at(library, start);
      const std::optional<NativeSymbolInfo>& symbol = frames.front().symbol;
      if (symbol && symbol->relative_address <= start)
        size = std::max(size, symbol->relative_address + symbol->size - start);
    }
    if (size == 0 || size > SymbolApi::kMaxCodeBytes)
      throw malformed("size must be from 1 to " + std::to_string(SymbolApi::kMaxCodeBytes));
    for (const std::string& path : library.files) {
      std::shared_ptr<const ElfFile> elf = api.elf_cache_.get(path);
      const UniqueFd fd = open_untrusted(path, UntrustedKind::kBinary).fd;
      if (!elf || !fd.valid()) continue;
      const uint64_t vaddr = start + elf->base_vaddr();
      const std::vector<uint8_t> code = read_code_bytes(fd.get(), vaddr, size);
      if (code.empty()) continue;  // a debug file: the code is in the library itself
      std::optional<DisassembledCode> text = disassemble(elf->architecture(), code, vaddr);
      if (!text)
        throw RequestError(404, "cannot disassemble " + std::string(elf->architecture()) + " code");
      Json instructions = Json::array();
      for (auto& [at, instruction] : text->instructions)
        instructions.push_back(Json::array({at, std::move(instruction)}));
      return {{"startAddress", hex_address(start)},
              {"size", hex_address(text->size)},
              {"arch", elf->architecture()},
              {"syntax", Json::array({text->syntax})},
              {"instructions", std::move(instructions)}};
    }
    throw RequestError(
        404, "no code at " + hex_address(start) + " in the files of " + library.description->name);
  }
};

SymbolApi::SymbolApi(std::vector<LibraryDescription> libraries, SymbolizerOptions options)
    : finder_(std::move(libraries), options.symbol_dirs), symbolizer_(std::move(options)) {}

ApiResponse SymbolApi::handle(std::string_view endpoint, std::string_view request) {
  const std::lock_guard lock(mutex_);
  ApiResponse response;
  Json answer;
  try {
    if (nesting_depth(request) > kMaxNesting) throw malformed("the request is nested too deeply");
    const Json parsed = Json::parse(request);
    SymbolApiHandlers handlers{*this};
    if (endpoint == "/symbolicate/v5")
      answer = handlers.symbolicate(parsed);
    else if (endpoint == "/source/v1")
      answer = handlers.source(parsed);
    else if (endpoint == "/asm/v1")
      answer = handlers.assembly(parsed);
    else
      throw RequestError(404, "no such endpoint: " + std::string(endpoint));
  } catch (const RequestError& e) {
    response.status = e.status;
    answer = {{"error", e.what()}};
  } catch (const Json::exception& e) {
    response.status = 400;
    answer = {{"error", std::string("malformed request: ") + e.what()}};
  } catch (const std::exception& e) {
    response.status = 500;
    answer = {{"error", e.what()}};
  }
  // Source files and DWARF names need not be UTF-8: bad bytes become U+FFFD.
  response.json = answer.dump(-1, ' ', false, Json::error_handler_t::replace);
  return response;
}

}  // namespace bpfprof
