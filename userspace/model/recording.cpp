#include "userspace/model/recording.h"

namespace bpfprof {

PythonFrameId PythonFrameTable::intern(const PythonFunction& function, uint32_t line) {
  const std::string key =
      function.filename + ":" + std::to_string(function.first_line) + ":" + function.qualified_name;
  auto [found, added] = function_index_.try_emplace(key, static_cast<uint32_t>(functions_.size()));
  if (added) functions_.push_back(function);
  const uint64_t frame_key = uint64_t{found->second} << 32 | line;
  auto [frame, new_frame] =
      frame_index_.try_emplace(frame_key, PythonFrameId{static_cast<uint32_t>(frames_.size())});
  if (new_frame) frames_.push_back(PythonFrame{found->second, line});
  return frame->second;
}

}  // namespace bpfprof
