/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ALLOCATOR_H
#define TG_ALLOCATOR_H

/*
 * tollgate-allocator: splits each namespace's cluster-wide internet budgets
 * (uploads and downloads, each its own) across the nodes by demand (budget/budget.h does the arithmetic and the
 * wire format) and answers every node's report with its grants.
 *
 *   tollgate-allocator --config FILE [--listen ADDR:PORT] [--max-connections N]
 *                      [--per-client N] [--deadline-ms MS] [--log-level L]
 *                      [--etcd URLS --advertise URL [--election-key KEY]
 *                       [--election-ttl S] [--etcd-ca F --etcd-cert F --etcd-key F]]
 *
 * One process, one thread, one event loop: a signalfd (TERM and INT exit 0,
 * HUP re-reads the config), an inotify watch on the config's directory, a
 * timerfd for the allocation rounds, and the HTTP server (http/http.h) that
 * takes POST /v1/report and serves /metrics, /healthz, /readyz and /.
 * Without --etcd it is the only replica and always leads; with it,
 * replicas elect a leader on etcd (elect.h) and only the leader grants: the
 * others answer reports with where the leader is.
 */

#include <stdbool.h>
#include <stdio.h>

#include "lib/log.h"

/* ---- the command line (options.c) ---- */

struct alloc_cli {
	const char *policy_path;
	const char *listen;	      /* ADDR:PORT, :PORT, HOST:PORT, or an address or name */
	unsigned int max_connections; /* nodes' kept-alive connections, and a few more */
	unsigned int per_client;      /* connections one address may hold */
	unsigned int deadline_ms;     /* a request's whole life (and a kept-alive idle one's) */
	unsigned int max_nodes;	      /* nodes remembered at most: a new one past them is refused */
	enum tg_log_level log_level;
	/* leader election: etcd NULL without */
	const char *etcd; /* comma-separated client URLs */
	const char *election_key;
	const char *advertise; /* this replica's URL, as the nodes reach it */
	unsigned int election_ttl_s;
	const char *etcd_ca, *etcd_cert, *etcd_key;
	/* who may report: jwks NULL only with insecure_no_auth */
	const char *jwks;		  /* the issuer's keys: a file, or a URL */
	const char *jwks_ca, *jwks_token; /* a URL's CA, and the bearer token it wants */
	const char *issuer;		  /* the service-account issuer (tokens' iss) */
	const char *agent_account;	  /* "<namespace>:<name>": the agents' service account */
	bool insecure_no_auth;		  /* every report taken for the node it names */
	const char *tls_cert, *tls_key;	  /* serve HTTPS; NULL: plain HTTP */
};

#define ALLOC_DEFAULT_MAX_CONNECTIONS 25000
#define ALLOC_DEFAULT_PER_CLIENT 64
#define ALLOC_DEFAULT_DEADLINE_MS 5000
#define ALLOC_DEFAULT_MAX_NODES 200000

/* What alloc_parse_options returns when the allocator goes on. */
#define ALLOC_RUN (-1)

/*
 * Reads and checks the command line into *ret (the usage or the problem on
 * stderr, --help's on stdout). ALLOC_RUN, or the exit status: 0 after
 * --help, 2 for a usage error.
 */
int alloc_parse_options(int argc, char **argv, struct alloc_cli *ret);
void alloc_usage(FILE *f);

/* The allocator, from set-up to SIGTERM: the exit status (0, 1: could not start or run). */
int alloc_main(const struct alloc_cli *cli);

#endif
