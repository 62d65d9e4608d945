// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting table against the kernel's nftables (root and the nft
 * binary). tests/integration/test_kernel_cases.sh runs this in a network
 * namespace of its own, and the process unshares another before its first
 * table (tests/unit/netns.h): run by hand it never sees the host's tables
 * either.
 *
 * The cases of tests/unit/acct_cases.h, which tests/unit/test_accounting.c
 * runs against the fake nf_tables, here against the kernel's (the reader,
 * the batch transport, a 400-pod rebuild whose ~6,000 answers must fit the
 * receive buffer); and what needs the kernel's rules and elements:
 *
 * - another internalCIDRs list, or perPod turned over, writes only what differs;
 * - a pod's element of @ingress_class follows its record through the ADD,
 *   the check, a reshape (replaced, deleted for 0), a repeated ADD (the
 *   same) and the DEL; the store's reconciliation, a declaration putting
 *   pods back and one of a table that predates the map make it what the
 *   records say;
 * - packets forwarded from an internet address to a pod with an element
 *   leave the forward hook with its class as priority and the internet
 *   mark's bit set (the mark's other bits kept), those to a pod without one
 *   with the veth's class and no bit: counted by a table of the test's own
 *   after tollgate's, in links of the process's namespace alone.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "tests/kernel/nft_kernel.h"
#include "tests/unit/acct_cases.h"

/* Another internalCIDRs list: only the set internal is written, the rules stay. */
static void t_declare_changes_only_what_differs(void **state)
{
	struct cidr4 two[2] = { { 0x0a000000u, 8 }, { 0xc0a80000u, 16 } };
	struct acct_config base = config(), cfg = base;
	struct acct_repairs rep;
	struct tg_err e = { 0 };

	NFT_FX_NEED();
	assert_int_equal(acct_declare(&base, NULL, 0, 0, &rep, &e), 1);
	cfg.internal = two;
	cfg.n_internal = 2;
	assert_int_equal(acct_declared(&cfg), 0);
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_int_equal(rep.internal, 1);
	assert_int_equal(rep.rules + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
	assert_int_equal(acct_declared(&base), 0);
	/* per-pod counting adds rules to some chains: only those chains are written */
	cfg.per_pod = !cfg.per_pod;
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_true(rep.rules > 0);
	assert_int_equal(rep.internal + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
}

/* ---- a pod's download class (@ingress_class) ---- */

/* A shell command in the process's own network namespace; fails the test when it fails. */
__attribute__((format(printf, 1, 2))) static void ns_sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	if (!in_private_netns())
		fail_msg("ns_sh outside a private network namespace");
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("failed: %s", cmd);
}

/* What `nft list ...` prints, NUL-terminated, into buf (private namespace only). */
static void nft_read(const char *what, char *buf, size_t size)
{
	char cmd[256];
	size_t n;
	FILE *p;

	if (!in_private_netns())
		fail_msg("nft_read outside a private network namespace");
	snprintf(cmd, sizeof(cmd), "nft list %s 2>&1", what);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(buf, 1, size - 1, p);
	buf[n] = '\0';
	pclose(p);
}

/* The elements of map ingress_class, as nft prints them ("" when it has none). */
static const char *class_elems(char *buf, size_t size)
{
	char *at;

	nft_read("map inet " ACCT_TABLE " " ACCT_MAP_INGRESS_CLASS, buf, size);
	at = strstr(buf, "elements = {");
	if (!at)
		return "";
	at += strlen("elements = {");
	at[strcspn(at, "}")] = '\0';
	return at;
}

/* Whether map ingress_class holds exactly these elements ("ip : class", ", "-separated, in nft's order). */
static void assert_classes(const char *want)
{
	char buf[4096], norm[1024] = "";
	const char *have = class_elems(buf, sizeof(buf));
	size_t n = 0;

	/* nft breaks long lists over lines and pads them: compare without blanks */
	for (const char *c = have; *c && n + 1 < sizeof(norm); c++)
		if (*c != ' ' && *c != '\t' && *c != '\n')
			norm[n++] = *c;
	norm[n] = '\0';
	if (strcmp(norm, want) != 0)
		fail_msg("map ingress_class holds {%s}, not {%s}", norm, want);
}

static struct acct_pod class_pod(uint32_t ip, const char *veth, uint32_t classid)
{
	return (struct acct_pod){ .ip = ip,
				  .k8s_namespace = "dl",
				  .host_veth = veth,
				  .egress_classid = 0,
				  .ingress_classid = classid };
}

/*
 * The element follows the pod's record: made by the ADD, checked, replaced
 * (a reshape; a repeated ADD whose class changed), deleted for 0 (nothing
 * written when it is right already) and by the DEL.
 */
static void t_download_class_element(void **state)
{
	struct acct_config cfg = config();
	struct acct_pod a = class_pod(0x0a010005u, "tg000000000005", 0x10005);
	struct acct_pod b = class_pod(0x0a010006u, "tg000000000006", 0);
	struct acct_repairs rep;
	struct tg_err e = { 0 };

	NFT_FX_NEED();
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_classes("");
	assert_int_equal(acct_pod_add(&cfg, &a, &e), 0);
	assert_int_equal(acct_pod_add(&cfg, &b, &e), 0);
	assert_classes("10.1.0.5:1:5");
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 1);
	assert_int_equal(acct_pod_check(&b, &cfg, &e), 1);
	/* the check sees a class other than the record's, and one the record has not */
	a.ingress_classid = 0x10007;
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 0);
	b.ingress_classid = 0x10003;
	assert_int_equal(acct_pod_check(&b, &cfg, &e), 0);
	a.ingress_classid = 0;
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 0);
	/* a reshape: replaced, put in, nothing to do */
	a.ingress_classid = 0x10007;
	assert_int_equal(acct_pod_ingress_class(&a, &e), 0);
	assert_int_equal(acct_pod_ingress_class(&b, &e), 0);
	assert_classes("10.1.0.5:1:7,10.1.0.6:1:3");
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 1);
	assert_int_equal(acct_pod_ingress_class(&a, &e), 0);
	assert_classes("10.1.0.5:1:7,10.1.0.6:1:3");
	/* a repeated ADD with another class than the kernel's takes the old one out */
	a.ingress_classid = 0x10009;
	assert_int_equal(acct_pod_add(&cfg, &a, &e), 0);
	assert_classes("10.1.0.5:1:9,10.1.0.6:1:3");
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 1);
	/* 0: deleted; again: nothing left to delete, no error */
	b.ingress_classid = 0;
	assert_int_equal(acct_pod_ingress_class(&b, &e), 0);
	assert_classes("10.1.0.5:1:9");
	assert_int_equal(acct_pod_ingress_class(&b, &e), 0);
	assert_int_equal(acct_pod_check(&b, &cfg, &e), 1);
	/* and by an ADD whose record has 0 (a reshape out of the tree) */
	b.ingress_classid = 0x10003;
	assert_int_equal(acct_pod_add(&cfg, &b, &e), 0);
	assert_classes("10.1.0.5:1:9,10.1.0.6:1:3");
	b.ingress_classid = 0;
	assert_int_equal(acct_pod_add(&cfg, &b, &e), 0);
	assert_classes("10.1.0.5:1:9");
	assert_int_equal(acct_pod_add(&cfg, &b, &e), 0);
	assert_int_equal(acct_pod_check(&b, &cfg, &e), 1);
	/* the DEL takes it with the pod's other elements */
	assert_int_equal(acct_pod_del(&a, NULL, NULL, &e), 0);
	assert_classes("");
	assert_int_equal(acct_pod_check(&a, &cfg, &e), 0);
	/* without the table: a class to set is an error, none to set is not */
	nft_fx_del_table(ACCT_TABLE);
	assert_int_equal(acct_pod_ingress_class(&b, &e), 0);
	assert_int_equal(acct_pod_ingress_class(&a, &e), -ENOENT);
}

/*
 * The store against the kernel: a class other than the record's replaced,
 * one where the record has 0 deleted, a missing one put in, a stray address
 * taken out; a second pass finds nothing. A declaration putting every pod
 * back makes the map from the store in its transaction, whatever it held.
 */
static void t_download_class_reconcile(void **state)
{
	struct acct_config cfg = config();
	struct acct_pod all[3] = {
		class_pod(0x0a010005u, "tg000000000005", 0x10005),
		class_pod(0x0a010006u, "tg000000000006", 0),
		class_pod(0x0a010007u, "tg000000000007", 0x10004),
	};
	struct acct_repairs rep;
	struct tg_err e = { 0 };
	unsigned added = 0, removed = 0;

	NFT_FX_NEED();
	assert_int_equal(acct_declare(&cfg, all, 3, ACCT_DECLARE_PODS, &rep, &e), 1);
	assert_classes("10.1.0.5:1:5,10.1.0.7:1:4");
	assert_int_equal(acct_pods_reconcile(&cfg, all, 3, &added, &removed, &e), 0);
	assert_int_equal(added + removed, 0);
	ns_sh("nft 'delete element inet " ACCT_TABLE " " ACCT_MAP_INGRESS_CLASS
	      " { 10.1.0.5, 10.1.0.7 }'");
	ns_sh("nft 'add element inet " ACCT_TABLE " " ACCT_MAP_INGRESS_CLASS
	      " { 10.1.0.5 : 1:7, 10.1.0.6 : 1:3, 10.1.0.99 : 1:8 }'");
	for (int i = 0; i < 3; i++)
		assert_int_equal(acct_pod_check(&all[i], &cfg, &e), 0);
	assert_int_equal(acct_pods_reconcile(&cfg, all, 3, &added, &removed, &e), 0);
	assert_classes("10.1.0.5:1:5,10.1.0.7:1:4");
	/* a's class put right and c's put back; b's and the stray's taken out */
	assert_int_equal(added, 2);
	assert_int_equal(removed, 2);
	for (int i = 0; i < 3; i++)
		assert_int_equal(acct_pod_check(&all[i], &cfg, &e), 1);
	assert_int_equal(acct_pods_reconcile(&cfg, all, 3, &added, &removed, &e), 0);
	assert_int_equal(added + removed, 0);
	/* a declaration putting the pods back: the kept map holds another value, and a stray */
	ns_sh("nft 'delete element inet " ACCT_TABLE " " ACCT_MAP_INGRESS_CLASS " { 10.1.0.5 }'");
	ns_sh("nft 'add element inet " ACCT_TABLE " " ACCT_MAP_INGRESS_CLASS
	      " { 10.1.0.5 : 1:6, 10.1.0.99 : 1:8 }'");
	if (acct_declare(&cfg, all, 3, ACCT_DECLARE_PODS, &rep, &e) < 0)
		fail_msg("declaration putting pods back: %s", e.msg);
	assert_classes("10.1.0.5:1:5,10.1.0.7:1:4");
	/* a table of before the map (no rule names it): declared again, the classes come back in */
	ns_sh("nft flush chain inet " ACCT_TABLE " fwd_ingress && nft delete map inet " ACCT_TABLE
	      " " ACCT_MAP_INGRESS_CLASS);
	assert_int_equal(acct_declared(&cfg), 0);
	assert_int_equal(acct_declare(&cfg, all, 3, 0, &rep, &e), 1);
	assert_int_equal(rep.sets, 1);
	assert_int_equal(acct_declared(&cfg), 1);
	assert_classes("10.1.0.5:1:5,10.1.0.7:1:4");
	for (int i = 0; i < 3; i++)
		assert_int_equal(acct_pod_check(&all[i], &cfg, &e), 1);
}

/* ---- packets ---- */

#define PROBE_TABLE "tg_probe"
#define INET_ADDR 0xcb007101u /* 203.0.113.1: the internet, for internalCIDRs 10/8 */
#define POD_A 0x0a010005u     /* 10.1.0.5, with an element */
#define POD_B 0x0a010006u     /* 10.1.0.6, without */
#define DL_PACKETS 5

static uint16_t ip_csum(const void *data, size_t len)
{
	const uint8_t *b = data;
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * n UDP packets from INET_ADDR to dst, sent out of link kx0 to the MAC of
 * its peer kx1: they come in on kx1 as from the internet, and the node
 * forwards them to the pod's link.
 */
static void send_downloads(uint32_t dst, int n)
{
	static const uint8_t peer_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
	uint8_t pkt[20 + 8 + 16] = { 0 };
	struct sockaddr_ll to = { 0 };
	uint32_t src_be = htonl(INET_ADDR), dst_be = htonl(dst);
	uint16_t v;
	int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));

	assert_true(fd >= 0);
	pkt[0] = 0x45;
	v = htons(sizeof(pkt));
	memcpy(pkt + 2, &v, 2);
	pkt[8] = 64;
	pkt[9] = IPPROTO_UDP;
	memcpy(pkt + 12, &src_be, 4);
	memcpy(pkt + 16, &dst_be, 4);
	v = htons(ip_csum(pkt, 20));
	memcpy(pkt + 10, &v, 2);
	v = htons(40000);
	memcpy(pkt + 20, &v, 2);
	v = htons(9);
	memcpy(pkt + 22, &v, 2);
	v = htons(sizeof(pkt) - 20);
	memcpy(pkt + 24, &v, 2); /* UDP checksum 0: none */
	to.sll_family = AF_PACKET;
	to.sll_protocol = htons(ETH_P_IP);
	to.sll_ifindex = (int)if_nametoindex("kx0");
	to.sll_halen = 6;
	memcpy(to.sll_addr, peer_mac, 6);
	assert_true(to.sll_ifindex > 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&to,
					sizeof(to)),
				 (ssize_t)sizeof(pkt));
	close(fd);
}

/* Packets counter `name` of the probe table counted. */
static uint64_t probe_packets(const char *name)
{
	char what[128], buf[1024];
	const char *at;

	snprintf(what, sizeof(what), "counter inet " PROBE_TABLE " %s", name);
	nft_read(what, buf, sizeof(buf));
	at = strstr(buf, "packets ");
	if (!at)
		fail_msg("no counter %s: %s", name, buf);
	return strtoull(at + strlen("packets "), NULL, 10);
}

/* Waits (at most 2 s) until counter `name` has n packets; its count then. */
static uint64_t probe_wait(const char *name, uint64_t n)
{
	uint64_t have = 0;

	for (int i = 0; i < 200 && (have = probe_packets(name)) < n; i++)
		usleep(10000);
	return have;
}

static void assert_probe(const char *name, uint64_t want)
{
	uint64_t have = probe_wait(name, want);

	if (have != want)
		fail_msg("counter %s: %" PRIu64 " packets, not %" PRIu64, name, have, want);
}

/*
 * What leaves the forward hook for each pod, counted after table inet
 * tollgate (priority 0; tollgate's forward is at -150): every packet to
 * it, and those with each (priority, mark) of interest. A chain before
 * tollgate's sets mark 0x101, bits of others that must survive.
 */
static void probe_table(void)
{
	ns_sh("nft -f - <<'EOF'\n"
	      "table inet " PROBE_TABLE " {\n"
	      "  counter a_all { }\n  counter a_tree5 { }\n  counter a_tree7 { }\n"
	      "  counter a_veth { }\n  counter b_all { }\n  counter b_veth { }\n"
	      "  chain before {\n    type filter hook forward priority -200;\n"
	      "    meta mark set 0x101\n  }\n"
	      "  chain after {\n    type filter hook forward priority 0;\n"
	      "    ip daddr 10.1.0.5 counter name a_all\n"
	      "    ip daddr 10.1.0.5 meta priority 1:5 meta mark 0x10101 counter name a_tree5\n"
	      "    ip daddr 10.1.0.5 meta priority 1:7 meta mark 0x10101 counter name a_tree7\n"
	      "    ip daddr 10.1.0.5 meta priority 1:2 meta mark 0x101 counter name a_veth\n"
	      "    ip daddr 10.1.0.6 counter name b_all\n"
	      "    ip daddr 10.1.0.6 meta priority 1:2 meta mark 0x101 counter name b_veth\n"
	      "  }\n}\nEOF");
}

/*
 * Packets forwarded from an internet address to a pod: with an element of
 * @ingress_class they leave fwd_ingress with its class as priority and the
 * internet mark's bit set, the mark's other bits kept; a pod without one
 * (the control, and the same pod once its element goes) keeps the veth's
 * class (1:2) and a mark without the bit. A reshape's new class reaches
 * the next packet.
 *
 *   kx0 --veth-- kx1 203.0.113.254/24 (node) tgdl0 --veth-- dlp0
 *   routes 10.1.0.5/32, 10.1.0.6/32 via tgdl0 (a MAC no link has)
 */
static void t_download_class_packets(void **state)
{
	struct acct_config cfg = config();
	struct acct_pod a = class_pod(POD_A, "tg000000000005", 0x10005);
	struct acct_pod b = class_pod(POD_B, "tg000000000006", 0);
	struct acct_repairs rep;
	struct tg_err e = { 0 };

	NFT_FX_NEED();
	nft_quiet("delete table inet " PROBE_TABLE);
	ns_sh("ip link del kx0 2>/dev/null; ip link del tgdl0 2>/dev/null; true");
	ns_sh("ip link add kx0 address 02:00:00:00:00:01 type veth peer name kx1 "
	      "address 02:00:00:00:00:02");
	/* the pods' side: what is sent to 02:..:04 its peer (02:..:03) drops as not its own */
	ns_sh("ip link add tgdl0 type veth peer name dlp0 address 02:00:00:00:00:03");
	ns_sh("ip addr add 203.0.113.254/24 dev kx1 && ip link set kx0 up && ip link set kx1 up "
	      "&& ip link set tgdl0 up && ip link set dlp0 up && ip link set lo up");
	ns_sh("ip route add 10.1.0.5/32 dev tgdl0 && ip route add 10.1.0.6/32 dev tgdl0");
	ns_sh("ip neigh add 10.1.0.5 lladdr 02:00:00:00:00:04 dev tgdl0 nud permanent && "
	      "ip neigh add 10.1.0.6 lladdr 02:00:00:00:00:04 dev tgdl0 nud permanent");
	ns_sh("echo 1 > /proc/sys/net/ipv4/ip_forward");
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_int_equal(acct_pod_add(&cfg, &a, &e), 0);
	assert_int_equal(acct_pod_add(&cfg, &b, &e), 0);
	probe_table();
	send_downloads(POD_A, DL_PACKETS);
	send_downloads(POD_B, DL_PACKETS);
	/* every packet was forwarded (the topology works), each as its pod's element says */
	assert_probe("a_all", DL_PACKETS);
	assert_probe("b_all", DL_PACKETS);
	assert_probe("a_tree5", DL_PACKETS);
	assert_probe("b_veth", DL_PACKETS);
	assert_probe("a_veth", 0);
	/* a reshape: the next packets take the new class */
	a.ingress_classid = 0x10007;
	assert_int_equal(acct_pod_ingress_class(&a, &e), 0);
	send_downloads(POD_A, DL_PACKETS);
	assert_probe("a_all", 2 * DL_PACKETS);
	assert_probe("a_tree7", DL_PACKETS);
	assert_probe("a_tree5", DL_PACKETS);
	/* its element gone: back to the veth's class, no mark */
	a.ingress_classid = 0;
	assert_int_equal(acct_pod_ingress_class(&a, &e), 0);
	send_downloads(POD_A, DL_PACKETS);
	assert_probe("a_all", 3 * DL_PACKETS);
	assert_probe("a_veth", DL_PACKETS);
	assert_probe("a_tree5", DL_PACKETS);
	assert_probe("a_tree7", DL_PACKETS);
	assert_probe("b_veth", DL_PACKETS);
	ns_sh("ip link del kx0 && ip link del tgdl0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		NFT_CASE(t_reader_without_table),
		NFT_CASE(t_reader_values),
		NFT_CASE(t_reader_ids),
		NFT_CASE(t_batch_refused_whole_answers_at_once),
		NFT_CASE(t_batch_ignores_earlier_answers),
		NFT_CASE(t_batch_reports_the_first_error),
		NFT_CASE(t_rebuild_400_pods),
		NFT_CASE(t_declare_changes_only_what_differs),
		NFT_CASE(t_add_rebuilds_missing_table),
		NFT_CASE(t_download_class_element),
		NFT_CASE(t_download_class_reconcile),
		NFT_CASE(t_download_class_packets),
	};

	return cmocka_run_group_tests_name("accounting in a network namespace", tests, NULL, NULL);
}
