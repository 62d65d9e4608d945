// SPDX-License-Identifier: Apache-2.0
/* The allocator's command line, read and checked before anything starts (allocator/allocator.h). */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/elect.h"
#include "allocator/internal.h"
#include "budget/budget.h"
#include "config/config.h"
#include "lib/cleanup.h"
#include "lib/k8sname.h"
#include "lib/util.h"
#include "lib/version.h"

void alloc_usage(FILE *f)
{
	fputs("usage: tollgate-allocator --policy FILE [--listen ADDR:PORT|:PORT]\n"
	      "       tollgate-allocator --check --policy FILE   (judge the file, exit 0 or 1)\n"
	      "                          [--max-connections N] [--per-client N]\n"
	      "                          [--deadline-ms MS] [--max-nodes N] [--log-level L]\n"
	      "defaults: --listen :9618, --max-connections 25000 (one per node, kept alive;\n"
	      "          at most the open-file limit allows), --per-client 64 (connections\n"
	      "          one address may hold), --deadline-ms 5000 (a request's whole life,\n"
	      "          and a kept-alive connection's idle time), --max-nodes 200000 (nodes\n"
	      "          remembered; a new one past them is refused, 503), --log-level info\n"
	      "       leader election: --etcd URL[,URL...] --advertise URL\n"
	      "                        [--election-key KEY] [--election-ttl SECONDS]\n"
	      "                        [--etcd-ca FILE] [--etcd-cert FILE --etcd-key FILE]\n"
	      "          replicas campaign on an etcd lease (the v3 JSON gateway); only the\n"
	      "          leader grants, the others answer with its --advertise URL.\n"
	      "          --election-key /tollgate/allocator/leader, --election-ttl 5 (2 to 60)\n"
	      "       who may report: --jwks FILE|URL [--jwks-ca FILE] [--jwks-token FILE]\n"
	      "                        [--issuer URL] [--agent-account NAMESPACE:NAME]\n"
	      "          each report carries its node's bound service-account token (audience\n"
	      "          " AUTH_AUDIENCE "), checked against the issuer's keys: the JWKS\n"
	      "          document the API server publishes at /openid/v1/jwks, a file or an\n"
	      "          https:// URL (its CA and a bearer token for it: --jwks-ca, --jwks-token).\n"
	      "          --issuer " AUTH_DEFAULT_ISSUER ",\n"
	      "          --agent-account kube-system:tollgate (the DaemonSet's ServiceAccount).\n"
	      "          --insecure-no-auth instead: every report taken for the node it names\n"
	      "       TLS: --tls-cert FILE --tls-key FILE (PEM; re-read when they change)\n"
	      "       --policy: the budgets (docs/budgets.md), re-read when it changes\n"
	      "       tollgate-allocator --version\n"
	      "endpoints: POST /v1/report, /metrics, /healthz, /readyz, /\n",
	      f);
}

/*
 * --check: the policy file judged as a running allocator would judge it,
 * one line on stdout (for CI before a ConfigMap ships); 0 accepted, 1 not.
 */
static int check_policy(const char *path)
{
	_cleanup_free_ char *text = NULL;
	struct alloc_policy p;
	struct tg_err e = { 0 };
	size_t len = 0;
	int r = read_file(path, NODE_CONFIG_MAX, &text, &len);

	if (r < 0) {
		printf("%s: refused: cannot read it: %s\n", path, strerror(-r));
		return 1;
	}
	if (alloc_policy_load_text(path, text, len, &p, &e) < 0) {
		size_t n = strlen(path);
		/* the message names the file first: said once */
		const char *msg = strncmp(e.msg, path, n) == 0 && e.msg[n] == ':' ? e.msg + n + 2
										  : e.msg;

		printf("%s: refused (error %d): %s\n", path, e.code, msg);
		return 1;
	}
	printf("%s: accepted (policy %s, %zu budgets, lease %lld s, reports every %lld s)\n", path,
	       p.budgets.id, p.budgets.n, (long long)(p.lease_ms / 1000),
	       (long long)(p.report_ms / 1000));
	alloc_policy_free(&p);
	return 0;
}

/* A decimal in [lo, hi], nothing else. */
static int parse_uint(const char *s, unsigned long lo, unsigned long hi, unsigned int *ret)
{
	char *end;
	unsigned long v;

	if (!*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -EINVAL;
	*ret = (unsigned int)v;
	return 0;
}

/* Each of --etcd's URLs, --advertise and the key: what the election can use. */
static int check_election(const struct alloc_cli *cli)
{
	char urls[ELECT_URLS_MAX][ELECT_URL_MAX + 1];
	const char *bad = NULL;
	size_t n, len = 0;
	int r = elect_split_urls(cli->etcd, urls, &n, &bad, &len);

	if (r == -EINVAL) {
		fprintf(stderr,
			"tollgate-allocator: --etcd: \"%.*s\" is not an http:// or "
			"https:// URL\n",
			(int)(len > 80 ? 80 : len), bad);
		return r;
	}
	if (r < 0) {
		fprintf(stderr, "tollgate-allocator: --etcd: at most %d URLs\n", ELECT_URLS_MAX);
		return -EINVAL;
	}
	if (!cli->advertise) {
		fprintf(stderr, "tollgate-allocator: --etcd needs --advertise (the URL the nodes "
				"reach this replica at)\n");
		return -EINVAL;
	}
	if (!budget_leader_url_ok(cli->advertise, strlen(cli->advertise))) {
		fprintf(stderr,
			"tollgate-allocator: --advertise: \"%.80s\" is not an http:// or "
			"https:// URL of at most %d bytes\n",
			cli->advertise, BUDGET_URL_MAX);
		return -EINVAL;
	}
	if (!*cli->election_key || strlen(cli->election_key) > ETCD_KEY_MAX) {
		fprintf(stderr, "tollgate-allocator: --election-key: 1 to %d bytes\n",
			ETCD_KEY_MAX);
		return -EINVAL;
	}
	if (!cli->etcd_cert != !cli->etcd_key) {
		fprintf(stderr, "tollgate-allocator: --etcd-cert and --etcd-key go together\n");
		return -EINVAL;
	}
	return 0;
}

/* Who may report: --jwks (or, knowingly, --insecure-no-auth) and what goes with it. */
static int check_trust(const struct alloc_cli *cli)
{
	const char *colon = strchr(cli->agent_account, ':');

	if (!cli->jwks && !cli->insecure_no_auth) {
		fprintf(stderr,
			"tollgate-allocator: --jwks is required: each report's service-account "
			"token is checked against the issuer's keys (--insecure-no-auth takes every "
			"report for the node it names: tests only)\n");
		return -EINVAL;
	}
	if (cli->jwks && cli->insecure_no_auth) {
		fprintf(stderr, "tollgate-allocator: --jwks and --insecure-no-auth exclude each "
				"other\n");
		return -EINVAL;
	}
	if (cli->jwks && strncmp(cli->jwks, "http://", 7) == 0) {
		fprintf(stderr,
			"tollgate-allocator: --jwks \"%s\": the issuer's keys come over "
			"https:// only (whoever answers a plain request decides who may "
			"report)\n",
			cli->jwks);
		return -EINVAL;
	}
	if ((cli->jwks_ca || cli->jwks_token) && (!cli->jwks || !alloc_trust_url(cli->jwks))) {
		fprintf(stderr, "tollgate-allocator: --jwks-ca and --jwks-token are for a --jwks "
				"URL\n");
		return -EINVAL;
	}
	/* a namespace is a DNS label, a ServiceAccount's name a DNS subdomain */
	if (!colon || !k8s_dns_label(cli->agent_account, (size_t)(colon - cli->agent_account)) ||
	    !k8s_dns_subdomain(colon + 1, strlen(colon + 1))) {
		fprintf(stderr,
			"tollgate-allocator: --agent-account \"%s\" is not NAMESPACE:NAME (the "
			"agents' ServiceAccount)\n",
			cli->agent_account);
		return -EINVAL;
	}
	if (strncmp(cli->issuer, "https://", 8) != 0 || strlen(cli->issuer) > 512) {
		fprintf(stderr,
			"tollgate-allocator: --issuer \"%.64s\" is not an https:// URL (the "
			"cluster's service-account issuer)\n",
			cli->issuer);
		return -EINVAL;
	}
	if (!cli->tls_cert != !cli->tls_key) {
		fprintf(stderr, "tollgate-allocator: --tls-cert and --tls-key go together\n");
		return -EINVAL;
	}
	return 0;
}

int alloc_parse_options(int argc, char **argv, struct alloc_cli *ret)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "max-connections", required_argument, NULL, 'M' },
		{ "per-client", required_argument, NULL, 'C' },
		{ "deadline-ms", required_argument, NULL, 'T' },
		{ "max-nodes", required_argument, NULL, 'N' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "etcd", required_argument, NULL, 'E' },
		{ "election-key", required_argument, NULL, 'K' },
		{ "advertise", required_argument, NULL, 'A' },
		{ "election-ttl", required_argument, NULL, 'L' },
		{ "etcd-ca", required_argument, NULL, 'a' },
		{ "etcd-cert", required_argument, NULL, 'e' },
		{ "etcd-key", required_argument, NULL, 'k' },
		{ "check", no_argument, NULL, 'k' + 256 },
		{ "jwks", required_argument, NULL, 'j' + 256 },
		{ "jwks-ca", required_argument, NULL, 'c' + 256 },
		{ "jwks-token", required_argument, NULL, 't' + 256 },
		{ "issuer", required_argument, NULL, 'i' + 256 },
		{ "agent-account", required_argument, NULL, 'a' + 256 },
		{ "insecure-no-auth", no_argument, NULL, 'n' + 256 },
		{ "tls-cert", required_argument, NULL, 'C' + 256 },
		{ "tls-key", required_argument, NULL, 'K' + 256 },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct alloc_cli *cli = ret;
	int opt;

	*cli = (struct alloc_cli){
		.listen = ":9618",
		.max_connections = ALLOC_DEFAULT_MAX_CONNECTIONS,
		.per_client = ALLOC_DEFAULT_PER_CLIENT,
		.deadline_ms = ALLOC_DEFAULT_DEADLINE_MS,
		.max_nodes = ALLOC_DEFAULT_MAX_NODES,
		.log_level = TG_LOG_INFO,
		.election_key = ELECT_DEFAULT_KEY,
		.election_ttl_s = ELECT_DEFAULT_TTL_S,
		.issuer = AUTH_DEFAULT_ISSUER,
		.agent_account = "kube-system:tollgate",
	};
	bool election_opt = false, check = false;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			cli->policy_path = optarg;
			break;
		case 'c':
			fprintf(stderr,
				"tollgate-allocator: --config: the budgets live in the allocator's "
				"own policy file now: --policy FILE (docs/budgets.md)\n");
			return 2;
		case 'l':
			cli->listen = optarg;
			break;
		case 'M':
			if (parse_uint(optarg, 16, 1000000, &cli->max_connections) < 0) {
				fprintf(stderr,
					"tollgate-allocator: --max-connections is 16 to 1000000\n");
				return 2;
			}
			break;
		case 'C':
			if (parse_uint(optarg, 1, 1000000, &cli->per_client) < 0) {
				fprintf(stderr,
					"tollgate-allocator: --per-client is 1 to 1000000\n");
				return 2;
			}
			break;
		case 'N':
			if (parse_uint(optarg, 1, BUDGET_NODES_MAX, &cli->max_nodes) < 0) {
				fprintf(stderr, "tollgate-allocator: --max-nodes is 1 to %d\n",
					BUDGET_NODES_MAX);
				return 2;
			}
			break;
		case 'T':
			if (parse_uint(optarg, 100, 600000, &cli->deadline_ms) < 0) {
				fprintf(stderr,
					"tollgate-allocator: --deadline-ms is 100 to 600000\n");
				return 2;
			}
			break;
		case 'v':
			if (tg_log_level_parse(optarg, &cli->log_level) < 0) {
				fprintf(stderr,
					"tollgate-allocator: --log-level is error, warn or info\n");
				return 2;
			}
			break;
		case 'E':
			cli->etcd = optarg;
			break;
		case 'K':
			cli->election_key = optarg;
			election_opt = true;
			break;
		case 'A':
			cli->advertise = optarg;
			election_opt = true;
			break;
		case 'a':
			cli->etcd_ca = optarg;
			election_opt = true;
			break;
		case 'e':
			cli->etcd_cert = optarg;
			election_opt = true;
			break;
		case 'k':
			cli->etcd_key = optarg;
			election_opt = true;
			break;
		case 'L':
			if (parse_uint(optarg, 2, 60, &cli->election_ttl_s) < 0) {
				fprintf(stderr,
					"tollgate-allocator: --election-ttl is 2 to 60 (seconds)\n");
				return 2;
			}
			election_opt = true;
			break;
		case 'k' + 256:
			check = true;
			break;
		case 'j' + 256:
			cli->jwks = optarg;
			break;
		case 'c' + 256:
			cli->jwks_ca = optarg;
			break;
		case 't' + 256:
			cli->jwks_token = optarg;
			break;
		case 'i' + 256:
			cli->issuer = optarg;
			break;
		case 'a' + 256:
			cli->agent_account = optarg;
			break;
		case 'n' + 256:
			cli->insecure_no_auth = true;
			break;
		case 'C' + 256:
			cli->tls_cert = optarg;
			break;
		case 'K' + 256:
			cli->tls_key = optarg;
			break;
		case 'h':
			alloc_usage(stdout);
			return 0;
		case 'V':
			tg_print_version(stdout, "tollgate-allocator");
			return 0;
		default:
			alloc_usage(stderr);
			return 2;
		}
	}
	if (optind < argc || !cli->policy_path) {
		if (!cli->policy_path)
			fprintf(stderr, "tollgate-allocator: --policy is required\n");
		else
			fprintf(stderr, "tollgate-allocator: unexpected argument \"%s\"\n",
				argv[optind]);
		alloc_usage(stderr);
		return 2;
	}
	if (check)
		return check_policy(cli->policy_path);
	if (!cli->etcd && election_opt) {
		/* a replica that believed it led alone beside others would overgrant */
		fprintf(stderr,
			"tollgate-allocator: --advertise, --election-* and --etcd-* need --etcd\n");
		return 2;
	}
	if (cli->etcd && check_election(cli) < 0)
		return 2;
	if (check_trust(cli) < 0)
		return 2;
	return ALLOC_RUN;
}
