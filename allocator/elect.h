/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ALLOCATOR_ELECT_H
#define TG_ALLOCATOR_ELECT_H

/*
 * The allocator's leader election on etcd (etcd/etcd.h), as a state
 * machine with no I/O of its own: elect_due says which request to send
 * next, elect_answer takes what came back, and time comes in as arguments
 * (milliseconds of a monotonic clock). The allocator sends the requests
 * (httpc/httpc.h) and asks elect_leading before every grant.
 *
 * A replica campaigns with a transaction that puts the election key (its
 * advertise URL, on its own etcd lease) only if the key does not exist;
 * the winner's term, its epoch, is the key's create_revision. The leader
 * keeps its lease alive every third of its TTL and checks every other time
 * that the key is still its own; it grants only until
 *
 *     (when the last keepalive that etcd answered was sent) + TTL - margin,
 *
 * which comes before etcd can have let the lease (and the key) expire,
 * since etcd counts the TTL from when it received that keepalive. A
 * replica that can no longer renew thus stops granting before any other
 * can win. Followers read the key once per poll period: its holder is
 * where reports are redirected, and when it is gone they campaign.
 * Requests go to one etcd URL at a time, the next after a failure.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"

#define ELECT_URLS_MAX 9
#define ELECT_URL_MAX 255
#define ELECT_DEFAULT_KEY "/tollgate/allocator/leader"
#define ELECT_DEFAULT_TTL_S 5
#define ELECT_POLL_MS 1000 /* a follower's read of the key */
#define ELECT_RETRY_MS 250 /* after a failed request */

enum elect_step {
	ELECT_NONE,
	ELECT_GRANT,
	ELECT_CAMPAIGN,
	ELECT_KEEPALIVE,
	ELECT_CHECK,
	ELECT_RANGE,
	ELECT_REVOKE,
	ELECT_STEPS
};
extern const char *const elect_step_names[ELECT_STEPS];

struct elect_config {
	const char *urls[ELECT_URLS_MAX]; /* etcd's client URLs, no trailing '/' */
	size_t n_urls;
	const char *key;
	const char *advertise; /* this replica's URL, the key's value */
	int64_t ttl_s;	       /* of the etcd lease */
};

struct elect_stats {
	uint64_t requests[ELECT_STEPS], failures[ELECT_STEPS];
	uint64_t terms;	     /* campaigns won */
	uint64_t step_downs; /* terms ended before a clean shutdown */
};

struct elect {
	struct elect_config cfg;
	size_t url;		 /* the etcd URL in use */
	enum elect_step pending; /* the request out, ELECT_NONE when none */
	int64_t sent_ms;	 /* when it was sent */
	int64_t next_ms;	 /* when the next request goes */
	/* the lease */
	int64_t lease_id, lease_ttl_ms;
	int64_t revoke_id;     /* an ended term's lease, revoked once etcd answers:
						   its key would otherwise outlive the term (etcd
						   even extends leases when its own leader changes) */
	int64_t lease_sent_ms; /* the grant or keepalive that etcd answered last */
	/* the term */
	bool leading;
	int64_t epoch;	       /* this replica's, while leading */
	int64_t lead_until_ms; /* it grants before this, never after */
	int64_t margin_ms;
	bool check_next; /* the next renewal is a read of the key */
	/* the leader this replica knows of (itself while leading) */
	bool leader_known;
	int64_t leader_epoch;
	char leader[ETCD_VALUE_MAX + 1];
	bool etcd_ok; /* the last request was answered */
	char last_error[ETCD_WHY_MAX + 64];
	char step_down_why[96];
	struct elect_stats stats;
};

struct elect_request {
	enum elect_step step;
	char url[ELECT_URL_MAX + 32]; /* etcd URL + path */
	char *body;		      /* malloc'ed: the caller frees */
	int timeout_ms;
};

/*
 * --etcd's comma-separated URLs into urls[] (each without trailing '/'),
 * *ret_n of them: 0; -EINVAL with *bad, *bad_len the one that is not an
 * http:// or https:// URL of at most ELECT_URL_MAX; -E2BIG past
 * ELECT_URLS_MAX.
 */
int elect_split_urls(const char *list, char urls[ELECT_URLS_MAX][ELECT_URL_MAX + 1], size_t *ret_n,
		     const char **bad, size_t *bad_len);
void elect_init(struct elect *el, const struct elect_config *cfg, int64_t now_ms);
/* 1 and *req when a request is due now (none is out), 0 when not, -ENOMEM. */
int elect_due(struct elect *el, int64_t now_ms, struct elect_request *req);
/*
 * The answer to the request out: etcd's HTTP status (0: none came), its
 * body (text, len), and why when it is not 200. Returns what changed:
 * ELECT_WON, ELECT_LOST (a term ended), or 0.
 */
#define ELECT_WON 1
#define ELECT_LOST 2
int elect_answer(struct elect *el, int64_t now_ms, long status, const char *text, size_t len,
		 const char *why);
/* Whether this replica may grant now; a term past its deadline ends here (ELECT_LOST). */
int elect_tick(struct elect *el, int64_t now_ms);
bool elect_leading(const struct elect *el, int64_t now_ms);
/* When the machine next wants to run (a request, or the term's deadline). */
int64_t elect_next_ms(const struct elect *el);
/* The revoke for a clean shutdown while leading (ends the term at once); 0 when none. */
int elect_resign(struct elect *el, int64_t now_ms, struct elect_request *req);

#endif
