// SPDX-License-Identifier: Apache-2.0
/* The agent's own families on /metrics, after the collectors' (exporter/exporter.h). */
#include <limits.h>
#include <stdio.h>

#include "agent/agent.h"
#include "exporter/exporter.h"
#include "lib/cniops.h"

static void counter(struct expo *x, const char *name, const char *help, uint64_t v)
{
	expo_family(x, name, "counter", help);
	expo_sample_u64(x, name, (const char *const[]){ NULL }, v);
}

static void results(struct expo *x, const char *name, const char *help, uint64_t total,
		    uint64_t failed)
{
	expo_family(x, name, "counter", help);
	expo_sample_u64(x, name, (const char *const[]){ "result", "ok", NULL }, total - failed);
	expo_sample_u64(x, name, (const char *const[]){ "result", "error", NULL }, failed);
}

/*
 * How long each command took, as the plugin recorded it: a histogram per
 * command once one was counted. A file of an older plugin has no durations:
 * the family, and none of its series.
 */
static void cni_durations(struct expo *x, const struct cniops_counts *c)
{
	static const char name[] = "tollgate_cni_operation_duration_seconds";

	expo_family(x, name, "histogram",
		    "How long the plugin's CNI operations on this node took since boot, by "
		    "command: from reading its environment to its result written and logged.");
	for (unsigned cmd = 0; c->has_durations && cmd < CNIOPS_CMDS; cmd++) {
		const char *l[] = { "command", cni_cmd_names[cmd], NULL };
		uint64_t n = 0;

		for (unsigned k = 0; k < CNIOPS_BUCKETS; k++)
			n += c->bucket[cmd][k];
		if (!n)
			continue;
		n = 0;
		for (unsigned k = 0; k < CNIOPS_BUCKETS; k++) {
			n += c->bucket[cmd][k];
			expo_sample_u64(x, "tollgate_cni_operation_duration_seconds_bucket",
					(const char *const[]){ "command", cni_cmd_names[cmd], "le",
							       cniops_bucket_le(k), NULL },
					n);
		}
		expo_sample(x, "tollgate_cni_operation_duration_seconds_sum", l,
			    (double)c->sum_ns[cmd] / 1e9);
		/* the buckets' total, so that _count and le="+Inf" always agree */
		expo_sample_u64(x, "tollgate_cni_operation_duration_seconds_count", l, n);
	}
}

/* What the plugin counted (lib/cniops.h): a series once its count is not zero. */
static void cni_operations(const struct agent *a, struct expo *x)
{
	static const char name[] = "tollgate_cni_operations_total";
	struct cniops_counts c;
	char dir[PATH_MAX + 256], code[8];

	snprintf(dir, sizeof(dir), "%s/%s", a->cfg.data_dir, a->cfg.name);
	expo_family(x, name, "counter",
		    "CNI operations the plugin ran on this node since boot, by command and result "
		    "code (0: success).");
	cniops_read(dir, &c); /* all zero without a file */
	for (unsigned cmd = 0; cmd < CNIOPS_CMDS; cmd++)
		for (unsigned k = 0; k < CNIOPS_CODES; k++)
			if (c.n[cmd][k])
				expo_sample_u64(x, name,
						(const char *const[]){
							"command", cni_cmd_names[cmd], "code",
							cniops_code_name(k, code), NULL },
						c.n[cmd][k]);
	cni_durations(x, &c);
}

void agent_render_metrics(const struct agent *a, struct expo *x)
{
	agent_budgets_render(a, x);
	const struct agent_stats *s = &a->stats;
	static const char rep[] = "tollgate_agent_repairs_total";

	if (a->opt.metrics_only) {
		/* it does none of the work the other families count */
		cni_operations(a, x);
		return;
	}
	const struct {
		const char *object;
		uint64_t n;
	} repairs[] = {
		{ "nft_table", s->repaired_nft_table },
		{ "nft_sets", s->repaired_nft_sets },
		{ "nft_chains", s->repaired_nft_chains },
		{ "nft_rules", s->repaired_nft_rules },
		{ "nft_internal_set", s->repaired_nft_internal },
		{ "nft_pod_elements", s->repaired_nft_pod_elements },
		{ "tc_ifb", s->repaired_tc_ifb },
		{ "tc_root", s->repaired_tc_root },
		{ "tc_node_class", s->repaired_tc_node_class },
		{ "tc_clsact", s->repaired_tc_clsact },
		{ "tc_filters", s->repaired_tc_filters },
		{ "tc_pod_classes", s->repaired_tc_classes_restored + s->repaired_tc_pod_classes },
		{ "sysctl", s->repaired_sysctls },
	};

	results(x, "tollgate_agent_syncs_total",
		"Pool syncs (IMDS; static pools: the store "
		"brought in line with the config), by result.",
		s->syncs, s->sync_failures);
	expo_family(x, "tollgate_agent_last_sync_success_timestamp_seconds", "gauge",
		    "When the last sync succeeded (unix seconds; 0: never).");
	expo_sample(x, "tollgate_agent_last_sync_success_timestamp_seconds",
		    (const char *const[]){ NULL }, (double)s->last_sync_ok_s);
	results(x, "tollgate_agent_declarations_total", "Node-wide declarations run, by result.",
		s->declarations, s->declaration_failures);
	expo_family(x, rep, "counter",
		    "Node-wide objects a declaration found missing or wrong and wrote, by object.");
	for (size_t i = 0; i < sizeof(repairs) / sizeof(repairs[0]); i++)
		expo_sample_u64(x, rep, (const char *const[]){ "object", repairs[i].object, NULL },
				repairs[i].n);
	counter(x, "tollgate_agent_gc_runs_total", "Collections run.", s->gc_runs);
	counter(x, "tollgate_agent_gc_collected_total",
		"Attachments collected because their network namespace was gone.", s->gc_collected);
	counter(x, "tollgate_agent_gc_kept_total",
		"Stale attachments kept because their teardown failed (retried next run).",
		s->gc_kept);
	counter(x, "tollgate_agent_gc_unseen_total",
		"Attachments not collected because their netns directory was missing or empty "
		"where the agent runs (counted once per run).",
		s->gc_unseen);
	counter(x, "tollgate_agent_gc_classes_retired_total",
		"Uplink classes of namespaces without pods retired.", s->gc_classes_retired);
	counter(x, "tollgate_agent_namespaces_retired_total",
		"Namespaces whose counters (and series) were retired accounting.retainSeconds "
		"after their last pod.",
		s->namespaces_retired);
	counter(x, "tollgate_agent_namespaces_kept_total",
		"Namespaces without pods whose counters were made again after the table was made "
		"anew, to be kept until accounting.retainSeconds.",
		s->namespaces_kept);
	counter(x, "tollgate_agent_reshaped_pods_total",
		"Running pods whose shaping a config change changed.", s->reshaped_pods);
	counter(x, "tollgate_agent_reshape_failures_total",
		"Running pods whose shaping could not be changed.", s->reshape_failures);
	results(x, "tollgate_agent_config_reloads_total",
		"Config reloads after a change (an invalid config keeps the one in force), by "
		"result.",
		s->config_reloads, s->config_errors);
	counter(x, "tollgate_agent_installs_total",
		"Times the plugin binary or the conflist was (re)written into the runtime's "
		"directories.",
		s->installs);
	cni_operations(a, x);
	expo_family(x, "tollgate_agent_ready", "gauge",
		    "1 once the pool exists, the node is declared and the plugin installed.");
	expo_sample(x, "tollgate_agent_ready", (const char *const[]){ NULL },
		    agent_ready(a) ? 1 : 0);
}
