#!/usr/bin/env bash
# The arm64 plugin's ADD, CHECK and DEL on an arm64 kernel: a qemu-system-aarch64
# virtual machine (software emulation, no KVM), booted from Debian's arm64
# kernel with an initramfs this test assembles: busybox (arm64), the kernel's
# netfilter, sched and veth modules, build-arm64/tollgate and the arm64
# libraries it loads. qemu-user (test_arm64.sh) cannot carry this: it has no
# nf_tables netlink, no tc messages and no NS_GET_NSTYPE.
#
# In the machine, on a node whose uplink is a dummy eth0 (10.0.0.1/24): two pods
# are ADDed in two Kubernetes namespaces from a static pool; each result's
# address is on the pod's eth0 and the pod reaches the node; the arm64
# tollgate-ipam finds the pod's veth, route and nftables element in the
# kernel; CHECK passes, and fails once a pod's route is deleted (the
# control); DEL leaves no veth, no route and no attachment.
# The machine prints TAP lines on its console; this script relays them.
#
# The kernel and busybox are Debian's arm64 packages, fetched (apt-get
# download, not installed: an arm64 kernel's package would run the host's
# initramfs and boot-loader hooks) by scripts/deps.sh into TG_ARM64_VM_CACHE.
#
# Standalone: bash tests/integration/test_arm64_vm.sh
# shellcheck disable=SC1091
set -u
. "$(dirname "$0")/lib.sh"

A64=${TG_ARM64_DIR:-$TG_ROOT/build-arm64}
CACHE=${TG_ARM64_VM_CACHE:-/var/cache/tollgate/arm64-vm}
QSYS=$(command -v qemu-system-aarch64 || true)
KDEB=$(find "$CACHE" -maxdepth 1 -name 'linux-image-*-arm64_*_arm64.deb' 2>/dev/null | sort | tail -1)
BDEB=$(find "$CACHE" -maxdepth 1 -name 'busybox-static_*_arm64.deb' 2>/dev/null | sort | tail -1)
if [ "$(id -u)" != 0 ] || [ -z "$QSYS" ] || [ -z "$KDEB" ] || [ -z "$BDEB" ] || [ ! -x "$A64/tollgate" ]; then
	echo "not ok - preconditions: root, qemu-system-aarch64, $CACHE's arm64 kernel and busybox (make deps), $A64/tollgate (make ARCH=arm64 all)"
	exit 1
fi

TG_TMP=$(mktemp -d /var/tmp/tollgate-vm.XXXXXX) || exit 1
trap 'rm -rf "$TG_TMP"' EXIT
R=$TG_TMP/root
mkdir -p "$R"/{bin,proc,sys,dev,run/netns,tmp,lib/modules,data}
dpkg-deb -x "$KDEB" "$TG_TMP/k"
dpkg-deb -x "$BDEB" "$TG_TMP/bb"
KV=$(ls "$TG_TMP/k/lib/modules")
install -m 0755 "$TG_TMP/bb/bin/busybox" "$R/bin/busybox"
M=$TG_TMP/k/lib/modules/$KV/kernel
mkdir -p "$R/lib/modules/$KV/kernel/drivers/net"
cp -r "$M/net" "$M/lib" "$M/crypto" "$M/arch" "$R/lib/modules/$KV/kernel/"
for m in veth dummy ifb; do cp "$M/drivers/net/$m.ko" "$R/lib/modules/$KV/kernel/drivers/net/"; done
install -m 0755 "$A64/tollgate" "$R/tollgate"
install -m 0755 "$A64/tollgate-ipam" "$R/tollgate-ipam"
# their libraries, as arm64's own loader lists them (multiarch)
for b in tollgate tollgate-ipam; do
	qemu-aarch64-static /lib/ld-linux-aarch64.so.1 --list "$A64/$b" |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }'
done | sort -u | while read -r lib; do
	install -D -m 0755 "$(readlink -f "$lib")" "$R$lib"
done

jq -n '{cniVersion: "1.1.0", name: "vm", type: "tollgate", mtu: 1500, uplink: "eth0",
	internalCIDRs: ["10.0.0.0/8"], masquerade: true, dataDir: "/data", logFile: "/tmp/tollgate.log",
	ipam: {source: "static", addresses: ["10.1.0.10-10.1.0.20"], cooldownSeconds: 0}}' >"$R/conf.json"

cat >"$R/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs run /run; mkdir -p /run/netns
N=0 F=0
ok() { echo "TGVM ok - $1"; N=$((N+1)); }
no() { echo "TGVM not ok - $1: $2"; F=$((F+1)); }
depmod
# the kernel's own module requests (nft expressions, crc32c for conntrack) go to busybox's modprobe
echo /bin/modprobe >/proc/sys/kernel/modprobe
for m in crc32c_generic veth dummy ifb nf_tables nft_ct nft_chain_nat nft_masq nft_nat nf_conntrack \
	nft_fib_inet nft_fib_ipv4 nft_reject_inet nft_numgen nft_limit nft_quota nft_hash nft_objref \
	sch_htb sch_tbf sch_ingress cls_u32 cls_bpf act_mirred; do
	e=$(modprobe "$m" 2>&1) || echo "TGVM # modprobe $m failed: $e"
done
ip link set lo up
ip link add eth0 type dummy && ip addr add 10.0.0.1/24 dev eth0 && ip link set eth0 up
ip route add default dev eth0
plugin() { # CMD CID NETNS NAMESPACE POD
	env -i CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=$3 CNI_IFNAME=eth0 CNI_PATH=/ \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=$4;K8S_POD_NAME=$5" /tollgate </conf.json
}
for p in a b; do
	touch /run/netns/$p
	unshare --net=/run/netns/$p true || no "netns $p" "unshare failed"
done
res_a=$(plugin ADD cid-a /run/netns/a team-a a); rc_a=$?
res_b=$(plugin ADD cid-b /run/netns/b team-b b); rc_b=$?
if [ $rc_a = 0 ] && [ $rc_b = 0 ]; then ok "ADD of two pods in two namespaces"; else no "ADD" "$rc_a $res_a / $rc_b $res_b"; fi
ip_a=$(echo "$res_a" | sed -n 's/.*"address":"\([0-9.]*\)\/32".*/\1/p')
ip_b=$(echo "$res_b" | sed -n 's/.*"address":"\([0-9.]*\)\/32".*/\1/p')
if [ -n "$ip_a" ] && [ -n "$ip_b" ] && [ "$ip_a" != "$ip_b" ]; then ok "each result has its own pool address"; else no "addresses" "'$ip_a' '$ip_b'"; fi
if nsenter --net=/run/netns/a ip -4 addr show eth0 | grep -q "inet $ip_a/"; then ok "pod a's eth0 holds its address"; else no "pod a's address" "$(nsenter --net=/run/netns/a ip addr)"; fi
if nsenter --net=/run/netns/a ping -c 3 -W 2 -s 972 10.0.0.1 >/dev/null; then ok "pod a reaches the node"; else no "pod a to node" "no answer"; fi
if nsenter --net=/run/netns/b ping -c 1 -W 2 10.0.0.1 >/dev/null; then ok "pod b reaches the node"; else no "pod b to node" "no answer"; fi
# the kernel objects of pod a as tollgate-ipam (arm64) reads them back: veth, route, nft element
show=$(/tollgate-ipam --data-dir /data --network vm show "$ip_a" 2>&1)
if echo "$show" | grep -q '^nft element.*(present)' && echo "$show" | grep -q '^host veth.*(present)' &&
	! echo "$show" | grep -q 'missing'; then ok "tollgate-ipam show: pod a's veth, route and nft element present"
else no "tollgate-ipam show" "$(echo "$show" | tr '\n' ' ')"; fi
plugin CHECK cid-a /run/netns/a team-a a >/tmp/check.out; rc=$?
if [ $rc = 0 ]; then ok "CHECK of pod a"; else no "CHECK" "$(cat /tmp/check.out)"; fi
ip route del "$ip_b/32"
plugin CHECK cid-b /run/netns/b team-b b >/tmp/check.out; rc=$?
if [ $rc != 0 ] && grep -q '"code"' /tmp/check.out; then ok "CHECK fails once pod b's route is gone (the control)"; else no "CHECK control" "rc $rc: $(cat /tmp/check.out)"; fi
for p in a b; do
	out=$(plugin DEL cid-$p /run/netns/$p team-$p $p); rc=$?
	[ $rc = 0 ] || no "DEL $p" "$rc $out"
done
left=$(ip -o link show | grep -c ' tg')
routes=$(ip route show | grep -c '^10\.1\.0\.')
atts=$(grep -o '"containerId"' /data/vm/state.json 2>/dev/null | wc -l)
if [ "$left" = 0 ] && [ "$routes" = 0 ] && [ "$atts" = 0 ]; then ok "DEL leaves no veth, route or attachment"; else no "after DEL" "links $left routes $routes attachments $atts"; fi
[ "$F" = 0 ] || { tail -n 4 /tmp/tollgate.log; dmesg | tail -n 8; } | sed 's/^/TGVM # /'
echo "TGVM done $N $F"
poweroff -f
EOF
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) >"$TG_TMP/initrd.gz"

start=$SECONDS
timeout 600 "$QSYS" -M virt -cpu cortex-a57 -smp 2 -m 1024 -nographic -no-reboot -nic none \
	-kernel "$TG_TMP/k/boot/vmlinuz-$KV" -initrd "$TG_TMP/initrd.gz" \
	-append "console=ttyAMA0 panic=-1 quiet rdinit=/init" </dev/null >"$TG_TMP/console" 2>&1
rc=$?
pass=0 fail=0
while IFS= read -r l; do
	l=${l%$'\r'}
	case $l in
	"TGVM ok - "*) echo "${l#TGVM }"; pass=$((pass + 1)) ;;
	"TGVM not ok - "*) echo "${l#TGVM }"; fail=$((fail + 1)) ;;
	"TGVM # "*) echo "${l#TGVM }" ;;
	esac
done <"$TG_TMP/console"
if ! grep -q '^TGVM done' "$TG_TMP/console"; then
	echo "not ok - the arm64 machine ran the smoke to its end: qemu exit $rc; console: $(tail -c 1500 "$TG_TMP/console" | tr '\r\n' '  ')"
	fail=$((fail + 1))
fi
echo "# the arm64 machine: $((SECONDS - start)) s, kernel $KV"
echo "# test_arm64_vm.sh: $pass ok, $fail not ok"
echo "# tollgate-tap: end of test_arm64_vm.sh"
[ "$fail" = 0 ]
