// SPDX-License-Identifier: Apache-2.0
/*
 * What the node lacks for Tollgate (agent/agent.h): the libraries the
 * plugin loads on the host, the sysctls below their floors, and the other
 * plugins the conflist chains.
 *
 * The plugin runs on the host (kubelet's runtime starts it there), not in
 * the agent's container, so the host's own loader must find what the
 * plugin's ELF file asks for: its program interpreter, each DT_NEEDED
 * library and each symbol version of them it needs (GLIBC_2.34 ...), and
 * the same again for the libraries those load. The agent reads these from
 * the files themselves (lib/elf.h), the plugin's in its image and the
 * host's under --host-root, resolving the host's symlinks inside that root
 * (lib/rootfs.h). gnu_get_libc_version() would name the agent's own glibc;
 * libc.so.6's file name says nothing since glibc 2.34 stopped shipping
 * libc-2.NN.so; the version definitions are what the loader checks.
 *
 * The libraries are looked for where glibc's loader looks on the
 * distributions that run Kubernetes nodes: the multiarch directories
 * (Debian, Ubuntu), lib64 (RHEL, Fedora, Azure Linux, Flatcar), lib. A
 * library only ld.so.cache knows of elsewhere (a hand-built one under
 * /usr/local/lib) is not seen: that node is reported lacking it.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agent/agent.h"
#include "lib/cleanup.h"
#include "lib/elf.h"
#include "lib/jsonx.h"
#include "lib/rootfs.h"
#include "lib/sysctls.h"
#include "lib/util.h"

#define OBJECTS_MAX 32
#define FILE_MAX (512u << 20)

static bool lack_has(const struct agent_lacks *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->l[i].key, key) == 0)
			return true;
	return false;
}

/* A new lack, its key and kind set; NULL when the list is full (or has it already). */
static struct agent_lack *lack_add(struct agent_lacks *l, bool blocking, const char *key)
{
	struct agent_lack *k;

	if (lack_has(l, key))
		return NULL;
	if (l->n == AGENT_LACKS_MAX) {
		l->dropped++;
		return NULL;
	}
	k = &l->l[l->n++];
	memset(k, 0, sizeof(*k));
	k->blocking = blocking;
	snprintf(k->key, sizeof(k->key), "%s", key);
	return k;
}

bool agent_lacks_blocking(const struct agent_lacks *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->l[i].blocking)
			return true;
	return false;
}

/* ---- the plugin's libraries ---- */

struct object {
	char name[ELF_NAME_MAX]; /* what it is needed as: its soname */
	char path[PATH_MAX];	 /* in the host's root ("" for the plugin, in ours) */
	struct elf_info *info;
};

struct search {
	int root_fd;
	const char *root;
	uint16_t machine;
	const char *dirs[8];
	size_t n_dirs;
	struct object obj[OBJECTS_MAX];
	size_t n_obj;
};

/* Reads an open file's loader view; -ENOEXEC for what is no ELF file of ours. */
static int read_elf_fd(int fd, struct elf_info *ret)
{
	struct stat sb;
	void *m;
	int r;

	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode) || sb.st_size == 0)
		return -ENOEXEC;
	if ((uint64_t)sb.st_size > FILE_MAX)
		return -EFBIG;
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r = elf_read(m, (size_t)sb.st_size, ret);
	munmap(m, (size_t)sb.st_size);
	return r;
}

/* The host's file at path (in its root), when it is an ELF file of the plugin's machine. */
static int read_host_elf(struct search *s, const char *path, struct elf_info *ret)
{
	_cleanup_close_ int fd = -1;
	int r = rootfs_open(s->root_fd, path, O_RDONLY, &fd);

	if (r < 0)
		return r;
	r = read_elf_fd(fd, ret);
	if (r == 0 && ret->machine != s->machine)
		r = -ENOEXEC;
	return r;
}

static struct object *object_named(struct search *s, const char *name)
{
	for (size_t i = 0; i < s->n_obj; i++)
		if (strcmp(s->obj[i].name, name) == 0 ||
		    (s->obj[i].info->soname[0] && strcmp(s->obj[i].info->soname, name) == 0))
			return &s->obj[i];
	return NULL;
}

static struct object *object_new(struct search *s, const char *name, const char *path,
				 struct elf_info *info)
{
	struct object *o = &s->obj[s->n_obj++];

	snprintf(o->name, sizeof(o->name), "%.*s", (int)sizeof(o->name) - 1,
		 name); /* a soname: short */
	snprintf(o->path, sizeof(o->path), "%s", path);
	o->info = info;
	return o;
}

/* "/lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, ..." */
static void dirs_text(const struct search *s, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->n_dirs && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s/%s", i ? ", " : "", s->dirs[i]);
}

/*
 * The highest GLIBC_2.N[.M] of n names, stride bytes apart from `names`
 * (a table's first), as "2.31"; "" when there is none.
 */
static void glibc_version(const char *names, size_t n, size_t stride, char *buf, size_t size)
{
	unsigned best[3] = { 0, 0, 0 };

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		const char *v = names + i * stride;
		unsigned x[3] = { 0, 0, 0 };

		if (strncmp(v, "GLIBC_", 6) != 0 ||
		    sscanf(v + 6, "%u.%u.%u", &x[0], &x[1], &x[2]) < 2)
			continue;
		if (x[0] > best[0] ||
		    (x[0] == best[0] && (x[1] > best[1] || (x[1] == best[1] && x[2] > best[2])))) {
			memcpy(best, x, sizeof(best));
			snprintf(buf, size, "%s", v + 6);
		}
	}
}

/* The highest glibc the plugin's own files ask for ("2.34"), from every object's needs. */
static void glibc_needed(const struct search *s, char *buf, size_t size)
{
	char names[OBJECTS_MAX * 8][ELF_NAME_MAX];
	size_t n = 0;

	for (size_t i = 0; i < s->n_obj; i++)
		for (size_t k = 0; k < s->obj[i].info->n_verneed && n < ARRAY_SIZE(names); k++)
			snprintf(names[n++], ELF_NAME_MAX, "%s", s->obj[i].info->verneed[k].name);
	glibc_version(&names[0][0], n, ELF_NAME_MAX, buf, size);
}

static void lack_missing(struct search *s, struct agent_lacks *l, const char *name)
{
	char key[64], dirs[400], glibc[32];
	struct agent_lack *k;

	snprintf(key, sizeof(key), "lib:%s", name);
	k = lack_add(l, true, key);
	if (!k)
		return;
	dirs_text(s, dirs, sizeof(dirs));
	glibc_needed(s, glibc, sizeof(glibc));
	if (strcmp(name, "libmnl.so.0") == 0)
		snprintf(
			k->text, sizeof(k->text),
			"the host has no libmnl.so.0, which the plugin loads (looked in %s under "
			"%s): install libmnl0 (Debian, Ubuntu) or libmnl (RHEL, Fedora, Azure Linux) "
			"on the node; the plugin is not installed until it can load",
			dirs, s->root);
	else if (strcmp(name, "libc.so.6") == 0)
		snprintf(
			k->text, sizeof(k->text),
			"the host has no glibc (libc.so.6; looked in %s under %s): the plugin needs "
			"glibc %s or later on the node (a musl host cannot run it), or %s is not the "
			"host's / mounted read-only; the plugin is not installed until it can load",
			dirs, s->root, glibc[0] ? glibc : "2.34", s->root);
	else
		snprintf(k->text, sizeof(k->text),
			 "the host has no %s, which the plugin loads (looked in %s under %s): "
			 "install it on the node; the plugin is not installed until it can load",
			 name, dirs, s->root);
	snprintf(k->note, sizeof(k->note),
		 "msg=\"the plugin cannot load on this host: a library is missing; not installed\" "
		 "library=%s host_root=%s",
		 name, LOGFMT_Q(s->root));
}

/* Finds `name` where the host's loader would, and reads it. */
static int load_needed(struct search *s, const char *name, struct agent_lacks *l)
{
	struct elf_info *info;
	char path[PATH_MAX];

	if (object_named(s, name))
		return 0;
	if (s->n_obj == OBJECTS_MAX || strchr(name, '/'))
		return -E2BIG;
	info = calloc(1, sizeof(*info));
	if (!info)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_dirs; i++) {
		snprintf(path, sizeof(path), "/%s/%s", s->dirs[i], name);
		/* a file of another class or machine is passed over, as the loader does */
		if (read_host_elf(s, path, info) == 0) {
			object_new(s, name, path, info);
			return 0;
		}
	}
	free(info);
	lack_missing(s, l, name);
	return 0;
}

static int version_cmp(const void *a, const void *b)
{
	return strverscmp(a, b); /* GLIBC_2.9 before GLIBC_2.34 */
}

/* The node images whose glibc is at least `want` ("2.34"), for the operator to pick from. */
static void node_images(const char *want, char *buf, size_t size)
{
	static const struct {
		const char *name, *glibc;
	} images[] = {
		{ "Ubuntu 22.04", "2.35" },	 { "Ubuntu 24.04", "2.39" },
		{ "Debian 12", "2.36" },	 { "RHEL 9", "2.34" },
		{ "Amazon Linux 2023", "2.34" }, { "Azure Linux 2.0", "2.35" },
		{ "Azure Linux 3.0", "2.38" },
	};
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(images) && n < size; i++)
		if (strverscmp(images[i].glibc, want) >= 0)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "",
					      images[i].name);
	if (!buf[0])
		snprintf(buf, size, "a newer node image");
}

/* The versions an object defines that its users need and it lacks: one lack per object. */
static void check_versions(struct search *s, const struct object *lib, struct agent_lacks *l)
{
	char missing[400] = "", key[64], have[32], want[32];
	char names[ELF_VERNEED_MAX][ELF_NAME_MAX];
	char images[160];
	size_t n = 0, len = 0;
	struct agent_lack *k;

	for (size_t i = 0; i < s->n_obj; i++) {
		const struct elf_info *user = s->obj[i].info;

		for (size_t v = 0; v < user->n_verneed && n < ARRAY_SIZE(names); v++) {
			const struct elf_verneed *need = &user->verneed[v];
			bool seen = false;

			if (object_named(s, need->file) != lib ||
			    elf_defines(lib->info, need->name))
				continue;
			for (size_t j = 0; j < n && !seen; j++)
				seen = strcmp(names[j], need->name) == 0;
			if (seen)
				continue;
			snprintf(names[n++], ELF_NAME_MAX, "%s", need->name);
		}
	}
	if (!n)
		return;
	qsort(names, n, sizeof(names[0]), version_cmp);
	for (size_t i = 0; i < n && len < sizeof(missing); i++)
		len += (size_t)snprintf(missing + len, sizeof(missing) - len, "%s%s", i ? ", " : "",
					names[i]);
	snprintf(key, sizeof(key), "versions:%s", lib->name);
	k = lack_add(l, true, key);
	if (!k)
		return;
	glibc_version(&lib->info->verdef[0][0], lib->info->n_verdef, ELF_NAME_MAX, have,
		      sizeof(have));
	glibc_version(&names[0][0], n, ELF_NAME_MAX, want, sizeof(want));
	node_images(want, images, sizeof(images));
	if (strcmp(lib->name, "libc.so.6") == 0 && have[0] && want[0])
		snprintf(k->text, sizeof(k->text),
			 "the host's glibc is %s (%s under %s) and the plugin needs %s: run a node "
			 "image with glibc %s or later (%s); the plugin is not installed until it "
			 "can load",
			 have, lib->path, s->root, missing, want, images);
	else
		snprintf(k->text, sizeof(k->text),
			 "the host's %s (%s under %s) lacks %s, which the plugin needs: install a "
			 "newer %s on the node; the plugin is not installed until it can load",
			 lib->name, lib->path, s->root, missing, lib->name);
	snprintf(k->note, sizeof(k->note),
		 "msg=\"the plugin cannot load on this host: a library is too old; not installed\" "
		 "library=%s path=%s host_root=%s lacks=%s%s%s",
		 lib->name, LOGFMT_Q(lib->path), LOGFMT_Q(s->root), LOGFMT_Q(missing),
		 have[0] ? " glibc=" : "", have);
}

static void search_dirs(struct search *s)
{
	static const char *const x86[] = { "lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu" };
	static const char *const arm[] = { "lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu" };
	static const char *const all[] = { "lib64", "usr/lib64", "lib", "usr/lib" };
	const char *const *multi = s->machine == EM_X86_64    ? x86
				   : s->machine == EM_AARCH64 ? arm
							      : NULL;

	s->n_dirs = 0;
	for (size_t i = 0; multi && i < 2; i++)
		s->dirs[s->n_dirs++] = multi[i];
	for (size_t i = 0; i < ARRAY_SIZE(all); i++)
		s->dirs[s->n_dirs++] = all[i];
}

static int check_objects(struct search *s, struct agent_lacks *l)
{
	const struct elf_info *plugin = s->obj[0].info;
	int r = 0;

	/* the interpreter: the kernel opens that very path */
	if (plugin->interp[0]) {
		struct elf_info *info = calloc(1, sizeof(*info));

		if (!info)
			return -ENOMEM;
		if (read_host_elf(s, plugin->interp, info) == 0) {
			const char *base = strrchr(plugin->interp, '/');

			object_new(s,
				   info->soname[0] ? info->soname
				   : base	   ? base + 1
						   : plugin->interp,
				   plugin->interp, info);
		} else {
			struct agent_lack *k = lack_add(l, true, "interp");

			free(info);
			if (k) {
				snprintf(
					k->text, sizeof(k->text),
					"the host has no %s under %s, the program loader the plugin "
					"names (glibc's): the node needs glibc; the plugin is not "
					"installed until it can load",
					plugin->interp, s->root);
				snprintf(
					k->note, sizeof(k->note),
					"msg=\"the plugin cannot load on this host: no program loader; "
					"not installed\" interp=%s host_root=%s",
					LOGFMT_Q(plugin->interp), LOGFMT_Q(s->root));
			}
		}
	}
	/* every object's needs, breadth first, as the loader maps them */
	for (size_t i = 0; i < s->n_obj && r == 0; i++)
		for (size_t k = 0; k < s->obj[i].info->n_needed && r == 0; k++)
			r = load_needed(s, s->obj[i].info->needed[k], l);
	for (size_t i = 1; i < s->n_obj && r == 0; i++)
		check_versions(s, &s->obj[i], l);
	return r;
}

int agent_host_libraries(const char *host_root, const char *plugin_path, struct agent_lacks *l)
{
	struct search s = { .root_fd = -1, .root = host_root };
	_cleanup_close_ int fd = open(plugin_path, O_RDONLY | O_CLOEXEC);
	struct elf_info *plugin;
	int r;

	if (fd < 0)
		return -errno;
	plugin = calloc(1, sizeof(*plugin));
	if (!plugin)
		return -ENOMEM;
	r = read_elf_fd(fd, plugin);
	if (r < 0) {
		free(plugin);
		return r;
	}
	/* a static plugin loads nothing */
	if (!plugin->interp[0] && !plugin->n_needed) {
		free(plugin);
		return 0;
	}
	s.machine = plugin->machine;
	search_dirs(&s);
	object_new(&s, "the plugin", "", plugin);
	s.root_fd = open(host_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.root_fd < 0) {
		struct agent_lack *k = lack_add(l, true, "host-root");

		r = -errno;
		if (k) {
			snprintf(k->text, sizeof(k->text),
				 "the host's root %s cannot be read (%s): mount the host's / there "
				 "read-only (--host-root); the plugin is not installed until its "
				 "libraries are checked",
				 host_root, strerror(-r));
			snprintf(
				k->note, sizeof(k->note),
				"msg=\"the host's root cannot be read: the plugin's libraries are not "
				"checked; not installed\" host_root=%s err=%s",
				LOGFMT_Q(host_root), LOGFMT_Q(strerror(-r)));
		}
		r = 0;
	} else {
		r = check_objects(&s, l);
		close(s.root_fd);
	}
	for (size_t i = 0; i < s.n_obj; i++)
		free(s.obj[i].info);
	return r;
}

/* ---- sysctls ---- */

void agent_host_sysctls(const char *proc_sys, struct agent_lacks *l)
{
	for (size_t i = 0; i < tg_sysctl_floors_n; i++) {
		const struct tg_sysctl_floor *f = &tg_sysctl_floors[i];
		struct agent_lack *k;
		char key[64], who[128];
		long v;

		/* absent in this network namespace, or unreadable: nothing to say */
		if (tg_sysctl_read(proc_sys, f, &v) < 0 || tg_sysctl_ok(f, v))
			continue;
		snprintf(key, sizeof(key), "sysctl:%s", f->name);
		k = lack_add(l, false, key);
		if (!k)
			continue;
		if (f->plugin_raises)
			snprintf(who, sizeof(who),
				 "the plugin raises it at its next ADD on the host");
		else
			snprintf(who, sizeof(who), "nothing %s it (%s)",
				 f->exact ? "sets" : "raises", f->why);
		snprintf(k->text, sizeof(k->text),
			 "%s is %ld, %s %ld, and the agent cannot %s it (/proc/sys is read-only "
			 "here): %s; set it at boot with deploy/90-tollgate.conf in /etc/sysctl.d",
			 f->name, v, f->exact ? "not" : "below", f->min, f->exact ? "set" : "raise",
			 who);
		snprintf(
			k->note, sizeof(k->note),
			"msg=\"a sysctl is %s and /proc/sys is read-only (an unprivileged "
			"container): %s\" sysctl=%s value=%ld %s=%ld fix=\"deploy/90-tollgate.conf "
			"in /etc/sysctl.d\"",
			f->exact ? "off its pinned value" : "below its floor",
			f->plugin_raises ? "left to the plugin on the host" : "left as it is",
			f->name, v, f->exact ? "pinned" : "floor", f->min);
	}
}

/* ---- the conflist's other plugins ---- */

/* A type names a file of the bin dir: one path component, not "." or "..". */
static bool plugin_name_ok(const char *t)
{
	return t[0] && strchr(t, '/') == NULL && strcmp(t, ".") != 0 && strcmp(t, "..") != 0;
}

int agent_host_chained(const char *bin_dir, const char *conflist, size_t len, struct agent_lacks *l)
{
	struct jx_parse_error why;
	json_object *root, *plugins;
	int r = jx_parse(conflist, len, &root, &why);

	if (r < 0)
		return r;
	plugins = jx_get(root, "plugins");
	if (!json_object_is_type(plugins, json_type_array)) {
		json_object_put(root);
		return -EINVAL;
	}
	for (size_t i = 0; i < json_object_array_length(plugins); i++) {
		json_object *t = jx_get(json_object_array_get_idx(plugins, i), "type");
		const char *type;
		struct agent_lack *k;
		char key[96], path[PATH_MAX];
		struct stat st;

		if (!json_object_is_type(t, json_type_string))
			continue;
		type = json_object_get_string(t);
		/* the agent installs Tollgate itself */
		if (strcmp(type, NODE_PLUGIN_TYPE) == 0)
			continue;
		if (plugin_name_ok(type) &&
		    (size_t)snprintf(path, sizeof(path), "%s/%s", bin_dir, type) < sizeof(path) &&
		    stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
			continue;
		snprintf(key, sizeof(key), "plugin:%.80s", type);
		k = lack_add(l, true, key);
		if (!k)
			continue;
		snprintf(
			k->text, sizeof(k->text),
			"the conflist chains plugin '%.80s', which is not an executable file of "
			"%.400s: every pod's ADD would fail, so the conflist is not installed; put the "
			"plugin there (the reference CNI plugins) or take it out of the conflist",
			type, bin_dir);
		snprintf(k->note, sizeof(k->note),
			 "msg=\"the conflist chains a plugin missing from the CNI bin dir: not "
			 "installing it\" plugin=%s bin_dir=%s",
			 LOGFMT_Q(type), LOGFMT_Q(bin_dir));
	}
	json_object_put(root);
	return 0;
}
