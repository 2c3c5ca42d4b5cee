# shellcheck shell=bash
# Shared by the benchmarks that repeat a point in rounds (run-dpdk, run-metrics, run-rx): the
# median and the range of a list of numbers. Sourced.
median() {  # median X...: the middle one (of an even count, the mean of the middle two)
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
lowest() { printf '%s\n' "$@" | sort -g | head -1; }
highest() { printf '%s\n' "$@" | sort -g | tail -1; }
