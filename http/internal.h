/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_HTTP_INTERNAL_H
#define TG_HTTP_INTERNAL_H

/*
 * Between http/server.c and its bookkeeping (http/conntab.c); not part of
 * the module's public face. Pure: no sockets, the clock is a parameter.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http_admit {
	HTTP_ADMIT,
	HTTP_REFUSE_CLIENT,  /* the address holds per_client connections */
	HTTP_REFUSE_RESERVE, /* only the reserve is left, and the address holds one */
	HTTP_REFUSE_FULL,
};

/*
 * May a client that holds `held` of the `used` connections open another?
 * The last `reserve` of `max` slots go only to clients that hold none.
 */
enum http_admit http_admit(unsigned int max, unsigned int per_client, unsigned int reserve,
			   unsigned int used, unsigned int held);

/*
 * One accepted connection, from accept until libmicrohttpd closes it. The
 * deadline runs from `start_ms`: accept, then the end of each response.
 */
struct http_conn {
	int fd;	       /* -1: slot free */
	uint32_t addr; /* client IPv4, network byte order */
	int64_t start_ms;
	const void *owner; /* libmicrohttpd's connection, once it announced it */
	bool cut;	   /* shut down at its deadline, waiting to be closed */
	/* the table's: the deadline order (live, uncut), or the free list (next) */
	unsigned int prev, next;
};

/* A client address and the connections it holds (n == 0: an empty bucket). */
struct http_held {
	uint32_t addr;
	unsigned int n;
};

/*
 * A fixed table: slots never move, so a pointer stays valid until removal.
 * Sized for tens of thousands of kept-alive clients (the allocator's nodes),
 * every operation is O(1) but inserting a start time earlier than the
 * latest (never, with one clock): a free list of slots, an index by fd, the
 * connections each address holds in an open-addressing hash, and the
 * uncut connections in a list ordered by start time, whose head is the next
 * deadline.
 */
struct conntab {
	struct http_conn *slots;
	unsigned int cap, used;
	unsigned int free_head;	 /* a free slot, linked through next */
	unsigned int head, tail; /* the deadline order: oldest start first */
	unsigned int *by_fd;	 /* fd -> slot + 1; 0: none */
	size_t n_fd;
	struct http_held *held; /* held_mask + 1 buckets, linear probing */
	unsigned int held_mask, held_shift;
};

int conntab_init(struct conntab *t, unsigned int cap);
void conntab_free(struct conntab *t);
/* Connections the address holds. */
unsigned int conntab_held(const struct conntab *t, uint32_t addr);
/* NULL when full (or out of memory for the fd's index). */
struct http_conn *conntab_add(struct conntab *t, int fd, uint32_t addr, int64_t now_ms);
struct http_conn *conntab_find(struct conntab *t, int fd);
void conntab_remove(struct conntab *t, struct http_conn *c);
/* A response ended: the next request's deadline starts now. */
void conntab_restart(struct conntab *t, struct http_conn *c, int64_t now_ms);
/* Marks c cut (its deadline no longer runs): the caller shuts it down. */
void conntab_cut(struct conntab *t, struct http_conn *c);
/*
 * Marks the connections past their deadline as cut and writes up to `max`
 * of their fds into `fds` (the rest come on the next call). Returns how many.
 */
unsigned int conntab_expire(struct conntab *t, int64_t now_ms, unsigned int deadline_ms, int *fds,
			    unsigned int max);
/* When the next deadline falls (INT64_MAX: none); cut connections have none. */
int64_t conntab_next_deadline(const struct conntab *t, unsigned int deadline_ms);

/*
 * Strikes: the addresses whose requests the admit callback refused, each
 * counted over a window of HTTP_STRIKE_WINDOW_MS. One that earns more than
 * `limit` in a window is benched until the window after: its connections
 * are closed at accept, before libmicrohttpd (or TLS) spends anything on
 * them. A fixed table of HTTP_STRIKES_MAX addresses: a new one takes the
 * slot of its bucket whose window is oldest (a flood of addresses forgets
 * the quietest, never grows the table). Pure: the clock is a parameter.
 */
#define HTTP_STRIKES_MAX 4096
#define HTTP_STRIKE_WINDOW_MS 1000
struct http_strike {
	uint32_t addr; /* 0: free */
	uint32_t n;    /* refusals in the window */
	int64_t window_ms;
	int64_t benched_until_ms;
};
struct strikes {
	struct http_strike slot[HTTP_STRIKES_MAX];
};
/* One more refusal for addr at now; true when it is benched from now. */
bool strikes_add(struct strikes *s, uint32_t addr, unsigned int limit, int64_t now_ms);
/* Whether addr's connections are closed at accept now. */
bool strikes_benched(const struct strikes *s, uint32_t addr, int64_t now_ms);

#endif
