// SPDX-License-Identifier: Apache-2.0
/* One line per command in logFile, written with a single append. Never stdout. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cni/internal.h"
#include "lib/rate.h"
#include "lib/steps.h"
#include "lib/util.h"

/*
 * The log file, locked, with room for `len` more bytes: past max_bytes it
 * is renamed to <logFile>.1 (replacing the one before) and a new one is
 * begun, so the plugin never holds more than two files of max_bytes. Every
 * writer appends under an flock on the file itself, and checks, holding it,
 * that the path still names the file it opened: a plugin that opened the
 * file just before another rotated it writes to the new one, so that no
 * line is lost or lands in the middle of another. -1: nothing to write to.
 */
static int log_open(const char *log_file, int64_t max_bytes, size_t len)
{
	char old[PATH_MAX + 8];
	struct stat sb, now;

	for (int tries = 0; tries < 4; tries++) {
		/*
		 * Only a regular file: a FIFO nobody reads (or a device) must never
		 * hold up a pod's ADD. O_NONBLOCK makes opening such a FIFO fail at once.
		 */
		int fd = open(log_file,
			      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
			      0600);

		if (fd < 0)
			return -1;
		if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || flock(fd, LOCK_EX) < 0) {
			close(fd);
			return -1;
		}
		/* Rotated since it was opened: the new file. */
		if (stat(log_file, &now) < 0 || now.st_ino != sb.st_ino ||
		    now.st_dev != sb.st_dev || fstat(fd, &sb) < 0) {
			close(fd);
			continue;
		}
		if (sb.st_size == 0 || sb.st_size + (off_t)len <= max_bytes)
			return fd;
		if ((size_t)snprintf(old, sizeof(old), "%s.1", log_file) >= sizeof(old) ||
		    rename(log_file, old) < 0)
			return fd; /* cannot rotate: still logged, past the cap */
		close(fd);
	}
	return -1;
}

/* "config:0.12,store:0.40,...": every step, in enum order (lib/steps.h). */
static void steps_format(char *dst, size_t size)
{
	size_t o = 0;

	dst[0] = '\0';
	for (int i = 0; i < STEP_COUNT && o < size; i++) {
		int n = snprintf(dst + o, size - o, "%s%s:%.2f", i ? "," : "", step_names[i],
				 (double)step_ns((enum step)i) / 1e6);

		if (n < 0)
			break;
		o += (size_t)n;
	}
}

static const struct {
	const char *field, *annotation, *what;
	struct shaping_source (*source)(const struct shaping *s);
} inet_dirs[] = {
	{ "inet_egress", "tollgate.io/internet-egress-bandwidth", "internet egress",
	  shaping_inet_egress_source },
	{ "inet_ingress", "tollgate.io/internet-ingress-bandwidth", "internet ingress",
	  shaping_inet_ingress_source },
};

/* " inet_egress=5M(config) inet_ingress=2M(annotation)": each internet cap and its source. */
static void shaping_fields(const struct shaping *s, char *dst, size_t size)
{
	size_t o = 0;

	dst[0] = '\0';
	for (size_t i = 0; s && i < ARRAY_SIZE(inet_dirs) && o < size; i++) {
		struct shaping_source src = inet_dirs[i].source(s);
		char cap[24];
		int n;

		if (!src.cap_bps && !src.annot_bps)
			continue;
		n = snprintf(dst + o, size - o, " %s=%s(%s)", inet_dirs[i].field,
			     src.cap_bps ? rate_format(src.cap_bps, cap, sizeof(cap)) : "-",
			     src.annotation ? "annotation" : "config");
		if (n < 0)
			break;
		o += (size_t)n;
	}
}

size_t cni_annotation_warning(const struct shaping *s, char *dst, size_t size)
{
	size_t o = 0;

	if (size)
		dst[0] = '\0';
	for (size_t i = 0; s && i < ARRAY_SIZE(inet_dirs) && o < size; i++) {
		struct shaping_source src = inet_dirs[i].source(s);
		char a[24], c[24];
		int n;

		if (!src.ignored)
			continue;
		n = snprintf(dst + o, size - o,
			     "%spod annotation %s %s is above the pod's %s cap %s: ignored",
			     o ? "; " : "", inet_dirs[i].annotation,
			     rate_format(src.annot_bps, a, sizeof(a)), inet_dirs[i].what,
			     rate_format(src.cap_bps, c, sizeof(c)));
		if (n < 0)
			break;
		o += (size_t)n;
	}
	return o < size ? o : size ? size - 1 : 0;
}

void cni_log(const char *log_file, int64_t max_bytes, const struct cni_env *env, const char *ip,
	     int64_t dur_ns, const struct shaping *shaping, const struct tg_err *e)
{
	char line[1600], ts[80], msg[600], tail[640] = "ok", steps[200], caps[100];
	char warn[400], warning[420] = "";
	struct timeval tv;
	struct tm tm;
	int fd, n;

	if (!log_file || !*log_file)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	/* UTC by hand: strftime would read the local time zone's file first. */
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	steps_format(steps, sizeof(steps));
	shaping_fields(shaping, caps, sizeof(caps));
	if (cni_annotation_warning(shaping, msg, sizeof(msg))) {
		logfmt_quote(warn, sizeof(warn), msg);
		snprintf(warning, sizeof(warning), " warning=%s", warn);
	}
	if (e && e->code) {
		logfmt_quote(msg, sizeof(msg), e->msg);
		snprintf(tail, sizeof(tail), "error code=%d msg=%s", e->code, msg);
	}
	n = snprintf(line, sizeof(line),
		     "%s.%03ldZ cmd=%s container=%.64s ifname=%s pod=%s/%s ip=%s duration_ms=%.2f "
		     "steps_ms=%s%s%s result=%s\n",
		     ts, (long)(tv.tv_usec / 1000), env->cmd_name ? env->cmd_name : "?",
		     env->container_id && *env->container_id ? env->container_id : "-",
		     env->ifname && *env->ifname ? env->ifname : "-", env->k8s_namespace, env->pod,
		     ip && *ip ? ip : "-", (double)dur_ns / 1e6, steps, caps, warning, tail);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1, line[n - 1] = '\n';
	fd = log_open(log_file, max_bytes, (size_t)n);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) < 0) {
		/* Logging must never fail the command. */
	}
	close(fd); /* and with it the lock */
}
