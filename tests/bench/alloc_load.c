// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's load: N nodes, each reporting its budgeted namespaces
 * once a second to one tollgate-allocator, as agents do (one kept-alive
 * HTTP/1.1 connection per node, POST /v1/report, the grants it answers
 * applied in the next report, the id of the policy it last heard named in
 * the next report, so that only a node's first answer carries the policy).
 * The nodes' reports are spread evenly over each second. For
 * tests/bench/bench_allocator.sh.
 *
 *   alloc_load --url http://ADDR:PORT --nodes N [--seconds D] [--warmup W]
 *              [--namespaces K] [--per-node P] [--src-base A.B.C.D]
 *              [--pid PID] [--targets]
 *
 * Node i reports namespaces ns(P*i) .. ns(P*i+P-1) (of K, "ns000".."ns<K-1>",
 * which the allocator's policy budgets) from source address src-base + i
 * (the bench makes the whole range local: each simulated node has an
 * address of its own, as nodes do). After W seconds of warm-up (connections
 * made, the allocator past its learning lease) it measures D seconds: each
 * report's latency (from the moment it was due to its answer), and, with
 * --pid, the allocator's CPU (utime + stime of /proc/PID/stat over the D
 * seconds) and its peak RSS (VmHWM). --targets prints PASS or MISS beside
 * each against the 7,500-node targets (p99 <= 50 ms, <= 1 core, <= 200 MiB).
 * p99_sent_ms is the p99 from the moment each report was handed to libcurl
 * instead (what the generator's own lateness adds is left out).
 * First one line for scripts ("result key=value ..."), then the same for
 * people, with the generator's own CPU, how late it sent reports and how
 * long the allocator and the generator waited for a CPU (alloc_wait,
 * generator_wait: seconds per second, from /proc/PID/schedstat), so
 * that a run the generator could not keep up with shows as one, and how
 * many answers carried the policy (each node's first, and one after each
 * policy change). Exits 1
 * when fewer than 99 % of the due reports were answered.
 *
 * libcurl's multi handle keeps its connections and host names in hash
 * tables of a fixed 97 and 71 buckets: one multi handle for 3,000 nodes
 * spent 2.4 ms of CPU per report, and the generator, not the allocator,
 * set the latency. So the nodes are
 * split into groups of GROUP nodes, a multi handle each, all driven by
 * libcurl's socket interface from one epoll set; and each node names the
 * allocator by a host name of its own (n<i>.alloc, pinned to the address
 * with CURLOPT_RESOLVE), so that each connection bundle holds one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <json-c/json.h>

#define MAX_PER_NODE 8
#define GROUP 200 /* nodes per multi handle (each holds 2 descriptors of its own) */
#define BODY_MAX 2048
#define ANSWER_MAX 2048	       /* an answer's buffer, kept between reports */
#define ANSWER_LIMIT (1 << 20) /* one carrying the policy grows it up to this */
#define POLICY_ID_MAX 32

struct ns_state {
	int ns;
	uint64_t demand; /* bytes/s the namespace's pods would send */
	uint64_t grant;	 /* from the last answer; 0: none yet */
	uint64_t safe_share;
	uint32_t nodes;
};

struct group {
	CURLM *m;
	unsigned int index;
	int64_t timer_us; /* libcurl's timeout; -1: none */
};

struct node {
	CURL *h;
	struct group *g;
	struct curl_slist *resolve;
	struct curl_slist *headers; /* with --tokens: the node's own, its token in them */
	char url[96], src[48];
	char body[BODY_MAX];
	char *answer; /* answer_cap bytes, NUL-terminated */
	size_t answer_len, answer_cap;
	char policy[POLICY_ID_MAX + 1]; /* the policy id last heard; "": none */
	bool busy;
	int64_t due_us;	 /* when the report in flight was due */
	int64_t sent_us; /* when it was handed to libcurl (late when the generator is) */
	int64_t last_us; /* when the last report was sent (its interval) */
	uint64_t seq;
	struct ns_state use[MAX_PER_NODE];
};

struct opts {
	const char *url;
	unsigned int nodes, seconds, warmup, namespaces, per_node;
	const char *src_base;
	int pid;
	bool targets;
	const char *tokens; /* one token per line, node i's on line i */
	const char *grants; /* where the last grants go, one "node namespace grant" a line */
	bool flood;
	unsigned int sources, spam, slow, big; /* the flood's (flood.c) */
	const char *kid;
};

static int ep = -1;

static struct {
	unsigned int busy;	  /* reports in flight */
	double *lat_ms, *sent_ms; /* from the moment due; from the moment sent */
	size_t n_lat, cap_lat;
	uint64_t ok, http_errors, curl_errors, bad_answers, skipped;
	uint64_t policy_answers; /* answers that carried a policy, warm-up too */
	int64_t max_lag_us;
} st;

static int64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static uint32_t rnd(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* The answer so far, grown as it arrives (past ANSWER_LIMIT the rest is dropped: not JSON). */
static size_t on_data(char *p, size_t size, size_t nmemb, void *cls)
{
	struct node *n = cls;
	size_t len = size * nmemb;

	if (n->answer_len + len >= n->answer_cap) {
		size_t cap = n->answer_cap;
		char *a;

		while (cap <= n->answer_len + len && cap < ANSWER_LIMIT)
			cap *= 2;
		a = cap > n->answer_cap ? realloc(n->answer, cap) : NULL;
		if (a) {
			n->answer = a;
			n->answer_cap = cap;
		}
		if (n->answer_len + len >= n->answer_cap)
			len = n->answer_cap - 1 - n->answer_len;
	}
	memcpy(n->answer + n->answer_len, p, len);
	n->answer_len += len;
	n->answer[n->answer_len] = '\0';
	return size * nmemb;
}

/* The policy id an answer carries ("policy": {"id": ...}), into the node's next reports. */
static void take_policy(struct node *n, json_object *root)
{
	json_object *policy, *id;
	const char *s;
	size_t len;

	if (!json_object_object_get_ex(root, "policy", &policy) ||
	    !json_object_object_get_ex(policy, "id", &id) ||
	    !json_object_is_type(id, json_type_string))
		return;
	s = json_object_get_string(id);
	len = strlen(s);
	if (!len || len > POLICY_ID_MAX || strspn(s, "0123456789abcdef") != len)
		return;
	memcpy(n->policy, s, len + 1);
	st.policy_answers++;
}

/* The grants of an answer, into the node's namespaces. False when it is not one. */
static bool take_answer(struct node *n, unsigned int per_node)
{
	json_object *root = json_tokener_parse(n->answer), *grants;
	bool ok = false;

	if (!root)
		return false;
	take_policy(n, root);
	if (json_object_object_get_ex(root, "grants", &grants) &&
	    json_object_is_type(grants, json_type_array)) {
		ok = true;
		for (size_t i = 0; i < json_object_array_length(grants); i++) {
			json_object *g = json_object_array_get_idx(grants, i), *v;
			const char *ns;
			int k;

			if (!json_object_object_get_ex(g, "namespace", &v))
				continue;
			ns = json_object_get_string(v);
			if (!ns || strncmp(ns, "ns", 2) != 0)
				continue;
			k = atoi(ns + 2);
			for (unsigned int j = 0; j < per_node; j++) {
				struct ns_state *u = &n->use[j];

				if (u->ns != k)
					continue;
				if (json_object_object_get_ex(g, "grant", &v))
					u->grant = (uint64_t)json_object_get_int64(v);
				if (json_object_object_get_ex(g, "safeShare", &v))
					u->safe_share = (uint64_t)json_object_get_int64(v);
				if (json_object_object_get_ex(g, "nodes", &v))
					u->nodes = (uint32_t)json_object_get_int64(v);
			}
		}
	}
	json_object_put(root);
	return ok;
}

/* The node's next report: what its namespaces sent since the last, at the grants it applied. */
static size_t build_report(struct node *n, unsigned int idx, unsigned int per_node, int64_t now)
{
	const uint64_t fallback = 1250000, limit = 125000000; /* 10M and 1G, bytes/s */
	uint32_t interval = n->last_us ? (uint32_t)((now - n->last_us) / 1000) : 0;
	size_t len;
	int w;

	n->last_us = now;
	w = snprintf(n->body, sizeof(n->body),
		     "{\"version\":1,\"node\":\"node-%05u\",\"seq\":%llu,%s%s%s"
		     "\"budgets\":[",
		     idx, (unsigned long long)++n->seq, n->policy[0] ? "\"policy\":\"" : "",
		     n->policy, n->policy[0] ? "\"," : "");
	len = (size_t)w;
	for (unsigned int j = 0; j < per_node; j++) {
		const struct ns_state *u = &n->use[j];
		uint64_t applied = u->grant ? u->grant : fallback;
		uint64_t rate = u->demand < applied ? u->demand : applied;

		w = snprintf(n->body + len, sizeof(n->body) - len,
			     "%s{\"namespace\":\"ns%03d\",\"sentBytes\":%llu,\"intervalMs\":%u,"
			     "\"saturated\":%s,\"applied\":%llu,\"limit\":%llu,\"state\":\"%s\","
			     "\"pods\":%u,\"safeShare\":%llu,\"nodes\":%u}",
			     j ? "," : "", u->ns, (unsigned long long)(rate * interval / 1000),
			     interval, u->demand > applied ? "true" : "false",
			     (unsigned long long)applied, (unsigned long long)limit,
			     u->grant ? "granted" : "fallback", 1 + (idx + j) % 4,
			     (unsigned long long)u->safe_share, u->nodes);
		len += (size_t)w;
	}
	len += (size_t)snprintf(n->body + len, sizeof(n->body) - len, "]}");
	return len;
}

static int setup_node(struct node *n, unsigned int i, const struct opts *o, struct in_addr src,
		      const char *host, unsigned int port, struct curl_slist *headers,
		      const char *token)
{
	char pin[128];
	uint32_t seed = 2463534242u ^ (i * 2654435761u);

	if (token) {
		size_t len = strlen(token) + 32;
		char *h = malloc(len);

		if (!h)
			return -ENOMEM;
		snprintf(h, len, "Authorization: Bearer %s", token);
		n->headers = curl_slist_append(NULL, "Content-Type: application/json");
		n->headers = curl_slist_append(n->headers, "Expect:");
		n->headers = curl_slist_append(n->headers, h);
		free(h);
		if (!n->headers)
			return -ENOMEM;
		headers = n->headers;
	}

	src.s_addr = htonl(ntohl(src.s_addr) + i);
	snprintf(n->src, sizeof(n->src), "host!%s", inet_ntoa(src));
	snprintf(n->url, sizeof(n->url), "http://n%u.alloc:%u/v1/report", i, port);
	snprintf(pin, sizeof(pin), "n%u.alloc:%u:%s", i, port, host);
	n->resolve = curl_slist_append(NULL, pin);
	n->h = curl_easy_init();
	n->answer = malloc(ANSWER_MAX);
	n->answer_cap = ANSWER_MAX;
	if (!n->resolve || !n->h || !n->answer)
		return -ENOMEM;
	n->answer[0] = '\0';
	for (unsigned int j = 0; j < o->per_node; j++) {
		n->use[j].ns = (int)((o->per_node * i + j) % o->namespaces);
		/* 1 to 30 MB/s: some nodes below their fair share, some far above */
		n->use[j].demand = 1000000 + (uint64_t)(rnd(&seed) % 29000000);
	}
	curl_easy_setopt(n->h, CURLOPT_URL, n->url);
	curl_easy_setopt(n->h, CURLOPT_RESOLVE, n->resolve);
	curl_easy_setopt(n->h, CURLOPT_INTERFACE, n->src);
	curl_easy_setopt(n->h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(n->h, CURLOPT_POSTFIELDS, n->body);
	curl_easy_setopt(n->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(n->h, CURLOPT_WRITEDATA, n);
	curl_easy_setopt(n->h, CURLOPT_PRIVATE, n);
	curl_easy_setopt(n->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(n->h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(n->h, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(n->h, CURLOPT_BUFFERSIZE, 4096L);
	curl_easy_setopt(n->h, CURLOPT_TCP_NODELAY, 1L);
	return 0;
}

static void start(struct node *n, unsigned int idx, const struct opts *o, int64_t due)
{
	int running;
	size_t len = build_report(n, idx, o->per_node, now_us());

	curl_easy_setopt(n->h, CURLOPT_POSTFIELDSIZE, (long)len);
	n->answer_len = 0;
	n->answer[0] = '\0';
	n->busy = true;
	st.busy++;
	n->due_us = due;
	n->sent_us = now_us();
	curl_multi_add_handle(n->g->m, n->h);
	/* sent now, not when the group's timer next comes round */
	curl_multi_socket_action(n->g->m, CURL_SOCKET_TIMEOUT, 0, &running);
}

static void record(double ms, double sent_ms)
{
	if (st.n_lat == st.cap_lat) {
		size_t cap = st.cap_lat ? 2 * st.cap_lat : 65536;
		double *p = realloc(st.lat_ms, cap * sizeof(*p));

		if (!p)
			return;
		st.lat_ms = p;
		p = realloc(st.sent_ms, cap * sizeof(*p));
		if (!p)
			return;
		st.sent_ms = p;
		st.cap_lat = cap;
	}
	st.sent_ms[st.n_lat] = sent_ms;
	st.lat_ms[st.n_lat++] = ms;
}

static void finish(CURLM *m, unsigned int per_node, int64_t measure_from, int64_t measure_to)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(m, &left))) {
		struct node *n;
		long code = 0;
		int64_t t = now_us();
		bool counted;

		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&n);
		curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
		counted = n->due_us >= measure_from && n->due_us < measure_to;
		if (msg->data.result != CURLE_OK) {
			st.curl_errors += counted;
			if (counted && st.curl_errors <= 3)
				fprintf(stderr, "alloc_load: %s: %s\n", n->url,
					curl_easy_strerror(msg->data.result));
		} else if (code != 200) {
			st.http_errors += counted;
			if (counted && st.http_errors <= 3)
				fprintf(stderr, "alloc_load: %s: HTTP %ld: %.200s\n", n->url, code,
					n->answer);
		} else if (!take_answer(n, per_node)) {
			st.bad_answers += counted;
		} else if (counted) {
			st.ok++;
			record((double)(t - n->due_us) / 1000.0, (double)(t - n->sent_us) / 1000.0);
		}
		if (n->answer_cap >
		    ANSWER_MAX) { /* one that carried the policy: back to the usual size */
			char *a = realloc(n->answer, ANSWER_MAX);

			if (a) {
				n->answer = a;
				n->answer_cap = ANSWER_MAX;
				n->answer_len = 0;
				a[0] = '\0';
			}
		}
		curl_multi_remove_handle(m, msg->easy_handle);
		n->busy = false;
		st.busy--;
	}
}

/* libcurl's socket interface: each socket of a group's transfers in the one epoll set. */
static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	const struct group *g = userp;
	struct epoll_event ev = { .data.u64 = ((uint64_t)g->index << 32) | (uint32_t)s };

	(void)e, (void)socketp;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL); /* closed already: nothing to do */
		return 0;
	}
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	if (epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) < 0)
		epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
	return 0;
}

static int on_timer(CURLM *m, long timeout_ms, void *userp)
{
	struct group *g = userp;

	(void)m;
	g->timer_us = timeout_ms < 0 ? -1 : now_us() + (int64_t)timeout_ms * 1000;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * The allocator's /proc/PID/stat and status, opened before the nodes'
 * connections take every descriptor the limit allows.
 */
static int stat_fd = -1, status_fd = -1, sched_fd = -1, self_sched_fd = -1;

static ssize_t read_proc(int fd, char *buf, size_t size)
{
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, size - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* utime + stime of the allocator, in seconds; -1 when it cannot be read. */
static double cpu_seconds(void)
{
	char buf[2048], *p;
	unsigned long long ut, stt;

	if (read_proc(stat_fd, buf, sizeof(buf)) <= 0)
		return -1;
	/* after the command's parenthesis: state is field 3, utime 14, stime 15 */
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt) != 2)
		return -1;
	return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

/*
 * Seconds a process waited for a CPU while runnable (the second field of
 * /proc/PID/schedstat): a process slow for want of a CPU (the machine
 * busy) rather than for its own work shows here. -1: not known.
 */
static double wait_seconds(int fd)
{
	char buf[256];
	unsigned long long run, wait;

	if (read_proc(fd, buf, sizeof(buf)) <= 0 || sscanf(buf, "%llu %llu", &run, &wait) != 2)
		return -1;
	return (double)wait / 1e9;
}

static double self_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static long status_kb(const char *key)
{
	char buf[4096], *p;
	size_t klen = strlen(key);

	if (read_proc(status_fd, buf, sizeof(buf)) <= 0)
		return -1;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, klen) == 0 && p[klen] == ':')
			return strtol(p + klen + 1, NULL, 10);
	return -1;
}

static const char *verdict(bool t, bool ok)
{
	return !t ? "" : ok ? "  PASS" : "  MISS";
}

static void usage(FILE *f)
{
	fputs("usage: alloc_load --url http://ADDR:PORT --nodes N [--seconds D] [--warmup W]\n"
	      "                  [--namespaces K] [--per-node P] [--src-base A.B.C.D] [--pid PID]\n"
	      "                  [--targets] [--tokens FILE] [--grants FILE]\n"
	      "       alloc_load --flood --url http://ADDR:PORT [--seconds D] [--src-base A.B.C.D]\n"
	      "                  [--sources S] [--spam C] [--slow C] [--big C] [--kid KID]\n",
	      f);
}

/*
 * --tokens FILE: its lines (at most `want`), trailing blanks cut, into a
 * malloc'ed array of pointers into one malloc'ed buffer (*ret_buf).
 */
static char **read_tokens(const char *path, unsigned int want, char **ret_buf)
{
	FILE *f = fopen(path, "r");
	char **lines = calloc(want, sizeof(*lines)), *buf = NULL, *p;
	size_t cap = 0;
	ssize_t len;
	unsigned int n = 0;

	if (!f || !lines) {
		fprintf(stderr, "alloc_load: --tokens %s: %m\n", path);
		goto fail;
	}
	len = getdelim(&buf, &cap, '\0', f);
	if (len <= 0) {
		fprintf(stderr, "alloc_load: --tokens %s: empty\n", path);
		goto fail;
	}
	for (p = buf; n < want && *p; n++) {
		char *end = strchr(p, '\n'), *next = end ? end + 1 : p + strlen(p);

		if (!end)
			end = next;
		while (end > p && (end[-1] == ' ' || end[-1] == '\r'))
			end--;
		*end = '\0';
		lines[n] = p;
		p = next;
	}
	if (n < want) {
		fprintf(stderr, "alloc_load: --tokens %s: %u lines, %u nodes\n", path, n, want);
		goto fail;
	}
	fclose(f);
	*ret_buf = buf;
	return lines;
fail:
	if (f)
		fclose(f);
	free(buf);
	free(lines);
	return NULL;
}

/* --grants FILE: each node's last grant of each of its namespaces ("node-00001 ns003 1250000"). */
static void write_grants(const char *path, const struct node *nodes, const struct opts *o)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "alloc_load: --grants %s: %m\n", path);
		return;
	}
	for (unsigned int i = 0; i < o->nodes; i++)
		for (unsigned int j = 0; j < o->per_node; j++)
			fprintf(f, "node-%05u ns%03d %llu\n", i, nodes[i].use[j].ns,
				(unsigned long long)nodes[i].use[j].grant);
	if (fclose(f) != 0)
		fprintf(stderr, "alloc_load: --grants %s: %m\n", path);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option opts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "namespaces", required_argument, NULL, 'k' },
		{ "per-node", required_argument, NULL, 'p' },
		{ "src-base", required_argument, NULL, 's' },
		{ "pid", required_argument, NULL, 'P' },
		{ "targets", no_argument, NULL, 't' },
		{ "tokens", required_argument, NULL, 'T' },
		{ "grants", required_argument, NULL, 'G' },
		{ "flood", no_argument, NULL, 'F' },
		{ "sources", required_argument, NULL, 'S' },
		{ "spam", required_argument, NULL, '1' },
		{ "slow", required_argument, NULL, '2' },
		{ "big", required_argument, NULL, '3' },
		{ "kid", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .seconds = 10,
			    .warmup = 3,
			    .namespaces = 100,
			    .per_node = 3,
			    .src_base = "10.64.0.1",
			    .sources = 50,
			    .spam = 8,
			    .slow = 40,
			    .big = 8 };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			o->url = optarg;
			break;
		case 'n':
			o->nodes = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			o->seconds = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			o->warmup = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			o->namespaces = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			o->per_node = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 's':
			o->src_base = optarg;
			break;
		case 'P':
			o->pid = atoi(optarg);
			break;
		case 't':
			o->targets = true;
			break;
		case 'T':
			o->tokens = optarg;
			break;
		case 'G':
			o->grants = optarg;
			break;
		case 'F':
			o->flood = true;
			break;
		case 'S':
			o->sources = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case '1':
			o->spam = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case '2':
			o->slow = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case '3':
			o->big = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'K':
			o->kid = optarg;
			break;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (o->flood) {
		if (!o->url || !o->seconds || !o->sources || o->sources > 4096 ||
		    o->spam + o->slow + o->big == 0 || o->spam + o->slow + o->big > 1024) {
			usage(stderr);
			return -1;
		}
		return 0;
	}
	if (!o->url || !o->nodes || o->nodes > 60000 || !o->seconds || !o->namespaces ||
	    !o->per_node || o->per_node > MAX_PER_NODE || o->per_node > o->namespaces) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/*
 * --flood: what a tenant (or anything on the node network) can throw at the
 * allocator's port, from S source addresses (src-base + 0 .. S-1), each
 * holding, for D seconds or until SIGTERM or SIGINT:
 *   C_spam  connections sending reports of invented nodes (random names),
 *           alternately without a token and with a forged one (a token's
 *           shape: the issuer's key id with --kid, a claim set the allocator
 *           would take, a jti of its own so that no cache knows it, and a
 *           signature of random bytes), each sent as soon as the last is
 *           answered, kept alive;
 *   C_slow  connections announcing a 64 KiB body (Content-Length: 65536),
 *           every other one trickling a byte a second, the rest sending
 *           nothing after the headers; reopened when the allocator closes them;
 *   C_big   connections sending 128 KiB reports (twice the wire's limit) as
 *           fast as they are taken, kept alive.
 * Raw non-blocking sockets on one epoll set. Prints one line for scripts
 * ("flood key=value ...": requests sent and answers by status, per kind;
 * connections made, refused, closed by the allocator; its own CPU seconds)
 * and exits 0.
 */

#define FLOOD_SLOW_LEN 65536
#define FLOOD_BIG_LEN 131072
#define FLOOD_IN_MAX 8192

enum { F_SPAM, F_SLOW, F_BIG, F_KINDS };
static const char *const flood_kind[F_KINDS] = { "spam", "slow", "big" };
/* answers counted by status: 200 401 403 408 413 431 503, the rest */
static const int flood_codes[] = { 200, 401, 403, 408, 413, 431, 503, 0 };
#define F_CODES (sizeof(flood_codes) / sizeof(flood_codes[0]))

struct fconn {
	int fd, kind;
	unsigned int src, seq;
	bool connecting;
	char *out; /* the request being sent (malloc'ed), out_len bytes */
	size_t out_len, out_off;
	size_t trickle_left; /* slow: body bytes still to trickle (0: silent) */
	int64_t next_us;     /* slow: when the next byte goes; 0: none */
	char in[FLOOD_IN_MAX];
	size_t in_len;
};

static struct {
	uint64_t sent[F_KINDS], answers[F_KINDS][F_CODES], connects, connect_errors,
		closed[F_KINDS], resets;
	uint32_t rnd;
	struct sockaddr_in dst, src0;
	const char *kid;
} fl;

static volatile sig_atomic_t flood_stop;

static void flood_signal(int sig)
{
	(void)sig;
	flood_stop = 1;
}

static void b64url(char *dst, const unsigned char *src, size_t len)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];

		*dst++ = a[v >> 18];
		*dst++ = a[(v >> 12) & 63];
		*dst++ = a[(v >> 6) & 63];
		*dst++ = a[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < len ? (uint32_t)src[i + 1] << 8 : 0);

		*dst++ = a[v >> 18];
		*dst++ = a[(v >> 12) & 63];
		if (i + 1 < len)
			*dst++ = a[(v >> 6) & 63];
	}
	*dst = '\0';
}

/* A forged token: the issuer's kid (--kid), claims the allocator takes, a random signature. */
static void forged_token(char *buf, size_t size, const char *node)
{
	char head[256], claims[640], h64[400], c64[900], s64[400];
	unsigned char sig[256];
	long now = (long)time(NULL);
	int n;

	n = snprintf(head, sizeof(head), "{\"alg\":\"RS256\",\"kid\":\"%s\"}",
		     fl.kid ? fl.kid : "forged");
	b64url(h64, (const unsigned char *)head, (size_t)n);
	n = snprintf(
		claims, sizeof(claims),
		"{\"aud\":[\"tollgate-allocator\"],\"exp\":%ld,\"iat\":%ld,\"nbf\":%ld,"
		"\"iss\":\"https://kubernetes.default.svc.cluster.local\",\"jti\":\"%08x%08x\","
		"\"kubernetes.io\":{\"namespace\":\"kube-system\",\"node\":{\"name\":\"%s\","
		"\"uid\":\"%08x\"},\"pod\":{\"name\":\"tollgate-x\",\"uid\":\"%08x\"},"
		"\"serviceaccount\":{\"name\":\"tollgate\",\"uid\":\"%08x\"}},"
		"\"sub\":\"system:serviceaccount:kube-system:tollgate\"}",
		now + 3600, now, now, rnd(&fl.rnd), rnd(&fl.rnd), node, rnd(&fl.rnd), rnd(&fl.rnd),
		rnd(&fl.rnd));
	b64url(c64, (const unsigned char *)claims, (size_t)n);
	for (size_t i = 0; i < sizeof(sig); i++)
		sig[i] = (unsigned char)rnd(&fl.rnd);
	b64url(s64, sig, sizeof(sig));
	snprintf(buf, size, "%s.%s.%s", h64, c64, s64);
}

/* The connection's next request, into c->out. */
static int flood_request(struct fconn *c)
{
	char node[32], auth[1800] = "", body[1024];
	size_t cap;
	int blen, n;

	snprintf(node, sizeof(node), "evil-%08x", rnd(&fl.rnd));
	if (c->kind == F_SPAM && (c->seq & 1)) {
		char tok[1700];

		forged_token(tok, sizeof(tok), node);
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", tok);
	}
	c->seq++;
	/* a report a node would send, claiming all it can */
	blen = snprintf(body, sizeof(body),
			"{\"version\":1,\"node\":\"%s\",\"seq\":%u,\"budgets\":[{\"namespace\":"
			"\"ns000\",\"sentBytes\":125000000,\"intervalMs\":1000,\"saturated\":true,"
			"\"applied\":125000000,\"limit\":125000000,\"state\":\"granted\",\"pods\":"
			"50,\"safeShare\":0,\"nodes\":0}]}",
			node, c->seq);
	cap = 2048 + (c->kind == F_BIG ? FLOOD_BIG_LEN : (size_t)blen);
	free(c->out);
	c->out = malloc(cap);
	if (!c->out)
		return -ENOMEM;
	n = snprintf(c->out, cap,
		     "POST /v1/report HTTP/1.1\r\nHost: allocator\r\nContent-Type: "
		     "application/json\r\n%sContent-Length: %d\r\n\r\n",
		     auth,
		     c->kind == F_SLOW	? FLOOD_SLOW_LEN
		     : c->kind == F_BIG ? FLOOD_BIG_LEN
					: blen);
	c->out_len = (size_t)n;
	c->out_off = 0;
	if (c->kind == F_SPAM) {
		memcpy(c->out + n, body, (size_t)blen);
		c->out_len += (size_t)blen;
	} else if (c->kind == F_BIG) {
		/* the report, padded with blanks after its closing brace to 128 KiB */
		memcpy(c->out + n, body, (size_t)blen);
		memset(c->out + n + blen, ' ', FLOOD_BIG_LEN - (size_t)blen);
		c->out_len += FLOOD_BIG_LEN;
	} else {
		/* every other slow connection trickles, the rest say nothing more */
		c->trickle_left = (c->src + c->seq) & 1 ? FLOOD_SLOW_LEN : 0;
		c->next_us = 0;
	}
	fl.sent[c->kind]++;
	return 0;
}

static void flood_want(struct fconn *c, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c };

	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void flood_open(struct fconn *c)
{
	struct sockaddr_in src = fl.src0;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
	int one = 1;

	c->in_len = 0;
	c->connecting = true;
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		fl.connect_errors++;
		return;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	src.sin_addr.s_addr = htonl(ntohl(fl.src0.sin_addr.s_addr) + c->src);
	if (bind(c->fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    (connect(c->fd, (struct sockaddr *)&fl.dst, sizeof(fl.dst)) < 0 &&
	     errno != EINPROGRESS) ||
	    flood_request(c) < 0) {
		fl.connect_errors++;
		close(c->fd);
		c->fd = -1;
		return;
	}
	fl.connects++;
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void flood_close(struct fconn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->next_us = 0;
}

/* Sends what is pending; false when the connection is gone. */
static bool flood_send(struct fconn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				flood_want(c, true);
				return true;
			}
			fl.resets++;
			return false;
		}
		c->out_off += (size_t)n;
	}
	flood_want(c, false);
	if (c->kind == F_SLOW && c->trickle_left && !c->next_us)
		c->next_us = now_us() + 1000000;
	return true;
}

/* Answers in c->in: each one counted, and the next request started. False: closed. */
static bool flood_answers(struct fconn *c)
{
	for (;;) {
		char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4), *cl;
		size_t head, body = 0, k;
		int code = 0;
		bool close_it;

		if (!end)
			return c->in_len < sizeof(c->in) - 1;
		head = (size_t)(end - c->in) + 4;
		c->in[c->in_len] = '\0';
		sscanf(c->in, "HTTP/1.%*d %d", &code);
		cl = strcasestr(c->in, "\r\nContent-Length:");
		if (cl && cl < end)
			body = strtoul(cl + 17, NULL, 10);
		if (head + body > c->in_len)
			return head + body < sizeof(c->in); /* the rest to come */
		close_it = (k = (size_t)(end - c->in), memmem(c->in, k, "Connection: close", 17)) ||
			   memmem(c->in, k, "connection: close", 17);
		for (k = 0; k < F_CODES - 1 && flood_codes[k] != code; k++)
			;
		fl.answers[c->kind][k]++;
		memmove(c->in, c->in + head + body, c->in_len - head - body);
		c->in_len -= head + body;
		if (close_it || c->kind == F_SLOW)
			return false;
		if (flood_request(c) < 0 || !flood_send(c))
			return false;
	}
}

static void flood_event(struct fconn *c, uint32_t events)
{
	if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			fl.connect_errors++;
			flood_close(c);
			return;
		}
		c->connecting = false;
	}
	if (!c->connecting && (events & EPOLLOUT) && !flood_send(c)) {
		flood_close(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
		for (;;) {
			ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len,
					 MSG_DONTWAIT);

			if (n > 0) {
				c->in_len += (size_t)n;
				if (!flood_answers(c)) {
					flood_close(c);
					return;
				}
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			/* closed by the allocator (EOF or reset) */
			fl.closed[c->kind]++;
			flood_close(c);
			return;
		}
	}
}

static int flood_main(const struct opts *o)
{
	unsigned int per = o->spam + o->slow + o->big, total = o->sources * per;
	struct fconn *conns = calloc(total, sizeof(*conns));
	struct rlimit rl = { .rlim_cur = total + 256, .rlim_max = total + 256 };
	char host[64];
	unsigned int port;
	int64_t end = now_us() + (int64_t)o->seconds * 1000000, t0 = now_us();
	struct sigaction sa = { .sa_handler = flood_signal };

	if (sscanf(o->url, "http://%63[0-9.]:%u", host, &port) != 2 ||
	    inet_pton(AF_INET, host, &fl.dst.sin_addr) != 1 ||
	    inet_pton(AF_INET, o->src_base, &fl.src0.sin_addr) != 1 || !conns) {
		fprintf(stderr,
			"alloc_load: --url is http://ADDR:PORT, --src-base an IPv4 address\n");
		free(conns);
		return 2;
	}
	setrlimit(RLIMIT_NOFILE, &rl);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	fl.dst.sin_family = fl.src0.sin_family = AF_INET;
	fl.dst.sin_port = htons((uint16_t)port);
	fl.rnd = (uint32_t)getpid() * 2654435761u | 1;
	fl.kid = o->kid;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		free(conns);
		return 1;
	}
	for (unsigned int i = 0; i < total; i++) {
		unsigned int k = i % per;

		conns[i] = (struct fconn){ .fd = -1,
					   .src = i / per,
					   .kind = k < o->spam		   ? F_SPAM
						   : k < o->spam + o->slow ? F_SLOW
									   : F_BIG };
	}
	while (!flood_stop) {
		struct epoll_event evs[256];
		int64_t now = now_us();
		int n;

		if (now >= end)
			break;
		/* reopened at once: as fast as it can */
		for (unsigned int i = 0; i < total; i++) {
			struct fconn *c = &conns[i];

			if (c->fd < 0)
				flood_open(c);
			else if (c->next_us && now >= c->next_us && c->trickle_left) {
				if (send(c->fd, "{", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
					c->trickle_left--;
					c->next_us = now + 1000000;
				} else if (errno != EAGAIN) {
					fl.closed[F_SLOW]++;
					flood_close(c);
				}
			}
		}
		n = epoll_wait(ep, evs, 256, 20);
		for (int i = 0; i < n; i++)
			flood_event(evs[i].data.ptr, evs[i].events);
	}
	printf("flood seconds=%.1f sources=%u connections=%u connects=%llu connect_errors=%llu "
	       "resets=%llu cpu_seconds=%.2f",
	       (double)(now_us() - t0) / 1e6, o->sources, total, (unsigned long long)fl.connects,
	       (unsigned long long)fl.connect_errors, (unsigned long long)fl.resets,
	       self_seconds());
	for (int k = 0; k < F_KINDS; k++) {
		printf(" %s_sent=%llu %s_closed=%llu", flood_kind[k],
		       (unsigned long long)fl.sent[k], flood_kind[k],
		       (unsigned long long)fl.closed[k]);
		for (size_t j = 0; j < F_CODES; j++)
			if (flood_codes[j])
				printf(" %s_%d=%llu", flood_kind[k], flood_codes[j],
				       (unsigned long long)fl.answers[k][j]);
			else
				printf(" %s_other=%llu", flood_kind[k],
				       (unsigned long long)fl.answers[k][j]);
	}
	printf("\n");
	for (unsigned int i = 0; i < total; i++) {
		flood_close(&conns[i]);
		free(conns[i].out);
	}
	free(conns);
	close(ep);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct node *nodes;
	struct curl_slist *headers = NULL;
	struct in_addr src;
	struct rlimit rl;
	char host[64];
	unsigned int port, cursor = 0, n_groups;
	int64_t t0, measure_from, measure_to, end, round_us = 0;
	double cpu0 = -1, cpu1 = -1, gen0 = 0, gen1 = 0, elapsed;
	double wait0 = 0, wait1 = 0, gwait0 = 0, gwait1 = 0; /* run-queue waits */
	struct group *groups;
	char **tokens = NULL, *tokens_buf = NULL;

	if (parse(argc, argv, &o) < 0)
		return 2;
	if (o.flood)
		return flood_main(&o);
	if (o.tokens && !(tokens = read_tokens(o.tokens, o.nodes, &tokens_buf)))
		return 2;
	if (sscanf(o.url, "http://%63[0-9.]:%u", host, &port) != 2 ||
	    inet_pton(AF_INET, o.src_base, &src) != 1) {
		fprintf(stderr,
			"alloc_load: --url is http://ADDR:PORT, --src-base an IPv4 address\n");
		return 2;
	}
	/* a descriptor per node, and some: past the hard limit only with CAP_SYS_RESOURCE */
	rl.rlim_cur = rl.rlim_max = o.nodes + 1024;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur < o.nodes + 2 * (o.nodes / GROUP + 1) + 32) {
			fprintf(stderr,
				"alloc_load: the open-file limit (%llu) is too low for %u nodes\n",
				(unsigned long long)rl.rlim_cur, o.nodes);
			return 1;
		}
	}
	if (o.pid) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/stat", o.pid);
		stat_fd = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/proc/%d/status", o.pid);
		status_fd = open(path, O_RDONLY | O_CLOEXEC);
		snprintf(path, sizeof(path), "/proc/%d/schedstat", o.pid);
		sched_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (stat_fd < 0 || status_fd < 0) {
			fprintf(stderr, "alloc_load: --pid %d: %m\n", o.pid);
			return 1;
		}
	}
	self_sched_fd = open("/proc/self/schedstat", O_RDONLY | O_CLOEXEC);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Expect:");
	n_groups = (o.nodes + GROUP - 1) / GROUP;
	nodes = calloc(o.nodes, sizeof(*nodes));
	groups = calloc(n_groups, sizeof(*groups));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!nodes || !groups || !headers || ep < 0)
		return 1;
	for (unsigned int k = 0; k < n_groups; k++) {
		struct group *g = &groups[k];

		*g = (struct group){ .m = curl_multi_init(), .index = k, .timer_us = -1 };
		if (!g->m)
			return 1;
		/* every node's connection stays in its group's cache between its reports */
		curl_multi_setopt(g->m, CURLMOPT_MAXCONNECTS, (long)GROUP + 4);
		curl_multi_setopt(g->m, CURLMOPT_SOCKETFUNCTION, on_socket);
		curl_multi_setopt(g->m, CURLMOPT_SOCKETDATA, g);
		curl_multi_setopt(g->m, CURLMOPT_TIMERFUNCTION, on_timer);
		curl_multi_setopt(g->m, CURLMOPT_TIMERDATA, g);
	}
	for (unsigned int i = 0; i < o.nodes; i++) {
		if (setup_node(&nodes[i], i, &o, src, host, port, headers,
			       tokens ? tokens[i] : NULL) < 0)
			return 1;
		nodes[i].g = &groups[i / GROUP];
	}

	t0 = now_us();
	measure_from = t0 + (int64_t)o.warmup * 1000000;
	measure_to = measure_from + (int64_t)o.seconds * 1000000;
	end = measure_to + 6000000; /* the last reports' answers (their timeout is 5 s) */
	for (;;) {
		struct epoll_event evs[256];
		int64_t now = now_us(), due, wake;
		int running, n;

		if (cpu0 < 0 && now >= measure_from) {
			cpu0 = o.pid ? cpu_seconds() : 0;
			gen0 = self_seconds();
			wait0 = wait_seconds(sched_fd);
			gwait0 = wait_seconds(self_sched_fd);
		}
		if (cpu1 < 0 && now >= measure_to) {
			cpu1 = o.pid ? cpu_seconds() : 0;
			gen1 = self_seconds();
			wait1 = wait_seconds(sched_fd);
			gwait1 = wait_seconds(self_sched_fd);
		}
		if (now >= end ||
		    (t0 + round_us + (int64_t)cursor * 1000000 / o.nodes >= measure_to && !st.busy))
			break;
		/* node i is due at i/N of each second */
		/* every report due within the measured seconds goes out, late ones too */
		while ((due = t0 + round_us + (int64_t)cursor * 1000000 / o.nodes) < measure_to &&
		       now >= due) {
			struct node *nd = &nodes[cursor];

			if (due >= measure_from && now - due > st.max_lag_us)
				st.max_lag_us = now - due;
			if (nd->busy)
				st.skipped += due >=
					      measure_from; /* the last report is still out */
			else
				start(nd, cursor, &o, due);
			if (++cursor == o.nodes) {
				cursor = 0;
				round_us += 1000000;
			}
		}
		due = t0 + round_us + (int64_t)cursor * 1000000 / o.nodes;
		wake = due < measure_to ? due : now + 10000;
		for (unsigned int k = 0; k < n_groups; k++) {
			struct group *g = &groups[k];

			if (g->timer_us < 0)
				continue;
			if (g->timer_us <= now) {
				g->timer_us = -1;
				curl_multi_socket_action(g->m, CURL_SOCKET_TIMEOUT, 0, &running);
				finish(g->m, o.per_node, measure_from, measure_to);
			}
			if (g->timer_us >= 0 && g->timer_us < wake)
				wake = g->timer_us;
		}
		n = epoll_wait(ep, evs, 256, wake > now ? (int)((wake - now + 999) / 1000) : 0);
		for (int i = 0; i < n; i++) {
			struct group *g = &groups[evs[i].data.u64 >> 32];
			int fd = (int)(uint32_t)evs[i].data.u64, mask = 0;

			if (evs[i].events & EPOLLIN)
				mask |= CURL_CSELECT_IN;
			if (evs[i].events & EPOLLOUT)
				mask |= CURL_CSELECT_OUT;
			if (evs[i].events & (EPOLLERR | EPOLLHUP))
				mask |= CURL_CSELECT_ERR;
			curl_multi_socket_action(g->m, fd, mask, &running);
			finish(g->m, o.per_node, measure_from, measure_to);
		}
	}
	/* the last answers may all be in before the measured seconds end */
	elapsed = (double)o.seconds;
	if (cpu1 < 0) {
		int64_t now = now_us();

		cpu1 = o.pid ? cpu_seconds() : 0;
		gen1 = self_seconds();
		wait1 = wait_seconds(sched_fd);
		gwait1 = wait_seconds(self_sched_fd);
		if (now > measure_from)
			elapsed = (double)(now - measure_from) / 1e6;
	}

	{
		size_t n = st.n_lat;
		double p50 = 0, p99 = 0, max = 0, cores = -1, p99_sent = 0;
		long hwm = o.pid ? status_kb("VmHWM") : -1;
		uint64_t expected = (uint64_t)o.nodes * o.seconds;
		bool t = o.targets;

		if (n) {
			qsort(st.lat_ms, n, sizeof(double), cmp_double);
			p50 = st.lat_ms[(size_t)floor(0.50 * (double)(n - 1))];
			p99 = st.lat_ms[(size_t)floor(0.99 * (double)(n - 1))];
			max = st.lat_ms[n - 1];
			qsort(st.sent_ms, n, sizeof(double), cmp_double);
			p99_sent = st.sent_ms[(size_t)floor(0.99 * (double)(n - 1))];
		}
		double gen_cores = (gen1 - gen0) / elapsed;

		if (o.pid && cpu0 >= 0 && cpu1 >= 0)
			cores = (cpu1 - cpu0) / elapsed;
		/* one line for scripts, then the same for people */
		printf("result nodes=%u namespaces_per_node=%u budgets=%u seconds=%u reports=%llu "
		       "expected=%llu errors=%llu skipped=%llu max_lag_ms=%.1f p50_ms=%.3f "
		       "p99_ms=%.3f max_ms=%.3f cpu_cores=%.3f rss_kb=%ld generator_cores=%.3f "
		       "policy_answers=%llu alloc_wait=%.3f generator_wait=%.3f p99_sent_ms=%.3f\n",
		       o.nodes, o.per_node, o.namespaces, o.seconds, (unsigned long long)st.ok,
		       (unsigned long long)expected,
		       (unsigned long long)(st.http_errors + st.curl_errors + st.bad_answers),
		       (unsigned long long)st.skipped, (double)st.max_lag_us / 1000.0, p50, p99,
		       max, cores, hwm, gen_cores, (unsigned long long)st.policy_answers,
		       wait0 >= 0 && wait1 >= 0 ? (wait1 - wait0) / elapsed : -1,
		       gwait0 >= 0 && gwait1 >= 0 ? (gwait1 - gwait0) / elapsed : -1, p99_sent);
		printf("  %llu of %llu reports answered, %llu errors, %llu not sent (the node's last "
		       "still out), generator lag up to %.1f ms, generator CPU %.3f cores\n",
		       (unsigned long long)st.ok, (unsigned long long)expected,
		       (unsigned long long)(st.http_errors + st.curl_errors + st.bad_answers),
		       (unsigned long long)st.skipped, (double)st.max_lag_us / 1000.0, gen_cores);
		printf("  waiting for a CPU while runnable, per second measured: the allocator %.3f s, "
		       "the generator %.3f s\n",
		       wait0 >= 0 && wait1 >= 0 ? (wait1 - wait0) / elapsed : -1,
		       gwait0 >= 0 && gwait1 >= 0 ? (gwait1 - gwait0) / elapsed : -1);
		printf("  %llu answers carried the policy (%u nodes; a node names the policy it "
		       "heard in its next reports)\n",
		       (unsigned long long)st.policy_answers, o.nodes);
		printf("  report latency: p50 %.2f ms, p99 %.2f ms%s, max %.2f ms\n", p50, p99,
		       verdict(t, n && p99 <= 50.0), max);
		if (cores >= 0)
			printf("  allocator CPU: %.3f cores%s\n", cores, verdict(t, cores <= 1.0));
		if (hwm >= 0)
			printf("  allocator peak RSS (VmHWM): %.1f MiB%s\n", (double)hwm / 1024.0,
			       verdict(t, hwm <= 200 * 1024));
	}
	if (o.grants)
		write_grants(o.grants, nodes, &o);
	for (unsigned int i = 0; i < o.nodes; i++) {
		if (nodes[i].busy)
			curl_multi_remove_handle(nodes[i].g->m, nodes[i].h);
		curl_easy_cleanup(nodes[i].h);
		curl_slist_free_all(nodes[i].resolve);
		curl_slist_free_all(nodes[i].headers);
		free(nodes[i].answer);
	}
	for (unsigned int k = 0; k < n_groups; k++)
		curl_multi_cleanup(groups[k].m);
	free(groups);
	close(ep);
	curl_slist_free_all(headers);
	curl_global_cleanup();
	free(nodes);
	free(st.lat_ms);
	free(st.sent_ms);
	free(tokens);
	free(tokens_buf);
	/* every report answered: the figures mean something */
	return st.ok >= (uint64_t)o.nodes * o.seconds * 99 / 100 ? 0 : 1;
}
