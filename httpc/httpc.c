// SPDX-License-Identifier: Apache-2.0
/*
 * One request at a time on a reused libcurl easy handle, on a multi handle
 * whose sockets and timer live in the caller's epoll loop (httpc/httpc.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <time.h>

#include <curl/curl.h>

#include "httpc/httpc.h"
#include "lib/buf.h"
#include "lib/util.h"

/* One request at a time: a connection, and libcurl's happy-eyeballs second try. */
#define HTTPC_SOCKS_MAX 8

struct httpc {
	CURLM *multi;
	CURL *easy;
	struct curl_slist *headers;
	struct curl_slist *get_headers;	 /* the running GET's own */
	struct curl_slist *post_headers; /* the running POST's, with its extra header */
	int epfd;
	int socks[HTTPC_SOCKS_MAX]; /* the sockets libcurl has in the loop's set */
	size_t n_socks;
	int64_t timer_ms; /* when libcurl wants its timer run; -1: never */
	bool busy;	  /* a request is running */
	struct buf body;  /* the answer so far, up to the client's max_body */
	size_t max_body;
	char *user_agent;
	char *tls[3]; /* CA, certificate, key */
	char url[600];
	char err[CURL_ERROR_SIZE];
	/* what the last request ended with, until taken */
	bool done;
	long status;
	CURLcode result;
	long retry_after_s;
	bool fresh;		/* the last exchange failed: the next one connects anew */
	int connect_timeout_ms; /* 0: the request's whole timeout */
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct httpc *c = arg;
	size_t len = size * n;

	buf_add(&c->body, p, len);
	return c->body.failed ? 0 : len; /* 0 aborts the transfer */
}

/* libcurl says which of its sockets to watch: into the loop's epoll set. */
/* cppcheck-suppress constParameter ; libcurl's callback type fixes it */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct httpc *c = arg;
	struct epoll_event ev = { .data.fd = s };

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(c->epfd, EPOLL_CTL_DEL, s, NULL);
		curl_multi_assign(c->multi, s, NULL);
		for (size_t i = 0; i < c->n_socks; i++)
			if (c->socks[i] == s)
				c->socks[i] = c->socks[--c->n_socks];
		return 0;
	}
	if (!sockp && c->n_socks < HTTPC_SOCKS_MAX)
		c->socks[c->n_socks++] = s;
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	/* sockp: set once the socket is in the set (curl_multi_assign) */
	if (sockp || (epoll_ctl(c->epfd, EPOLL_CTL_ADD, s, &ev) < 0 && errno == EEXIST))
		epoll_ctl(c->epfd, EPOLL_CTL_MOD, s, &ev);
	curl_multi_assign(c->multi, s, c);
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	struct httpc *c = arg;

	(void)multi;
	c->timer_ms = timeout_ms < 0 ? -1 : time_mono_ms() + timeout_ms;
	return 0;
}

int httpc_new(int epfd, const char *user_agent, size_t max_body, struct httpc **ret)
{
	struct httpc *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->epfd = epfd;
	c->timer_ms = -1;
	c->max_body = max_body;
	c->body.max = max_body + 1;
	c->user_agent = strdup(user_agent);
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!c->multi || !c->easy || !c->headers || !c->user_agent) {
		httpc_free(c);
		return -ENOMEM;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	*ret = c;
	return 0;
}

void httpc_free(struct httpc *c)
{
	if (!c)
		return;
	if (c->busy)
		curl_multi_remove_handle(c->multi, c->easy);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->headers);
	curl_slist_free_all(c->get_headers);
	curl_slist_free_all(c->post_headers);
	for (size_t i = 0; i < 3; i++)
		free(c->tls[i]);
	free(c->user_agent);
	buf_free(&c->body);
	free(c);
}

int httpc_set_tls(struct httpc *c, const struct httpc_tls *tls)
{
	const char *f[3] = { tls->ca_file, tls->cert_file, tls->key_file };

	for (size_t i = 0; i < 3; i++) {
		free(c->tls[i]);
		c->tls[i] = f[i] ? strdup(f[i]) : NULL;
		if (f[i] && !c->tls[i])
			return -ENOMEM;
	}
	return 0;
}

void httpc_cancel(struct httpc *c)
{
	if (!c->busy)
		return;
	curl_multi_remove_handle(c->multi, c->easy);
	c->busy = false;
	c->done = false;
}

bool httpc_busy(const struct httpc *c)
{
	return c->busy;
}

/* A request on the reused handle; the method's own options are set by the caller. */
static int start(struct httpc *c, const char *url, struct curl_slist *headers, int timeout_ms)
{
	CURL *h = c->easy;

	if (c->busy)
		return -EBUSY;
	if (strlen(url) >= sizeof(c->url))
		return -ENAMETOOLONG;
	snprintf(c->url, sizeof(c->url), "%s", url);
	buf_free(&c->body);
	c->done = false;
	c->err[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(c->connect_timeout_ms > 0 ? c->connect_timeout_ms : timeout_ms));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->err);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	/*
	 * A kept-alive connection to a peer that keeps failing (behind a
	 * Service: always the same replica) is dropped for a new one, which
	 * the Service may send elsewhere.
	 */
	curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, c->fresh ? 1L : 0L);
	if (c->tls[0])
		curl_easy_setopt(h, CURLOPT_CAINFO, c->tls[0]);
	if (c->tls[1])
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->tls[1]);
	if (c->tls[2])
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->tls[2]);
	if (curl_multi_add_handle(c->multi, h) != CURLM_OK)
		return -EIO;
	c->busy = true;
	return 0;
}

int httpc_post(struct httpc *c, const char *url, const char *body, size_t len, const char *header,
	       int timeout_ms)
{
	struct curl_slist *h = c->headers;

	if (c->busy)
		return -EBUSY;
	curl_slist_free_all(c->post_headers);
	c->post_headers = NULL;
	if (header) {
		c->post_headers = curl_slist_append(NULL, "Content-Type: application/json");
		if (!c->post_headers || !curl_slist_append(c->post_headers, header))
			return -ENOMEM;
		h = c->post_headers;
	}
	curl_easy_setopt(c->easy, CURLOPT_NOPROXY, NULL);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(c->easy, CURLOPT_COPYPOSTFIELDS, body);
	return start(c, url, h, timeout_ms);
}

int httpc_get(struct httpc *c, const char *url, const char *header, int timeout_ms)
{
	if (c->busy)
		return -EBUSY;
	curl_slist_free_all(c->get_headers);
	c->get_headers = header ? curl_slist_append(NULL, header) : NULL;
	if (header && !c->get_headers)
		return -ENOMEM;
	curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	/* what a daemon GETs is link-local (IMDS): never through a proxy */
	curl_easy_setopt(c->easy, CURLOPT_NOPROXY, "*");
	return start(c, url, c->get_headers, timeout_ms);
}

/* What finished, from libcurl's messages. */
static void collect(struct httpc *c)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(c->multi, &left))) {
		if (m->msg != CURLMSG_DONE || m->easy_handle != c->easy)
			continue;
		c->result = m->data.result;
		c->status = 0;
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
		{
			curl_off_t ra = 0;

			curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &ra);
			c->retry_after_s = ra > 0 && ra < 86400 ? (long)ra
					   : ra >= 86400	? 86400
								: 0;
		}
		curl_multi_remove_handle(c->multi, c->easy);
		/* a redirect is an answer: the peer works, it just does not lead */
		c->fresh = c->result != CURLE_OK || (c->status != 200 && c->status != 307);
		c->busy = false;
		c->done = true;
	}
}

void httpc_socket(struct httpc *c, int fd, uint32_t events)
{
	int running, flags = ((events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
			     ((events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
			     ((events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);

	curl_multi_socket_action(c->multi, fd, flags, &running);
	collect(c);
}

int httpc_timeout_ms(const struct httpc *c)
{
	int64_t w;

	if (c->timer_ms < 0)
		return -1;
	w = c->timer_ms - time_mono_ms();
	return w < 0 ? 0 : w > INT32_MAX ? INT32_MAX : (int)w;
}

void httpc_run_timer(struct httpc *c)
{
	int running;

	if (c->timer_ms < 0 || c->timer_ms > time_mono_ms())
		return;
	c->timer_ms = -1;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	collect(c);
}

int httpc_take(struct httpc *c, long *ret_status, const char **ret_body, size_t *ret_len, char *why,
	       size_t why_size)
{
	if (!c->done)
		return 0;
	c->done = false;
	*ret_status = c->status;
	*ret_body = c->body.p ? c->body.p : "";
	*ret_len = c->body.len;
	if (c->body.too_big)
		snprintf(why, why_size, "the answer is over %zu bytes", c->max_body);
	else if (c->result != CURLE_OK)
		snprintf(why, why_size, "%s", c->err[0] ? c->err : curl_easy_strerror(c->result));
	else if (c->status != 200)
		snprintf(why, why_size, "HTTP %ld", c->status);
	else
		why[0] = '\0';
	return c->result == CURLE_OK && c->status == 200 && !c->body.too_big ? 1 : -1;
}

long httpc_retry_after_s(const struct httpc *c)
{
	return c->retry_after_s;
}

bool httpc_has_socket(const struct httpc *c, int fd)
{
	for (size_t i = 0; i < c->n_socks; i++)
		if (c->socks[i] == fd)
			return true;
	return false;
}

/* Runs c's request on its own epoll set until it ends; false past the deadline. */
static bool drive(struct httpc *c, int epfd, int64_t deadline_ms)
{
	while (!c->done) {
		struct epoll_event ev[HTTPC_SOCKS_MAX];
		int64_t left = deadline_ms - time_mono_ms();
		int wait = httpc_timeout_ms(c), n;

		if (left <= 0)
			return false;
		if (wait < 0 || wait > left)
			wait = (int)left;
		n = epoll_wait(epfd, ev, HTTPC_SOCKS_MAX, wait);
		if (n < 0 && errno != EINTR)
			return false;
		for (int i = 0; i < n; i++)
			httpc_socket(c, ev[i].data.fd, ev[i].events);
		httpc_run_timer(c);
	}
	return true;
}

int httpc_request_sync(const struct httpc_sync *req, struct httpc_answer *ret)
{
	struct httpc *c = NULL;
	const char *body;
	int epfd, r;

	memset(ret, 0, sizeof(*ret));
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return -errno;
	r = httpc_new(epfd, req->user_agent, req->max_body, &c);
	if (r == 0 && req->tls)
		r = httpc_set_tls(c, req->tls);
	if (r == 0) {
		c->connect_timeout_ms = req->connect_timeout_ms;
		r = req->body ? httpc_post(c, req->url, req->body, req->len, req->header,
					   req->timeout_ms)
			      : httpc_get(c, req->url, req->header, req->timeout_ms);
	}
	if (r < 0)
		goto out;
	/* libcurl's own timeout ends the request; this is only a bound on the wait */
	if (!drive(c, epfd, time_mono_ms() + req->timeout_ms + 1000)) {
		httpc_cancel(c);
		c->done = true;
		c->result = CURLE_OPERATION_TIMEDOUT;
		c->status = 0;
		c->err[0] = '\0';
	}
	ret->ok = httpc_take(c, &ret->status, &body, &ret->len, ret->why, sizeof(ret->why)) == 1;
	ret->answered = c->result == CURLE_OK;
	ret->error = curl_easy_strerror(c->result);
	ret->too_big = c->body.too_big;
	ret->retry_after_s = c->retry_after_s;
	ret->body = buf_take(&c->body, NULL);
	if (!ret->body) {
		ret->body = strdup("");
		r = ret->body ? 0 : -ENOMEM;
	}
out:
	httpc_free(c);
	close(epfd);
	return r;
}

void httpc_answer_free(struct httpc_answer *a)
{
	free(a->body);
	memset(a, 0, sizeof(*a));
}
