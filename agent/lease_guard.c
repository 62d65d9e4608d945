// SPDX-License-Identifier: Apache-2.0
/* A budget's lease ended in the kernel on time, by a thread of its own (lease_guard.h). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <netlink/socket.h>

#include "agent/lease_guard.h"
#include "lib/nl.h"
#include "lib/util.h"
#include "shaper/shaper.h"

struct lease_guard {
	pthread_t thread;
	int timer_fd, wake_fd, mtu;
	pthread_mutex_t lock;
	/* under lock */
	struct lease_guard_entry e[LEASE_GUARD_MAX];
	bool done[LEASE_GUARD_MAX];
	size_t n;
	bool stop;
	uint64_t fired, failed;
};

/* Under lock: the leases due by now into due[], the timer armed for the next one. */
static size_t take_due(struct lease_guard *g, int64_t now_ms, struct lease_guard_entry *due)
{
	struct itimerspec its = { 0 };
	int64_t next = INT64_MAX;
	size_t k = 0;

	for (size_t i = 0; i < g->n; i++) {
		if (g->done[i])
			continue;
		if (g->e[i].until_ms <= now_ms) {
			due[k++] = g->e[i];
			g->done[i] = true;
		} else if (g->e[i].until_ms < next) {
			next = g->e[i].until_ms;
		}
	}
	if (next != INT64_MAX) {
		its.it_value.tv_sec = next / 1000;
		its.it_value.tv_nsec = (long)(next % 1000) * 1000000L;
	}
	/* disarmed (all zero) when no lease runs */
	timerfd_settime(g->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
	return k;
}

static void lower(struct lease_guard *g, struct nl_sock **sk, const struct lease_guard_entry *e)
{
	int ifb, r;

	if (!*sk && tg_nl_route_open(sk) < 0) {
		*sk = NULL;
		r = -ENOMEM;
	} else {
		ifb = e->dir == BUDGET_INGRESS ? shaper_inet_in_ifindex(*sk)
					       : shaper_inet_ifindex(*sk);
		r = ifb ? shaper_ns_set_ceil(*sk, ifb, e->ns_class, e->after * 8, g->mtu) : -ENODEV;
		/* a download tree or class that is not there holds nothing to lower */
		if (e->dir == BUDGET_INGRESS && (r == -ENODEV || r == -ENOENT))
			return;
	}
	if (r < 0 && *sk) {
		/* what is left unread on it goes with it */
		nl_socket_free(*sk);
		*sk = NULL;
	}
	pthread_mutex_lock(&g->lock);
	if (r < 0)
		g->failed++;
	else
		g->fired++;
	pthread_mutex_unlock(&g->lock);
}

static void *run(void *arg)
{
	struct lease_guard *g = arg;
	struct lease_guard_entry due[LEASE_GUARD_MAX];
	struct nl_sock *sk = NULL;

	for (;;) {
		struct pollfd p[2] = { { .fd = g->timer_fd, .events = POLLIN },
				       { .fd = g->wake_fd, .events = POLLIN } };
		uint64_t v;
		size_t k;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			(void)!read(g->timer_fd, &v, sizeof(v));
		if (p[1].revents & POLLIN)
			(void)!read(g->wake_fd, &v, sizeof(v));
		pthread_mutex_lock(&g->lock);
		if (g->stop) {
			pthread_mutex_unlock(&g->lock);
			break;
		}
		k = take_due(g, time_boot_ms(), due);
		pthread_mutex_unlock(&g->lock);
		for (size_t i = 0; i < k; i++)
			lower(g, &sk, &due[i]);
	}
	nl_socket_free(sk);
	return NULL;
}

int lease_guard_start(struct lease_guard **ret, int mtu)
{
	struct lease_guard *g = calloc(1, sizeof(*g));
	int r;

	if (!g)
		return -ENOMEM;
	g->mtu = mtu;
	g->timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	g->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (g->timer_fd < 0 || g->wake_fd < 0) {
		r = -errno;
		goto fail;
	}
	pthread_mutex_init(&g->lock, NULL);
	r = -pthread_create(&g->thread, NULL, run, g);
	if (r < 0) {
		pthread_mutex_destroy(&g->lock);
		goto fail;
	}
	*ret = g;
	return 0;
fail:
	if (g->timer_fd >= 0)
		close(g->timer_fd);
	if (g->wake_fd >= 0)
		close(g->wake_fd);
	free(g);
	return r;
}

static void wake(struct lease_guard *g)
{
	uint64_t one = 1;

	(void)!write(g->wake_fd, &one, sizeof(one));
}

void lease_guard_set(struct lease_guard *g, const struct lease_guard_entry *e, size_t n)
{
	if (!g)
		return;
	if (n > LEASE_GUARD_MAX)
		n = LEASE_GUARD_MAX;
	pthread_mutex_lock(&g->lock);
	memcpy(g->e, e, n * sizeof(*e));
	memset(g->done, 0, sizeof(g->done));
	g->n = n;
	pthread_mutex_unlock(&g->lock);
	wake(g);
}

void lease_guard_counts(struct lease_guard *g, uint64_t *ret_fired, uint64_t *ret_failed)
{
	*ret_fired = *ret_failed = 0;
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	*ret_fired = g->fired;
	*ret_failed = g->failed;
	pthread_mutex_unlock(&g->lock);
}

void lease_guard_stop(struct lease_guard *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_mutex_unlock(&g->lock);
	wake(g);
	pthread_join(g->thread, NULL);
	pthread_mutex_destroy(&g->lock);
	close(g->timer_fd);
	close(g->wake_fd);
	free(g);
}
