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
	HTTP_REFUSE_CLIENT,	/* the address holds per_client connections */
	HTTP_REFUSE_RESERVE,	/* only the reserve is left, and the address holds one */
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
	int fd;			/* -1: slot free */
	uint32_t addr;		/* client IPv4, network byte order */
	int64_t start_ms;
	const void *owner;	/* libmicrohttpd's connection, once it announced it */
	bool cut;		/* shut down at its deadline, waiting to be closed */
};

/* A fixed table: slots never move, so a pointer stays valid until removal. */
struct conntab {
	struct http_conn *slots;
	unsigned int cap, used;
};

int conntab_init(struct conntab *t, unsigned int cap);
void conntab_free(struct conntab *t);
/* Connections the address holds. */
unsigned int conntab_held(const struct conntab *t, uint32_t addr);
/* NULL when full. */
struct http_conn *conntab_add(struct conntab *t, int fd, uint32_t addr, int64_t now_ms);
struct http_conn *conntab_find(struct conntab *t, int fd);
void conntab_remove(struct conntab *t, struct http_conn *c);
/* A response ended: the next request's deadline starts now. */
void conntab_restart(struct http_conn *c, int64_t now_ms);
/*
 * Marks the connections past their deadline as cut and writes up to `max`
 * of their fds into `fds` (the rest come on the next call). Returns how many.
 */
unsigned int conntab_expire(struct conntab *t, int64_t now_ms, unsigned int deadline_ms, int *fds,
			    unsigned int max);
/* When the next deadline falls (INT64_MAX: none); cut connections have none. */
int64_t conntab_next_deadline(const struct conntab *t, unsigned int deadline_ms);

#endif
