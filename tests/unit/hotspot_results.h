// A HotSpot table reader's result in a test: its value, and a test failure where it is an
// error.
#pragma once

#include <gtest/gtest.h>

#include <variant>

#include "runtimes/hotspot/vm_structs.h"

namespace bpfprof::hotspot {

template <typename T>
const T& value_of(const std::variant<T, VmStructsError>& result) {
  if (const auto* error = std::get_if<VmStructsError>(&result))
    ADD_FAILURE() << "error: " << error->message;
  return std::get<T>(result);
}

}  // namespace bpfprof::hotspot
