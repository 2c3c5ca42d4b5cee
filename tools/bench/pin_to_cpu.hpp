// Pins the calling thread to one CPU, for the benchmark programs that place their own threads.
#pragma once

#include <pthread.h>
#include <sched.h>

inline bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}
