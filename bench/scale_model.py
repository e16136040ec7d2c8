#!/usr/bin/env python3
"""A model of bpfprof's cost on machines larger than this one (issue 39).

  bench/scale_model.py measure [--out FILE]   root: measures the unit costs on this machine
  bench/scale_model.py project [--inputs FILE] [--processes N] [--execs N] [--share S]
                                             prints the projections for 64 and 192 CPUs

`measure` spins a deep-stack fixture on every CPU and records the whole machine
(`record -a`) at three frequencies. What the recorder and its BPF programs cost grows with the
samples per second, not with where they come from, so raising the frequency on two CPUs loads
the recorder as more CPUs at 1 kHz would: 10 kHz on 2 CPUs is the sample rate of 20 CPUs at
1 kHz. From each run it takes the recorder's CPU time (its rusage), the samples and ring bytes
its summary gives, the BPF programs' run time per call (kernel.bpf_stats_enabled) and every
BPF map's memory (the recorder's /proc/PID/fdinfo). It fits the recorder's CPU as a fixed
part plus a cost per sample on the lowest and highest frequency and checks the fit against
the middle one (the validation, printed and saved).

`project` turns the unit costs into the figures of a machine with C CPUs, P processes and B
distinct binaries, at F Hz, and says which limit comes first (docs/scale.md).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get('BUILD_DIR', os.path.join(ROOT, 'build'))
BPFPROF = os.environ.get('BPFPROF', os.path.join(BUILD, 'bpfprof'))
FIXTURE = os.environ.get('FIXTURE', os.path.join(BUILD, 'tests/fixtures/unwind_recursion'))
DEPTH = os.environ.get('DEPTH', '40')
SECONDS = float(os.environ.get('SECONDS_RECORDED', '4'))
FREQUENCIES = [1000, 4000, 10000]

# BPF maps by what their memory grows with. Names as the kernel keeps them (15 characters).
PER_CPU_ARRAYS = {'copy_scratch', 'row_cache'}  # plain arrays sized to the possible CPUs
PER_PROCESS = {'unwind_processe'}  # no-prealloc hash: an entry per process with mappings
RINGS = {'events', 'lifecycle_event'}
# The row array's chunks are maps of their own, added as tables need (bpf/unwind_maps.h).
UNWIND_TABLES = {'unwind_rows', 'unwind_pages', 'unwind_rules', 'unwind_row_chun'}
CHUNK_ROWS = 1 << 20  # rows of 4 bytes: 4 MiB a chunk
SYSTEM_WIDE_INITIAL_CHUNKS = 4
SYSTEM_WIDE_MAX_CHUNKS = 16
BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_LRU_PERCPU_HASH = 5, 6, 10


def map_name(map_id):
    out = subprocess.run(['bpftool', '-j', 'map', 'show', 'id', str(map_id)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out).get('name', '')


def fdinfo_entries(pid):
    """The BPF maps and programs a process holds, from its fdinfo."""
    maps, progs = {}, {}
    fd_dir = f'/proc/{pid}/fdinfo'
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                fields = dict(line.split(':', 1) for line in f if ':' in line)
        except OSError:
            continue
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if 'map_id' in fields:
            maps[int(fields['map_id'])] = fields
        elif 'prog_type' in fields and 'link_type' not in fields:  # a link names its program too
            progs[int(fields['prog_id'])] = fields
    return maps, progs


def prog_names():
    out = subprocess.run(['bpftool', '-j', 'prog', 'show'], capture_output=True, text=True,
                         check=True).stdout
    return {p['id']: p.get('name', '') for p in json.loads(out)}


def classify(name, map_type):
    if name in UNWIND_TABLES:
        return 'unwind_tables'
    if name in RINGS:
        return 'ring'
    if name in PER_PROCESS:
        return 'per_process'
    if name in PER_CPU_ARRAYS or map_type in (BPF_MAP_TYPE_PERCPU_HASH, BPF_MAP_TYPE_PERCPU_ARRAY,
                                              BPF_MAP_TYPE_LRU_PERCPU_HASH):
        return 'per_cpu'
    return 'fixed'


def snapshot_maps(pid):
    maps, _ = fdinfo_entries(pid)
    by_class = {}
    listing = []
    for map_id, f in maps.items():
        name = map_name(map_id)
        kind = classify(name, int(f['map_type']))
        memlock = int(f['memlock'])
        by_class[kind] = by_class.get(kind, 0) + memlock
        listing.append({'name': name, 'class': kind, 'memlock': memlock,
                        'value_size': int(f['value_size']), 'max_entries': int(f['max_entries'])})
    return by_class, listing


def summary_figures(stderr):
    samples = re.search(r'bpfprof: (\d+) samples \(', stderr)
    lost = re.search(r'; (\d+) events lost', stderr)
    ring = re.search(r'(\d+) bytes per sample', stderr)
    return {'samples': int(samples.group(1)) if samples else 0,
            'lost': int(lost.group(1)) if lost else 0,
            'bytes_per_sample': int(ring.group(1)) if ring else None}


def process_cpu_s(pid):
    """CPU time of all the process's threads, in ns resolution (schedstat, not clock ticks)."""
    total = 0
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended
    return total / 1e9


def bpf_counts(pid, names):
    counts = {}
    for prog_id, f in fdinfo_entries(pid)[1].items():
        name = names.get(prog_id, str(prog_id))
        counts[name] = (int(f.get('run_cnt', 0)), int(f.get('run_time_ns', 0)))
    return counts


def record_once(frequency, out_dir, take_maps, call_graph='dwarf'):
    """One recording; its steady state is measured between 1.5 s in and 0.5 s before its end
    (the start-up, which reads /proc and loads every running program's tables, apart)."""
    argv = [BPFPROF, 'record', '-a', '-v', '-d', str(SECONDS), '-F', str(frequency), '--no-off-cpu',
            '--call-graph', call_graph, '-o', os.path.join(out_dir, f'f{frequency}.json.gz')]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    names = prog_names()
    cpu0, bpf0, t0 = process_cpu_s(proc.pid), bpf_counts(proc.pid, names), time.monotonic()
    by_class, listing = snapshot_maps(proc.pid) if take_maps else ({}, [])
    time.sleep(max(0.5, SECONDS - 2.0 - (time.monotonic() - t0)))
    cpu1, bpf1, t1 = process_cpu_s(proc.pid), bpf_counts(proc.pid, names), time.monotonic()
    _, stderr = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f'scale_model: {" ".join(argv)} failed:\n{stderr[-2000:]}')
    bpf = {}
    for name, (runs1, ns1) in bpf1.items():
        runs0, ns0 = bpf0.get(name, (0, 0))
        if runs1 > runs0:
            bpf[name] = {'runs_per_s': (runs1 - runs0) / (t1 - t0), 'ns_per_run': (ns1 - ns0) / (runs1 - runs0)}
    run = {'frequency': frequency, 'call_graph': call_graph, 'steady_cpu_share': (cpu1 - cpu0) / (t1 - t0),
           'startup_cpu_s': cpu0, 'bpf': bpf, **summary_figures(stderr)}
    run['samples_per_s'] = bpf.get('on_sample', {}).get('runs_per_s', run['samples'] / SECONDS)
    if take_maps:
        run['maps_by_class'] = by_class
        run['maps'] = listing
    return run


def fit(runs):
    """The recorder's steady CPU = fixed + cost * samples per second, through the lowest and
    highest frequency; the middle one checks it."""
    lo, hi = runs[0], runs[-1]
    per_sample = (hi['steady_cpu_share'] - lo['steady_cpu_share']) / (hi['samples_per_s'] - lo['samples_per_s'])
    fixed = lo['steady_cpu_share'] - per_sample * lo['samples_per_s']
    checks = [{'frequency': r['frequency'], 'measured_cpu_share': r['steady_cpu_share'],
               'predicted_cpu_share': fixed + per_sample * r['samples_per_s']} for r in runs[1:-1]]
    return {'recorder_fixed_cpu_share': fixed, 'recorder_us_per_sample': per_sample * 1e6,
            'validation': checks}


def measure(args):
    if os.geteuid() != 0:
        sys.exit('scale_model: measure needs root')
    cpus = os.cpu_count()
    spinners = [subprocess.Popen([FIXTURE, '3600000', DEPTH], stdout=subprocess.DEVNULL)
                for _ in range(cpus)]
    subprocess.run(['sysctl', '-qw', 'kernel.bpf_stats_enabled=1'], check=True)
    try:
        with tempfile.TemporaryDirectory() as out_dir:
            runs = [record_once(f, out_dir, take_maps=(i == 0)) for i, f in enumerate(FREQUENCIES)]
            # Every stack a copy unwound in userspace: what a walk that falls back costs.
            copies = record_once(FREQUENCIES[0], out_dir, False, call_graph='dwarf-copy')
            # Programs started all the time (a build, a CI runner): what a new process costs.
            churn = subprocess.Popen(['sh', '-c', 'while :; do /bin/true; sleep 0.01; done'])
            try:
                starts = record_once(FREQUENCIES[0], out_dir, False)
            finally:
                churn.kill()
    finally:
        subprocess.run(['sysctl', '-qw', 'kernel.bpf_stats_enabled=0'], check=False)
        for s in spinners:
            s.kill()
    processes = sum(1 for d in os.listdir('/proc') if d.isdigit())
    result = {'machine': {'cpus': cpus, 'processes': processes, 'seconds': SECONDS,
                          'fixture': f'{os.path.basename(FIXTURE)} depth {DEPTH} on every CPU'},
              'runs': runs, 'copies': copies, **fit(runs)}
    fixed, per_sample = result['recorder_fixed_cpu_share'], result['recorder_us_per_sample'] / 1e6
    result['recorder_us_per_copy'] = (copies['steady_cpu_share'] - fixed) / copies['samples_per_s'] * 1e6
    execs = starts['bpf'].get('on_exec', {}).get('runs_per_s', 0)
    result['process_starts'] = starts
    result['recorder_us_per_exec'] = (
        (starts['steady_cpu_share'] - fixed - per_sample * starts['samples_per_s']) / execs * 1e6
        if execs else None)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text + '\n')
    print(text)
    print_validation(result)


def print_validation(m):
    print(f"\nrecorder: {m['recorder_fixed_cpu_share'] * 100:.2f}% of a CPU fixed + "
          f"{m['recorder_us_per_sample']:.2f} us a sample (fit on {FREQUENCIES[0]} and "
          f"{FREQUENCIES[-1]} Hz per CPU)")
    for c in m['validation']:
        err = c['predicted_cpu_share'] / c['measured_cpu_share'] - 1
        print(f"  at {c['frequency']} Hz per CPU: predicted {c['predicted_cpu_share'] * 100:.1f}%, "
              f"measured {c['measured_cpu_share'] * 100:.1f}% of a CPU ({err * 100:+.0f}%)")


def unit_costs(m):
    """The per-unit costs of a `measure` result."""
    walk, copy = m['runs'][0], m['copies']
    maps = walk['maps_by_class']
    return {
        'cpus': m['machine']['cpus'],
        'fixed_cpu': m['recorder_fixed_cpu_share'],
        'us_walk': m['recorder_us_per_sample'], 'us_copy': m['recorder_us_per_copy'],
        'us_exec': m.get('recorder_us_per_exec') or 0,
        'ns_walk': walk['bpf']['on_sample']['ns_per_run'],
        'ns_copy': copy['bpf']['on_sample']['ns_per_run'],
        'bytes_walk': walk['bytes_per_sample'], 'bytes_copy': copy['bytes_per_sample'],
        'per_cpu': maps.get('per_cpu', 0) / m['machine']['cpus'],
        'fixed_maps': maps.get('fixed', 0) + maps.get('ring', 0),
        # The pages and rules arrays (fixed sizes); the row chunks are counted by projection().
        'tables': sum(x['memlock'] for x in walk['maps']
                      if x['class'] == 'unwind_tables' and x['name'] != 'unwind_row_chun'),
        'per_process': next((x['value_size'] + 64 for x in walk['maps'] if x['class'] == 'per_process'), 0),
    }


def row_chunks(rows):
    """The row array's chunks for `rows` rows under -a: 4 at first, growing to 16 at most."""
    needed = -(-rows // CHUNK_ROWS)
    return min(max(needed, SYSTEM_WIDE_INITIAL_CHUNKS), SYSTEM_WIDE_MAX_CHUNKS)


def projection(u, cpus, hz, share, execs_per_s, processes, table_rows, ring_bytes=16 << 20):
    rate = cpus * hz
    recorder = (u['fixed_cpu'] + rate * (share * u['us_walk'] + (1 - share) * u['us_copy']) / 1e6
                + execs_per_s * u['us_exec'] / 1e6)
    bpf = hz * (share * u['ns_walk'] + (1 - share) * u['ns_copy']) / 1e9
    bandwidth = rate * (share * u['bytes_walk'] + (1 - share) * u['bytes_copy'])
    memory = (u['fixed_maps'] + u['tables'] + row_chunks(table_rows) * CHUNK_ROWS * 4
              + u['per_cpu'] * cpus + u['per_process'] * processes)
    return {'samples_per_s': rate, 'recorder': recorder, 'bpf': bpf, 'ring_mb_s': bandwidth / 1e6,
            'ring_lasts_s': ring_bytes / bandwidth, 'maps_mib': memory / 2**20}


def project(args):
    with open(args.inputs) as f:
        u = unit_costs(json.load(f))
    print(f"Unit costs on {u['cpus']} CPUs: recorder {u['fixed_cpu'] * 100:.2f}% of a CPU + "
          f"{u['us_walk']:.2f} us a walked stack, {u['us_copy']:.1f} us a copied one, "
          f"{u['us_exec']:.0f} us a process start; on_sample {u['ns_walk']:.0f} ns walking, "
          f"{u['ns_copy']:.0f} ns copying; {u['bytes_walk']} / {u['bytes_copy']} ring bytes a "
          f"sample; maps {u['per_cpu'] / 1024:.0f} KiB a CPU, {u['per_process']} B a process, "
          f"{u['fixed_maps'] / 2**20:.1f} MiB fixed, {u['tables'] / 2**20:.1f} MiB of unwind "
          f"pages and rules (-a)\n")
    rows = args.binaries * args.rows_per_binary
    print(f"{args.binaries} distinct binaries of {args.rows_per_binary:,} rows: {rows:,} rows, "
          f"{row_chunks(rows)} chunks of the row array ({row_chunks(rows) * 4} MiB).")
    print(f"Every CPU busy; {args.processes:,} processes, {args.execs:g} process starts a second; "
          f"stacks walked in the kernel: {args.share * 100:g}% (the rest copied).\n")
    print('| CPUs | Hz | samples/s | recorder, of one CPU | BPF, of each CPU | ring MB/s | '
          '16 MiB ring full after | BPF maps |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for cpus in (u['cpus'], 64, 192):
        for hz in (19, 100, 1000):
            p = projection(u, cpus, hz, args.share, args.execs, args.processes, rows)
            print(f"| {cpus} | {hz} | {p['samples_per_s']:,} | {p['recorder'] * 100:.1f}% | "
                  f"{p['bpf'] * 100:.2f}% | {p['ring_mb_s']:.1f} | {p['ring_lasts_s']:.2f} s | "
                  f"{p['maps_mib']:.0f} MiB |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    m = sub.add_parser('measure')
    m.add_argument('--out')
    p = sub.add_parser('project')
    p.add_argument('--inputs', default=os.path.join(BUILD, 'scale_model.json'))
    p.add_argument('--processes', type=int, default=2000)
    p.add_argument('--execs', type=float, default=20, help='process starts a second')
    p.add_argument('--share', type=float, default=0.95, help='share of stacks walked in the kernel')
    p.add_argument('--binaries', type=int, default=300, help='distinct binaries mapped')
    p.add_argument('--rows-per-binary', type=int, default=18500,
                   help='unwind rows of a binary (the mean of a machine of this kind)')
    args = parser.parse_args()
    (measure if args.command == 'measure' else project)(args)


if __name__ == '__main__':
    main()
