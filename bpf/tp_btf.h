/* The section of a BTF tracepoint program: tp_btf/NAME in the main object, bpfprof's own in the
 * walker object (why below). */
#ifndef BPFPROF_TP_BTF_H
#define BPFPROF_TP_BTF_H

/* bpf/profiler.bpf.c is built twice (bpf/CMakeLists.txt): the main object, whose lifecycle
 * programs userspace loads, and the walker object (BPFPROF_WALKER_OBJECT), whose stack walkers
 * it loads one to an object, with the main object's maps. The walker object has no kernel function
 * calls (image_mappings.h's VMA iterator, for the lifecycle programs), and its tp_btf programs
 * go through bpfprof's own section handler, with the attach ids it found (core_btf.h): libbpf
 * then needs nothing of the kernel's BTF but a few types for CO-RE, and does not parse all of
 * it for each object. Its global data are the main object's (knobs.h, maps.h): one layout. */
#ifdef BPFPROF_WALKER_OBJECT
#define TP_BTF(tracepoint) "bpfprof_tp_btf/" tracepoint
#else
#define TP_BTF(tracepoint) "tp_btf/" tracepoint
#endif

#endif
