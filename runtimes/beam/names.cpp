#include "runtimes/beam/names.h"

#include <cctype>

namespace bpfprof {
namespace {

bool bare_atom(std::string_view atom) {
  if (atom.empty() || !std::islower(static_cast<unsigned char>(atom[0]))) return false;
  for (char c : atom)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '@') return false;
  return true;
}

constexpr std::string_view kElixirPrefix = "Elixir.";

// Elixir's name of an anonymous function's atom, '-outer/2-fun-0-': "anonymous fn/A in
// Module.outer/2"; empty when the atom is not one.
std::string elixir_anonymous(std::string_view module, std::string_view function, uint32_t arity) {
  if (!function.starts_with('-') || !function.ends_with('-')) return "";
  const size_t fun = function.rfind("-fun-");
  if (fun == std::string_view::npos || fun < 2) return "";
  const std::string_view parent = function.substr(1, fun - 1);
  return "anonymous fn/" + std::to_string(arity) + " in " + std::string(module) + "." +
         std::string(parent);
}

}  // namespace

std::string erlang_atom(std::string_view atom) {
  if (bare_atom(atom)) return std::string(atom);
  std::string quoted = "'";
  for (char c : atom) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "'";
}

std::string beam_function_name(const BeamMfa& mfa) {
  const std::string arity = std::to_string(mfa.arity);
  if (mfa.module.starts_with(kElixirPrefix)) {
    const std::string_view module = std::string_view(mfa.module).substr(kElixirPrefix.size());
    std::string anonymous = elixir_anonymous(module, mfa.function, mfa.arity);
    if (!anonymous.empty()) return anonymous;
    return std::string(module) + "." + mfa.function + "/" + arity;
  }
  return erlang_atom(mfa.module) + ":" + erlang_atom(mfa.function) + "/" + arity;
}

}  // namespace bpfprof
