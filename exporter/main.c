// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-exporter: serves Tollgate's counters, IPAM state and its own
 * health to Prometheus.
 *
 *   tollgate-exporter [--listen ADDR:PORT] [--data-dir D] [--network N] [--log-level L]
 *                     [--page-cache-ms MS] [--deadline-ms MS]
 *
 * One thread, one event loop: epoll over a signalfd and the HTTP server
 * (http/http.h), which bounds connections per client and in all, the time
 * and memory of each, and collects the page at most once per cache window
 * however many scrape it. At start it keeps only CAP_NET_ADMIN (the
 * nftables dump needs it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "exporter/exporter.h"
#include "http/http.h"
#include "lib/cleanup.h"
#include "lib/util.h"

#define PAGE_MAX (64u << 20)		/* a scrape page is cut (and fails) past this */

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

static enum log_level log_level = LOG_INFO;

static void __attribute__((format(printf, 2, 0))) logv_(enum log_level lvl, const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char ts[32], msg[512];
	struct timespec now;
	struct tm tm;
	size_t n;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[lvl], msg);
}

static void __attribute__((format(printf, 2, 3))) logf_(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	logv_(lvl, fmt, ap);
	va_end(ap);
}

/* libmicrohttpd's notes on malformed requests: a client's doing, not ours. */
static void __attribute__((format(printf, 2, 0))) log_http(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	logv_(LOG_DEBUG, fmt, ap);
}

struct app {
	struct exporter *ex;
	struct expo page;
	struct http_server *http;
};

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>Tollgate exporter</title></head><body>\n"
	"<h1>Tollgate exporter</h1>\n<ul>\n<li><a href=\"metrics\">/metrics</a> "
	"(Prometheus text format 0.0.4)</li>\n<li><a href=\"healthz\">/healthz</a></li>\n</ul>\n"
	"</body></html>\n";

static void route(void *cls, const char *path, struct http_reply *ret)
{
	(void)cls;
	if (strcmp(path, "/metrics") == 0) {
		ret->page = true;
	} else if (strcmp(path, "/healthz") == 0) {
		*ret = (struct http_reply){ .status = 200, .content_type = "text/plain; charset=utf-8",
					    .body = "ok\n", .len = 3 };
	} else if (strcmp(path, "/") == 0) {
		*ret = (struct http_reply){ .status = 200, .content_type = "text/html; charset=utf-8",
					    .body = index_html, .len = sizeof(index_html) - 1 };
	}
}

/* A new page: the collectors, then the HTTP server's own counters. */
static int collect(void *cls, char **ret_buf, size_t *ret_len)
{
	struct app *a = cls;
	struct http_stats st;
	char *buf;
	size_t len;
	int r;

	expo_reset(&a->page);
	r = exporter_render(a->ex, &a->page);
	if (r >= 0) {
		http_get_stats(a->http, &st);
		exporter_render_http(&a->page, &st);
		if (a->page.overflow)
			r = -ENOBUFS;
	}
	if (r < 0) {
		logf_(LOG_ERROR, "msg=\"scrape failed\" err=\"%s\"", strerror(-r));
		return r;
	}
	/* The page goes to the server as it is (no copy of hundreds of kB). */
	buf = expo_take(&a->page, &len);
	if (!buf)
		return -ENODATA;
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/*
 * Keeps CAP_NET_ADMIN (reading nftables needs it) and nothing else: bounding
 * set first (that needs CAP_SETPCAP, still held), then the process's own.
 */
static int drop_capabilities(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	int keep = CAP_NET_ADMIN;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	if (!(data[0].permitted & (1u << keep)))
		return 0; /* not privileged: nothing to drop, the nft collector will say so */
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (c != keep && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	memset(data, 0, sizeof(data));
	data[0].effective = data[0].permitted = 1u << keep;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: tollgate-exporter [--listen ADDR:PORT|:PORT|HOST:PORT] [--data-dir DIR]\n"
	      "                         [--network NAME] [--log-level error|warn|info|debug]\n"
	      "                         [--page-cache-ms MS] [--deadline-ms MS]\n"
	      "defaults: --listen 127.0.0.1:9617 --data-dir /run/tollgate --network tollgate\n"
	      "          --page-cache-ms 1000 --deadline-ms 10000\n"
	      "endpoints: /metrics, /healthz, /\n",
	      f);
}

static int set_log_level(const char *name)
{
	static const struct {
		const char *name;
		enum log_level level;
	} levels[] = { { "error", LOG_ERROR }, { "warn", LOG_WARN }, { "info", LOG_INFO },
		       { "debug", LOG_DEBUG } };

	for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
		if (strcmp(name, levels[i].name) == 0) {
			log_level = levels[i].level;
			return 0;
		}
	return -EINVAL;
}

/* A whole number of milliseconds in [min, max]. */
static int parse_ms(const char *s, unsigned int min, unsigned int max, unsigned int *ret)
{
	char *end;
	unsigned long v;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*ret = (unsigned int)v;
	return 0;
}

static int listen_problem(const char *listen, int r)
{
	switch (r) {
	case -EAFNOSUPPORT:
		fprintf(stderr, "tollgate-exporter: --listen \"%s\": IPv6 is not served; give an IPv4 "
				"address or a name with one\n", listen);
		return 2;
	case -ENOENT:
		fprintf(stderr, "tollgate-exporter: --listen \"%s\": the name has no IPv4 address\n",
			listen);
		return 1;
	case -EAGAIN:
		fprintf(stderr, "tollgate-exporter: --listen \"%s\": the resolver did not answer; "
				"try again\n", listen);
		return 1;
	case -EINVAL:
		fprintf(stderr, "tollgate-exporter: --listen \"%s\" is not ADDR:PORT, :PORT or "
				"HOST:PORT (port 1-65535)\n", listen);
		usage(stderr);
		return 2;
	default:
		fprintf(stderr, "tollgate-exporter: --listen \"%s\": %s\n", listen, strerror(-r));
		return 1;
	}
}

/*
 * The event loop: the HTTP server and a signalfd for SIGTERM and SIGINT.
 * Returns the signal that ended it, or a negative errno.
 */
static int serve(struct http_server *http, const sigset_t *sigs)
{
	_cleanup_close_ int ep = epoll_create1(EPOLL_CLOEXEC);
	_cleanup_close_ int sfd = signalfd(-1, sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, evs[4];
	int last_err = 0;

	if (ep < 0 || sfd < 0)
		return -errno;
	ev.data.fd = sfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
		return -errno;
	ev.data.fd = http_fd(http);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) < 0)
		return -errno;
	for (;;) {
		int n = epoll_wait(ep, evs, ARRAY_SIZE(evs), http_timeout_ms(http)), r;

		if (n < 0 && errno != EINTR)
			return -errno;
		for (int i = 0; i < n; i++) {
			struct signalfd_siginfo si;

			if (evs[i].data.fd != sfd)
				continue;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
					return (int)si.ssi_signo;
		}
		/* Readable or timed out: the server does what is due either way. */
		r = http_run(http);
		if (r < 0 && r != last_err)
			logf_(LOG_WARN, "msg=\"cannot accept\" err=\"%s\"", strerror(-r));
		last_err = r;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "network", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "page-cache-ms", required_argument, NULL, 'c' },
		{ "deadline-ms", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = "127.0.0.1:9617", *data_dir = "/run/tollgate", *network = "tollgate";
	struct app app = { 0 };
	struct http_config cfg;
	char addr[INET_ADDRSTRLEN];
	sigset_t sigs;
	int opt, r;

	http_config_defaults(&cfg);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			listen = optarg;
			break;
		case 'd':
			data_dir = optarg;
			break;
		case 'n':
			network = optarg;
			break;
		case 'v':
			if (set_log_level(optarg) == 0)
				break;
			usage(stderr);
			return 2;
		case 'c':
			if (parse_ms(optarg, 0, 60000, &cfg.cache_ms) == 0)
				break;
			fprintf(stderr, "tollgate-exporter: --page-cache-ms \"%s\" is not 0-60000\n",
				optarg);
			return 2;
		case 't':
			if (parse_ms(optarg, 100, 600000, &cfg.deadline_ms) == 0)
				break;
			fprintf(stderr, "tollgate-exporter: --deadline-ms \"%s\" is not 100-600000\n",
				optarg);
			return 2;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	r = http_parse_listen(listen, HTTP_DEFAULT_PORT, &cfg.addr);
	if (r < 0)
		return listen_problem(listen, r);
	if (!name_is_safe(network, 128)) {
		fprintf(stderr, "tollgate-exporter: --network \"%s\" is not a valid network name\n",
			network);
		return 2;
	}
	if ((r = drop_capabilities()) < 0) {
		logf_(LOG_ERROR, "msg=\"cannot drop capabilities\" err=\"%s\"", strerror(-r));
		return 1;
	}
	app.ex = exporter_new(data_dir, network);
	if (!app.ex)
		return 1;
	expo_init(&app.page, PAGE_MAX);

	/* Signals arrive through the loop's signalfd; a closed peer is an error, not a signal. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	cfg.route = route;
	cfg.collect = collect;
	cfg.collect_cls = &app;
	cfg.page_type = "text/plain; version=0.0.4; charset=utf-8";
	cfg.log = log_http;
	inet_ntop(AF_INET, &cfg.addr.sin_addr, addr, sizeof(addr));
	r = http_start(&cfg, &app.http);
	if (r < 0) {
		logf_(LOG_ERROR, "msg=\"cannot listen\" listen=%s addr=%s:%u err=\"%s\"", listen, addr,
		      ntohs(cfg.addr.sin_port), strerror(-r));
	} else {
		logf_(LOG_INFO,
		      "msg=\"listening\" listen=%s addr=%s:%u data_dir=%s network=%s "
		      "page_cache_ms=%u deadline_ms=%u version=%s",
		      listen, addr, ntohs(cfg.addr.sin_port), data_dir, network, cfg.cache_ms,
		      cfg.deadline_ms, TG_VERSION);
		r = serve(app.http, &sigs);
		if (r < 0)
			logf_(LOG_ERROR, "msg=\"event loop failed\" err=\"%s\"", strerror(-r));
		else
			logf_(LOG_INFO, "msg=\"shutting down\" signal=%d", r);
		http_free(app.http);
	}
	expo_free(&app.page);
	exporter_free(app.ex);
	return r < 0 ? 1 : 0;
}
