// SPDX-License-Identifier: Apache-2.0
/*
 * cni_config_read(): the network configuration on stdin.
 *
 * Valid configs parse into the right fields and defaults; every known key of
 * the wrong JSON type, or with an invalid value, is error 7 naming the key;
 * input that is not a JSON object is error 6; unsupported cniVersions are 1.
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

#include <cmocka.h>

#include "tests/unit/group.h"
#include "tests/unit/helpers.h"

#include "accounting/internal.h"
#include "cni/internal.h"
#include "config/config.h"
#include "lib/util.h"
#include "node/node.h"

/* ---- helpers ---- */

static int parse_cmd(const char *json, enum cni_cmd cmd, struct node_config *cfg, struct tg_err *e)
{
	memset(e, 0, sizeof(*e));
	return cni_config_read(json, strlen(json), cmd, cfg, e);
}

static int parse(const char *json, struct node_config *cfg, struct tg_err *e)
{
	return parse_cmd(json, CNI_CMD_ADD, cfg, e);
}

static void expect_ok_cmd(const char *json, enum cni_cmd cmd)
{
	struct node_config cfg;
	struct tg_err e;
	int r = parse_cmd(json, cmd, &cfg, &e);

	if (r != 0)
		fail_msg("config rejected (r=%d code=%d): %s\n  config: %s", r, e.code, e.msg,
			 json);
	assert_int_equal(e.code, 0);
	node_config_free(&cfg);
}

/* A minimal valid config and builders that put one key in a chosen place. */
#define HEAD "{\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":\"tollgate\""
#define IPAM_OK "\"ipam\":{\"source\":\"static\",\"addresses\":[\"10.1.0.10-10.1.0.40\"]}"
#define MINIMAL HEAD "," IPAM_OK "}"
#define TOP(kv) HEAD "," kv "," IPAM_OK "}"
#define IPAM(kv) HEAD ",\"ipam\":{" kv "}}"
#define IPAM_STATIC(kv) IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.10-10.1.0.40\"]," kv)
#define ACCT(kv) HEAD "," IPAM_OK ",\"accounting\":{" kv "}}"
#define ACCESS(kv) HEAD "," IPAM_OK ",\"nodeAccess\":{" kv "}}"
#define GUARD(kv) HEAD "," IPAM_OK ",\"internetGuard\":{\"connections\":{" kv "}}}"
#define DSTS(v) HEAD "," IPAM_OK ",\"internetGuard\":{\"destinations\":" v "}}"
#define BUDGETS(kv) HEAD "," IPAM_OK ",\"budgets\":{" kv "}}"
#define ALLOC_OK "\"allocator\":\"http://10.0.0.9:9618\""
#define VERSIONED(v, rest) \
	"{\"cniVersion\":\"" v "\",\"name\":\"net\",\"type\":\"tollgate\"," rest "}"

/* ---- table-driven rejections: each row becomes its own test case ---- */

struct bad_case {
	const char *name;
	const char *json;
	enum cni_cmd cmd;
	int code;
	const char *needle; /* must appear in the message */
};

static void t_bad(void **state)
{
	const struct bad_case *c = *state;
	struct node_config cfg;
	struct tg_err e;
	int r = parse_cmd(c->json, c->cmd, &cfg, &e);

	node_config_free(&cfg); /* before any assertion: a failing case must not leak */
	if (r >= 0)
		fail_msg("accepted, want code %d naming \"%s\"\n  config: %s", c->code, c->needle,
			 c->json);
	if (e.code != c->code)
		fail_msg("code %d, want %d (msg: %s)\n  config: %s", e.code, c->code, e.msg,
			 c->json);
	assert_contains(e.msg, c->needle);
}

static const struct bad_case bad_cases[] = {
	/* ---- wrong JSON type of a known key: 7, naming the key ---- */
	{ "type: cniVersion number", "{\"cniVersion\":1,\"name\":\"net\"," IPAM_OK "}", CNI_CMD_ADD,
	  7, "cniVersion" },
	{ "type: name number", "{\"cniVersion\":\"1.1.0\",\"name\":5," IPAM_OK "}", CNI_CMD_ADD, 7,
	  "name" },
	{ "type: type number", "{\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":5," IPAM_OK "}",
	  CNI_CMD_ADD, 7, "type" },
	{ "type: type array", "{\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":[]," IPAM_OK "}",
	  CNI_CMD_DEL, 7, "type" },
	{ "type: mtu string", TOP("\"mtu\":\"1500\""), CNI_CMD_ADD, 7, "mtu" },
	{ "type: mtu float", TOP("\"mtu\":1500.5"), CNI_CMD_ADD, 7, "mtu" },
	{ "type: mtu bool", TOP("\"mtu\":true"), CNI_CMD_ADD, 7, "mtu" },
	{ "type: uplink number", TOP("\"uplink\":5"), CNI_CMD_ADD, 7, "uplink" },
	{ "type: internalCIDRs string", TOP("\"internalCIDRs\":\"10.0.0.0/8\""), CNI_CMD_ADD, 7,
	  "internalCIDRs" },
	{ "type: internalCIDRs element number", TOP("\"internalCIDRs\":[8]"), CNI_CMD_ADD, 7,
	  "internalCIDRs[0]" },
	{ "type: internalCIDRs object", TOP("\"internalCIDRs\":{}"), CNI_CMD_ADD, 7,
	  "internalCIDRs" },
	{ "type: masquerade string", TOP("\"masquerade\":\"yes\""), CNI_CMD_ADD, 7, "masquerade" },
	{ "type: masquerade number", TOP("\"masquerade\":1"), CNI_CMD_ADD, 7, "masquerade" },
	{ "type: dataDir number", TOP("\"dataDir\":5"), CNI_CMD_ADD, 7, "dataDir" },
	{ "type: dataDir array", TOP("\"dataDir\":[\"/run/tollgate\"]"), CNI_CMD_ADD, 7,
	  "dataDir" },
	{ "type: logFile bool", TOP("\"logFile\":false"), CNI_CMD_ADD, 7, "logFile" },
	{ "type: ipam string", HEAD ",\"ipam\":\"static\"}", CNI_CMD_ADD, 7, "ipam" },
	{ "type: ipam array", HEAD ",\"ipam\":[]}", CNI_CMD_ADD, 7, "ipam" },
	{ "type: ipam.source number", IPAM("\"source\":1,\"addresses\":[\"10.1.0.1\"]"),
	  CNI_CMD_ADD, 7, "ipam.source" },
	{ "type: ipam.imdsURL number", IPAM_STATIC("\"imdsURL\":80"), CNI_CMD_ADD, 7,
	  "ipam.imdsURL" },
	{ "type: ipam.addresses number", IPAM("\"source\":\"static\",\"addresses\":5"), CNI_CMD_ADD,
	  7, "ipam.addresses" },
	{ "type: ipam.addresses string", IPAM("\"source\":\"static\",\"addresses\":\"10.1.0.1\""),
	  CNI_CMD_ADD, 7, "ipam.addresses" },
	{ "type: ipam.addresses element number",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.1\",5]"), CNI_CMD_ADD, 7,
	  "ipam.addresses[1]" },
	{ "type: ipam.exclude string", IPAM_STATIC("\"exclude\":\"10.1.0.11\""), CNI_CMD_ADD, 7,
	  "ipam.exclude" },
	{ "type: ipam.exclude element null", IPAM_STATIC("\"exclude\":[null]"), CNI_CMD_ADD, 7,
	  "ipam.exclude[0]" },
	{ "type: ipam.cooldownSeconds string", IPAM_STATIC("\"cooldownSeconds\":\"30\""),
	  CNI_CMD_ADD, 7, "ipam.cooldownSeconds" },
	{ "type: ipam.cooldownSeconds float", IPAM_STATIC("\"cooldownSeconds\":1.5"), CNI_CMD_ADD,
	  7, "ipam.cooldownSeconds" },
	{ "type: accounting array", HEAD "," IPAM_OK ",\"accounting\":[]}", CNI_CMD_ADD, 7,
	  "accounting" },
	{ "type: accounting.enabled string", ACCT("\"enabled\":\"true\""), CNI_CMD_ADD, 7,
	  "accounting.enabled" },
	{ "type: accounting.perPod number", ACCT("\"perPod\":1"), CNI_CMD_ADD, 7,
	  "accounting.perPod" },
	{ "type: accounting.internetMark bool", ACCT("\"internetMark\":true"), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "type: accounting.internetMark array", ACCT("\"internetMark\":[65536]"), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "type: shaping string", TOP("\"shaping\":\"fast\""), CNI_CMD_ADD, 7, "shaping" },
	{ "type: runtimeConfig array", TOP("\"runtimeConfig\":[]"), CNI_CMD_ADD, 7,
	  "runtimeConfig" },
	{ "type: runtimeConfig string", TOP("\"runtimeConfig\":\"x\""), CNI_CMD_ADD, 7,
	  "runtimeConfig" },
	{ "type: valid-attachments object", TOP("\"cni.dev/valid-attachments\":{}"), CNI_CMD_GC, 7,
	  "cni.dev/valid-attachments" },
	{ "type: valid-attachments element string", TOP("\"cni.dev/valid-attachments\":[\"abc\"]"),
	  CNI_CMD_GC, 7, "cni.dev/valid-attachments[0]" },
	{ "type: valid-attachments element without ifname",
	  TOP("\"cni.dev/valid-attachments\":[{\"containerID\":\"a\",\"ifname\":\"eth0\"},{\"containerID\":\"b\"}]"),
	  CNI_CMD_GC, 7, "cni.dev/valid-attachments[1]" },
	{ "type: valid-attachments containerID number",
	  TOP("\"cni.dev/valid-attachments\":[{\"containerID\":1,\"ifname\":\"eth0\"}]"),
	  CNI_CMD_GC, 7, "containerID" },
	/* prevResult that is not an object cannot be decoded: 6 (contract) */
	{ "type: prevResult array is 6", TOP("\"prevResult\":[]"), CNI_CMD_DEL, 6, "prevResult" },
	{ "type: prevResult string is 6", TOP("\"prevResult\":\"x\""), CNI_CMD_CHECK, 6,
	  "prevResult" },

	/* ---- budgets ---- */
	{ "type: budgets array", TOP("\"budgets\":[]"), CNI_CMD_ADD, 7, "budgets" },
	{ "type: budgets.allocator number", BUDGETS("\"allocator\":5"), CNI_CMD_ADD, 7,
	  "budgets.allocator" },
	{ "value: budgets.allocator not a URL",
	  BUDGETS("\"allocator\":\"tollgate-allocator:9618\""), CNI_CMD_ADD, 7,
	  "budgets.allocator" },
	{ "value: budgets.allocator ftp", BUDGETS("\"allocator\":\"ftp://a/\""), CNI_CMD_ADD, 7,
	  "budgets.allocator" },
	{ "value: budgets.allocator with a blank", BUDGETS("\"allocator\":\"http://a b/\""),
	  CNI_CMD_ADD, 7, "budgets.allocator" },
	{ "value: budgets.reportSeconds 0", BUDGETS(ALLOC_OK ",\"reportSeconds\":0"), CNI_CMD_ADD,
	  7, "budgets.reportSeconds" },
	{ "value: budgets.reportSeconds 61", BUDGETS(ALLOC_OK ",\"reportSeconds\":61"), CNI_CMD_ADD,
	  7, "budgets.reportSeconds" },
	{ "type: budgets.reportSeconds string", BUDGETS(ALLOC_OK ",\"reportSeconds\":\"1\""),
	  CNI_CMD_ADD, 7, "budgets.reportSeconds" },
	{ "value: budgets.leaseSeconds 1", BUDGETS(ALLOC_OK ",\"leaseSeconds\":1"), CNI_CMD_ADD, 7,
	  "budgets.leaseSeconds" },
	{ "value: budgets.leaseSeconds under two reports",
	  BUDGETS(ALLOC_OK ",\"reportSeconds\":5,\"leaseSeconds\":9"), CNI_CMD_ADD, 7,
	  "budgets.leaseSeconds" },
	{ "value: budgets.fallback 10Mbps", BUDGETS(ALLOC_OK ",\"fallback\":\"10Mbps\""),
	  CNI_CMD_ADD, 7, "budgets.fallback" },
	{ "value: budgets.fallback negative", BUDGETS(ALLOC_OK ",\"fallback\":-1"), CNI_CMD_ADD, 7,
	  "budgets.fallback" },
	{ "value: budgets.fallbackAfterSeconds 86401",
	  BUDGETS(ALLOC_OK ",\"fallbackAfterSeconds\":86401"), CNI_CMD_ADD, 7,
	  "budgets.fallbackAfterSeconds" },
	{ "value: budgets.fallbackAfterSeconds negative",
	  BUDGETS(ALLOC_OK ",\"fallbackAfterSeconds\":-1"), CNI_CMD_ADD, 7,
	  "budgets.fallbackAfterSeconds" },
	{ "type: budgets.fallbackAfterSeconds string",
	  BUDGETS(ALLOC_OK ",\"fallbackAfterSeconds\":\"300\""), CNI_CMD_ADD, 7,
	  "budgets.fallbackAfterSeconds" },
	/* budgets are the allocator's policy, not the conflist's */
	{ "moved: budgets.internetEgress",
	  BUDGETS(ALLOC_OK ",\"internetEgress\":{\"datasets\":\"1G\"}"), CNI_CMD_ADD, 7,
	  "tollgate-allocator --policy" },
	{ "missing: budgets.allocator", BUDGETS("\"reportSeconds\":1"), CNI_CMD_ADD, 7,
	  "budgets.allocator" },

	/* ---- internetGuard ---- */
	{ "type: internetGuard array", TOP("\"internetGuard\":[]"), CNI_CMD_ADD, 7,
	  "internetGuard" },
	{ "type: internetGuard.connections number", TOP("\"internetGuard\":{\"connections\":5}"),
	  CNI_CMD_ADD, 7, "internetGuard.connections" },
	{ "value: internetGuard.connections.namespaceDefault 0", GUARD("\"namespaceDefault\":0"),
	  CNI_CMD_ADD, 7, "internetGuard.connections.namespaceDefault" },
	{ "value: internetGuard.connections.namespaceDefault over ten million",
	  GUARD("\"namespaceDefault\":10000001"), CNI_CMD_ADD, 7,
	  "internetGuard.connections.namespaceDefault" },
	{ "type: internetGuard.connections.namespaceDefault string",
	  GUARD("\"namespaceDefault\":\"20000\""), CNI_CMD_ADD, 7,
	  "internetGuard.connections.namespaceDefault" },
	{ "value: internetGuard.connections.newPerSecond negative", GUARD("\"newPerSecond\":-1"),
	  CNI_CMD_ADD, 7, "internetGuard.connections.newPerSecond" },
	{ "type: internetGuard.connections.newPerSecond float", GUARD("\"newPerSecond\":2.5"),
	  CNI_CMD_ADD, 7, "internetGuard.connections.newPerSecond" },
	{ "type: internetGuard.connections.namespaces array", GUARD("\"namespaces\":[]"),
	  CNI_CMD_ADD, 7, "internetGuard.connections.namespaces" },
	{ "value: internetGuard.connections.namespaces upper-case namespace",
	  GUARD("\"namespaces\":{\"Crawl\":5}"), CNI_CMD_ADD, 7,
	  "internetGuard.connections.namespaces[\"Crawl\"]" },
	{ "value: internetGuard.connections.namespaces limit negative",
	  GUARD("\"namespaces\":{\"crawl\":-5}"), CNI_CMD_ADD, 7,
	  "internetGuard.connections.namespaces[\"crawl\"]" },
	{ "type: internetGuard.connections.namespaces limit string",
	  GUARD("\"namespaces\":{\"crawl\":\"5\"}"), CNI_CMD_ADD, 7,
	  "internetGuard.connections.namespaces[\"crawl\"]" },
	{ "type: internetGuard.destinations array", DSTS("[]"), CNI_CMD_ADD, 7,
	  "internetGuard.destinations" },
	{ "value: internetGuard.destinations.top 0", DSTS("{\"top\":0}"), CNI_CMD_ADD, 7,
	  "internetGuard.destinations.top" },
	{ "value: internetGuard.destinations.top over 100", DSTS("{\"top\":101}"), CNI_CMD_ADD, 7,
	  "internetGuard.destinations.top" },
	{ "value: internetGuard.destinations.prefixLength 7", DSTS("{\"prefixLength\":7}"),
	  CNI_CMD_ADD, 7, "internetGuard.destinations.prefixLength" },
	{ "value: internetGuard.destinations.prefixLength 33", DSTS("{\"prefixLength\":33}"),
	  CNI_CMD_ADD, 7, "internetGuard.destinations.prefixLength" },
	{ "type: internetGuard.destinations.prefixLength string", DSTS("{\"prefixLength\":\"24\"}"),
	  CNI_CMD_ADD, 7, "internetGuard.destinations.prefixLength" },
	{ "value: internetGuard.destinations.tracked 15", DSTS("{\"tracked\":15}"), CNI_CMD_ADD, 7,
	  "internetGuard.destinations.tracked" },
	{ "value: internetGuard.destinations.tracked over 65536", DSTS("{\"tracked\":65537}"),
	  CNI_CMD_ADD, 7, "internetGuard.destinations.tracked" },
	{ "value: internetGuard.destinations.top above tracked",
	  DSTS("{\"top\":20,\"tracked\":16}"), CNI_CMD_ADD, 7,
	  "internetGuard.destinations.top (20) is more than internetGuard.destinations.tracked (16)" },
	/* ---- nodeAccess ---- */
	{ "type: nodeAccess array", TOP("\"nodeAccess\":[]"), CNI_CMD_ADD, 7, "nodeAccess" },
	{ "type: nodeAccess.metadataNamespaces string",
	  ACCESS("\"metadataNamespaces\":\"monitoring\""), CNI_CMD_ADD, 7,
	  "nodeAccess.metadataNamespaces" },
	{ "type: nodeAccess.metadataNamespaces element number",
	  ACCESS("\"metadataNamespaces\":[\"a\",5]"), CNI_CMD_ADD, 7,
	  "nodeAccess.metadataNamespaces[1]" },
	{ "type: nodeAccess.metricsNamespaces object", ACCESS("\"metricsNamespaces\":{}"),
	  CNI_CMD_ADD, 7, "nodeAccess.metricsNamespaces" },
	{ "type: nodeAccess.metricsPort string", ACCESS("\"metricsPort\":\"9617\""), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsPort" },
	{ "type: nodeAccess.metricsPort float", ACCESS("\"metricsPort\":9617.5"), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsPort" },
	{ "value: nodeAccess.metricsPort 0", ACCESS("\"metricsPort\":0"), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsPort" },
	{ "value: nodeAccess.metricsPort 65536", ACCESS("\"metricsPort\":65536"), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsPort" },
	{ "value: nodeAccess.metadataNamespaces upper case",
	  ACCESS("\"metadataNamespaces\":[\"Kube\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.metadataNamespaces[0]" },
	{ "value: nodeAccess.metadataNamespaces empty name",
	  ACCESS("\"metadataNamespaces\":[\"\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.metadataNamespaces[0]" },
	{ "value: nodeAccess.metricsNamespaces underscore",
	  ACCESS("\"metricsNamespaces\":[\"ok\",\"a_b\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsNamespaces[1]" },
	{ "value: nodeAccess.metricsNamespaces leading dash",
	  ACCESS("\"metricsNamespaces\":[\"-a\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.metricsNamespaces[0]" },
	{ "type: nodeAccess.hostPortDeny object", ACCESS("\"hostPortDeny\":{}"), CNI_CMD_ADD, 7,
	  "nodeAccess.hostPortDeny must be an array" },
	{ "type: nodeAccess.hostPortDeny element bool", ACCESS("\"hostPortDeny\":[22,true]"),
	  CNI_CMD_ADD, 7, "nodeAccess.hostPortDeny[1] must be a port" },
	{ "value: nodeAccess.hostPortDeny port 0", ACCESS("\"hostPortDeny\":[0]"), CNI_CMD_ADD, 7,
	  "nodeAccess.hostPortDeny[0]: 0 is not a port" },
	{ "value: nodeAccess.hostPortDeny port 65536", ACCESS("\"hostPortDeny\":[65536]"),
	  CNI_CMD_ADD, 7, "nodeAccess.hostPortDeny[0]: 65536 is not a port" },
	{ "value: nodeAccess.hostPortDeny range reversed",
	  ACCESS("\"hostPortDeny\":[\"32767-30000\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.hostPortDeny[0]: \"32767-30000\" is not a range" },
	{ "value: nodeAccess.hostPortDeny range open", ACCESS("\"hostPortDeny\":[\"30000-\"]"),
	  CNI_CMD_ADD, 7, "nodeAccess.hostPortDeny[0]: \"30000-\" is not a range" },
	{ "value: nodeAccess.hostPortDeny range signed", ACCESS("\"hostPortDeny\":[\"-1-5\"]"),
	  CNI_CMD_ADD, 7, "nodeAccess.hostPortDeny[0]: \"-1-5\" is not a range" },
	{ "value: nodeAccess.hostPortDeny range past 65535",
	  ACCESS("\"hostPortDeny\":[\"1-70000\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.hostPortDeny[0]: \"1-70000\" is not a range" },
	{ "value: nodeAccess.hostPortDeny 33 entries",
	  ACCESS("\"hostPortDeny\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33]"),
	  CNI_CMD_ADD, 7, "nodeAccess.hostPortDeny lists more than 32 entries" },
	{ "value: nodeAccess.namespaceConnections negative", ACCESS("\"namespaceConnections\":-1"),
	  CNI_CMD_ADD, 7, "nodeAccess.namespaceConnections" },
	{ "type: nodeAccess.namespaceConnections string",
	  ACCESS("\"namespaceConnections\":\"1000\""), CNI_CMD_ADD, 7,
	  "nodeAccess.namespaceConnections" },
	{ "value: nodeAccess.newNeighboursPerSecond negative",
	  ACCESS("\"newNeighboursPerSecond\":-5"), CNI_CMD_ADD, 7,
	  "nodeAccess.newNeighboursPerSecond" },
	{ "value: nodeAccess.newNeighboursPerSecond over a million",
	  ACCESS("\"newNeighboursPerSecond\":1000001"), CNI_CMD_ADD, 7,
	  "nodeAccess.newNeighboursPerSecond" },
	{ "value: nodeAccess.metricsNamespaces 64 characters",
	  ACCESS("\"metricsNamespaces\":[\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]"),
	  CNI_CMD_ADD, 7, "nodeAccess.metricsNamespaces[0]" },
#define SVC(v) ACCESS("\"servicePorts\":" v)
#define SVC1(kv) SVC("[{" kv "}]")
	{ "type: nodeAccess.servicePorts object", SVC("{}"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts must be an array" },
	{ "type: nodeAccess.servicePorts entry a port", SVC("[9618]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0] must be" },
	{ "unknown: nodeAccess.servicePorts entry key",
	  SVC1("\"ports\":[9618],\"namespaces\":[],\"namespace\":\"x\""), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0]: unknown key \"namespace\"" },
	{ "missing: nodeAccess.servicePorts ports", SVC1("\"namespaces\":[\"monitoring\"]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts[0].ports is missing" },
	{ "missing: nodeAccess.servicePorts namespaces", SVC1("\"ports\":[9618]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].namespaces is missing" },
	{ "value: nodeAccess.servicePorts ports empty", SVC1("\"ports\":[],\"namespaces\":[]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts[0].ports must be a non-empty array" },
	{ "type: nodeAccess.servicePorts ports a number", SVC1("\"ports\":9618,\"namespaces\":[]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts[0].ports must be a non-empty array" },
	{ "value: nodeAccess.servicePorts port 0", SVC1("\"ports\":[0],\"namespaces\":[]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts[0].ports[0]: 0 is not a port" },
	{ "value: nodeAccess.servicePorts port 65536",
	  SVC1("\"ports\":[9618,65536],\"namespaces\":[]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].ports[1]: 65536 is not a port" },
	{ "value: nodeAccess.servicePorts range reversed",
	  SVC1("\"ports\":[\"2380-2379\"],\"namespaces\":[]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].ports[0]: \"2380-2379\" is not a range" },
	{ "value: nodeAccess.servicePorts range text",
	  SVC1("\"ports\":[\"etcd\"],\"namespaces\":[]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].ports[0]: \"etcd\" is not a range" },
	{ "type: nodeAccess.servicePorts port bool", SVC1("\"ports\":[true],\"namespaces\":[]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts[0].ports[0] must be a port" },
	{ "value: nodeAccess.servicePorts nine ports",
	  SVC1("\"ports\":[1,2,3,4,5,6,7,8,9],\"namespaces\":[]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].ports lists more than 8" },
	{ "value: nodeAccess.servicePorts overlap in an entry",
	  SVC1("\"ports\":[\"2379-2380\",2380],\"namespaces\":[]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].ports[1] (2380-2380) overlaps "
	  "nodeAccess.servicePorts[0].ports[0]" },
	{ "value: nodeAccess.servicePorts overlap across entries",
	  SVC("[{\"ports\":[9618],\"namespaces\":[]},"
	      "{\"ports\":[\"9000-9999\"],\"namespaces\":[]}]"),
	  CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[1].ports[0] (9000-9999) overlaps "
	  "nodeAccess.servicePorts[0].ports[0]" },
	{ "type: nodeAccess.servicePorts namespaces a string",
	  SVC1("\"ports\":[9618],\"namespaces\":\"monitoring\""), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].namespaces must be an array of strings" },
	{ "value: nodeAccess.servicePorts namespace underscore",
	  SVC1("\"ports\":[9618],\"namespaces\":[\"ok\",\"kube_system\"]"), CNI_CMD_ADD, 7,
	  "nodeAccess.servicePorts[0].namespaces[1] \"kube_system\" is not a namespace name" },
	{ "value: nodeAccess.servicePorts nine entries",
	  SVC("[{\"ports\":[1],\"namespaces\":[]},{\"ports\":[2],\"namespaces\":[]},"
	      "{\"ports\":[3],\"namespaces\":[]},{\"ports\":[4],\"namespaces\":[]},"
	      "{\"ports\":[5],\"namespaces\":[]},{\"ports\":[6],\"namespaces\":[]},"
	      "{\"ports\":[7],\"namespaces\":[]},{\"ports\":[8],\"namespaces\":[]},"
	      "{\"ports\":[9],\"namespaces\":[]}]"),
	  CNI_CMD_ADD, 7, "nodeAccess.servicePorts lists more than 8 entries" },
#undef SVC1
#undef SVC

	/* ---- missing required keys ---- */
	{ "missing: cniVersion", "{\"name\":\"net\"," IPAM_OK "}", CNI_CMD_ADD, 7, "cniVersion" },
	{ "missing: name", "{\"cniVersion\":\"1.1.0\"," IPAM_OK "}", CNI_CMD_ADD, 7, "name" },
	{ "missing: ipam", HEAD "}", CNI_CMD_ADD, 7, "ipam" },
	{ "null: name", "{\"cniVersion\":\"1.1.0\",\"name\":null," IPAM_OK "}", CNI_CMD_ADD, 7,
	  "name" },

	/* ---- cniVersion ---- */
	{ "version: 9.9.9 is 1", VERSIONED("9.9.9", IPAM_OK), CNI_CMD_ADD, 1, "9.9.9" },
	{ "version: empty is 1", VERSIONED("", IPAM_OK), CNI_CMD_ADD, 1, "cniVersion" },
	{ "version: 0.2.0 is 1", VERSIONED("0.2.0", IPAM_OK), CNI_CMD_ADD, 1, "0.2.0" },
	{ "version: 1.1 is 1", VERSIONED("1.1", IPAM_OK), CNI_CMD_ADD, 1, "cniVersion" },
	{ "version: 1.2.0 is 1", VERSIONED("1.2.0", IPAM_OK), CNI_CMD_ADD, 1, "1.2.0" },
	{ "version: 1.1.0 with a space is 1", VERSIONED("1.1.0 ", IPAM_OK), CNI_CMD_ADD, 1,
	  "cniVersion" },
	{ "version: 9.9.9 on VERSION is 1", VERSIONED("9.9.9", IPAM_OK), CNI_CMD_VERSION, 1,
	  "9.9.9" },
	{ "version: CHECK with 0.3.1 is 1", VERSIONED("0.3.1", IPAM_OK), CNI_CMD_CHECK, 1,
	  "CHECK" },
	{ "version: CHECK with 0.3.0 is 1", VERSIONED("0.3.0", IPAM_OK), CNI_CMD_CHECK, 1,
	  "CHECK" },
	{ "version: STATUS with 1.0.0 is 1", VERSIONED("1.0.0", IPAM_OK), CNI_CMD_STATUS, 1,
	  "STATUS" },
	{ "version: GC with 1.0.0 is 1", VERSIONED("1.0.0", IPAM_OK), CNI_CMD_GC, 1, "GC" },
	{ "version: STATUS with 0.4.0 is 1", VERSIONED("0.4.0", IPAM_OK), CNI_CMD_STATUS, 1,
	  "STATUS" },
	{ "version: GC with 0.3.1 is 1", VERSIONED("0.3.1", IPAM_OK), CNI_CMD_GC, 1, "GC" },

	/* ---- invalid values: 7, naming the key ---- */
	{ "value: mtu 0", TOP("\"mtu\":0"), CNI_CMD_ADD, 7, "mtu" },
	{ "value: mtu 67", TOP("\"mtu\":67"), CNI_CMD_ADD, 7, "mtu" },
	{ "value: mtu 65536", TOP("\"mtu\":65536"), CNI_CMD_ADD, 7, "mtu" },
	{ "value: mtu -1500", TOP("\"mtu\":-1500"), CNI_CMD_ADD, 7, "mtu" },
	{ "value: mtu 2^63 overflow", TOP("\"mtu\":9223372036854775808"), CNI_CMD_ADD, 7, "mtu" },
	{ "value: uplink empty", TOP("\"uplink\":\"\""), CNI_CMD_ADD, 7, "uplink" },
	{ "value: uplink 16 chars", TOP("\"uplink\":\"abcdefghijklmnop\""), CNI_CMD_ADD, 7,
	  "uplink" },
	{ "value: uplink with slash", TOP("\"uplink\":\"eth/0\""), CNI_CMD_ADD, 7, "uplink" },
	{ "value: internalCIDRs bad prefix", TOP("\"internalCIDRs\":[\"10.0.0.0/33\"]"),
	  CNI_CMD_ADD, 7, "internalCIDRs[0]" },
	{ "value: internalCIDRs not a CIDR", TOP("\"internalCIDRs\":[\"10.0.0.0/8\",\"banana\"]"),
	  CNI_CMD_ADD, 7, "internalCIDRs[1]" },
	{ "value: internalCIDRs bare address", TOP("\"internalCIDRs\":[\"10.0.0.0\"]"), CNI_CMD_ADD,
	  7, "internalCIDRs[0]" },
	{ "value: internalCIDRs host bits set", TOP("\"internalCIDRs\":[\"10.1.2.3/8\"]"),
	  CNI_CMD_ADD, 7, "internalCIDRs[0]" },
	{ "value: internalCIDRs overlapping",
	  TOP("\"internalCIDRs\":[\"10.0.0.0/8\",\"10.1.0.0/16\"]"), CNI_CMD_ADD, 7,
	  "internalCIDRs" },
	{ "value: internalCIDRs overlapping, reversed order",
	  TOP("\"internalCIDRs\":[\"192.168.1.0/24\",\"172.16.0.0/12\",\"192.168.0.0/16\"]"),
	  CNI_CMD_ADD, 7, "internalCIDRs" },
	{ "value: internalCIDRs duplicate",
	  TOP("\"internalCIDRs\":[\"10.0.0.0/8\",\"10.0.0.0/8\"]"), CNI_CMD_ADD, 7,
	  "internalCIDRs" },
	{ "value: internalCIDRs empty", TOP("\"internalCIDRs\":[]"), CNI_CMD_ADD, 7,
	  "internalCIDRs" },
	{ "value: dataDir relative", TOP("\"dataDir\":\"run/tollgate\""), CNI_CMD_ADD, 7,
	  "dataDir" },
	{ "value: dataDir empty", TOP("\"dataDir\":\"\""), CNI_CMD_ADD, 7, "dataDir" },
	{ "value: dataDir with ..", TOP("\"dataDir\":\"/run/../etc\""), CNI_CMD_ADD, 7, "dataDir" },
	{ "value: dataDir ending in /..", TOP("\"dataDir\":\"/run/tollgate/..\""), CNI_CMD_ADD, 7,
	  "dataDir" },
	{ "value: logFile relative", TOP("\"logFile\":\"tollgate.log\""), CNI_CMD_ADD, 7,
	  "logFile" },
	{ "value: name with slash", "{\"cniVersion\":\"1.1.0\",\"name\":\"a/b\"," IPAM_OK "}",
	  CNI_CMD_ADD, 7, "name" },
	{ "value: name empty", "{\"cniVersion\":\"1.1.0\",\"name\":\"\"," IPAM_OK "}", CNI_CMD_ADD,
	  7, "name" },
	{ "value: name ..", "{\"cniVersion\":\"1.1.0\",\"name\":\"..\"," IPAM_OK "}", CNI_CMD_ADD,
	  7, "name" },
	{ "value: name leading dot", "{\"cniVersion\":\"1.1.0\",\"name\":\".net\"," IPAM_OK "}",
	  CNI_CMD_ADD, 7, "name" },
	{ "value: name with space", "{\"cniVersion\":\"1.1.0\",\"name\":\"my net\"," IPAM_OK "}",
	  CNI_CMD_ADD, 7, "name" },
	{ "value: name 129 chars",
	  "{\"cniVersion\":\"1.1.0\",\"name\":\""
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"," IPAM_OK "}",
	  CNI_CMD_ADD, 7, "name" },
	{ "value: ipam.source unknown", IPAM("\"source\":\"dhcp\",\"addresses\":[\"10.1.0.1\"]"),
	  CNI_CMD_ADD, 7, "ipam.source" },
	{ "value: ipam.source empty", IPAM("\"source\":\"\",\"addresses\":[\"10.1.0.1\"]"),
	  CNI_CMD_ADD, 7, "ipam.source" },
	{ "value: static without addresses", IPAM("\"source\":\"static\""), CNI_CMD_ADD, 7,
	  "ipam.addresses" },
	{ "value: static with empty addresses", IPAM("\"source\":\"static\",\"addresses\":[]"),
	  CNI_CMD_ADD, 7, "ipam.addresses" },
	{ "value: ipam.addresses bad entry",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.1\",\"10.1.0.300\"]"), CNI_CMD_ADD, 7,
	  "ipam.addresses[1]" },
	{ "value: ipam.addresses reversed range",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.9-10.1.0.1\"]"), CNI_CMD_ADD, 7,
	  "ipam.addresses[0]" },
	/* addresses no pod can use are refused, naming the address and why */
	{ "value: ipam.addresses loopback",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.10\",\"127.0.0.5\"]"), CNI_CMD_ADD, 7,
	  "127.0.0.5" },
	{ "value: ipam.addresses the pods' gateway",
	  IPAM("\"source\":\"static\",\"addresses\":[\"169.254.1.1\"]"), CNI_CMD_ADD, 7,
	  "169.254.1.1" },
	{ "value: ipam.addresses multicast",
	  IPAM("\"source\":\"static\",\"addresses\":[\"224.0.0.5\"]"), CNI_CMD_ADD, 7,
	  "multicast" },
	{ "value: ipam.addresses broadcast",
	  IPAM("\"source\":\"static\",\"addresses\":[\"255.255.255.250-255.255.255.255\"]"),
	  CNI_CMD_ADD, 7, "broadcast" },
	{ "value: ipam.addresses CIDR with host bits",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.1/24\"]"), CNI_CMD_ADD, 7,
	  "ipam.addresses[0]" },
	{ "value: ipam.addresses too many",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.0.0.0/8\"]"), CNI_CMD_ADD, 7,
	  "ipam.addresses" },
	{ "value: ipam.exclude bad entry", IPAM_STATIC("\"exclude\":[\"10.1.0.11\",\"nope\"]"),
	  CNI_CMD_ADD, 7, "ipam.exclude[1]" },
	{ "value: ipam.exclude bad entry, imds source",
	  IPAM("\"source\":\"imds\",\"exclude\":[\"nope\"]"), CNI_CMD_ADD, 7, "ipam.exclude" },
	{ "value: exclude removes every address",
	  IPAM("\"source\":\"static\",\"addresses\":[\"10.1.0.10-10.1.0.20\"],\"exclude\":[\"10.1.0.0/24\"]"),
	  CNI_CMD_ADD, 7, "ipam.exclude" },
	{ "value: ipam.cooldownSeconds negative", IPAM_STATIC("\"cooldownSeconds\":-1"),
	  CNI_CMD_ADD, 7, "ipam.cooldownSeconds" },
	{ "value: ipam.cooldownSeconds over a day", IPAM_STATIC("\"cooldownSeconds\":86401"),
	  CNI_CMD_ADD, 7, "ipam.cooldownSeconds" },
	{ "value: internetMark \"0\"", ACCT("\"internetMark\":\"0\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: retainSeconds -1", ACCT("\"retainSeconds\":-1"), CNI_CMD_ADD, 7,
	  "accounting.retainSeconds" },
	{ "value: retainSeconds past 30 days", ACCT("\"retainSeconds\":2592001"), CNI_CMD_ADD, 7,
	  "accounting.retainSeconds" },
	{ "type: retainSeconds string", ACCT("\"retainSeconds\":\"1h\""), CNI_CMD_ADD, 7,
	  "accounting.retainSeconds" },
	{ "value: internetMark 0", ACCT("\"internetMark\":0"), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark \"0x4000\"", ACCT("\"internetMark\":\"0x4000\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark 0x4000 as a number", ACCT("\"internetMark\":16384"), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark \"0x8000\"", ACCT("\"internetMark\":\"0x8000\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark \"0x1c000\"", ACCT("\"internetMark\":\"0x1c000\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark \"junk\"", ACCT("\"internetMark\":\"junk\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark \"0x10000junk\"", ACCT("\"internetMark\":\"0x10000junk\""),
	  CNI_CMD_ADD, 7, "accounting.internetMark" },
	{ "value: internetMark empty", ACCT("\"internetMark\":\"\""), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark over 32 bits", ACCT("\"internetMark\":\"0x100000000\""), CNI_CMD_ADD,
	  7, "accounting.internetMark" },
	{ "value: internetMark negative number", ACCT("\"internetMark\":-1"), CNI_CMD_ADD, 7,
	  "accounting.internetMark" },
	{ "value: internetMark number over 32 bits", ACCT("\"internetMark\":4294967296"),
	  CNI_CMD_ADD, 7, "accounting.internetMark" },

	/* ---- not a JSON object: 6 ---- */
	{ "decode: malformed", "{\"cniVersion\":", CNI_CMD_ADD, 6, "JSON" },
	{ "decode: not json at all", "cniVersion=1.1.0", CNI_CMD_ADD, 6, "JSON" },
	{ "decode: missing value", "{\"cniVersion\":}", CNI_CMD_ADD, 6, "JSON" },
	{ "decode: trailing garbage", MINIMAL " x", CNI_CMD_ADD, 6, "not valid JSON" },
	{ "decode: two documents", MINIMAL "{}", CNI_CMD_ADD, 6, "not valid JSON" },
	{ "decode: array top level", "[" MINIMAL "]", CNI_CMD_ADD, 6, "object" },
	{ "decode: string top level", "\"1.1.0\"", CNI_CMD_ADD, 6, "object" },
	{ "decode: number top level", "42", CNI_CMD_ADD, 6, "configuration" },
	{ "decode: null top level", "null", CNI_CMD_ADD, 6, "configuration" },
	{ "decode: whitespace only", "   \n", CNI_CMD_ADD, 6, "configuration" },
	{ "decode: single-quoted strings are not JSON",
	  "{'cniVersion':'1.1.0','name':'net'," IPAM_OK "}", CNI_CMD_ADD, 6, "JSON" },
	{ "decode: trailing comma is not JSON", HEAD "," IPAM_OK ",}", CNI_CMD_ADD, 6, "JSON" },

	/* ---- a key twice in one object: 7, naming it (json-c would keep the last) ---- */
	{ "twice: mtu at the top", TOP("\"mtu\":1500,\"mtu\":9000"), CNI_CMD_ADD, 7,
	  "mtu is written twice" },
	{ "twice: ipam.exclude", IPAM_STATIC("\"exclude\":[],\"exclude\":[\"10.1.0.11\"]"),
	  CNI_CMD_ADD, 7, "ipam.exclude is written twice" },
	{ "twice: one name escaped", TOP("\"mtu\":1500,\"m\\u0074u\":9000"), CNI_CMD_DEL, 7,
	  "mtu is written twice" },
};

/* ---- valid configs ---- */

#define FULL_BODY                                                                              \
	"\"mtu\":1500,\"uplink\":\"eth0\",\"internalCIDRs\":[\"10.0.0.0/8\"],"                 \
	"\"masquerade\":true,\"dataDir\":\"/run/tollgate\","                                   \
	"\"logFile\":\"/var/log/tollgate.log\","                                               \
	"\"ipam\":{\"source\":\"%s\",\"imdsURL\":\"http://169.254.169.254\","                  \
	"\"addresses\":[\"10.1.0.10-10.1.0.40\",\"10.1.0.64/28\"],"                            \
	"\"exclude\":[\"10.1.0.11\"],\"cooldownSeconds\":45},"                                 \
	"\"accounting\":{\"enabled\":true,\"perPod\":false,\"internetMark\":\"0x10000\"},"     \
	"\"shaping\":{\"internetEgress\":{\"node\":\"10G\",\"namespaceDefault\":\"2G\","       \
	"\"podDefault\":\"1G\",\"namespaces\":{\"datasets\":\"5G\"}},"                         \
	"\"internetIngress\":{\"podDefault\":\"500M\",\"namespaces\":{\"datasets\":\"2G\"}}}," \
	"\"capabilities\":{\"bandwidth\":true,\"io.kubernetes.cri.pod-annotations\":true}"

static void full_config(char *buf, size_t size, const char *source)
{
	snprintf(buf, size,
		 "{\"cniVersion\":\"1.1.0\",\"name\":\"tollgate\",\"type\":\"tollgate\"," FULL_BODY
		 "}",
		 source);
}

static void t_full_config_static(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	char json[4096];

	full_config(json, sizeof(json), "static");
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_string_equal(cfg.cni_version, "1.1.0");
	assert_int_equal(cfg.version, 10100);
	assert_string_equal(cfg.name, "tollgate");
	assert_int_equal(cfg.mtu, 1500);
	assert_string_equal(cfg.uplink, "eth0");
	assert_int_equal(cfg.n_internal, 1);
	assert_int_equal(cfg.internal[0].net, ip("10.0.0.0"));
	assert_int_equal(cfg.internal[0].prefix, 8);
	assert_true(cfg.masquerade);
	assert_string_equal(cfg.data_dir, "/run/tollgate");
	assert_string_equal(cfg.log_file, "/var/log/tollgate.log");
	assert_int_equal(cfg.source, IPAM_SOURCE_STATIC);
	assert_non_null(cfg.imds_url);
	assert_string_equal(cfg.imds_url, "http://169.254.169.254");
	assert_int_equal(cfg.cooldown_ms, 45000);
	assert_true(cfg.acct_enabled);
	assert_false(cfg.acct_per_pod);
	assert_int_equal(cfg.internet_mark, 0x10000);
	assert_int_equal(cfg.retain_seconds, 3600);
	/* 10.1.0.10-40 is 31 addresses, minus .11; 10.1.0.64/28 gives .65-.78 */
	assert_int_equal(cfg.n_pool, 30 + 14);
	assert_int_equal(cfg.pool[0], ip("10.1.0.10"));
	assert_int_equal(cfg.pool[1], ip("10.1.0.12"));
	assert_int_equal(cfg.pool[29], ip("10.1.0.40"));
	assert_int_equal(cfg.pool[30], ip("10.1.0.65"));
	assert_int_equal(cfg.pool[43], ip("10.1.0.78"));
	for (size_t i = 1; i < cfg.n_pool; i++)
		assert_true(cfg.pool[i - 1] < cfg.pool[i]);
	assert_null(cfg.prev_result);
	assert_null(cfg.runtime_config);
	assert_null(cfg.valid_attachments);
	node_config_free(&cfg);
}

static void t_full_config_imds(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	char json[4096];

	full_config(json, sizeof(json), "imds");
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_int_equal(cfg.source, IPAM_SOURCE_IMDS);
	assert_string_equal(cfg.imds_url, "http://169.254.169.254");
	/* the pool of the imds source comes from `tollgate-ipam sync`, not the config */
	assert_int_equal(cfg.n_pool, 0);
	assert_int_equal(cfg.cooldown_ms, 45000);
	assert_int_equal(cfg.mtu, 1500);
	node_config_free(&cfg);
}

static void t_full_config_as_conflist_entry_every_version(void **state)
{
	static const char *const versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0" };
	static const int codes[] = { 300, 301, 400, 10000, 10100 };

	for (size_t i = 0; i < 5; i++) {
		struct node_config cfg;
		struct tg_err e;
		char json[4096];

		snprintf(
			json, sizeof(json),
			"{\"cniVersion\":\"%s\",\"name\":\"tollgate\",\"type\":\"tollgate\"," FULL_BODY
			"}",
			versions[i], "static");
		assert_int_equal(parse(json, &cfg, &e), 0);
		assert_string_equal(cfg.cni_version, versions[i]);
		assert_int_equal(cfg.version, codes[i]);
		node_config_free(&cfg);
	}
}

static void t_non_default_values(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	const char *json =
		"{\"cniVersion\":\"1.0.0\",\"name\":\"net-2_a.b\",\"type\":\"tollgate\",\"mtu\":9000,"
		"\"uplink\":\"bond0.100\",\"internalCIDRs\":[\"192.168.0.0/16\",\"10.0.0.0/8\",\"172.16.0.0/12\"],"
		"\"masquerade\":false,\"dataDir\":\"/var/lib/tollgate\",\"logFile\":\"/tmp/tg.log\","
		"\"ipam\":{\"addresses\":[\"10.2.0.1\",\"10.2.0.3\"],\"cooldownSeconds\":0},"
		"\"accounting\":{\"enabled\":false,\"perPod\":true,\"internetMark\":\"0x200000\","
		"\"retainSeconds\":600},"
		"\"runtimeConfig\":{\"bandwidth\":{\"ingressRate\":1000}},"
		"\"prevResult\":{\"cniVersion\":\"1.0.0\",\"ips\":[]}}";

	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_string_equal(cfg.name, "net-2_a.b");
	assert_int_equal(cfg.version, 10000);
	assert_int_equal(cfg.mtu, 9000);
	assert_string_equal(cfg.uplink, "bond0.100");
	assert_false(cfg.masquerade);
	assert_string_equal(cfg.data_dir, "/var/lib/tollgate");
	assert_string_equal(cfg.log_file, "/tmp/tg.log");
	/* source defaults to static when addresses are listed */
	assert_int_equal(cfg.source, IPAM_SOURCE_STATIC);
	assert_int_equal(cfg.n_pool, 2);
	assert_int_equal(cfg.cooldown_ms, 0);
	assert_false(cfg.acct_enabled);
	assert_true(cfg.acct_per_pod);
	assert_int_equal(cfg.internet_mark, 0x200000);
	assert_int_equal(cfg.retain_seconds, 600);
	/* internal CIDRs are kept sorted */
	assert_int_equal(cfg.n_internal, 3);
	assert_int_equal(cfg.internal[0].net, ip("10.0.0.0"));
	assert_int_equal(cfg.internal[0].prefix, 8);
	assert_int_equal(cfg.internal[1].net, ip("172.16.0.0"));
	assert_int_equal(cfg.internal[1].prefix, 12);
	assert_int_equal(cfg.internal[2].net, ip("192.168.0.0"));
	assert_int_equal(cfg.internal[2].prefix, 16);
	assert_non_null(cfg.runtime_config);
	assert_true(json_object_is_type(cfg.runtime_config, json_type_object));
	assert_non_null(cfg.prev_result);
	assert_true(json_object_is_type(cfg.prev_result, json_type_object));
	node_config_free(&cfg);
}

static void t_defaults(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	assert_int_equal(cfg.n_internal, 1);
	assert_int_equal(cfg.internal[0].net, ip("10.0.0.0"));
	assert_int_equal(cfg.internal[0].prefix, 8);
	assert_true(cfg.masquerade);
	assert_string_equal(cfg.data_dir, "/run/tollgate");
	assert_int_equal(cfg.cooldown_ms, 30000);
	assert_int_equal(cfg.cooldown_ms, IPAM_DEFAULT_COOLDOWN_MS);
	assert_int_equal(cfg.mtu, 0);
	assert_string_equal(cfg.uplink, "");
	assert_string_equal(cfg.log_file, "");
	assert_true(cfg.acct_enabled);
	assert_false(cfg.acct_per_pod);
	assert_int_equal(cfg.internet_mark, 0x10000);
	assert_null(cfg.prev_result);
	assert_null(cfg.runtime_config);
	assert_null(cfg.valid_attachments);
	node_config_free(&cfg);
}

static void t_node_access_defaults(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	/* nothing listed: no pod reaches the metadata, the agents' port is not filtered */
	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	assert_int_equal(cfg.access.n_metadata_ns, 0);
	assert_int_equal(cfg.access.n_metrics_ns, 0);
	assert_false(cfg.access.metrics_filter);
	assert_int_equal(cfg.access.metrics_port, 9617);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCESS(""), &cfg, &e), 0);
	assert_false(cfg.access.metrics_filter);
	assert_int_equal(cfg.access.metrics_port, 9617);
	node_config_free(&cfg);
}

/* What a tenant can exhaust of the node: the defaults, values, and the hostPorts it cannot take. */
static void t_node_access_tables_and_ports(void **state)
{
	static const uint16_t denied[] = { 22, 10250, 10256, 30000, 30080, 32767 };
	static const uint16_t allowed[] = { 21, 23, 8080, 10249, 10251, 29999, 32768 };
	struct hostports ports;
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	assert_true(cfg.ns_connections_default);
	assert_int_equal(cfg.access.neighbours_per_second, ACCT_NEIGHBOURS_PER_SECOND_DEFAULT);
	assert_int_equal(cfg.n_port_deny, 4);
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		char rc[160];

		snprintf(rc, sizeof(rc),
			 "{\"portMappings\":[{\"hostPort\":%u,\"containerPort\":80}]}", denied[i]);
		json_object_put(cfg.runtime_config);
		cfg.runtime_config = json_tokener_parse(rc);
		e = (struct tg_err){ 0 };
		assert_int_equal(node_config_ports(&cfg, &ports, &e), -EINVAL);
		assert_int_equal(e.code, CNI_ERR_CONFIG);
		assert_non_null(strstr(e.msg, "nodeAccess.hostPortDeny"));
	}
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++) {
		char rc[160];

		snprintf(rc, sizeof(rc),
			 "{\"portMappings\":[{\"hostPort\":%u,\"containerPort\":80}]}", allowed[i]);
		json_object_put(cfg.runtime_config);
		cfg.runtime_config = json_tokener_parse(rc);
		assert_int_equal(node_config_ports(&cfg, &ports, &e), 0);
	}
	json_object_put(cfg.runtime_config);
	cfg.runtime_config = NULL;
	node_config_free(&cfg);
	/* an operator's own list replaces the default: [] lets 22 through, "8000-8099" not 8050 */
	assert_int_equal(parse(ACCESS("\"hostPortDeny\":[\"8000-8099\", 9000],"
				      "\"namespaceConnections\":5000,\"newNeighboursPerSecond\":0"),
			       &cfg, &e),
			 0);
	assert_false(cfg.ns_connections_default);
	assert_int_equal(cfg.access.ns_connections, 5000);
	assert_int_equal(cfg.access.neighbours_per_second, 0);
	assert_int_equal(cfg.n_port_deny, 2);
	assert_int_equal(cfg.port_deny[0].lo, 8000);
	assert_int_equal(cfg.port_deny[0].hi, 8099);
	assert_int_equal(cfg.port_deny[1].lo, 9000);
	assert_int_equal(cfg.port_deny[1].hi, 9000);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCESS("\"hostPortDeny\":[]"), &cfg, &e), 0);
	assert_int_equal(cfg.n_port_deny, 0);
	node_config_free(&cfg);
}

/* nodeAccess.servicePorts: absent, the shipped value, eight entries, an empty list. */
static void t_node_access_service_ports(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	const struct acct_service_port *sp;

	(void)state;
	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	assert_int_equal(cfg.access.n_services, 0);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCESS("\"metricsNamespaces\":[\"monitoring\"]"), &cfg, &e), 0);
	assert_int_equal(cfg.access.n_services, 0);
	node_config_free(&cfg);
	assert_int_equal(
		parse(ACCESS("\"servicePorts\":["
			     "{\"ports\":[9618],\"namespaces\":[\"monitoring\"]},"
			     "{\"namespaces\":[\"kube-system\",\"etcd\"],\"ports\":[\"2379-2380\"]}]"),
		      &cfg, &e),
		0);
	assert_int_equal(cfg.access.n_services, 2);
	sp = &cfg.access.services[0];
	assert_int_equal(sp->n_ports, 1);
	assert_int_equal(sp->ports[0].lo, 9618);
	assert_int_equal(sp->ports[0].hi, 9618);
	assert_int_equal(sp->n_ns, 1);
	assert_string_equal(sp->ns[0], "monitoring");
	sp = &cfg.access.services[1];
	assert_int_equal(sp->n_ports, 1);
	assert_int_equal(sp->ports[0].lo, 2379);
	assert_int_equal(sp->ports[0].hi, 2380);
	assert_int_equal(sp->n_ns, 2);
	assert_string_equal(sp->ns[0], "kube-system");
	assert_string_equal(sp->ns[1], "etcd");
	/* metricsNamespaces stays unset: the two are separate */
	assert_false(cfg.access.metrics_filter);
	node_config_free(&cfg);
	/* eight entries (the most), one with eight ports and ranges; an empty list: no pod */
	assert_int_equal(
		parse(ACCESS("\"servicePorts\":["
			     "{\"ports\":[1,2,3,4,5,6,\"7-8\",\"9-9\"],\"namespaces\":[]},"
			     "{\"ports\":[20],\"namespaces\":[]},{\"ports\":[30],\"namespaces\":[]},"
			     "{\"ports\":[40],\"namespaces\":[]},{\"ports\":[50],\"namespaces\":[]},"
			     "{\"ports\":[60],\"namespaces\":[]},{\"ports\":[70],\"namespaces\":[]},"
			     "{\"ports\":[\"65534-65535\"],\"namespaces\":[\"a\"]}]"),
		      &cfg, &e),
		0);
	assert_int_equal(cfg.access.n_services, 8);
	assert_int_equal(cfg.access.services[0].n_ports, 8);
	assert_int_equal(cfg.access.services[0].ports[6].lo, 7);
	assert_int_equal(cfg.access.services[0].ports[6].hi, 8);
	assert_int_equal(cfg.access.services[0].n_ns, 0);
	assert_int_equal(cfg.access.services[7].ports[0].hi, 65535);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCESS("\"servicePorts\":[]"), &cfg, &e), 0);
	assert_int_equal(cfg.access.n_services, 0);
	node_config_free(&cfg);
}

static void t_node_access_values(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(
		parse(ACCESS("\"metadataNamespaces\":[\"kube-system\",\"id0\"],"
			     "\"metricsNamespaces\":[\"monitoring\"],\"metricsPort\":19617"),
		      &cfg, &e),
		0);
	assert_int_equal(cfg.access.n_metadata_ns, 2);
	assert_string_equal(cfg.access.metadata_ns[0], "kube-system");
	assert_string_equal(cfg.access.metadata_ns[1], "id0");
	assert_true(cfg.access.metrics_filter);
	assert_int_equal(cfg.access.n_metrics_ns, 1);
	assert_string_equal(cfg.access.metrics_ns[0], "monitoring");
	assert_int_equal(cfg.access.metrics_port, 19617);
	assert_true(acct_ns_listed(cfg.access.metadata_ns, cfg.access.n_metadata_ns, "id0"));
	assert_false(acct_ns_listed(cfg.access.metadata_ns, cfg.access.n_metadata_ns, "id"));
	node_config_free(&cfg);
	/* an empty list filters too: no namespace reaches the port */
	assert_int_equal(parse(ACCESS("\"metricsNamespaces\":[]"), &cfg, &e), 0);
	assert_true(cfg.access.metrics_filter);
	assert_int_equal(cfg.access.n_metrics_ns, 0);
	node_config_free(&cfg);
}

static void t_internet_guard(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	/* absent: no guard at all */
	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	assert_false(cfg.guard.on);
	node_config_free(&cfg);
	assert_int_equal(parse(GUARD("\"namespaceDefault\":20000,\"newPerSecond\":2000,"
				     "\"namespaces\":{\"crawl\":50000,\"open\":0}"),
			       &cfg, &e),
			 0);
	assert_true(cfg.guard.on);
	assert_true(cfg.guard.limits);
	assert_int_equal(cfg.guard.new_per_second, 2000);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "crawl"), 50000);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "open"), 0);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "datasets"), 20000);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, ""), 20000);
	node_config_free(&cfg);
	/* only overrides: the other namespaces have no concurrent limit, and no rate */
	assert_int_equal(parse(GUARD("\"namespaces\":{\"crawl\":7}"), &cfg, &e), 0);
	assert_true(cfg.guard.on);
	assert_int_equal(cfg.guard.new_per_second, 0);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "crawl"), 7);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "other"), 0);
	assert_false(cfg.guard.dst.on);
	node_config_free(&cfg);
	/* destinations alone: the namespaces' chains without limits; defaults filled in */
	assert_int_equal(parse(DSTS("{}"), &cfg, &e), 0);
	assert_true(cfg.guard.on);
	assert_false(cfg.guard.limits);
	assert_true(cfg.guard.dst.on);
	assert_int_equal(cfg.guard.dst.top, ACCT_DST_TOP_DEFAULT);
	assert_int_equal(cfg.guard.dst.prefix_len, ACCT_DST_PREFIX_DEFAULT);
	assert_int_equal(cfg.guard.dst.tracked, ACCT_DST_TRACKED_DEFAULT);
	assert_int_equal(acct_guard_concurrent(&cfg.guard, "crawl"), 0);
	node_config_free(&cfg);
	assert_int_equal(parse(DSTS("{\"top\":3,\"prefixLength\":32,\"tracked\":16}"), &cfg, &e),
			 0);
	assert_int_equal(cfg.guard.dst.top, 3);
	assert_int_equal(cfg.guard.dst.prefix_len, 32);
	assert_int_equal(cfg.guard.dst.tracked, 16);
	node_config_free(&cfg);
}

static void t_ipam_source_defaults_to_imds_without_addresses(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(IPAM("\"imdsURL\":\"http://127.0.0.1:8080\""), &cfg, &e), 0);
	assert_int_equal(cfg.source, IPAM_SOURCE_IMDS);
	assert_int_equal(cfg.n_pool, 0);
	node_config_free(&cfg);
}

static void t_empty_ipam_object_is_imds(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(IPAM(""), &cfg, &e), 0);
	assert_int_equal(cfg.source, IPAM_SOURCE_IMDS);
	node_config_free(&cfg);
}

static void t_imds_exclude_syntax_ok(void **state)
{
	expect_ok_cmd(
		IPAM("\"source\":\"imds\",\"exclude\":[\"10.1.0.4\",\"10.1.0.0/30\",\"10.1.0.8-10.1.0.9\"]"),
		CNI_CMD_ADD);
}

static void t_each_version_accepted(void **state)
{
	expect_ok_cmd(VERSIONED("0.3.0", IPAM_OK), CNI_CMD_ADD);
	expect_ok_cmd(VERSIONED("0.3.1", IPAM_OK), CNI_CMD_ADD);
	expect_ok_cmd(VERSIONED("0.4.0", IPAM_OK), CNI_CMD_ADD);
	expect_ok_cmd(VERSIONED("1.0.0", IPAM_OK), CNI_CMD_ADD);
	expect_ok_cmd(VERSIONED("1.1.0", IPAM_OK), CNI_CMD_ADD);
}

static void t_each_version_accepted_on_del(void **state)
{
	expect_ok_cmd(VERSIONED("0.3.0", IPAM_OK), CNI_CMD_DEL);
	expect_ok_cmd(VERSIONED("0.3.1", IPAM_OK), CNI_CMD_DEL);
	expect_ok_cmd(VERSIONED("0.4.0", IPAM_OK), CNI_CMD_DEL);
	expect_ok_cmd(VERSIONED("1.0.0", IPAM_OK), CNI_CMD_DEL);
	expect_ok_cmd(VERSIONED("1.1.0", IPAM_OK), CNI_CMD_DEL);
}

static void t_check_needs_0_4_0(void **state)
{
	expect_ok_cmd(VERSIONED("0.4.0", IPAM_OK), CNI_CMD_CHECK);
	expect_ok_cmd(VERSIONED("1.0.0", IPAM_OK), CNI_CMD_CHECK);
	expect_ok_cmd(VERSIONED("1.1.0", IPAM_OK), CNI_CMD_CHECK);
}

static void t_status_gc_with_1_1_0(void **state)
{
	expect_ok_cmd(VERSIONED("1.1.0", IPAM_OK), CNI_CMD_STATUS);
	expect_ok_cmd(VERSIONED("1.1.0", IPAM_OK), CNI_CMD_GC);
}

static void t_version_only_needs_cni_version(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	/* VERSION decodes only cniVersion: no name, no ipam, odd keys are fine. */
	assert_int_equal(parse_cmd("{\"cniVersion\":\"0.4.0\",\"mtu\":\"x\"}", CNI_CMD_VERSION,
				   &cfg, &e),
			 0);
	assert_int_equal(cfg.version, 400);
	node_config_free(&cfg);
}

/* One name in two objects is no name twice. */
static void t_same_key_in_two_objects_ok(void **state)
{
	(void)state;
	expect_ok_cmd(TOP("\"mtu\":1500,\"x\":{\"mtu\":9000,\"y\":[{\"mtu\":1}]}"), CNI_CMD_ADD);
}

static void t_mtu_bounds_accepted(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(TOP("\"mtu\":68"), &cfg, &e), 0);
	assert_int_equal(cfg.mtu, 68);
	node_config_free(&cfg);
	assert_int_equal(parse(TOP("\"mtu\":65535"), &cfg, &e), 0);
	assert_int_equal(cfg.mtu, 65535);
	node_config_free(&cfg);
}

static void t_null_values_mean_absent(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(
		parse(TOP("\"mtu\":null,\"masquerade\":null,\"dataDir\":null,\"internalCIDRs\":null"),
		      &cfg, &e),
		0);
	assert_int_equal(cfg.mtu, 0);
	assert_true(cfg.masquerade);
	assert_string_equal(cfg.data_dir, "/run/tollgate");
	assert_int_equal(cfg.n_internal, 1);
	node_config_free(&cfg);
}

/* Every budgets key at its bounds, and the defaults. */
static void t_budgets_accepted(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	expect_ok_cmd(BUDGETS(ALLOC_OK
			      ",\"reportSeconds\":60,\"leaseSeconds\":3600,\"fallback\":\"1.5G\","
			      "\"fallbackAfterSeconds\":86400"),
		      CNI_CMD_ADD);
	expect_ok_cmd(BUDGETS(ALLOC_OK ",\"fallbackAfterSeconds\":0"), CNI_CMD_ADD);
	expect_ok_cmd(
		BUDGETS("\"allocator\":\"https://alloc.kube-system.svc:9618/\",\"reportSeconds\":1,"
			"\"leaseSeconds\":2"),
		CNI_CMD_ADD);
	assert_int_equal(parse_cmd(BUDGETS(ALLOC_OK), CNI_CMD_ADD, &cfg, &e), 0);
	assert_int_equal(cfg.budgets.report_ms, 1000);
	assert_int_equal(cfg.budgets.lease_ms, 10000);
	assert_int_equal(cfg.budgets.fallback_bps, 10000000);
	assert_int_equal(cfg.budgets.fallback_after_ms, 300000);
	node_config_free(&cfg);
}

/*
 * Which namespaces are budgeted, per direction: the policy heard; before
 * any, every one in both directions (the node cannot know); without an
 * allocator, none.
 */
static void t_budgeted_by_policy_heard(void **state)
{
	struct budget_def d[3] = {
		{ .ns = "web", .budget = 1000 },
		{ .ns = "datasets", .budget = 2500000000ULL },
		{ .ns = "mirror", .dir = BUDGET_INGRESS, .budget = 5000000000ULL },
	};
	struct budget_set heard = { .d = d, .n = 3 }, none = { 0 };
	struct node_config cfg;
	struct tg_err e;

	(void)state;
	assert_int_equal(parse_cmd(BUDGETS(ALLOC_OK), CNI_CMD_ADD, &cfg, &e), 0);
	assert_true(node_config_budgeted(&cfg, "research", BUDGET_EGRESS));
	assert_true(node_config_budgeted(&cfg, "research", BUDGET_INGRESS));
	cfg.budgets.heard = &none;
	assert_true(node_config_budgeted(&cfg, "research", BUDGET_EGRESS));
	assert_true(node_config_budgeted(&cfg, "research", BUDGET_INGRESS));
	assert_int_equal(budget_set_seal(&heard, &e), 0);
	cfg.budgets.heard = &heard;
	assert_true(node_config_budgeted(&cfg, "datasets", BUDGET_EGRESS));
	assert_false(node_config_budgeted(&cfg, "datasets", BUDGET_INGRESS));
	assert_true(node_config_budgeted(&cfg, "web", BUDGET_EGRESS));
	/* a download budget alone: the namespace's uploads are not budgeted */
	assert_true(node_config_budgeted(&cfg, "mirror", BUDGET_INGRESS));
	assert_false(node_config_budgeted(&cfg, "mirror", BUDGET_EGRESS));
	assert_false(node_config_budgeted(&cfg, "research", BUDGET_EGRESS));
	assert_false(node_config_budgeted(&cfg, "research", BUDGET_INGRESS));
	assert_false(node_config_budgeted(&cfg, "dataset", BUDGET_EGRESS));
	cfg.budgets.allocator = NULL;
	assert_false(node_config_budgeted(&cfg, "datasets", BUDGET_EGRESS));
	assert_false(node_config_budgeted(&cfg, "mirror", BUDGET_INGRESS));
	node_config_free(&cfg);
}

/* ---- the allocator's policy file ---- */

static int load_policy(const char *text, struct alloc_policy *p, struct tg_err *e)
{
	memset(e, 0, sizeof(*e));
	return alloc_policy_load_text("policy.json", text, strlen(text), p, e);
}

static void t_policy_accepted(void **state)
{
	struct alloc_policy p, q;
	struct tg_err e;

	(void)state;
	assert_int_equal(load_policy("{\"version\":1,\"reportSeconds\":2,\"leaseSeconds\":4,"
				     "\"namespaces\":{\"web\":{\"internetEgress\":8000},"
				     "\"datasets\":{\"internetEgress\":\"40G\"},"
				     "\"big\":{\"internetEgress\":\"1000T\"}}}",
				     &p, &e),
			 0);
	assert_int_equal(p.report_ms, 2000);
	assert_int_equal(p.lease_ms, 4000);
	assert_int_equal(p.budgets.n, 3);
	/* sorted by namespace, bytes/s */
	assert_string_equal(p.budgets.d[0].ns, "big");
	assert_true(p.budgets.d[0].budget == BUDGET_TOTAL_MAX);
	assert_string_equal(p.budgets.d[1].ns, "datasets");
	assert_true(p.budgets.d[1].budget == 5000000000ULL);
	assert_string_equal(p.budgets.d[2].ns, "web");
	assert_int_equal(p.budgets.d[2].budget, 1000);
	assert_int_equal(strlen(p.budgets.id), BUDGET_POLICY_ID_LEN);
	/* the id is of what it says, not of how it is written */
	assert_int_equal(load_policy("{ \"namespaces\": {\"datasets\": {\"internetEgress\": "
				     "40000000000}, \"big\":{\"internetEgress\":\"1000T\"},"
				     "\"web\":{\"internetEgress\":\"8k\"}}, \"version\": 1 }",
				     &q, &e),
			 0);
	assert_string_equal(p.budgets.id, q.budgets.id);
	assert_int_equal(q.report_ms, 1000);
	assert_int_equal(q.lease_ms, 10000);
	alloc_policy_free(&q);
	/* ... and changes with any budget */
	assert_int_equal(load_policy("{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":"
				     "8000},\"datasets\":{\"internetEgress\":\"20G\"},"
				     "\"big\":{\"internetEgress\":\"1000T\"}}}",
				     &q, &e),
			 0);
	assert_string_not_equal(p.budgets.id, q.budgets.id);
	assert_non_null(budget_set_find(&q.budgets, "web", BUDGET_EGRESS));
	assert_null(budget_set_find(&q.budgets, "web", BUDGET_INGRESS));
	assert_null(budget_set_find(&q.budgets, "we", BUDGET_EGRESS));
	alloc_policy_free(&q);
	alloc_policy_free(&p);
	/* no budgets at all is a policy too */
	assert_int_equal(load_policy("{\"version\":1}", &p, &e), 0);
	assert_int_equal(p.budgets.n, 0);
	assert_int_equal(strlen(p.budgets.id), BUDGET_POLICY_ID_LEN);
	alloc_policy_free(&p);
}

/*
 * Download budgets: namespaces.<ns>.internetIngress, alone or beside
 * internetEgress, each (namespace, direction) a budget of its own; the id
 * changes when one is added, and a policy of uploads only keeps the id it
 * had before directions (the digest of name, NUL, budget).
 */
static void t_policy_ingress(void **state)
{
	struct alloc_policy p, q;
	struct tg_err e;
	unsigned char le[8];
	uint64_t h = FNV1A64_INIT, v = 1000;
	char old_id[BUDGET_POLICY_ID_LEN + 1];

	(void)state;
	assert_int_equal(load_policy("{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":"
				     "8000},\"datasets\":{\"internetIngress\":\"40G\","
				     "\"internetEgress\":\"8G\"},\"mirror\":{\"internetIngress\":"
				     "\"1G\"}}}",
				     &p, &e),
			 0);
	assert_int_equal(p.budgets.n, 4);
	/* sorted by namespace, then direction: egress first */
	assert_string_equal(p.budgets.d[0].ns, "datasets");
	assert_int_equal(p.budgets.d[0].dir, BUDGET_EGRESS);
	assert_true(p.budgets.d[0].budget == 1000000000ULL);
	assert_string_equal(p.budgets.d[1].ns, "datasets");
	assert_int_equal(p.budgets.d[1].dir, BUDGET_INGRESS);
	assert_true(p.budgets.d[1].budget == 5000000000ULL);
	assert_string_equal(p.budgets.d[2].ns, "mirror");
	assert_int_equal(p.budgets.d[2].dir, BUDGET_INGRESS);
	assert_int_equal(p.budgets.d[2].budget, 125000000);
	assert_string_equal(p.budgets.d[3].ns, "web");
	assert_int_equal(p.budgets.d[3].dir, BUDGET_EGRESS);
	assert_true(budget_set_find(&p.budgets, "datasets", BUDGET_INGRESS)->budget ==
		    5000000000ULL);
	assert_true(budget_set_find(&p.budgets, "datasets", BUDGET_EGRESS)->budget ==
		    1000000000ULL);
	assert_null(budget_set_find(&p.budgets, "mirror", BUDGET_EGRESS));
	assert_null(budget_set_find(&p.budgets, "web", BUDGET_INGRESS));
	/* the uploads alone, for nodes that predate directions */
	assert_int_equal(p.uploads.n, 2);
	assert_string_equal(p.uploads.d[0].ns, "datasets");
	assert_string_equal(p.uploads.d[1].ns, "web");
	assert_int_equal(p.uploads.d[1].dir, BUDGET_EGRESS);
	assert_string_not_equal(p.uploads.id, p.budgets.id);

	/* uploads only: the id of before directions */
	assert_int_equal(load_policy("{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":"
				     "8000}}}",
				     &q, &e),
			 0);
	for (int k = 0; k < 8; k++)
		le[k] = (unsigned char)(v >> (8 * k));
	h = hash_fnv1a64("web", 4, h);
	h = hash_fnv1a64(le, sizeof(le), h);
	snprintf(old_id, sizeof(old_id), "%016" PRIx64, h);
	assert_string_equal(q.budgets.id, old_id);
	assert_string_equal(q.uploads.id, old_id);
	alloc_policy_free(&q);
	/* a download budget added: another id; the same rate as an upload: another id again */
	assert_int_equal(load_policy("{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":"
				     "8000,\"internetIngress\":8000}}}",
				     &q, &e),
			 0);
	assert_string_not_equal(q.budgets.id, old_id);
	assert_int_equal(q.budgets.n, 2);
	memcpy(old_id, q.budgets.id, sizeof(old_id));
	alloc_policy_free(&q);
	assert_int_equal(load_policy("{\"version\":1,\"namespaces\":{\"web\":{\"internetIngress\":"
				     "8000}}}",
				     &q, &e),
			 0);
	assert_string_not_equal(q.budgets.id, old_id);
	assert_string_not_equal(q.budgets.id, p.budgets.id);
	alloc_policy_free(&q);
	alloc_policy_free(&p);
}

/* Each refusal: code, and the text that names the key. */
static void t_policy_refused(void **state)
{
	static const struct {
		const char *text;
		int code;
		const char *names;
	} bad[] = {
		{ "", 6, "not valid JSON" },
		{ "[]", 6, "not a JSON object" },
		{ "{\"version\":1} x", 6, "at byte 14" },
		{ "{\"version\":1,\"version\":1}", 7, "twice" },
		{ "{}", 7, "version is missing" },
		{ "{\"version\":2}", 7, "version" },
		{ "{\"version\":1,\"namespace\":{}}", 7, "\"namespace\" is not a key" },
		{ "{\"version\":1,\"destinations\":{}}", 7, "destinations: destination budgets" },
		{ "{\"version\":1,\"reportSeconds\":0}", 7, "reportSeconds" },
		{ "{\"version\":1,\"leaseSeconds\":3601}", 7, "leaseSeconds" },
		{ "{\"version\":1,\"reportSeconds\":6}", 7, "at least twice reportSeconds" },
		{ "{\"version\":1,\"namespaces\":[]}", 7, "namespaces" },
		{ "{\"version\":1,\"namespaces\":{\"Web\":{\"internetEgress\":\"1G\"}}}", 7,
		  "namespaces[\"Web\"] is not a namespace name" },
		{ "{\"version\":1,\"namespaces\":{\"web\":\"1G\"}}", 7,
		  "namespaces[\"web\"] must be an object" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{}}}", 7,
		  "namespaces[\"web\"] has no budget" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetEgres\":\"1G\"}}}", 7,
		  "namespaces[\"web\"].\"internetEgres\" is not a key" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetIngress\":\"abc\"}}}", 7,
		  "namespaces[\"web\"].internetIngress \"abc\" is not a rate" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetIngress\":0}}}", 7,
		  "namespaces[\"web\"].internetIngress" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":\"1G\","
		  "\"internetIngress\":\"1001T\"}}}",
		  7, "out of range (1k..1000T bit/s)" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetIngres\":\"1G\"}}}", 7,
		  "namespaces[\"web\"].\"internetIngres\" is not a key" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetIngress\":\"1G\"}},"
		  "\"destinations\":{\"prefixLength\":24}}",
		  7, "destinations: destination budgets are not enforced by this version" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":\"abc\"}}}", 7,
		  "namespaces[\"web\"].internetEgress \"abc\" is not a rate" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":0}}}", 7,
		  "namespaces[\"web\"].internetEgress" },
		{ "{\"version\":1,\"namespaces\":{\"web\":{\"internetEgress\":\"1001T\"}}}", 7,
		  "out of range (1k..1000T bit/s)" },
	};
	struct alloc_policy p;
	struct tg_err e;

	(void)state;
	/* a refusal names the file */
	assert_true(load_policy(bad[6].text, &p, &e) < 0);
	assert_string_equal(e.msg, "policy.json: \"namespace\" is not a key of the policy");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = load_policy(bad[i].text, &p, &e);

		if (r == 0 || e.code != bad[i].code || !strstr(e.msg, bad[i].names))
			fail_msg("policy %zu (%s): r=%d code=%d msg=\"%s\"", i, bad[i].text, r,
				 e.code, e.msg);
	}
}

/* At most BUDGET_POLICY_NS_MAX namespaces: the most one answer carries. */
static void t_policy_namespaces_bounded(void **state)
{
	size_t size = 64 + (BUDGET_POLICY_NS_MAX + 1) * 48;
	char *text = malloc(size), *p = text;
	struct alloc_policy pol;
	struct tg_err e;

	(void)state;
	assert_non_null(text);
	p += sprintf(p, "{\"version\":1,\"namespaces\":{");
	for (int i = 0; i < BUDGET_POLICY_NS_MAX; i++)
		p += sprintf(p, "%s\"ns-%d\":{\"internetEgress\":\"1G\"}", i ? "," : "", i);
	strcpy(p, "}}");
	assert_int_equal(load_policy(text, &pol, &e), 0);
	assert_int_equal(pol.budgets.n, BUDGET_POLICY_NS_MAX);
	alloc_policy_free(&pol);
	sprintf(p, ",\"ns-x\":{\"internetEgress\":\"1G\"}}}");
	assert_int_equal(load_policy(text, &pol, &e), -E2BIG);
	assert_non_null(strstr(e.msg, "at most 1024"));
	free(text);
}

static void t_name_128_chars_accepted(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	char name[129], json[1024];

	memset(name, 'n', 128);
	name[128] = '\0';
	snprintf(json, sizeof(json), "{\"cniVersion\":\"1.1.0\",\"name\":\"%s\"," IPAM_OK "}",
		 name);
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_string_equal(cfg.name, name);
	node_config_free(&cfg);
}

static void t_internet_mark_forms(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(ACCT("\"internetMark\":\"65536\""), &cfg, &e), 0);
	assert_int_equal(cfg.internet_mark, 0x10000);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCT("\"internetMark\":131072"), &cfg, &e), 0);
	assert_int_equal(cfg.internet_mark, 0x20000);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCT("\"internetMark\":\"0x1\""), &cfg, &e), 0);
	assert_int_equal(cfg.internet_mark, 1);
	node_config_free(&cfg);
	assert_int_equal(parse(ACCT("\"internetMark\":\"0xffff0000\""), &cfg, &e), 0);
	assert_int_equal(cfg.internet_mark, 0xffff0000u);
	node_config_free(&cfg);
}

static void t_cooldown_bounds(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(IPAM_STATIC("\"cooldownSeconds\":0"), &cfg, &e), 0);
	assert_int_equal(cfg.cooldown_ms, 0);
	node_config_free(&cfg);
	assert_int_equal(parse(IPAM_STATIC("\"cooldownSeconds\":86400"), &cfg, &e), 0);
	assert_int_equal(cfg.cooldown_ms, 86400000);
	node_config_free(&cfg);
}

static void t_unknown_keys_ignored(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	const char *json =
		"{\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":\"tollgate\","
		"\"someFutureKey\":{\"nested\":[1,2,{\"x\":null}]},\"mtu2\":\"big\",\"MTU\":\"x\","
		"\"ipam\":{\"type\":\"tollgate\",\"addresses\":[\"10.1.0.1\"],\"ranges\":[[{}]],\"routes\":5},"
		"\"accounting\":{\"colour\":\"blue\"},"
		"\"dns\":{\"nameservers\":[\"10.0.0.10\"]},\"args\":{\"cni\":{\"labels\":[]}},"
		"\"capabilities\":{\"portMappings\":true}}";

	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_int_equal(e.code, 0);
	assert_int_equal(cfg.mtu, 0);
	assert_int_equal(cfg.n_pool, 1);
	node_config_free(&cfg);
}

static void t_trailing_whitespace_ok(void **state)
{
	expect_ok_cmd(MINIMAL "\n \t\r\n", CNI_CMD_ADD);
}

static void t_empty_input_is_6(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	memset(&e, 0, sizeof(e));
	assert_true(cni_config_read("", 0, CNI_CMD_ADD, &cfg, &e) < 0);
	assert_int_equal(e.code, 6);
	node_config_free(&cfg);
}

static void t_over_one_mib_is_6(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	size_t len = NODE_CONFIG_MAX + 1;
	char *big = malloc(len + 1);
	size_t head = strlen(MINIMAL) - 1; /* without the closing brace */

	assert_non_null(big);
	memcpy(big, MINIMAL, head);
	/* pad with an unknown key so the document stays valid JSON */
	memcpy(big + head, ",\"pad\":\"", 8);
	memset(big + head + 8, 'x', len - head - 8 - 2);
	big[len - 2] = '"';
	big[len - 1] = '}';
	big[len] = '\0';
	memset(&e, 0, sizeof(e));
	assert_true(cni_config_read(big, len, CNI_CMD_ADD, &cfg, &e) < 0);
	assert_int_equal(e.code, 6);
	node_config_free(&cfg);
	free(big);
}

static void t_len_bounds_the_input(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	/* Only `len` bytes are the config: what follows must not be read. */
	char text[256];

	snprintf(text, sizeof(text), "%s garbage", MINIMAL);
	memset(&e, 0, sizeof(e));
	assert_int_equal(cni_config_read(text, strlen(MINIMAL), CNI_CMD_ADD, &cfg, &e), 0);
	node_config_free(&cfg);
}

static void t_valid_attachments_kept(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(
		parse_cmd(
			TOP("\"cni.dev/valid-attachments\":[{\"containerID\":\"abc\",\"ifname\":\"eth0\"}]"),
			CNI_CMD_GC, &cfg, &e),
		0);
	assert_non_null(cfg.valid_attachments);
	assert_int_equal(json_object_array_length(cfg.valid_attachments), 1);
	node_config_free(&cfg);
	assert_int_equal(parse_cmd(TOP("\"cni.dev/valid-attachments\":[]"), CNI_CMD_GC, &cfg, &e),
			 0);
	assert_non_null(cfg.valid_attachments);
	assert_int_equal(json_object_array_length(cfg.valid_attachments), 0);
	node_config_free(&cfg);
}

static void t_free_is_idempotent(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	assert_int_equal(parse(MINIMAL, &cfg, &e), 0);
	node_config_free(&cfg);
	assert_null(cfg.root);
	assert_null(cfg.pool);
	node_config_free(&cfg);
}

static void t_failed_parse_can_be_freed(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	/* the pool was expanded before the accounting section failed */
	assert_true(parse(ACCT("\"internetMark\":\"junk\""), &cfg, &e) < 0);
	node_config_free(&cfg);
	assert_true(parse("{", &cfg, &e) < 0);
	node_config_free(&cfg);
}

static void t_first_error_wins(void **state)
{
	struct node_config cfg;
	struct tg_err e;

	/* mtu is checked before ipam: its error is reported, not overwritten */
	assert_true(parse(HEAD ",\"mtu\":1,\"ipam\":{\"source\":\"dhcp\"}}", &cfg, &e) < 0);
	assert_int_equal(e.code, 7);
	assert_contains(e.msg, "mtu");
	assert_null(strstr(e.msg, "ipam"));
	node_config_free(&cfg);
}

static void internal_cidrs_config(char *buf, size_t size, int n)
{
	size_t off = (size_t)snprintf(buf, size, HEAD ",\"internalCIDRs\":[");

	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(buf + off, size - off, "%s\"10.%d.%d.0/24\"", i ? "," : "",
					i / 256, i % 256);
	snprintf(buf + off, size - off, "]," IPAM_OK "}");
}

static void t_internal_cidrs_limit(void **state)
{
	struct node_config cfg;
	struct tg_err e;
	char json[8192];

	internal_cidrs_config(json, sizeof(json), ACCT_MAX_INTERNAL);
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_int_equal(cfg.n_internal, ACCT_MAX_INTERNAL);
	node_config_free(&cfg);
	internal_cidrs_config(json, sizeof(json), ACCT_MAX_INTERNAL + 1);
	assert_true(parse(json, &cfg, &e) < 0);
	node_config_free(&cfg);
	assert_int_equal(e.code, 7);
	assert_contains(e.msg, "internalCIDRs");
}

/* err.h documents struct tg_err as optional: a NULL error must not crash. */
static const char *const null_err_jsons[] = {
	TOP("\"mtu\":\"1500\""),
	IPAM("\"source\":\"imds\",\"exclude\":[\"nope\"]"),
	IPAM("\"source\":\"static\",\"addresses\":[\"bad\"]"),
	"[]",
	"{",
};

/* Exit status 10 + i: config i was accepted. */
static int null_err_child(void *arg)
{
	for (size_t i = 0; i < ARRAY_SIZE(null_err_jsons); i++) {
		struct node_config cfg;

		if (cni_config_read(null_err_jsons[i], strlen(null_err_jsons[i]), CNI_CMD_ADD, &cfg,
				    NULL) >= 0)
			return 10 + (int)i;
		node_config_free(&cfg);
	}
	return 0;
}

/* In a child process, so that a crash fails this case only. */
static void t_null_err_tolerated(void **state)
{
	int rc = child_run(null_err_child, NULL, "cni_config_read(..., e=NULL)");

	if (rc >= 10)
		fail_msg("config %d accepted", rc - 10);
	if (rc != 0)
		fail_msg("child exited %d (a sanitizer report is above)", rc);
}

/* ---- the group ---- */

/* A conflist file with `tail` after its document; the result of loading it. */
static int load_conflist(const char *tail, struct node_config *cfg, struct tg_err *e)
{
	char path[] = "/tmp/tollgate-conflist.XXXXXX";
	int fd = mkstemp(path), r;
	FILE *f;

	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"cniVersion\": \"1.0.0\", \"name\": \"n\", \"plugins\": [{\"type\": \"tollgate\", "
		"\"ipam\": {\"source\": \"static\", \"addresses\": [\"10.1.0.10\"]}}]}%s",
		tail);
	fclose(f);
	r = node_config_load_file(path, cfg, e);
	unlink(path);
	return r;
}

/* A conflist file is read as strictly as a config on stdin: one document, then blanks only. */
static void t_conflist_file_strict(void **state)
{
	struct node_config cfg;
	struct tg_err e = { 0 };

	assert_int_equal(load_conflist(" \n\t\n", &cfg, &e), 0);
	assert_string_equal(cfg.name, "n");
	assert_int_equal(cfg.n_pool, 1);
	node_config_free(&cfg);

	memset(&e, 0, sizeof(e));
	assert_int_equal(load_conflist("\n{}", &cfg, &e), -EBADMSG);
	assert_int_equal(e.code, CNI_ERR_DECODE);
	if (!strstr(e.msg, "is not valid JSON: unexpected character at byte 130"))
		fail_msg("message: %s", e.msg);
	node_config_free(&cfg);

	memset(&e, 0, sizeof(e));
	assert_int_equal(node_config_load_file("/nonexistent/tollgate.conflist", &cfg, &e),
			 -ENOENT);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_non_null(strstr(e.msg, "cannot read /nonexistent/tollgate.conflist"));
	node_config_free(&cfg);
}

int main(void)
{
	ADD(t_full_config_static);
	ADD(t_full_config_imds);
	ADD(t_full_config_as_conflist_entry_every_version);
	ADD(t_non_default_values);
	ADD(t_defaults);
	ADD(t_node_access_defaults);
	ADD(t_node_access_values);
	ADD(t_node_access_service_ports);
	ADD(t_node_access_tables_and_ports);
	ADD(t_internet_guard);
	ADD(t_ipam_source_defaults_to_imds_without_addresses);
	ADD(t_empty_ipam_object_is_imds);
	ADD(t_imds_exclude_syntax_ok);
	ADD(t_each_version_accepted);
	ADD(t_each_version_accepted_on_del);
	ADD(t_check_needs_0_4_0);
	ADD(t_status_gc_with_1_1_0);
	ADD(t_version_only_needs_cni_version);
	ADD(t_mtu_bounds_accepted);
	ADD(t_null_values_mean_absent);
	ADD(t_name_128_chars_accepted);
	ADD(t_budgets_accepted);
	ADD(t_budgeted_by_policy_heard);
	ADD(t_policy_accepted);
	ADD(t_policy_refused);
	ADD(t_policy_ingress);
	ADD(t_policy_namespaces_bounded);
	ADD(t_internet_mark_forms);
	ADD(t_cooldown_bounds);
	ADD(t_unknown_keys_ignored);
	ADD(t_trailing_whitespace_ok);
	ADD(t_same_key_in_two_objects_ok);
	ADD(t_conflist_file_strict);
	ADD(t_empty_input_is_6);
	ADD(t_over_one_mib_is_6);
	ADD(t_len_bounds_the_input);
	ADD(t_valid_attachments_kept);
	ADD(t_free_is_idempotent);
	ADD(t_failed_parse_can_be_freed);
	ADD(t_first_error_wins);
	ADD(t_internal_cidrs_limit);
	ADD(t_null_err_tolerated);
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++)
		add_test(bad_cases[i].name, t_bad, (void *)&bad_cases[i]);
	return run_group("config");
}
