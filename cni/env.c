// SPDX-License-Identifier: Apache-2.0
/* The CNI_* environment variables, validated as libcni does. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cni/internal.h"
#include "lib/util.h"

int cni_env_command(struct cni_env *env, struct tg_err *e)
{
	const char *c = getenv("CNI_COMMAND");

	memset(env, 0, sizeof(*env));
	if (!c || !*c)
		return tg_fail(e, CNI_ERR_ENV, -EINVAL, "CNI_COMMAND is not set");
	for (int i = 0; i < CNI_CMDS; i++)
		if (strcmp(c, cni_cmd_names[i]) == 0) {
			env->cmd = (enum cni_cmd)i;
			env->cmd_name = cni_cmd_names[i];
			return 0;
		}
	return tg_fail(e, CNI_ERR_ENV, -EINVAL,
		       "CNI_COMMAND \"%.64s\" is not one of ADD, DEL, CHECK, STATUS, GC, VERSION",
		       c);
}

static bool ifname_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= IFNAMSIZ || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' ||
		    (unsigned char)s[i] < 0x20)
			return false;
	return true;
}

static const char *env_var(const char *name, bool required, struct tg_err *e, int *r)
{
	const char *v = getenv(name);

	if ((!v || !*v) && required)
		*r = tg_fail(e, CNI_ERR_ENV, -EINVAL, "%s is required for this command", name);
	return v ? v : "";
}

/*
 * Kubernetes names: a namespace is a DNS-1123 label, a pod name a DNS-1123
 * subdomain (lowercase alphanumerics and '-', plus '.' for subdomains,
 * alphanumeric at both ends).
 */
static bool k8s_name_valid(const char *s, bool subdomain)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && !(c == '-' || (subdomain && c == '.')))
			return false;
		if ((i == 0 || i == n - 1) && !alnum)
			return false;
	}
	return true;
}

/* K8S_POD_NAMESPACE / K8S_POD_NAME out of "K=V;K=V"; other keys are ignored. */
static int parse_args(const char *args, struct cni_env *env, struct tg_err *e)
{
	const char *p = args;

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);

		if (len > 0) {
			size_t klen, vlen;
			char *dst = NULL;
			size_t max = 0;

			if (!eq || eq == p)
				return tg_fail(e, CNI_ERR_ENV, -EINVAL,
					       "CNI_ARGS: \"%.*s\" is not a KEY=VALUE pair",
					       (int)(len > 64 ? 64 : len), p);
			klen = (size_t)(eq - p);
			vlen = len - klen - 1;
			if (klen == 17 && memcmp(p, "K8S_POD_NAMESPACE", 17) == 0) {
				dst = env->k8s_namespace;
				max = sizeof(env->k8s_namespace) - 1;
			} else if (klen == 12 && memcmp(p, "K8S_POD_NAME", 12) == 0) {
				dst = env->pod;
				max = sizeof(env->pod) - 1;
			}
			if (dst) {
				if (vlen > max)
					return tg_fail(
						e, CNI_ERR_ENV, -EINVAL,
						"CNI_ARGS: %.*s is longer than %zu characters",
						(int)klen, p, max);
				memcpy(dst, eq + 1, vlen);
				dst[vlen] = '\0';
				if (vlen && !k8s_name_valid(dst, dst == env->pod))
					return tg_fail(
						e, CNI_ERR_ENV, -EINVAL,
						"CNI_ARGS: %.*s \"%.64s\" is not a valid Kubernetes name",
						(int)klen, p, dst);
			}
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

int cni_env_parse(struct cni_env *env, struct tg_err *e)
{
	bool add_or_check = env->cmd == CNI_CMD_ADD || env->cmd == CNI_CMD_CHECK;
	bool per_container = add_or_check || env->cmd == CNI_CMD_DEL;
	int r = 0;

	if (!per_container)
		return 0;
	env->container_id = env_var("CNI_CONTAINERID", true, e, &r);
	if (r == 0 && !name_is_safe(env->container_id, IPAM_CONTAINER_ID_MAX))
		r = tg_fail(e, CNI_ERR_ENV, -EINVAL,
			    "CNI_CONTAINERID \"%.64s\" must match [A-Za-z0-9][A-Za-z0-9_.-]* "
			    "(at most %d characters)",
			    env->container_id, IPAM_CONTAINER_ID_MAX);
	env->ifname = env_var("CNI_IFNAME", true, e, &r);
	if (r == 0 && !ifname_valid(env->ifname))
		r = tg_fail(e, CNI_ERR_ENV, -EINVAL,
			    "CNI_IFNAME \"%.64s\" is not a valid interface name (1-15 characters, "
			    "no '/', ':' or spaces)",
			    env->ifname);
	env->netns = env_var("CNI_NETNS", add_or_check, e, &r);
	if (r == 0 && strlen(env->netns) > IPAM_NETNS_MAX)
		r = tg_fail(e, CNI_ERR_ENV, -EINVAL, "CNI_NETNS is longer than %d characters",
			    IPAM_NETNS_MAX);
	env->path = env_var("CNI_PATH", true, e, &r);
	if (r == 0)
		r = parse_args(getenv("CNI_ARGS"), env, e);
	return r;
}
