# shellcheck shell=bash
# Shared by the benchmarks that run one daqirid configuration against another where the poller
# is the limit (run-rss, run-decap): the rates a running daemon's RX queues take frames at and
# its clients get them, and rounds alternating two modes. Sourced after round-stats.sh, with
# CTL set and a function `round MODE` that starts the daemon for MODE, calls rates_over, and
# stops it.

# wait_started SOCK LOG: waits up to 10 s for a daemon's control socket (an EAL can take
# seconds to start); says so, with the daemon's log, if it never comes.
wait_started() {
  for _ in $(seq 200); do [ -S "$1" ] && return; sleep 0.05; done
  echo "daqirid did not start:" >&2
  cat "$2" >&2
}

# rates_over SOCK SECS: frames the daemon's RX queues took from the PMD and its attachments
# delivered, millions a second over the next SECS seconds: prints "received delivered".
rates_over() {
  local before after
  before=$("$CTL" --socket "$1" --json stats)
  sleep "$2"
  after=$("$CTL" --socket "$1" --json stats)
  python3 - "$2" "$before" "$after" <<'PY'
import json, sys
secs = float(sys.argv[1])
def totals(text):
    s = json.loads(text)
    received = sum(int(q.get("packets", 0)) for n in s.get("nics", [])
                   for q in n.get("queues", []) if "TX" not in q.get("direction", ""))
    delivered = sum(int(a.get("packets", 0)) for a in s.get("attachments", []))
    return received, delivered
b, a = totals(sys.argv[2]), totals(sys.argv[3])
print(f"{(a[0] - b[0]) / secs / 1e6:.3f} {(a[1] - b[1]) / secs / 1e6:.3f}")
PY
}

# ab_rounds ROUNDS PEER PEER_LABEL SUBJECT SUBJECT_LABEL: `round PEER` then `round SUBJECT`,
# ROUNDS times; prints the medians as a markdown table and the subject / peer ratio of frames
# received (its median and the rounds' range), each round's rates on stderr.
ab_rounds() {
  local rounds=$1 peer=$2 peer_label=$3 subject=$4 subject_label=$5
  local prx=() pdl=() srx=() sdl=() ratios=() r a b c d
  for r in $(seq "$rounds"); do
    read -r a b < <(round "$peer")
    read -r c d < <(round "$subject")
    prx+=("$a") pdl+=("$b") srx+=("$c") sdl+=("$d")
    ratios+=("$(awk -v s="$c" -v p="$a" 'BEGIN {printf "%.3f", (p > 0) ? s / p : 0}')")
    echo "round $r: $peer $a received / $b delivered Mpps, $subject $c / $d" >&2
  done
  echo "| path | received Mpps | delivered Mpps |"
  echo "| --- | ---: | ---: |"
  echo "| $peer_label | $(median "${prx[@]}") | $(median "${pdl[@]}") |"
  echo "| $subject_label | $(median "${srx[@]}") | $(median "${sdl[@]}") |"
  echo
  echo "$subject / $peer, frames received: median $(median "${ratios[@]}")" \
    "(rounds $(lowest "${ratios[@]}")–$(highest "${ratios[@]}")); $rounds rounds"
}
