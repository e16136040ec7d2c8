/* The runtimes whose own frames bpfprof reads (runtimes/<name>/), one line each, read by the
 * BPF side and userspace alike: the enums of bpf/events.h, userspace's RuntimeKind, the
 * runtimes' names and their categories in the profile are made from it. A new runtime adds
 * its line at the end (the position is its index in enum bpfprof_runtime; the values of
 * recorded event kinds never change).
 *
 * X(ID, id, Kind, language, colour, event)
 *   ID, id:   BPFPROF_RUNTIME_<ID>, BPFPROF_EVENT_<ID>_STACK, struct bpfprof_<id>_stack_event
 *             (its frames, sent just before the stack event they belong to, with the same
 *             bpfprof_event_header first)
 *   Kind:     userspace's RuntimeKind::k<Kind>
 *   language: the runtime's name in the summary, and its frames' category in the profile
 *   colour:   that category's colour (the Firefox Profiler's names)
 *   event:    the value of BPFPROF_EVENT_<ID>_STACK */
#ifndef BPFPROF_RUNTIME_LIST_H
#define BPFPROF_RUNTIME_LIST_H

#define BPFPROF_RUNTIME_LIST(X)                              \
  X(PYTHON, python, Python, "Python", "yellow", 8)           \
  X(V8, v8, V8, "JavaScript", "yellow", 9)                   \
  X(HOTSPOT, hotspot, HotSpot, "Java", "blue", 10)           \
  X(RUBY, ruby, Ruby, "Ruby", "red", 11)                     \
  X(GOLABELS, golabels, GoLabels, "Go labels", "purple", 12) \
  X(PHP, php, Php, "PHP", "green", 13)                       \
  X(BEAM, beam, Beam, "Erlang", "red", 14)                   \
  X(PERL, perl, Perl, "Perl", "brown", 15)

/* The runtimes whose readers cost the verifier most and whose stacks stay whole without them
 * for a while: the walkers that sampling a launched command starts with leave them out
 * (bpf/CMakeLists.txt, walker_lite), and their processes are told to the kernel side once the
 * full walkers have taken those walkers' place (userspace/capture/bpf_walkers.cpp). V8's JIT
 * code keeps frame pointers and a JVM starts in its interpreter, which keeps rbp's chain: their
 * frames are walked and named in userspace meanwhile. Not the BEAM: its JIT code runs from the
 * first instruction without frame pointers, and its boot's stacks were cut at the first JIT
 * frame until the full walkers came (4% of erlc's samples). X(ID). */
#define BPFPROF_RUNTIMES_READ_LATER(X) X(V8) X(HOTSPOT)

#endif
