// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's event loop (allocator/internal.h): epoll over a signalfd
 * (TERM and INT end it, HUP re-reads the files), an inotify watch on the
 * files' directories, the round's timerfd, the HTTP server, the role
 * changes the election's thread posts, and the --jwks URL's client; the
 * wait ends at the next deadline of either.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "allocator/internal.h"
#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/util.h"

#define ALLOC_STALL_MS 8000 /* allocator.loop.stall's */

static void drain(int fd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(fd, buf, sizeof(buf)) > 0) {
	}
}

/*
 * A change in a watched directory, or SIGHUP: a new policy is taken and its
 * timer armed, a new key set taken, new TLS files served.
 */
static void reload(struct app *app, bool hup)
{
	int r = alloc_reload(app, false);
	uint64_t tls;

	if (r == 0 && hup)
		tg_log(TG_LOG_INFO, "msg=\"SIGHUP: the config is unchanged\"");
	if (r > 0 && alloc_arm_rounds(app) < 0)
		tg_log(TG_LOG_ERROR, "msg=\"cannot re-arm the round's timer\" err=\"%m\"");
	alloc_trust_reload(app, hup);
	tls = alloc_tls_digest(app);
	if (!app->cli.tls_cert || !tls || tls == app->tls_digest)
		return;
	r = http_tls_reload(app->http);
	if (r < 0) {
		tg_log(TG_LOG_ERROR,
		       "msg=\"the new TLS files were refused; the certificate in force stays\" "
		       "err=%s",
		       LOGFMT_Q(app->tls_err[0] ? app->tls_err : strerror(-r)));
		return;
	}
	app->tls_digest = tls;
	tg_log(TG_LOG_INFO, "msg=\"serving the new TLS certificate\" cert=%s",
	       LOGFMT_Q(app->cli.tls_cert));
}

static int add(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int alloc_loop(struct app *app)
{
	_cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);
	_cleanup_close_ int sfd = signalfd(-1, &app->sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	struct epoll_event evs[8];
	int r;

	if (ep < 0 || sfd < 0)
		return -errno;
	if ((r = add(ep, sfd)) < 0 || (r = add(ep, http_fd(app->http))) < 0 ||
	    (r = add(ep, app->inotify_fd)) < 0 || (r = add(ep, app->timer_fd)) < 0)
		return r;
	/* the election's etcd client: its sockets join this set as libcurl opens them */
	if ((r = alloc_elect_start(app)) < 0 || (r = add(ep, alloc_elect_fd(app))) < 0 ||
	    (r = alloc_trust_start(app, ep)) < 0)
		return r;
	for (;;) {
		int wait = http_timeout_ms(app->http), t = alloc_trust_timeout_ms(app), n;

		if (t >= 0 && (wait < 0 || t < wait))
			wait = t;
		bool changed = false, hup = false;

		n = epoll_wait(ep, evs, 8, wait);

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == sfd) {
				struct signalfd_siginfo si;

				while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					if (si.ssi_signo == SIGHUP) {
						hup = changed = true;
						continue;
					}
					tg_log(TG_LOG_INFO, "msg=\"shutting down\" signal=%u",
					       si.ssi_signo);
					alloc_elect_stop(app);
					return 0;
				}
			} else if (fd == app->inotify_fd) {
				drain(fd);
				changed = true;
			} else if (fd == app->timer_fd) {
				uint64_t expired;

				/* late rounds are not made up: one round sees every report */
				if (read(fd, &expired, sizeof(expired)) == (ssize_t)sizeof(expired))
					alloc_round(app);
			} else if (fd == alloc_elect_fd(app)) {
				alloc_elect_changes(app);
			} else if (alloc_trust_has_socket(app, fd)) {
				alloc_trust_socket(app, fd, evs[i].events);
			}
		}
		alloc_trust_run(app);
		/* test builds: the loop held, as a flood of reports would hold it (the lease is not) */
		if (TG_FAILPOINT("allocator.loop.stall", NULL) < 0)
			usleep(ALLOC_STALL_MS * 1000);
		if (changed)
			reload(app, hup);
		http_run(app->http);
	}
}
