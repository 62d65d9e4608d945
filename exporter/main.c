// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-exporter: serves Tollgate's counters, IPAM state and its own
 * health to Prometheus.
 *
 *   tollgate-exporter [--listen ADDR:PORT] [--data-dir D] [--network N] [--log-level L]
 *
 * One libmicrohttpd thread polls every connection (epoll), so a slow client
 * never blocks a scrape; connections, their memory and their idle time are
 * bounded. At start it keeps only CAP_NET_ADMIN (the nftables dump needs it).
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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "exporter/exporter.h"
#include "lib/util.h"

#define PAGE_MAX (64u << 20)		/* a scrape page is cut (and fails) past this */
#define CONNECTIONS_MAX 64
#define CONNECTION_TIMEOUT_S 10
#define CONNECTION_MEMORY 32768		/* request line + headers; larger gets 431/414 */

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

static enum log_level log_level = LOG_INFO;

static void __attribute__((format(printf, 2, 3))) logf_(enum log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char ts[32], msg[512];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One line per record, written at once. */
	fprintf(stderr, "%s.%03ldZ level=%s %s\n", ts, now.tv_nsec / 1000000, names[lvl], msg);
}

struct server {
	struct exporter *ex;
	struct expo page;
};

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>Tollgate exporter</title></head><body>\n"
	"<h1>Tollgate exporter</h1>\n<ul>\n<li><a href=\"metrics\">/metrics</a> "
	"(Prometheus text format 0.0.4)</li>\n<li><a href=\"healthz\">/healthz</a></li>\n</ul>\n"
	"</body></html>\n";

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status, const char *type,
			     const char *body, size_t len)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* The page goes to MHD as it is (no copy of a page of hundreds of kB); MHD frees it. */
static enum MHD_Result reply_page(struct MHD_Connection *conn, struct expo *page)
{
	struct MHD_Response *resp;
	enum MHD_Result r;
	size_t len;
	char *body = expo_take(page, &len);

	resp = MHD_create_response_from_buffer_with_free_callback(len, body, free);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"text/plain; version=0.0.4; charset=utf-8");
	r = MHD_queue_response(conn, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct server *srv = cls;
	static const char text[] = "text/plain; charset=utf-8";

	(void)version;
	(void)upload_data;
	/* The first call only announces the request; answer on the second. */
	if (!*con_cls) {
		*con_cls = (void *)1;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is never wanted: drop it */
		return MHD_YES;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		logf_(LOG_DEBUG, "msg=\"method not allowed\" method=%.16s path=%.64s", method, url);
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
	}
	if (strcmp(url, "/metrics") == 0) {
		int r;

		expo_reset(&srv->page);
		r = exporter_render(srv->ex, &srv->page);
		if (r < 0) {
			logf_(LOG_ERROR, "msg=\"scrape failed\" err=\"%s\"", strerror(-r));
			return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "scrape failed\n", 14);
		}
		return reply_page(conn, &srv->page);
	}
	if (strcmp(url, "/healthz") == 0)
		return reply(conn, MHD_HTTP_OK, text, "ok\n", 3);
	if (strcmp(url, "/") == 0)
		return reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", index_html,
			     sizeof(index_html) - 1);
	return reply(conn, MHD_HTTP_NOT_FOUND, text, "not found\n", 10);
}

static int parse_listen(const char *s, struct sockaddr_in *ret)
{
	char host[64] = "";
	const char *colon = strrchr(s, ':');
	char *end;
	long port;

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->sin_family = AF_INET;
	ret->sin_port = htons((uint16_t)port);
	if (!host[0])
		ret->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, host, &ret->sin_addr) != 1)
		return -EINVAL;
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
	fputs("usage: tollgate-exporter [--listen ADDR:PORT] [--data-dir DIR] [--network NAME]\n"
	      "                         [--log-level error|warn|info|debug]\n"
	      "defaults: --listen 127.0.0.1:9617 --data-dir /run/tollgate --network tollgate\n"
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

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(name, levels[i].name) == 0) {
			log_level = levels[i].level;
			return 0;
		}
	return -EINVAL;
}

static void block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

/* The HTTP server: bounded connections, per client and in all, each with a deadline. */
static struct MHD_Daemon *start_http(struct server *srv, const struct sockaddr_in *addr)
{
	return MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				on_request, srv, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)addr,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONNECTIONS_MAX,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)16,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONNECTION_TIMEOUT_S,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
				MHD_OPTION_END);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "network", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *listen = "127.0.0.1:9617", *data_dir = "/run/tollgate", *network = "tollgate";
	struct server srv = { 0 };
	struct sockaddr_in addr;
	struct MHD_Daemon *d;
	sigset_t sigs;
	int opt, sig = 0, r;

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
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || parse_listen(listen, &addr) < 0) {
		if (optind >= argc)
			fprintf(stderr, "tollgate-exporter: --listen \"%s\" is not ADDR:PORT\n", listen);
		usage(stderr);
		return 2;
	}
	if (!name_is_safe(network, 128)) {
		fprintf(stderr, "tollgate-exporter: --network \"%s\" is not a valid network name\n",
			network);
		return 2;
	}
	if ((r = drop_capabilities()) < 0) {
		logf_(LOG_ERROR, "msg=\"cannot drop capabilities\" err=\"%s\"", strerror(-r));
		return 1;
	}
	srv.ex = exporter_new(data_dir, network);
	if (!srv.ex)
		return 1;
	expo_init(&srv.page, PAGE_MAX);

	/* Signals are taken synchronously by main; the HTTP thread never sees them. */
	block_signals(&sigs);

	d = start_http(&srv, &addr);
	if (d) {
		logf_(LOG_INFO, "msg=\"listening\" listen=%s data_dir=%s network=%s version=%s",
		      listen, data_dir, network, TG_VERSION);
		while (sig != SIGTERM && sig != SIGINT)
			if (sigwait(&sigs, &sig) != 0)
				break;
		logf_(LOG_INFO, "msg=\"shutting down\" signal=%d", sig);
		MHD_stop_daemon(d);
	} else {
		logf_(LOG_ERROR, "msg=\"cannot listen\" listen=%s err=\"%m\"", listen);
	}
	expo_free(&srv.page);
	exporter_free(srv.ex);
	return d ? 0 : 1;
}
