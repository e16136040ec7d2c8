// Pretend containers made of what the kernel gives (podman cannot start one here): cgroups
// named as a container runtime names them, in the v1 hierarchies or the v2 one, and pid,
// mount and uts namespaces (unshare), with a workload inside.
import { existsSync, mkdirSync, readFileSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';

import { sleep, startBackground } from './processes.mjs';

export const CGROUP_ROOT = '/sys/fs/cgroup';
// This host mounts the v1 controllers and the v2 tree beside them (hybrid); a pure v2 host
// has v2 at the root.
export const V2_ROOT = existsSync(join(CGROUP_ROOT, 'unified', 'cgroup.procs'))
  ? join(CGROUP_ROOT, 'unified') : CGROUP_ROOT;
const V1_HIERARCHIES = ['cpu', 'memory', 'systemd'].filter((h) => existsSync(join(CGROUP_ROOT, h, 'cgroup.procs')));

export const hex64 = (seed) => Array.from({ length: 64 }, (_, i) => ((seed * 31 + i * 7) % 16).toString(16)).join('');

// A container: its cgroup directories (made here, removed by remove()), and run() starts
// `command args` inside them, as pid 1 of new pid, mount and uts namespaces.
export class PretendContainer {
  // `paths`: cgroup paths under each root they go in, e.g. [[v2Root, '/kubepods.slice/...']].
  constructor(paths) {
    this.dirs = paths.map(([root, path]) => join(root, path));
    this.made = [];
  }

  static dockerOnV1(id) {
    return new PretendContainer(V1_HIERARCHIES.map((h) => [join(CGROUP_ROOT, h), `/docker/${id}`]));
  }

  static kubernetesPodOnV2(podUid, containerId) {
    const uid = podUid.replaceAll('-', '_');
    return new PretendContainer([[V2_ROOT, '/kubepods.slice/kubepods-burstable.slice/' +
      `kubepods-burstable-pod${uid}.slice/cri-containerd-${containerId}.scope`]]);
  }

  static available() {
    return V1_HIERARCHIES.length > 0 && existsSync(join(V2_ROOT, 'cgroup.procs'));
  }

  create() {
    for (const dir of this.dirs) {
      const missing = [];
      for (let d = dir; !existsSync(d); d = join(d, '..')) missing.unshift(d);
      for (const d of missing) {
        mkdirSync(d);
        this.made.push(d);
      }
    }
    return this;
  }

  // The shell moves itself into every cgroup of the container, then execs unshare, whose
  // child (pid 1 inside) runs `script` (sh -c).
  run(script) {
    const join_cgroups = this.dirs.map((d) => `echo $$ > '${d}/cgroup.procs'`).join(' && ');
    return startBackground('/bin/sh', ['-c', `${join_cgroups} && exec unshare --pid --fork --mount-proc --uts sh -c '${script}'`]);
  }

  // The cgroups, deepest first, once their processes are gone.
  async remove() {
    for (const dir of [...this.made].reverse()) {
      for (let attempt = 0; attempt < 50; attempt++) {
        try {
          rmdirSync(dir);
          break;
        } catch (e) {
          if (e.code === 'ENOENT') break;
          await sleep(20);  // a process that just exited can hold it for a moment
        }
      }
    }
    this.made = [];
  }

  pids() {
    return readFileSync(join(this.dirs[0], 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  }
}
