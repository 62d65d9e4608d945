// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-ipam: the operator's view of the node's address pool.
 *
 *   tollgate-ipam [--data-dir D] [--network N] [--json] VERB [ARGS]
 *
 * Each verb builds one JSON document; --json prints it, otherwise the same
 * document is rendered as a table, so text and JSON never disagree.
 * Exit status: 0 ok, 1 problems found (or the verb failed), 2 usage error.
 *
 * One table describes the verbs: usage(), VERB --help, which options a verb
 * takes, what it needs opened first and which function runs it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "lib/version.h"
#include "lib/util.h"

/* The options only some verbs take. */
enum {
	OPT_FORCE = 1 << 0,
	OPT_DRY_RUN = 1 << 1,
	OPT_IMDS = 1 << 2,
	OPT_FIX = 1 << 3,
	OPT_FROM_FILE = 1 << 4,
	OPT_RETRY_BUDGET = 1 << 5,
	OPT_AGENT = 1 << 6,
};

/* What a verb needs before it runs. */
enum {
	NEED_ARG = 1 << 0,	    /* one operand */
	NEED_CONFIG = 1 << 1,	    /* --config */
	NEED_STORE_WRITE = 1 << 2,  /* the store opened for writing (its lock) */
	NEED_STATE = 1 << 3,	    /* the state loaded (without the lock) */
	NEED_STATE_ANYHOW = 1 << 4, /* ... and a corrupt store is the verb's to report */
	NEED_ARG_MAYBE = 1 << 5,    /* an operand or none */
};

struct verb {
	const char *name;
	int (*main)(struct cli *c);
	const char *synopsis; /* after the name, in usage() */
	unsigned int opts;    /* OPT_* */
	unsigned int needs;   /* NEED_* */
	const char *summary;
	const char *help;
};

static const struct verb verbs[] = {
	{ "status", status_main, "", 0, NEED_STATE, "pool size, allocated, free, cooling, warnings",
	  "usage: tollgate-ipam status\n"
	  "Pool size, addresses allocated, free and cooling down, addresses in use that\n"
	  "left the pool (retired), addresses seen once by sync (pending), the pool's\n"
	  "source and last sync, and warnings. Exit 1 when there is a warning.\n" },
	{ "list", list_main, "", 0, NEED_STATE,
	  "every attachment: IP, namespace/pod, container, veth, age",
	  "usage: tollgate-ipam list\n"
	  "Every attachment: IP, namespace/pod, container ID, interface, host veth, age.\n" },
	{ "show", show_main, "IP|NAMESPACE/POD|CONTAINERID", 0, NEED_ARG | NEED_STATE,
	  "one attachment and its kernel objects",
	  "usage: tollgate-ipam show IP|NAMESPACE/POD|CONTAINERID\n"
	  "One attachment from the store, with the state of its kernel objects:\n"
	  "netns, host veth, host route, nftables element. Exit 1 when one is missing.\n" },
	{ "sync", sync_main, "[--imds-url URL] [--from-file F] [--uplink IF] [--retry-budget S]",
	  OPT_FROM_FILE | OPT_RETRY_BUDGET, NEED_STORE_WRITE, "refresh the pool from Azure IMDS",
	  "usage: tollgate-ipam sync [--imds-url URL] [--from-file FILE] [--uplink IF]\n"
	  "                          [--retry-budget SECONDS]\n"
	  "Reads the uplink's secondary addresses from Azure IMDS (or FILE, an IMDS\n"
	  "network document) and folds them into the pool. The first sync of an empty\n"
	  "pool takes them all; later, a new address joins when two syncs in a row see\n"
	  "it. 429, 410, 5xx and timeouts are retried with back-off (1 s doubling to\n"
	  "10 s) within the budget (default 70 s). On any failure the store is untouched.\n" },
	{ "release", release_main, "IP|CONTAINERID [--force]", OPT_FORCE,
	  NEED_ARG | NEED_STORE_WRITE | NEED_STATE,
	  "give an address back (--force tears down a live veth)",
	  "usage: tollgate-ipam release IP|CONTAINERID [--force]\n"
	  "Removes the attachment from the store. Refuses while its host veth exists,\n"
	  "unless --force, which deletes the veth and the nftables elements first.\n" },
	{ "gc", gc_main, "[--dry-run]", OPT_DRY_RUN, NEED_STORE_WRITE | NEED_STATE,
	  "release attachments whose network namespace is gone",
	  "usage: tollgate-ipam gc [--dry-run]\n"
	  "Releases every attachment whose network namespace path no longer exists,\n"
	  "tearing down what is left of it. --dry-run only lists them.\n" },
	{ "doctor", doctor_main, "[--imds] [--fix]", OPT_IMDS | OPT_FIX,
	  NEED_STATE | NEED_STATE_ANYHOW, "store vs kernel (and IMDS): leaks, orphans, fixes",
	  "usage: tollgate-ipam doctor [--imds] [--fix]\n"
	  "Cross-checks the store against the kernel of this network namespace: tg*\n"
	  "veths, host routes, the inet tollgate table and its elements, and pool\n"
	  "addresses configured on the uplink. --imds also compares the pool with IMDS.\n"
	  "Each finding comes with the command that repairs it. Exit 1 on findings.\n"
	  "--fix (with --config) declares the nftables table again with every pod of\n"
	  "the store: the repair for missing-table and missing-nft-element.\n" },
	{ "top", top_main, "[NAMESPACE] [--agent URL]", OPT_AGENT, NEED_ARG_MAYBE,
	  "where each namespace's internet bytes go: top prefixes and other",
	  "usage: tollgate-ipam top [NAMESPACE] [--agent URL]\n"
	  "Each namespace's internet bytes on this node by outside prefix and direction\n"
	  "(internetGuard.destinations): its top prefixes, each counted from when it\n"
	  "entered the top, and the rest as other; they add up to the namespace's\n"
	  "internet bytes. Read from the node agent (default http://127.0.0.1:PORT,\n"
	  "PORT nodeAccess.metricsPort of --config, else 9617), as /metrics has them.\n" },
	{ "validate", validate_main, "FILE", 0, NEED_ARG,
	  "whether a conflist would be taken, and why not",
	  "usage: tollgate-ipam validate FILE\n"
	  "Reads FILE (a conflist, or one plugin config) with the parser the plugin and\n"
	  "the node agent run: \"accepted\", or \"refused\" with the CNI error code and\n"
	  "the message the plugin would answer (--json: those as members). Changes\n"
	  "nothing and needs no node. Exit 0 accepted, 1 refused.\n" },
	{ "reshape", reshape_main, "[--dry-run]", OPT_DRY_RUN,
	  NEED_CONFIG | NEED_STORE_WRITE | NEED_STATE,
	  "apply the config's shaping policy to running pods",
	  "usage: tollgate-ipam --config FILE reshape [--dry-run]\n"
	  "Applies the shaping policy of FILE (shaping.internetEgress/internetIngress)\n"
	  "to every running pod without restarting it: recomputes each pod's caps (its\n"
	  "own runtimeConfig limits and annotations are kept), replaces its tc classes\n"
	  "and its nftables class element, and records the result in the store. The\n"
	  "node agent runs it when the CNI config changes.\n" },
};

static void usage(FILE *f)
{
	fputs("usage: tollgate-ipam [--data-dir DIR] [--network NAME] [--config FILE] [--json] "
	      "VERB [ARGS]\n\nverbs:\n",
	      f);
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
		char left[100];

		snprintf(left, sizeof(left), "%s%s%s", verbs[i].name,
			 verbs[i].synopsis[0] ? " " : "", verbs[i].synopsis);
		/* A long synopsis gets its own line; the summaries stay in one column. */
		if (strlen(left) <= 28)
			fprintf(f, "  %-28s %s\n", left, verbs[i].summary);
		else
			fprintf(f, "  %s\n%31s%s\n", left, "", verbs[i].summary);
	}
	fputs("\n"
	      "defaults: --data-dir /run/tollgate --network tollgate; --config reads both, the\n"
	      "uplink, imdsURL and exclude from a conflist. `tollgate-ipam VERB --help` describes "
	      "a verb;\n`tollgate-ipam --version` says which build this is.\n"
	      "exit status: 0 ok, 1 problems found, 2 usage error\n",
	      f);
}

static const struct verb *verb_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

/* What the command line said beyond struct cli. */
struct args {
	bool help;
	bool version;
	bool net_set;
	bool dir_set;
	const char *verb;
};

static const struct option long_opts[] = {
	{ "data-dir", required_argument, NULL, 'd' },
	{ "network", required_argument, NULL, 'n' },
	{ "config", required_argument, NULL, 'c' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "force", no_argument, NULL, 'f' },
	{ "dry-run", no_argument, NULL, 'r' },
	{ "imds-url", required_argument, NULL, 'u' },
	{ "from-file", required_argument, NULL, 'F' },
	{ "uplink", required_argument, NULL, 'U' },
	{ "retry-budget", required_argument, NULL, 'b' },
	{ "imds", no_argument, NULL, 'I' },
	{ "fix", no_argument, NULL, 'X' },
	{ "agent", required_argument, NULL, 'A' },
	{ NULL, 0, NULL, 0 },
};

/* One option into c (or a); 0, or EXIT_USAGE. */
static int parse_option(int opt, struct cli *c, struct args *a)
{
	char *end;

	switch (opt) {
	case 'd':
		c->data_dir = optarg;
		a->dir_set = true;
		break;
	case 'n':
		c->network = optarg;
		a->net_set = true;
		break;
	case 'c':
		c->config_path = optarg;
		break;
	case 'j':
		c->json = true;
		break;
	case 'h':
		a->help = true;
		break;
	case 'V':
		a->version = true;
		break;
	case 'f':
		c->force = true;
		break;
	case 'r':
		c->dry_run = true;
		break;
	case 'u':
		c->imds_url = optarg;
		break;
	case 'F':
		c->from_file = optarg;
		break;
	case 'U':
		c->uplink = optarg;
		break;
	case 'I':
		c->imds_check = true;
		break;
	case 'X':
		c->fix = true;
		break;
	case 'A':
		c->agent_url = optarg;
		break;
	case 'b':
		c->retry_budget_s = (int)strtol(optarg, &end, 10);
		if (*end || c->retry_budget_s < 0 || c->retry_budget_s > 600) {
			fprintf(stderr, "tollgate-ipam: --retry-budget takes seconds, 0..600\n");
			return EXIT_USAGE;
		}
		break;
	default:
		usage(stderr);
		return EXIT_USAGE;
	}
	return 0;
}

/* Options anywhere; the verb and its operand are the non-options. 0, or EXIT_USAGE. */
static int parse_args(int argc, char **argv, struct cli *c, struct args *a)
{
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "d:n:c:jh", long_opts, NULL)) != -1)
		if ((rc = parse_option(opt, c, a)) != 0)
			return rc;
	for (int i = optind; i < argc; i++) {
		if (!a->verb) {
			a->verb = argv[i];
		} else if (!c->arg) {
			c->arg = argv[i];
		} else {
			fprintf(stderr, "tollgate-ipam: unexpected argument \"%s\"\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	return 0;
}

static unsigned int opts_used(const struct cli *c)
{
	return (c->force ? OPT_FORCE : 0) | (c->dry_run ? OPT_DRY_RUN : 0) |
	       (c->imds_check ? OPT_IMDS : 0) | (c->fix ? OPT_FIX : 0) |
	       (c->from_file ? OPT_FROM_FILE : 0) | (c->agent_url ? OPT_AGENT : 0) |
	       (c->retry_budget_s != 70 ? OPT_RETRY_BUDGET : 0);
}

/* Settings from --config, where flags did not set them. */
static int apply_config(struct cli *c, const struct args *a)
{
	struct tg_err e = { 0 };

	if (node_config_load_file(c->config_path, &c->cfg, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: --config %s: %s\n", c->config_path, e.msg);
		return EXIT_USAGE;
	}
	if (!a->net_set)
		c->network = c->cfg.name;
	if (!a->dir_set)
		c->data_dir = c->cfg.data_dir;
	if (!c->uplink && c->cfg.uplink[0])
		c->uplink = c->cfg.uplink;
	if (!c->imds_url && c->cfg.imds_url)
		c->imds_url = c->cfg.imds_url;
	c->exclude = c->cfg.exclude;
	c->cooldown_ms = c->cfg.cooldown_ms;
	return 0;
}

/* The settings the verb runs with: config, defaults, checks. 0, or EXIT_USAGE. */
static int settle(struct cli *c, const struct args *a, const struct verb *v)
{
	if (c->config_path && apply_config(c, a) != 0)
		return EXIT_USAGE;
	if (!c->imds_url)
		c->imds_url = "http://169.254.169.254";
	if (!c->agent_url) {
		snprintf(c->agent_url_buf, sizeof(c->agent_url_buf), "http://127.0.0.1:%u",
			 c->config_path ? c->cfg.access.metrics_port : 9617u);
		c->agent_url = c->agent_url_buf;
	}
	if (!name_is_safe(c->network, TG_NETWORK_NAME_MAX)) {
		fprintf(stderr, "tollgate-ipam: --network \"%s\" is not a valid network name\n",
			c->network);
		return EXIT_USAGE;
	}
	if ((v->needs & NEED_CONFIG) && !c->config_path) {
		fprintf(stderr, "tollgate-ipam: %s needs --config (the policy to apply)\n",
			v->name);
		return EXIT_USAGE;
	}
	return 0;
}

/*
 * The store as the verb needs it: opened for writing (its lock), or only
 * named (creating nothing) and its state read without the lock, which rename
 * makes safe. 0, or EXIT_PROBLEMS.
 */
static int open_store(struct cli *c, const struct verb *v)
{
	struct tg_err e = { 0 };
	int r;

	if (v->needs & NEED_STORE_WRITE)
		r = ipam_store_open(&c->store, c->data_dir, c->network, &e);
	else
		r = ipam_store_open_readonly(&c->store, c->data_dir, c->network, &e);
	if (r < 0 && (v->needs & NEED_STORE_WRITE)) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return EXIT_PROBLEMS;
	}
	if (!(v->needs & NEED_STATE))
		return 0;
	if (r == 0)
		r = ipam_store_load(&c->store, &c->state, &e);
	if (r < 0) {
		c->store_ok = false;
		c->store_newer = r == -EPROTO;
		snprintf(c->store_error, sizeof(c->store_error), "%s", e.msg);
		if (!(v->needs & NEED_STATE_ANYHOW)) {
			fprintf(stderr, "tollgate-ipam: %s\n", c->store_error);
			return EXIT_PROBLEMS;
		}
	}
	return 0;
}

/* Which verb, and whether the command line suits it; NULL with *rc the exit status when not. */
static const struct verb *pick_verb(const struct cli *c, const struct args *a, int *rc)
{
	const struct verb *v;

	*rc = EXIT_USAGE;
	if (a->version) {
		tg_print_version(stdout, "tollgate-ipam");
		*rc = 0;
		return NULL;
	}
	if (!a->verb) {
		usage(a->help ? stdout : stderr);
		*rc = a->help ? 0 : EXIT_USAGE;
		return NULL;
	}
	v = verb_find(a->verb);
	if (!v) {
		fprintf(stderr, "tollgate-ipam: unknown verb \"%s\"\n\n", a->verb);
		usage(stderr);
		return NULL;
	}
	if (a->help) {
		fputs(v->help, stdout);
		*rc = 0;
		return NULL;
	}
	if ((!(v->needs & NEED_ARG_MAYBE) && !!(v->needs & NEED_ARG) != !!c->arg) ||
	    (opts_used(c) & ~v->opts)) {
		fputs(v->help, stderr);
		return NULL;
	}
	return v;
}

int main(int argc, char **argv)
{
	struct cli c = { .data_dir = "/run/tollgate",
			 .network = "tollgate",
			 .cooldown_ms = IPAM_DEFAULT_COOLDOWN_MS,
			 .retry_budget_s = 70,
			 .store_ok = true };
	struct args a = { 0 };
	const struct verb *v;
	int rc;

	c.store.lock_fd = -1;
	rc = parse_args(argc, argv, &c, &a);
	if (rc != 0)
		return rc;
	v = pick_verb(&c, &a, &rc);
	if (!v)
		return rc;
	rc = settle(&c, &a, v);
	if (rc == 0)
		rc = open_store(&c, v);
	if (rc == 0)
		rc = v->main(&c);
	ipam_state_free(&c.state);
	ipam_store_close(&c.store);
	node_config_free(&c.cfg);
	return rc;
}
