#include "userspace/model/process_context.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "symbols/util/text.h"

namespace bpfprof {
namespace {

constexpr size_t kMaxUnitBytes = 256;

bool is_hex_id(std::string_view s) {
  return s.size() >= 12 && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// 8-4-4-4-12 hex digits; systemd's cgroup driver writes '_' for '-'.
std::optional<std::string> pod_uid(std::string_view s) {
  if (s.size() != 36) return std::nullopt;
  std::string uid(s);
  for (size_t i = 0; i < uid.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash && (uid[i] == '_' || uid[i] == '-')) {
      uid[i] = '-';
      continue;
    }
    if (dash || !((uid[i] >= '0' && uid[i] <= '9') || (uid[i] >= 'a' && uid[i] <= 'f')))
      return std::nullopt;
  }
  return uid;
}

// "prefix<middle>suffix" -> middle.
std::optional<std::string_view> text_between(std::string_view s, std::string_view prefix,
                                             std::string_view suffix) {
  if (s.size() < prefix.size() + suffix.size() || !s.starts_with(prefix) || !s.ends_with(suffix))
    return std::nullopt;
  return s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
}

// systemd's unit-name escapes (\x2d for '-' in a machine's name), other bytes kept.
std::string unescape_unit(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' &&
        std::from_chars(s.data() + i + 2, s.data() + i + 4, value, 16).ptr == s.data() + i + 4) {
      out += static_cast<char>(value);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool is_unit_name(std::string_view s) {
  return !s.empty() && s.size() <= kMaxUnitBytes && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
           c == '_' || c == '.' || c == '\\' || c == '@' || c == '-';
  });
}

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

struct Container {
  ContainerRuntime runtime;
  std::string id;
};

// A container scope of the systemd driver, or a machine of systemd-nspawn.
std::optional<Container> container_scope(std::string_view part) {
  static constexpr std::pair<std::string_view, ContainerRuntime> kScopes[] = {
      {"docker-", ContainerRuntime::kDocker},
      {"cri-containerd-", ContainerRuntime::kContainerd},
      {"crio-", ContainerRuntime::kCrio},
      {"libpod-", ContainerRuntime::kPodman}};
  for (const auto& [prefix, runtime] : kScopes) {
    auto id = text_between(part, prefix, ".scope");
    if (!id && runtime == ContainerRuntime::kPodman) id = text_between(part, prefix, "");
    if (id && is_hex_id(*id)) return Container{runtime, std::string(*id)};
  }
  for (const auto& [prefix, suffix] :
       {std::pair<std::string_view, std::string_view>{"machine-", ".scope"},
        {"systemd-nspawn@", ".service"}}) {
    const auto name = text_between(part, prefix, suffix);
    // systemd's machine names are 64 bytes at most (hostname rules).
    if (name && name->size() <= 64 && is_unit_name(*name))
      return Container{ContainerRuntime::kNspawn, unescape_unit(*name)};
  }
  return std::nullopt;
}

struct PathFacts {
  std::optional<Container> container;
  std::optional<std::string> pod;
  PodQos qos = PodQos::kGuaranteed;
  std::string service;  // the innermost .service or .scope that is not a container's
};

// The pod of a kubepods path, systemd driver ("kubepods-burstable-pod<uid>.slice") or
// cgroupfs ("kubepods/burstable/pod<uid>"); its QoS class from the same names.
void read_pod(std::string_view part, bool under_kubepods, PathFacts& facts) {
  if (part == "kubepods-burstable.slice" || (under_kubepods && part == "burstable"))
    facts.qos = PodQos::kBurstable;
  if (part == "kubepods-besteffort.slice" || (under_kubepods && part == "besteffort"))
    facts.qos = PodQos::kBestEffort;
  for (std::string_view prefix :
       {"kubepods-burstable-pod", "kubepods-besteffort-pod", "kubepods-pod"})
    if (const auto uid = text_between(part, prefix, ".slice"))
      if (auto parsed = pod_uid(*uid)) facts.pod = std::move(parsed);
  if (under_kubepods)
    if (const auto uid = text_between(part, "pod", ""))
      if (auto parsed = pod_uid(*uid)) facts.pod = std::move(parsed);
}

PathFacts facts_of(std::string_view path) {
  PathFacts facts;
  const std::vector<std::string_view> parts = components(path);
  bool under_kubepods = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    under_kubepods = under_kubepods || part == "kubepods" || part.starts_with("kubepods.") ||
                     part.starts_with("kubepods-");
    read_pod(part, under_kubepods, facts);
    if (auto container = container_scope(part)) {
      facts.container = std::move(container);
      continue;
    }
    // The cgroupfs drivers: docker/<id>; a pod's <id>, whose runtime the path does not name.
    const bool docker = i > 0 && parts[i - 1] == "docker";
    if ((docker || facts.pod) && is_hex_id(part))
      facts.container =
          Container{docker ? ContainerRuntime::kDocker : ContainerRuntime::kCri, std::string(part)};
    if ((part.ends_with(".service") || part.ends_with(".scope")) && is_unit_name(part))
      facts.service = unescape_unit(part);
  }
  return facts;
}

// A path as kept in the profile: bounded, control characters replaced.
std::string kept_path(std::string_view path) {
  std::string kept(path.substr(0, kMaxCgroupPathBytes));
  for (char& c : kept)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return kept;
}

}  // namespace

std::vector<CgroupLine> cgroup_lines(std::string_view proc_cgroup) {
  std::vector<CgroupLine> lines;
  for (std::string_view line : split(proc_cgroup, '\n')) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    lines.push_back({line.substr(0, first), line.substr(first + 1, second - first - 1),
                     line.substr(second + 1)});
  }
  return lines;
}

bool CgroupLine::has_controller(std::string_view name) const {
  for (std::string_view controller : split(controllers, ','))
    if (controller == name) return true;
  return false;
}

ProcessContext context_from_cgroups(std::string_view proc_cgroup) {
  ProcessContext context;
  std::string_view v2_path, systemd_path, container_path;
  PathFacts chosen;
  for (const CgroupLine& line : cgroup_lines(proc_cgroup)) {
    const std::string_view path = line.path.substr(0, kMaxCgroupPathBytes);
    const bool v2 = line.v2();
    if (v2) v2_path = path;
    if (line.controllers == "name=systemd") systemd_path = path;
    PathFacts facts = facts_of(path);
    // A container or pod found in the v2 path wins; else the first v1 hierarchy with one.
    if ((facts.container || facts.pod) && (v2 || container_path.empty())) {
      chosen = std::move(facts);
      container_path = path;
    }
  }
  const PathFacts v2_facts = facts_of(v2_path);
  const PathFacts systemd_facts = facts_of(systemd_path);
  if (chosen.container) {
    context.runtime = chosen.container->runtime;
    context.container_id = chosen.container->id;
  }
  if (chosen.pod) {
    context.pod_uid = *chosen.pod;
    context.qos = chosen.qos;
  }
  if (!chosen.container && !chosen.pod)
    context.service = !v2_facts.service.empty() ? v2_facts.service : systemd_facts.service;
  const std::string_view shown = !container_path.empty()                ? container_path
                                 : (!v2_path.empty() && v2_path != "/") ? v2_path
                                                                        : systemd_path;
  context.cgroup = kept_path(shown);
  return context;
}

std::optional<int32_t> namespace_pid_from_status(std::string_view status) {
  const size_t at = status.find("\nNSpid:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  std::optional<int32_t> innermost;
  size_t count = 0;
  while (!line.empty()) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    int32_t pid = 0;
    const auto [next, error] = std::from_chars(line.data(), line.data() + line.size(), pid);
    if (error != std::errc() || pid <= 0) break;
    innermost = pid;
    ++count;
    line.remove_prefix(static_cast<size_t>(next - line.data()));
  }
  return count > 1 ? innermost : std::nullopt;
}

const char* container_runtime_name(ContainerRuntime runtime) {
  switch (runtime) {
    case ContainerRuntime::kDocker:
      return "docker";
    case ContainerRuntime::kContainerd:
      return "containerd";
    case ContainerRuntime::kCrio:
      return "cri-o";
    case ContainerRuntime::kPodman:
      return "podman";
    case ContainerRuntime::kNspawn:
      return "nspawn";
    case ContainerRuntime::kCri:
      return "cri";
  }
  return "container";
}

const char* pod_qos_name(PodQos qos) {
  switch (qos) {
    case PodQos::kGuaranteed:
      return "Guaranteed";
    case PodQos::kBurstable:
      return "Burstable";
    case PodQos::kBestEffort:
      return "BestEffort";
  }
  return "";
}

std::optional<ContainerRuntime> container_runtime_named(std::string_view name) {
  for (ContainerRuntime r :
       {ContainerRuntime::kDocker, ContainerRuntime::kContainerd, ContainerRuntime::kCrio,
        ContainerRuntime::kPodman, ContainerRuntime::kNspawn, ContainerRuntime::kCri})
    if (name == container_runtime_name(r)) return r;
  return std::nullopt;
}

std::optional<PodQos> pod_qos_named(std::string_view name) {
  for (PodQos q : {PodQos::kGuaranteed, PodQos::kBurstable, PodQos::kBestEffort})
    if (name == pod_qos_name(q)) return q;
  return std::nullopt;
}

std::string context_label(const ProcessContext& context) {
  const std::string container = container_label(context);
  return container.empty() ? context.service : container;
}

std::string container_label(const ProcessContext& context) {
  std::string container;
  if (context.runtime) {
    const bool hex = context.runtime != ContainerRuntime::kNspawn;
    container = std::string(container_runtime_name(*context.runtime)) + " " +
                (hex ? context.container_id.substr(0, 12) : context.container_id);
  }
  if (!context.pod_uid.empty())
    return "pod " + context.pod_uid.substr(0, 8) + (container.empty() ? "" : ": " + container);
  return container;
}

bool same_container(const ProcessContext& a, const ProcessContext& b) {
  return a.runtime == b.runtime && a.container_id == b.container_id && a.pod_uid == b.pod_uid;
}

std::string with_container(const std::string& name, const ProcessContext& context) {
  const std::string where = container_label(context);
  return where.empty() ? name : name + " [" + where + "]";
}

std::string without_container(const std::string& name, const ProcessContext& context) {
  const std::string where = container_label(context);
  const std::string suffix = " [" + where + "]";
  return !where.empty() && name.ends_with(suffix) ? name.substr(0, name.size() - suffix.size())
                                                  : name;
}

}  // namespace bpfprof
