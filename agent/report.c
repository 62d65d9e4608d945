// SPDX-License-Identifier: Apache-2.0
/*
 * The budget reports' HTTP client (agent/internal.h): one libcurl easy
 * handle on a multi handle whose sockets and timer live in the agent's own
 * epoll loop, so that an allocator that is slow or gone costs the loop
 * nothing but the request's timeout, and never blocks /metrics or a
 * declaration. The easy handle is reused: its connection stays alive from
 * one report to the next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include <curl/curl.h>

#include "agent/internal.h"
#include "budget/budget.h"

struct report_client {
	CURLM *multi;
	CURL *easy;
	struct curl_slist *headers;
	int epfd;
	int64_t timer_ms;		/* when libcurl wants its timer run; -1: never */
	bool busy;			/* a request is running */
	char *body;			/* the answer so far */
	size_t len;
	bool too_big;
	char url[600];
	char err[CURL_ERROR_SIZE];
	/* what the last request ended with, until taken */
	bool done;
	long status;
	CURLcode result;
};

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct report_client *c = arg;
	size_t len = size * n;
	char *b;

	if (c->len + len > BUDGET_BODY_MAX) {
		c->too_big = true;
		return 0; /* aborts the transfer */
	}
	b = realloc(c->body, c->len + len + 1);
	if (!b)
		return 0;
	memcpy(b + c->len, p, len);
	c->len += len;
	b[c->len] = '\0';
	c->body = b;
	return len;
}

/* libcurl says which of its sockets to watch: into the loop's epoll set. */
/* cppcheck-suppress constParameter ; libcurl's callback type fixes it */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *sockp)
{
	struct report_client *c = arg;
	struct epoll_event ev = { .data.fd = s };

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(c->epfd, EPOLL_CTL_DEL, s, NULL);
		curl_multi_assign(c->multi, s, NULL);
		return 0;
	}
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	/* sockp: set once the socket is in the set (curl_multi_assign) */
	if (sockp || (epoll_ctl(c->epfd, EPOLL_CTL_ADD, s, &ev) < 0 && errno == EEXIST))
		epoll_ctl(c->epfd, EPOLL_CTL_MOD, s, &ev);
	curl_multi_assign(c->multi, s, c);
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	struct report_client *c = arg;

	(void)multi;
	c->timer_ms = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	return 0;
}

int report_client_new(int epfd, struct report_client **ret)
{
	struct report_client *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->epfd = epfd;
	c->timer_ms = -1;
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	c->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!c->multi || !c->easy || !c->headers) {
		report_client_free(c);
		return -ENOMEM;
	}
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	*ret = c;
	return 0;
}

void report_client_free(struct report_client *c)
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
	free(c->body);
	free(c);
}

bool report_client_busy(const struct report_client *c)
{
	return c->busy;
}

int report_client_post(struct report_client *c, const char *base_url, const char *body,
		       size_t len, int timeout_ms)
{
	CURL *h = c->easy;
	size_t n = strlen(base_url);

	if (c->busy)
		return -EBUSY;
	while (n && base_url[n - 1] == '/')
		n--;
	if (n + sizeof(BUDGET_REPORT_PATH) > sizeof(c->url))
		return -ENAMETOOLONG;
	snprintf(c->url, sizeof(c->url), "%.*s%s", (int)n, base_url, BUDGET_REPORT_PATH);
	free(c->body);
	c->body = NULL;
	c->len = 0;
	c->too_big = false;
	c->done = false;
	c->err[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->err);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tollgate-agent/" TG_VERSION);
	if (curl_multi_add_handle(c->multi, h) != CURLM_OK)
		return -EIO;
	c->busy = true;
	return 0;
}

/* What finished, from libcurl's messages. */
static void collect(struct report_client *c)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(c->multi, &left))) {
		if (m->msg != CURLMSG_DONE || m->easy_handle != c->easy)
			continue;
		c->result = m->data.result;
		c->status = 0;
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
		curl_multi_remove_handle(c->multi, c->easy);
		c->busy = false;
		c->done = true;
	}
}

void report_client_socket(struct report_client *c, int fd, uint32_t events)
{
	int running, flags = ((events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
			     ((events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
			     ((events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);

	curl_multi_socket_action(c->multi, fd, flags, &running);
	collect(c);
}

int report_client_timeout_ms(const struct report_client *c)
{
	int64_t w;

	if (c->timer_ms < 0)
		return -1;
	w = c->timer_ms - now_ms();
	return w < 0 ? 0 : w > INT32_MAX ? INT32_MAX : (int)w;
}

void report_client_run_timer(struct report_client *c)
{
	int running;

	if (c->timer_ms < 0 || c->timer_ms > now_ms())
		return;
	c->timer_ms = -1;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	collect(c);
}

int report_client_take(struct report_client *c, long *ret_status, const char **ret_body,
		       size_t *ret_len, char *why, size_t why_size)
{
	if (!c->done)
		return 0;
	c->done = false;
	*ret_status = c->status;
	*ret_body = c->body ? c->body : "";
	*ret_len = c->len;
	if (c->too_big)
		snprintf(why, why_size, "the answer is over %d bytes", BUDGET_BODY_MAX);
	else if (c->result != CURLE_OK)
		snprintf(why, why_size, "%s", c->err[0] ? c->err : curl_easy_strerror(c->result));
	else if (c->status != 200)
		snprintf(why, why_size, "HTTP %ld", c->status);
	else
		why[0] = '\0';
	return c->result == CURLE_OK && c->status == 200 && !c->too_big ? 1 : -1;
}
