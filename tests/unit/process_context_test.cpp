// The context of a process from /proc/PID/cgroup as each container runtime, Kubernetes'
// two cgroup drivers and systemd write it (paths as found on real hosts), and from NSpid.
#include "userspace/model/process_context.h"

#include <gtest/gtest.h>

#include <string>

namespace bpfprof {
namespace {

const std::string kId = "4f1c0ed7c1c6e4f9bbf0a9a2b5d7e1c3f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2";
const std::string kPod = "2c48913c-b29f-11e7-9350-020968147796";
const std::string kPodUnderscores = "2c48913c_b29f_11e7_9350_020968147796";

TEST(ProcessContext, DockerSystemdDriverOnCgroupV2) {
  const ProcessContext c = context_from_cgroups("0::/system.slice/docker-" + kId + ".scope\n");
  EXPECT_EQ(c.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_TRUE(c.pod_uid.empty());
  EXPECT_TRUE(c.service.empty());
  EXPECT_EQ(c.cgroup, "/system.slice/docker-" + kId + ".scope");
  EXPECT_EQ(context_label(c), "docker 4f1c0ed7c1c6");
}

TEST(ProcessContext, DockerCgroupfsDriverOnV1BesideAnEmptyV2) {
  // A hybrid host (as this one): the container in the v1 controllers' paths, v2 at its root.
  const std::string text = "9:name=systemd:/docker/" + kId + "\n4:memory:/docker/" + kId +
                           "\n1:cpu,cpuacct:/docker/" + kId + "\n0::/\n";
  const ProcessContext c = context_from_cgroups(text);
  EXPECT_EQ(c.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.cgroup, "/docker/" + kId);
}

TEST(ProcessContext, KubernetesPodSystemdDriverContainerd) {
  const ProcessContext c =
      context_from_cgroups("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                           kPodUnderscores + ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(c.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.pod_uid, kPod);
  EXPECT_EQ(c.qos, PodQos::kBurstable);
  EXPECT_EQ(context_label(c), "pod 2c48913c: containerd 4f1c0ed7c1c6");
}

TEST(ProcessContext, KubernetesGuaranteedAndBestEffortPods) {
  const ProcessContext guaranteed = context_from_cgroups(
      "0::/kubepods.slice/kubepods-pod" + kPodUnderscores + ".slice/crio-" + kId + ".scope\n");
  EXPECT_EQ(guaranteed.runtime, ContainerRuntime::kCrio);
  EXPECT_EQ(guaranteed.qos, PodQos::kGuaranteed);
  EXPECT_EQ(guaranteed.pod_uid, kPod);
  const ProcessContext cgroupfs =
      context_from_cgroups("4:memory:/kubepods/besteffort/pod" + kPod + "/" + kId + "\n0::/\n");
  EXPECT_EQ(cgroupfs.runtime, ContainerRuntime::kCri);  // the path does not name the runtime
  EXPECT_EQ(cgroupfs.container_id, kId);
  EXPECT_EQ(cgroupfs.pod_uid, kPod);
  EXPECT_EQ(cgroupfs.qos, PodQos::kBestEffort);
}

TEST(ProcessContext, AConmonIsInThePodButIsNoContainer) {
  const ProcessContext c =
      context_from_cgroups("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                           kPodUnderscores + ".slice/crio-conmon-" + kId + ".scope\n");
  EXPECT_FALSE(c.runtime);
  EXPECT_EQ(c.pod_uid, kPod);
  EXPECT_EQ(context_label(c), "pod 2c48913c");
}

TEST(ProcessContext, PodmanRootfulRootlessAndCgroupfs) {
  EXPECT_EQ(context_from_cgroups("0::/machine.slice/libpod-" + kId + ".scope\n").runtime,
            ContainerRuntime::kPodman);
  const ProcessContext rootless =
      context_from_cgroups("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" +
                           kId + ".scope/container\n");
  EXPECT_EQ(rootless.runtime, ContainerRuntime::kPodman);
  EXPECT_EQ(rootless.container_id, kId);
  EXPECT_EQ(context_from_cgroups("3:cpu:/libpod_parent/libpod-" + kId + "\n").container_id, kId);
}

TEST(ProcessContext, NspawnMachinesByTheirName) {
  const ProcessContext scope =
      context_from_cgroups("0::/machine.slice/machine-my\\x2dbox.scope/payload\n");
  EXPECT_EQ(scope.runtime, ContainerRuntime::kNspawn);
  EXPECT_EQ(scope.container_id, "my-box");
  EXPECT_EQ(context_label(scope), "nspawn my-box");
  EXPECT_EQ(context_from_cgroups("0::/machine.slice/systemd-nspawn@debian.service/payload\n")
                .container_id,
            "debian");
  // Longer than a machine's name can be: no machine (found by fuzz_process_context).
  EXPECT_FALSE(
      context_from_cgroups("0::/machine.slice/machine-" + std::string(65, 'm') + ".scope\n")
          .runtime);
}

TEST(ProcessContext, OtherwiseTheInnermostSystemdUnit) {
  EXPECT_EQ(context_from_cgroups("0::/system.slice/nginx.service\n").service, "nginx.service");
  EXPECT_EQ(context_label(context_from_cgroups("0::/system.slice/nginx.service\n")),
            "nginx.service");
  EXPECT_EQ(context_from_cgroups("0::/user.slice/user-1000.slice/session-3.scope\n").service,
            "session-3.scope");
  EXPECT_EQ(context_from_cgroups("0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                 "app-gnome-firefox-4242.scope\n")
                .service,
            "app-gnome-firefox-4242.scope");
  // v1 only: the name=systemd hierarchy says it.
  EXPECT_EQ(context_from_cgroups("9:name=systemd:/system.slice/cron.service\n0::/\n").service,
            "cron.service");
}

TEST(ProcessContext, NoContextAtTheRoot) {
  const ProcessContext c = context_from_cgroups("9:name=systemd:/\n4:memory:/\n0::/\n");
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(context_label(c), "");
}

TEST(ProcessContext, UntrustedPathsAreBoundedAndCleaned) {
  // Not ids: too short, upper case, too long.
  EXPECT_FALSE(context_from_cgroups("0::/docker/4f1c0ed7\n").runtime);
  EXPECT_FALSE(context_from_cgroups("0::/system.slice/docker-4F1C0ED7C1C6E4F9.scope\n").runtime);
  EXPECT_FALSE(context_from_cgroups("0::/docker/" + kId + kId + "\n").runtime);
  // A container naming its own sub-cgroups: control characters and length.
  const ProcessContext c =
      context_from_cgroups("0::/docker/" + kId + "/\x1b[31mred\t" + std::string(2000, 'a') + "\n");
  EXPECT_EQ(c.container_id, kId);
  EXPECT_LE(c.cgroup.size(), kMaxCgroupPathBytes);
  EXPECT_EQ(c.cgroup.find('\x1b'), std::string::npos);
  EXPECT_EQ(c.cgroup.find('\t'), std::string::npos);
  // Lines that are not cgroup lines.
  EXPECT_TRUE(context_from_cgroups("garbage\n::\n\n:").empty());
  EXPECT_TRUE(context_from_cgroups("").empty());
}

TEST(ProcessContext, PidInItsOwnNamespace) {
  EXPECT_EQ(namespace_pid_from_status("Name:\tsh\nPid:\t4123\nNSpid:\t4123\t7\t1\nNSpgid:\t1\n"),
            1);
  EXPECT_EQ(namespace_pid_from_status("Name:\tsh\nNSpid:\t4123\n"), std::nullopt);
  EXPECT_EQ(namespace_pid_from_status("Name:\tsh\n"), std::nullopt);
  EXPECT_EQ(namespace_pid_from_status("\nNSpid:\tx\t3\n"), std::nullopt);
}

}  // namespace
}  // namespace bpfprof
