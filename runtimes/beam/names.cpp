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

// Elixir's operators, written bare after a module as its remote calls are (`Kernel.+/2`).
constexpr std::string_view kElixirOperators[] = {
    "+",   "-",   "*",   "/",   "++",  "--", "**", "..",  "<>",  "==",  "!=", "===", "!==",
    "<",   ">",   "<=",  ">=",  "&&",  "||", "!",  "and", "or",  "not", "in", "|>",  "<<<",
    ">>>", "~~~", "&&&", "|||", "^^^", "<~", "~>", "<~>", "<|>", "=~",  "@",  "&",   "::"};

// Whether Elixir writes a function's name bare after its module: an identifier (letters,
// digits and _, led by a lowercase letter or _, perhaps ending in ? or !) or an operator.
bool elixir_bare_function(std::string_view name) {
  for (std::string_view op : kElixirOperators)
    if (name == op) return true;
  if (name.empty() || (!std::islower(static_cast<unsigned char>(name[0])) && name[0] != '_'))
    return false;
  if (name.back() == '?' || name.back() == '!') name.remove_suffix(1);
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// `text` between `quote`s, the quote and backslashes escaped.
std::string quoted(std::string_view text, char quote) {
  std::string out(1, quote);
  for (char c : text) {
    if (c == quote || c == '\\') out += '\\';
    out += c;
  }
  return out + quote;
}

// A function's name as Elixir writes it after its module (Macro.inspect_atom(:remote_call)):
// bare, or in double quotes.
std::string elixir_function(std::string_view name) {
  return elixir_bare_function(name) ? std::string(name) : quoted(name, '"');
}

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
  return bare_atom(atom) ? std::string(atom) : quoted(atom, '\'');
}

std::string beam_function_name(const BeamMfa& mfa) {
  const std::string arity = std::to_string(mfa.arity);
  if (mfa.module.starts_with(kElixirPrefix)) {
    const std::string_view module = std::string_view(mfa.module).substr(kElixirPrefix.size());
    std::string anonymous = elixir_anonymous(module, mfa.function, mfa.arity);
    if (!anonymous.empty()) return anonymous;
    return std::string(module) + "." + elixir_function(mfa.function) + "/" + arity;
  }
  return erlang_atom(mfa.module) + ":" + erlang_atom(mfa.function) + "/" + arity;
}

}  // namespace bpfprof
