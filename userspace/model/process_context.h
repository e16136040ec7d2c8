// Where a process runs: its container (runtime and id), its Kubernetes pod, its systemd
// service, from the cgroup paths of /proc/PID/cgroup; and its pid inside its pid namespace.
// The paths are untrusted text (a container names its own sub-cgroups): every field is
// bounded, and ids are kept only in their runtime's form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bpfprof {

// kCri: a pod's container under the cgroupfs driver, whose path does not name its runtime.
enum class ContainerRuntime : uint8_t { kDocker, kContainerd, kCrio, kPodman, kNspawn, kCri };
enum class PodQos : uint8_t { kGuaranteed, kBurstable, kBestEffort };

struct ProcessContext {
  std::optional<ContainerRuntime> runtime;  // set with container_id
  std::string container_id;                 // hex as the runtime prints it; a machine's name
  std::string pod_uid;                      // 8-4-4-4-12 hex, from a kubepods path
  std::optional<PodQos> qos;                // set with pod_uid
  std::string service;                      // the innermost systemd unit (nginx.service)
  std::string cgroup;                       // the path it was read from (v2, else v1)
  std::optional<int32_t> namespace_pid;     // its pid in its own pid namespace, if not ours

  bool empty() const { return !runtime && pod_uid.empty() && service.empty(); }
  bool operator==(const ProcessContext&) const = default;
};

// One line of /proc/PID/cgroup: "hierarchy-id:controller-list:path" (v2's: "0::path"); the
// path may itself hold ':'.
struct CgroupLine {
  std::string_view hierarchy;
  std::string_view controllers;  // comma-separated; "name=systemd" for a named hierarchy
  std::string_view path;
  bool v2() const { return hierarchy == "0" && controllers.empty(); }
  bool has_controller(std::string_view name) const;
};
// The lines of a /proc/PID/cgroup text; what is not such a line is left out.
std::vector<CgroupLine> cgroup_lines(std::string_view proc_cgroup);

// The longest cgroup path kept; a longer one is cut (and a container id in its cut part lost).
inline constexpr size_t kMaxCgroupPathBytes = 512;

// From the text of /proc/PID/cgroup ("0::/path" for v2, "N:controllers:/path" for v1): a
// container in any hierarchy (a v1-only docker host puts it in the controllers' paths), the
// pod, and the service of the v2 path or else of v1's name=systemd one.
ProcessContext context_from_cgroups(std::string_view proc_cgroup);

// The innermost pid of the NSpid line of /proc/PID/status, when the process is in a pid
// namespace below ours (the line has more than one pid).
std::optional<int32_t> namespace_pid_from_status(std::string_view proc_status);

// What names the context in a label: "docker 3f2a9c1b1d2e", "pod 5d3c...: containerd 9ab...",
// "nginx.service"; empty for no context.
std::string context_label(const ProcessContext& context);
// The same for a container or pod only (empty for a service alone): a process track's label
// carries it, where a service would be on every track of a desktop's recording.
std::string container_label(const ProcessContext& context);
// Whether two processes run in the same container or pod (or neither in one).
bool same_container(const ProcessContext& a, const ProcessContext& b);
// A process's or main thread's name as its track and folded stacks show it: with its container
// or pod ("python3 [docker 4f1c0ed7c1c6]"), where it runs in one; without_container undoes it.
std::string with_container(const std::string& name, const ProcessContext& context);
std::string without_container(const std::string& name, const ProcessContext& context);
const char* container_runtime_name(ContainerRuntime runtime);
const char* pod_qos_name(PodQos qos);
// The reverse of the two above; nullopt for any other text.
std::optional<ContainerRuntime> container_runtime_named(std::string_view name);
std::optional<PodQos> pod_qos_named(std::string_view name);

}  // namespace bpfprof
