#!/usr/bin/env bash
# Builds the .deb from a configured build tree and checks it carries what an install needs.
#   check-package.sh BUILD_DIR
set -euo pipefail
build=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cpack --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1 ||
  { echo "cpack failed:"; cat "$out/cpack.log"; exit 1; }
deb=$(ls "$out"/daqiri_*.deb)
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for want in ./usr/sbin/daqirid ./usr/bin/daqiri-ctl ./usr/bin/daqiri-k8s-plugin \
    ./usr/share/daqiri/kubernetes/daemonset.yaml ./usr/lib/systemd/system/daqirid.service \
    ./usr/lib/sysusers.d/daqiri.conf ./usr/lib/tmpfiles.d/daqiri.conf \
    ./usr/share/daqiri/examples/default.yaml ./usr/share/daqiri/proto/daqiri/v1/control.proto \
    ./usr/share/doc/daqiri/configuration.md ./usr/share/man/man8/daqirid.8 \
    ./usr/share/man/man1/daqiri-ctl.1 ./usr/share/man/man1/daqiri-gen.1 \
    ./usr/share/bash-completion/completions/daqiri-ctl; do
  grep -qxF "$want" <<<"$contents" || { echo "missing from $deb: $want"; exit 1; }
done
# Captured first: `dpkg-deb | grep -q` under pipefail fails whenever grep's early exit makes
# dpkg-deb die of SIGPIPE.
info=$(dpkg-deb -I "$deb")
grep -q 'Depends:.*libgrpc++' <<<"$info" ||
  { echo "no shared-library dependencies:"; echo "$info"; cat "$out/cpack.log"; exit 1; }
dpkg-deb -e "$deb" "$out/control"
[ -x "$out/control/postinst" ] || { echo "no postinst"; exit 1; }
echo "package ok: $(basename "$deb")"
