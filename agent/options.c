// SPDX-License-Identifier: Apache-2.0
/* The agent's command line, read and checked before anything starts (agent/internal.h). */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/version.h"
#include "agent/internal.h"
#include "lib/k8sname.h"
#include "lib/util.h"

void agent_usage(FILE *f)
{
	fputs("usage: tollgate-agent --config FILE [--data-dir DIR] [--listen ADDR:PORT|:PORT]\n"
	      "                      [--cni-conf-dir DIR --cni-bin-dir DIR] [--plugin FILE]\n"
	      "                      [--conf-name NAME] [--once] [--metrics-only]\n"
	      "                      [--declare-interval S] [--sync-interval S] [--gc-interval S]\n"
	      "                      [--page-cache-ms MS] [--deadline-ms MS] [--log-level L]\n"
	      "                      [--node-name NAME] [--host-root DIR]\n"
	      "       tollgate-agent --metrics-only --data-dir DIR --network NAME [--listen ...]\n"
	      "       tollgate-agent --check --config FILE   (would FILE be taken? exit 0 or 1)\n"
	      "       tollgate-agent --version\n"
	      "defaults: --listen :9617, --plugin: tollgate beside this binary,\n"
	      "          --conf-name 10-tollgate.conflist, intervals 30 / 300 / 60 s,\n"
	      "          --page-cache-ms 1000 (scrapes within it share one page),\n"
	      "          --deadline-ms 10000 (a request's whole life), --log-level info,\n"
	      "          --node-name: this host's name (the DaemonSet passes spec.nodeName),\n"
	      "          --host-root: none (the host's / mounted read-only: the plugin's\n"
	      "          libraries are checked there before it is installed)\n"
	      "endpoints: /metrics, /healthz, /readyz, /\n",
	      f);
}

static int parse_seconds(const char *s, int64_t *ret_ms)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1 || v > 86400)
		return -EINVAL;
	*ret_ms = (int64_t)v * 1000;
	return 0;
}

/* --page-cache-ms (0 to 60000) and --deadline-ms (100 to 600000). */
static int parse_ms(int opt, const char *s, struct agent_cli *cli)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || !*s || (opt == 'P' && (v < 0 || v > 60000)) ||
	    (opt == 'T' && (v < 100 || v > 600000))) {
		fprintf(stderr, "tollgate-agent: %s\n",
			opt == 'P' ? "--page-cache-ms is 0 to 60000"
				   : "--deadline-ms is 100 to 600000");
		return -EINVAL;
	}
	*(opt == 'P' ? &cli->page_cache_ms : &cli->deadline_ms) = (int)v;
	return 0;
}

static void default_plugin(char *buf, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0) {
		snprintf(buf, size, "/usr/local/bin/tollgate");
		return;
	}
	self[n] = '\0';
	snprintf(buf, size, "%s/tollgate", dirname(self));
}

/* Which options go together; the usage or the problem on stderr, 2 when they do not. */
static int check_options(struct agent_cli *cli, int argc)
{
	struct agent_options *o = &cli->opt;

	/* Metrics only, the store named by --data-dir and --network: no config needed. */
	if (o->metrics_only && !o->config_path && o->data_dir && cli->network) {
		if (!name_is_safe(cli->network, 128)) {
			fprintf(stderr,
				"tollgate-agent: --network \"%s\" is not a valid network name\n",
				cli->network);
			return 2;
		}
	} else if (optind < argc || !o->config_path || cli->network) {
		if (!o->config_path)
			fprintf(stderr,
				"tollgate-agent: --config is required (or --metrics-only with "
				"--data-dir and --network)\n");
		else if (cli->network)
			fprintf(stderr,
				"tollgate-agent: --network goes with --metrics-only without "
				"--config (the config names its network)\n");
		agent_usage(stderr);
		return 2;
	}
	if (o->cni_bin_dir && !o->cni_conf_dir) {
		fprintf(stderr, "tollgate-agent: --cni-bin-dir goes with --cni-conf-dir\n");
		return 2;
	}
	/* Without --node-name: the host's name, as kubelet names its node (lower case). */
	if (!o->node_name && gethostname(cli->hostname, sizeof(cli->hostname) - 1) == 0) {
		for (char *c = cli->hostname; *c; c++)
			*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
		if (k8s_dns_subdomain(cli->hostname, strlen(cli->hostname)))
			o->node_name = cli->hostname;
	}
	if (!o->plugin_path) {
		default_plugin(cli->plugin, sizeof(cli->plugin));
		o->plugin_path = cli->plugin;
	}
	return AGENT_RUN;
}

int agent_parse_options(int argc, char **argv, struct agent_cli *ret)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "listen", required_argument, NULL, 'l' },
		{ "cni-conf-dir", required_argument, NULL, 'C' },
		{ "cni-bin-dir", required_argument, NULL, 'B' },
		{ "plugin", required_argument, NULL, 'p' },
		{ "conf-name", required_argument, NULL, 'N' },
		{ "once", no_argument, NULL, 'o' },
		{ "metrics-only", no_argument, NULL, 'm' },
		{ "declare-interval", required_argument, NULL, 'D' },
		{ "sync-interval", required_argument, NULL, 'S' },
		{ "gc-interval", required_argument, NULL, 'G' },
		{ "page-cache-ms", required_argument, NULL, 'P' },
		{ "deadline-ms", required_argument, NULL, 'T' },
		{ "network", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "node-name", required_argument, NULL, 'H' },
		{ "host-root", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "check", no_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent_cli *cli = ret;
	struct agent_options *o = &cli->opt;
	int opt;

	*cli = (struct agent_cli){
		.opt = { .conf_name = "10-tollgate.conflist",
			 .declare_ms = 30000,
			 .sync_ms = 300000,
			 .gc_ms = 60000 },
		.listen = ":9617",
		.page_cache_ms = -1,
		.deadline_ms = -1,
		.log_level = TG_LOG_INFO,
	};
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			o->config_path = optarg;
			break;
		case 'd':
			o->data_dir = optarg;
			break;
		case 'l':
			cli->listen = optarg;
			break;
		case 'C':
			o->cni_conf_dir = optarg;
			break;
		case 'B':
			o->cni_bin_dir = optarg;
			break;
		case 'p':
			o->plugin_path = optarg;
			break;
		case 'R':
			o->host_root = optarg;
			break;
		case 'N':
			o->conf_name = optarg;
			break;
		case 'o':
			o->once = true;
			break;
		case 'm':
			o->metrics_only = true;
			break;
		case 'D':
		case 'S':
		case 'G':
			if (parse_seconds(optarg, opt == 'D'   ? &o->declare_ms
						  : opt == 'S' ? &o->sync_ms
							       : &o->gc_ms) < 0) {
				fprintf(stderr,
					"tollgate-agent: an interval is 1 to 86400 seconds\n");
				return 2;
			}
			break;
		case 'P':
		case 'T':
			if (parse_ms(opt, optarg, cli) < 0)
				return 2;
			break;
		case 'n':
			cli->network = optarg;
			break;
		case 'H':
			if (!k8s_dns_subdomain(optarg, strlen(optarg))) {
				fprintf(stderr,
					"tollgate-agent: --node-name \"%.64s\" is not a node name "
					"(a DNS subdomain: a-z, 0-9, '-' and '.', at most 253)\n",
					optarg);
				return 2;
			}
			o->node_name = optarg;
			break;
		case 'v':
			if (tg_log_level_parse(optarg, &cli->log_level) < 0) {
				fprintf(stderr,
					"tollgate-agent: --log-level is error, warn or info\n");
				return 2;
			}
			break;
		case 'h':
			agent_usage(stdout);
			return 0;
		case 'V':
			tg_print_version(stdout, "tollgate-agent");
			return 0;
		case 'K':
			cli->check = true;
			break;
		default:
			agent_usage(stderr);
			return 2;
		}
	}
	return check_options(cli, argc);
}
