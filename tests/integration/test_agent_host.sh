#!/usr/bin/env bash
# The agent checks the host's libraries before it installs the plugin there
# (--host-root, the DaemonSet's read-only mount of the host's /). The host
# roots here are built from the plugin's own libraries, as `ldd` finds them
# on this machine, in a Debian layout (merged /usr, the multiarch directory,
# /lib64's loader):
#   - complete: ready, the plugin and the conflist installed, /readyz says
#     only "ready" (the control: the check does not refuse a good host);
#   - without libmnl.so.0: not ready (503), nothing installed, /readyz names
#     the library and the package to install, one log record however many
#     declarations look; libmnl put in place: ready and installed at the next
#     declaration, "no longer lacking" logged once;
#   - glibc older than the plugin needs (the copies' GLIBC_2.33 and later
#     renamed, a 2.32 glibc): /readyz names the host's version, what the
#     plugin needs and the node images that have it;
#   - an unreadable --host-root: not ready, said so;
#   - a conflist that chains portmap while the CNI bin dir lacks it: not
#     ready, nothing installed, /readyz names the plugin and the bin dir, one
#     log record; portmap put in place: ready and installed at the next
#     declaration (the control).
#
#   node ($TG_ID-node, topology from lib.sh): tollgate-agent on 127.0.0.1:$PORT
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_agent_host.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps

AGENT=$TOLLGATE_BIN_DIR/tollgate-agent
PLUGIN=$TOLLGATE_BIN_DIR/tollgate
PORT=19637
MULTIARCH=$(gcc -print-multiarch)

t_begin topology
topo_up || tap_bail "could not build the namespace topology"
CONF=$(tg_conf)
CL=$TG_TMP/10-tollgate.conflist
jq -c '{cniVersion, name, plugins: [del(.cniVersion, .name)]}' <<<"$CONF" >"$CL"
t_end

# host_root DIR: the plugin's loader and libraries, copied from this machine
host_root() {
	local dir=$1 line name path
	mkdir -p "$dir/usr/lib/$MULTIARCH" "$dir/usr/lib64" "$dir/etc"
	ln -s usr/lib "$dir/lib"
	ln -s usr/lib64 "$dir/lib64"
	while read -r line; do
		if [[ $line =~ ^([^[:space:]]+)\ =\>\ (/[^[:space:]]+) ]]; then
			name=${BASH_REMATCH[1]}
			path=${BASH_REMATCH[2]}
			cp -L "$path" "$dir/usr/lib/$MULTIARCH/$name"
		elif [[ $line =~ ^(/[^[:space:]]+)\ \( ]]; then
			# the interpreter: in the multiarch directory, its path a link there
			path=${BASH_REMATCH[1]}
			cp -L "$path" "$dir/usr/lib/$MULTIARCH/${path##*/}"
			mkdir -p "$dir$(dirname "$path")"
			[ -e "$dir$path" ] || ln -s "/lib/$MULTIARCH/${path##*/}" "$dir$path"
		fi
	done < <(ldd "$PLUGIN")
	[ -f "$dir/usr/lib/$MULTIARCH/libc.so.6" ] && [ -f "$dir/usr/lib/$MULTIARCH/libmnl.so.0" ]
}

AGENT_PID=""
ALOG=""
NETD=""
CNIBIN=""
# agent_run NAME HOST_ROOT: a fresh agent with its own runtime directories
agent_run() {
	ALOG=$TG_TMP/$1.log
	NETD=$TG_TMP/$1.netd
	CNIBIN=$TG_TMP/$1.bin
	mkdir -p "$NETD" "$CNIBIN"
	ip netns exec "$TG_NODE" "$AGENT" --config "${AGENT_CL:-$CL}" --listen "127.0.0.1:$PORT" \
		--cni-conf-dir "$NETD" --cni-bin-dir "$CNIBIN" --plugin "$PLUGIN" \
		--host-root "$2" --declare-interval 1 --gc-interval 60 --sync-interval 60 2>>"$ALOG" &
	AGENT_PID=$!
	TG_PIDS+=("$AGENT_PID")
}
agent_stop() {
	kill -TERM "$AGENT_PID" 2>/dev/null
	wait "$AGENT_PID" 2>/dev/null
}
http_get() { ip netns exec "$TG_NODE" curl -s -o "$TG_TMP/http.out" -w '%{http_code}' --max-time 2 "http://127.0.0.1:$PORT$1"; }
ready() { [ "$(http_get /readyz)" = 200 ]; }
up() { [ "$(http_get /healthz)" = 200 ]; }
declarations() {
	http_get /metrics >/dev/null
	awk '$1 == "tollgate_agent_declarations_total{result=\"ok\"}" { print $2 }' "$TG_TMP/http.out"
}
# wait_declarations N: N more declarations than now
wait_declarations() {
	local want=$(($(declarations) + $1))
	wait_for 10 declared_at_least "$want"
}
declared_at_least() { [ "$(declarations)" -ge "$1" ] 2>/dev/null; }
installed() { [ -f "$NETD/10-tollgate.conflist" ] && cmp -s "$CNIBIN/tollgate" "$PLUGIN"; }
# refused N TEXT: after N declarations the agent is up but not ready, its
# /readyz body holds TEXT, and nothing is installed
refused() {
	wait_for 10 up || t_fail "/healthz does not answer: $(tail -3 "$ALOG")"
	wait_declarations "$1" || t_fail "fewer than $1 declarations: $(tail -3 "$ALOG")"
	t_expect "readyz" "$(http_get /readyz)" 503
	grep -qF "$2" "$TG_TMP/http.out" || t_fail "/readyz does not say '$2': $(cat "$TG_TMP/http.out")"
	t_expect "installed" "$(find "$NETD" "$CNIBIN" -mindepth 1 | tr '\n' ' ')" ""
}

t_begin "a complete host: ready, plugin and conflist installed, /readyz says only ready"
host_root "$TG_TMP/good" || tap_bail "cannot build a host root from ldd $PLUGIN"
agent_run good "$TG_TMP/good"
wait_for 20 ready || t_fail "not ready: $(tail -3 "$ALOG")"
installed || t_fail "the plugin or the conflist was not installed"
http_get /readyz >/dev/null
t_expect "/readyz body" "$(cat "$TG_TMP/http.out")" ready
t_expect "lack records" "$(grep -c 'cannot load on this host' "$ALOG")" 0
agent_stop
t_end

t_begin "a host without libmnl: not ready, nothing installed, /readyz names it, one log record"
host_root "$TG_TMP/nomnl" || tap_bail "cannot build a host root"
rm "$TG_TMP/nomnl/usr/lib/$MULTIARCH/libmnl.so.0"
agent_run nomnl "$TG_TMP/nomnl"
wait_for 10 up || t_fail "/healthz does not answer: $(tail -3 "$ALOG")"
wait_declarations 3 || t_fail "fewer than 3 declarations: $(tail -3 "$ALOG")"
t_expect "readyz" "$(http_get /readyz)" 503
body=$(cat "$TG_TMP/http.out")
t_expect "/readyz first line" "$(head -1 <<<"$body")" "not ready"
grep -q "the host has no libmnl.so.0, which the plugin loads" <<<"$body" || t_fail "/readyz does not name libmnl: $body"
grep -q "install libmnl0 (Debian, Ubuntu)" <<<"$body" || t_fail "/readyz does not say what to install: $body"
grep -qF "under $TG_TMP/nomnl" <<<"$body" || t_fail "/readyz does not name the host root: $body"
t_expect "installed" "$(find "$NETD" "$CNIBIN" -mindepth 1 | tr '\n' ' ')" ""
t_expect "library-missing records after 3 declarations" \
	"$(grep -c 'level=error msg="the plugin cannot load on this host: a library is missing; not installed" library=libmnl.so.0' "$ALOG")" 1
t_end

t_begin "libmnl put in place: ready and installed at the next declaration, said once"
cp -L "$TG_TMP/good/usr/lib/$MULTIARCH/libmnl.so.0" "$TG_TMP/nomnl/usr/lib/$MULTIARCH/"
wait_for 10 ready || t_fail "not ready after libmnl arrived: $(tail -3 "$ALOG")"
installed || t_fail "the plugin or the conflist was not installed"
wait_declarations 2 || t_fail "no more declarations"
t_expect "no-longer-lacking records" "$(grep -c 'msg="no longer lacking" what=\"lib:libmnl.so.0\"' "$ALOG")" 1
t_expect "library-missing records" "$(grep -c 'a library is missing' "$ALOG")" 1
agent_stop
t_end

t_begin "a host whose glibc is older than the plugin needs: /readyz names both versions"
host_root "$TG_TMP/oldc" || tap_bail "cannot build a host root"
# glibc 2.32: the libc's and the loader's definitions of 2.33 and later renamed
# (same length, the loader's own references follow the libc's)
python3 - "$TG_TMP/oldc/usr/lib/$MULTIARCH" <<'EOF' || tap_bail "cannot age the copied glibc"
import glob, os, re, sys
for path in glob.glob(os.path.join(sys.argv[1], "l[di]*")):
    if not re.search(r"/(libc\.so\.6|ld-linux[^/]*)$", path):
        continue
    data = open(path, "rb").read()
    aged = re.sub(rb"(?<=\0)GLIBC_2\.(3[3-9])(?=\0)", lambda m: b"GLIBC_X." + m.group(1), data)
    open(path, "wb").write(aged)
EOF
agent_run oldc "$TG_TMP/oldc"
wait_for 10 up || t_fail "/healthz does not answer: $(tail -3 "$ALOG")"
wait_declarations 2 || t_fail "no declarations: $(tail -3 "$ALOG")"
t_expect "readyz" "$(http_get /readyz)" 503
body=$(cat "$TG_TMP/http.out")
grep -qF "the host's glibc is 2.32 (/lib/$MULTIARCH/libc.so.6 under $TG_TMP/oldc)" <<<"$body" ||
	t_fail "/readyz does not name the host's glibc: $body"
# what the plugin and the libraries it loads need of libc, 2.33 and later, as binutils reads them
needs=$(for f in "$PLUGIN" "$TG_TMP/good/usr/lib/$MULTIARCH"/*; do objdump -p "$f"; done |
	awk '/file format|Version definitions/ { lc = 0 } /required from/ { lc = ($3 == "libc.so.6:") } lc && $4 ~ /^GLIBC_2\.(3[3-9])$/ { print $4 }' |
	sort -uV)
[ -n "$needs" ] || tap_bail "objdump finds no GLIBC_2.33 or later the plugin needs"
want=$(tail -1 <<<"$needs")
grep -qF "the plugin needs $(paste -sd, <<<"$needs" | sed 's/,/, /g'): run a node image with glibc ${want#GLIBC_} or later (" <<<"$body" ||
	t_fail "/readyz does not say what the plugin needs ($(paste -sd' ' <<<"$needs")): $body"
grep -qF "Debian 12" <<<"$body" || t_fail "/readyz names no node image: $body"
t_expect "lack lines" "$(sed 1d <<<"$body" | wc -l)" 1
t_expect "installed" "$(find "$NETD" "$CNIBIN" -mindepth 1 | tr '\n' ' ')" ""
t_expect "too-old records" "$(grep -c 'level=error msg="the plugin cannot load on this host: a library is too old; not installed" library=libc.so.6 .* glibc=2.32' "$ALOG")" 1
agent_stop
t_end

t_begin "an unreadable --host-root: not ready, said so"
agent_run noroot "$TG_TMP/no-such-root"
refused 2 "the host's root $TG_TMP/no-such-root cannot be read (No such file or directory)"
agent_stop
t_end

t_begin "a conflist chaining portmap, missing from the bin dir: not ready, nothing installed, said once"
AGENT_CL=$TG_TMP/chained.conflist
jq -c '.plugins += [{type: "portmap", capabilities: {portMappings: true}}]' "$CL" >"$AGENT_CL"
agent_run chained "$TG_TMP/good"
refused 3 "the conflist chains plugin 'portmap', which is not an executable file of $CNIBIN: every pod's ADD would fail"
t_expect "missing-plugin records after 3 declarations" \
	"$(grep -c 'level=error msg="the conflist chains a plugin missing from the CNI bin dir: not installing it" plugin=\"portmap\" bin_dir=' "$ALOG")" 1
t_end

t_begin "portmap put in place: ready and installed at the next declaration"
cp /usr/lib/cni/portmap "$CNIBIN/portmap"
wait_for 10 ready || t_fail "not ready after portmap arrived: $(tail -3 "$ALOG")"
installed || t_fail "the plugin or the conflist was not installed"
t_expect "installed conflist chains" "$(jq -c '[.plugins[].type]' "$NETD/10-tollgate.conflist")" '["tollgate","portmap"]'
t_expect "no-longer-lacking records" "$(grep -c 'msg="no longer lacking" what=\"plugin:portmap\"' "$ALOG")" 1
agent_stop
t_end

tap_done
