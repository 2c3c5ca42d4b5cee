# Shared by the receive benchmarks (run-rx, run-python): a daqirid on loopback with flows
# f0..f3 on UDP 4096..4099, its start and stop, and reading the receivers' reports. Sourced.
# Expects COUNT; sets B, GEN, RX, DIR, SOCK, RXCORE, GENCORE.
source tools/bench/round-stats.sh
B=${DAQIRI_BUILD:-build}
GEN=$B/tools/daqiri-gen/daqiri-gen
RX=$B/tools/bench/rx-bench
DIR=$(mktemp -d /tmp/daqiri-bench.XXXX)
SOCK=$DIR/d.sock
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
ncpu=$(nproc)
RXCORE=$((ncpu - 1))   # the receive work: the plain reader, or daqirid's poller
GENCORE=0

# Client rings of DAQIRI_RX_RING slots (default 4096); a pool of 1.5 rings plus a batch and
# a margin, what daqirid asks of a pool that feeds a queue of that ring (docs/configuration.md).
RING=${DAQIRI_RX_RING:-4096}
pool_bufs() { echo $((RING * 3 / 2 + $1 + 64)); }  # pool_bufs BURST

config() {  # config BURST BUFSIZE
  local ring=$RING bufs; bufs=$(pool_bufs "$1")
  cat <<YAML
daemon: {socket: $SOCK, metrics: "off", log_level: warn}
memory_regions:
  - {name: rx, kind: host, buf_size: $2, num_bufs: $bufs}
  - {name: tx, kind: host, buf_size: 2048, num_bufs: 256}
interfaces:
  - name: lo
    backend: socket
    address: 127.0.0.1
    rx: {queues: [{name: rx0, core: $RXCORE, batch_size: $1, ring_size: $ring, regions: [rx]}]}
    tx: {queues: [{name: tx0, batch_size: 32, ring_size: 64, regions: [tx]}]}
flows:
  - {name: f0, interface: lo, match: {udp_dst: 4096}, allow_block: true}
  - {name: f1, interface: lo, match: {udp_dst: 4097}, allow_block: true}
  - {name: f2, interface: lo, match: {udp_dst: 4098}, allow_block: true}
  - {name: f3, interface: lo, match: {udp_dst: 4099}, allow_block: true}
YAML
}

start_daemon() {  # BURST BUFSIZE [config function]
  ${3:-config} "$1" "$2" >"$DIR/d.yaml"
  $B/daemon/daqirid --config "$DIR/d.yaml" 2>"$DIR/daemon.log" &
  DAEMON=$!
  for _ in $(seq 100); do $B/tools/daqiri-ctl/daqiri-ctl --socket "$SOCK" health >/dev/null 2>&1 && return; sleep 0.05; done
  echo "daqirid did not start"; cat "$DIR/daemon.log"; exit 1
}
stop_daemon() { kill -TERM "$DAEMON"; wait "$DAEMON" || true; }

# measure OUTFILE: waits for the receiver's "ready", sends, waits, prints pps
wait_ready() { for _ in $(seq 200); do grep -q ready "$1" 2>/dev/null && return; sleep 0.01; done; }
rate_of() {  # file -> "pps"
  awk '/^packets/ {if ($6 > 0) printf "%.0f", $2 / $6; else print 0}' "$1"
}

