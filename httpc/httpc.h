/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_HTTPC_H
#define TG_HTTPC_H

/*
 * An HTTP client for daemons with an epoll loop: one request at a time on
 * one libcurl easy handle, driven by libcurl's multi interface whose
 * sockets join the caller's epoll set and whose timer the caller runs. A
 * peer that is slow or gone costs the loop nothing but the request's
 * timeout; it never blocks the loop's other work. The easy handle is
 * reused, so a connection stays alive from one request to the next, until
 * an exchange fails (no answer, or a status other than 200 and 307): the
 * next request connects anew.
 *
 * The agent reports to the allocator and asks IMDS with it (a client
 * each); the allocator talks to etcd's JSON gateway with it. Programs
 * without a loop (tollgate-ipam; the allocator on its way out) make one
 * blocking request with httpc_request_sync: the only other way into libcurl.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct httpc;

struct httpc_tls {
	const char *ca_file;   /* the peer's CA bundle; NULL: the system's */
	const char *cert_file; /* a client certificate (PEM); NULL: none */
	const char *key_file;  /* its key (PEM) */
};

/*
 * A client whose sockets go into epfd; answers over max_body bytes fail.
 * user_agent is copied. 0 or -ENOMEM.
 */
int httpc_new(int epfd, const char *user_agent, size_t max_body, struct httpc **ret);
void httpc_free(struct httpc *c);
/* TLS files for https:// URLs (copied); 0 or -ENOMEM. */
int httpc_set_tls(struct httpc *c, const struct httpc_tls *tls);
bool httpc_busy(const struct httpc *c);
/*
 * POSTs body (JSON) to url, with one extra header ("Authorization: Bearer
 * ..."; NULL: none); -EBUSY while one runs, -ENAMETOOLONG, -ENOMEM, -EIO.
 */
int httpc_post(struct httpc *c, const char *url, const char *body, size_t len, const char *header,
	       int timeout_ms);
/*
 * GETs url, with one extra header ("Metadata: true"; NULL: none), never
 * through a proxy (IMDS is link-local); -EBUSY while one runs,
 * -ENAMETOOLONG, -ENOMEM, -EIO.
 */
int httpc_get(struct httpc *c, const char *url, const char *header, int timeout_ms);
/* Drops the request that runs, if any (its answer is never taken). */
void httpc_cancel(struct httpc *c);
/* Whether fd is one of this client's sockets (a loop may run several clients). */
bool httpc_has_socket(const struct httpc *c, int fd);
/* One of the client's sockets (not the loop's own) is ready. */
void httpc_socket(struct httpc *c, int fd, uint32_t events);
/* How long the loop may wait for the client's timer; -1: no limit. */
int httpc_timeout_ms(const struct httpc *c);
void httpc_run_timer(struct httpc *c);
/*
 * The finished request: 1 with a 200 answer (body valid until the next
 * post, NUL-terminated), -1 for a failure (why says it; *ret_status is the
 * HTTP status, 0 when there was none, and the body what came), 0 when none
 * finished.
 */
int httpc_take(struct httpc *c, long *ret_status, const char **ret_body, size_t *ret_len, char *why,
	       size_t why_size);
/* The Retry-After (seconds) of the last answer taken; 0 when it had none. */
long httpc_retry_after_s(const struct httpc *c);

/*
 * One request, blocking: a client of its own on an epoll set of its own,
 * driven until the answer or the request's timeout.
 */
struct httpc_sync {
	const char *url;
	const char *user_agent;
	const char *body; /* POSTed (JSON); NULL: a GET (never through a proxy) */
	size_t len;
	const char *header;	     /* one extra header; NULL: none */
	const struct httpc_tls *tls; /* NULL: none */
	int timeout_ms;
	int connect_timeout_ms; /* 0: timeout_ms */
	size_t max_body;	/* a longer answer fails (too_big) */
};
struct httpc_answer {
	bool ok;       /* a 200 answer, whole */
	bool answered; /* the transfer ended with an answer, of any status */
	long status;   /* the HTTP status; 0: none */
	char *body;    /* what came, NUL-terminated (httpc_answer_free) */
	size_t len;
	bool too_big;	    /* the answer was over max_body */
	long retry_after_s; /* 0: no Retry-After */
	const char *error;  /* libcurl's word on the transfer ("No error") */
	char why[256];	    /* why it failed, as httpc_take says it */
};
/* 0 with *ret filled (ok or not); -ENOMEM, -ENAMETOOLONG, -EIO when it could not start. */
int httpc_request_sync(const struct httpc_sync *req, struct httpc_answer *ret);
void httpc_answer_free(struct httpc_answer *a);

#endif
