#!/usr/bin/env bash
# Concurrency: 50 ADDs started at once (as kubelet does when a node fills up)
# get 50 distinct addresses and 50 working pods; then 50 DELs at once leave
# nothing behind. Exercises the store's flock and the atomic nft batches.
#
#   pod01 .. pod50 (one netns each)
#        \  |  /   50 veths tg*, 50 routes /32
#         node 10.0.0.1 -- fabric -- peer / inet   (topology drawn in lib.sh)
#
#   network tgtest, pool 10.1.0.100-10.1.0.199 (100 addresses), cool-down 0
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_concurrency.sh
# shellcheck disable=SC2016,SC2015,SC2004,SC1091  # jq filters with $vars; associative arrays
set -u
. "$(dirname "$0")/lib.sh"
tg_require
tg_traps
t_begin topology
topo_up || tap_bail "could not build the namespace topology"

N=${TG_CONC_PODS:-50}
CONF=$(tg_conf '.ipam.addresses=["10.1.0.100-10.1.0.199"] | .ipam.exclude=[]')
pods=()
for ((i = 1; i <= N; i++)); do pods+=("$(printf 'pod%02d' "$i")"); done

t_begin "setup: $N pod network namespaces"
for s in "${pods[@]}"; do pod_ns_add "$s" || t_fail "netns $s"; done
t_end
[ -z "$T_ERRS" ] || tap_bail "cannot create namespaces"

# run_bg CMD SHORT: start one plugin run in the background (output in $TG_TMP/CMD.SHORT.*).
declare -A PID=()
run_bg() {
	local cmd=$1 s=$2 cid path
	cid=$(cid_for "$s")
	path=$(netns_path "$s")
	tg_exec CNI_COMMAND="$cmd" CNI_CONTAINERID="$cid" CNI_IFNAME=eth0 CNI_NETNS="$path" \
		CNI_PATH="$TOLLGATE_BIN_DIR" CNI_ARGS="$(k8s_args research "$s" "$cid")" \
		<<<"$CONF" >"$TG_TMP/$cmd.$s.out" 2>"$TG_TMP/$cmd.$s.err" &
	PID[$s]=$!
	TG_PIDS+=("$!")
}
# wait_all: wait for every background run, by PID; sets RC[short].
declare -A RC=()
wait_all() {
	local s
	for s in "${pods[@]}"; do
		wait "${PID[$s]}"
		RC[$s]=$?
	done
	TG_PIDS=()
}

t_begin "$N concurrent ADDs all succeed with distinct IPs"
t0=$SECONDS
for s in "${pods[@]}"; do run_bg ADD "$s"; done
wait_all
diag "$N ADDs took $((SECONDS - t0)) s"
failed=0
for s in "${pods[@]}"; do
	if [ "${RC[$s]}" != 0 ]; then
		failed=$((failed + 1))
		[ "$failed" -le 3 ] && diag "ADD $s rc=${RC[$s]}: $(cat "$TG_TMP/ADD.$s.out") $(head -c 300 "$TG_TMP/ADD.$s.err")"
		continue
	fi
	POD_IP[$s]=$(jq -r '.ips[0].address | split("/")[0]' "$TG_TMP/ADD.$s.out" 2>/dev/null)
done
[ "$failed" = 0 ] || t_fail "$failed of $N ADDs failed"
ips=$(for s in "${pods[@]}"; do echo "${POD_IP[$s]:-}"; done | grep . | sort)
t_expect "distinct IPs" "$(uniq <<<"$ips" | wc -l)" "$N"
t_expect "IPs in results" "$(wc -l <<<"$ips")" "$N"
t_end

t_begin "state.json has $N attachments matching the results"
st=$(tg_state)
t_expect "attachments" "$(jq '.attachments|length' <<<"$st")" "$N"
t_expect "state IPs" "$(jq -r '.attachments[].ip' <<<"$st" | sort | tr '\n' ' ')" "$(tr '\n' ' ' <<<"$ips")"
t_expect "distinct host veths" "$(jq -r '.attachments[].hostVeth' <<<"$st" | sort -u | wc -l)" "$N"
t_end

t_begin "kernel holds $N veths, $N /32 routes, $N @pods elements"
t_expect "tg links" "$(node_links_tg | wc -l)" "$N"
t_expect "/32 routes" "$(node_host_routes | wc -l)" "$N"
missing=0
t_expect "@pods elements" "$(nft_set_count pods)" "$N"
set_txt=$(ip netns exec "$TG_NODE" nft list set inet tollgate pods 2>/dev/null)
for s in "${pods[@]}"; do
	[ -n "${POD_IP[$s]:-}" ] && ! grep -qw -- "${POD_IP[$s]}" <<<"$set_txt" && missing=$((missing + 1))
done
t_expect "IPs missing from @pods" "$missing" 0
t_end

t_begin "every pod answers ping from the node"
bad=""
for s in "${pods[@]}"; do
	[ -n "${POD_IP[$s]:-}" ] || continue
	pingq "$TG_NODE" "${POD_IP[$s]}" || bad="$bad $s"
done
[ -z "$bad" ] || t_fail "no answer from:$bad"
pingq "$TG_ID-pod01" "${POD_IP[pod$(printf %02d "$N")]:-0.0.0.0}" || t_fail "pod01 -> last pod fails"
t_end

t_begin "$N concurrent DELs leave nothing behind"
t0=$SECONDS
for s in "${pods[@]}"; do run_bg DEL "$s"; done
wait_all
diag "$N DELs took $((SECONDS - t0)) s"
failed=0
for s in "${pods[@]}"; do
	if [ "${RC[$s]}" != 0 ]; then
		failed=$((failed + 1))
		[ "$failed" -le 3 ] && diag "DEL $s rc=${RC[$s]}: $(cat "$TG_TMP/DEL.$s.out") $(head -c 300 "$TG_TMP/DEL.$s.err")"
	fi
done
[ "$failed" = 0 ] || t_fail "$failed of $N DELs failed"
t_expect "tg links" "$(node_links_tg | wc -l)" 0
t_expect "/32 routes" "$(node_host_routes | wc -l)" 0
t_expect "attachments" "$(state_count)" 0
# the table and its set stay, empty
t_expect "@pods elements" "$(nft_set_count pods)" 0
left=0
for s in "${pods[@]}"; do [ "$(ip -n "$TG_ID-$s" -o link show | grep -vc ': lo:')" = 0 ] || left=$((left + 1)); done
t_expect "pods still holding an eth0" "$left" 0
t_end

tap_done
