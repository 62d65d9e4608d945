// SPDX-License-Identifier: Apache-2.0
/*
 * What the node lacks for the plugin (agent/host.c), and the two readers it
 * stands on: ELF files as the loader reads them (lib/elf.h) and paths inside
 * another root (lib/rootfs.h).
 *
 * The ELF files here are built by the test (a loader's view: program
 * headers, dynamic section, string table, version tables), so that each
 * case says exactly what the host holds; the test binary itself and the
 * libc it runs on are read too, as the real thing. Cut and mangled files
 * are errors, never reads out of bounds (the sanitizer build checks).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/helpers.h"

#include "agent/agent.h"
#include "lib/elf.h"
#include "lib/rootfs.h"
#include "lib/sysctls.h"

/* ---- ELF files made to measure ---- */

struct fake_need {
	const char *file;
	const char *names[8];
};

struct fake_elf {
	uint16_t machine; /* 0: this machine's */
	const char *interp, *soname;
	const char *needed[8];
	struct fake_need need[4];
	const char *def[64];
};

#define BASE 0x10000u /* the load's address: every dynamic pointer goes through it */

struct out {
	unsigned char *b;
	size_t len, cap;
};

static size_t put(struct out *o, const void *p, size_t n)
{
	size_t at = o->len;

	assert_true(o->len + n <= o->cap);
	memcpy(o->b + o->len, p, n);
	o->len += n;
	return at;
}

static size_t count(const char *const *v, size_t max)
{
	size_t n = 0;

	while (n < max && v[n])
		n++;
	return n;
}

/* The dynamic string table: each string once, its offset by strtab_of. */
struct strtab {
	char b[4096];
	size_t len;
};

static uint32_t strtab_of(struct strtab *t, const char *s)
{
	size_t n = strlen(s) + 1;

	for (size_t at = 1; at + n <= t->len; at++)
		if (memcmp(t->b + at, s, n) == 0)
			return (uint32_t)at;
	assert_true(t->len + n <= sizeof(t->b));
	memcpy(t->b + t->len, s, n);
	t->len += n;
	return (uint32_t)(t->len - n);
}

#ifdef __x86_64__
#define OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#else
#define OWN_MACHINE EM_NONE
#endif

/* Builds f into buf (cap bytes); returns its size. */
static size_t fake_elf_build(const struct fake_elf *f, unsigned char *buf, size_t cap)
{
	struct out o = { .b = buf, .cap = cap };
	struct strtab st = { .len = 1 };
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph[3];
	Elf64_Dyn dyn[64];
	size_t n_dyn = 0, n_ph = 0, at_ph, at_interp = 0, at_str, at_vn = 0, at_vd = 0, at_dyn;
	size_t n_need = 0, n_def = count(f->def, 64);
	unsigned char vn[2048], vd[4096];
	size_t vn_len = 0, vd_len = 0;

	memset(buf, 0, cap);
	memset(ph, 0, sizeof(ph));
	/* strings first, so that every table knows its offsets */
	for (size_t i = 0; i < 8 && f->needed[i]; i++)
		strtab_of(&st, f->needed[i]);
	if (f->soname)
		strtab_of(&st, f->soname);
	for (size_t i = 0; i < 4 && f->need[i].file; i++) {
		size_t cnt = count(f->need[i].names, 8);
		Elf64_Verneed v = { .vn_version = VER_NEED_CURRENT,
				    .vn_cnt = (uint16_t)cnt,
				    .vn_file = strtab_of(&st, f->need[i].file),
				    .vn_aux = sizeof(Elf64_Verneed) };

		n_need++;
		if (i + 1 < 4 && f->need[i + 1].file)
			v.vn_next = (uint32_t)(sizeof(v) + cnt * sizeof(Elf64_Vernaux));
		memcpy(vn + vn_len, &v, sizeof(v));
		vn_len += sizeof(v);
		for (size_t k = 0; k < cnt; k++) {
			Elf64_Vernaux a = { .vna_other = (uint16_t)(2 + k),
					    .vna_name = strtab_of(&st, f->need[i].names[k]),
					    .vna_next = k + 1 < cnt ? sizeof(Elf64_Vernaux) : 0 };

			memcpy(vn + vn_len, &a, sizeof(a));
			vn_len += sizeof(a);
		}
	}
	for (size_t i = 0; i <= n_def && (n_def || f->soname); i++) {
		/* entry 0: the base, named after the file */
		const char *name = i ? f->def[i - 1] : f->soname ? f->soname : "base";
		Elf64_Verdef d = { .vd_version = VER_DEF_CURRENT,
				   .vd_flags = i ? 0 : VER_FLG_BASE,
				   .vd_ndx = (uint16_t)(i + 1),
				   .vd_cnt = 1,
				   .vd_aux = sizeof(Elf64_Verdef),
				   .vd_next = i < n_def
						      ? sizeof(Elf64_Verdef) + sizeof(Elf64_Verdaux)
						      : 0 };
		Elf64_Verdaux a = { .vda_name = strtab_of(&st, name) };

		memcpy(vd + vd_len, &d, sizeof(d));
		vd_len += sizeof(d);
		memcpy(vd + vd_len, &a, sizeof(a));
		vd_len += sizeof(a);
	}

	put(&o, &eh, sizeof(eh));
	n_ph = f->interp ? 3 : 2;
	at_ph = put(&o, ph, n_ph * sizeof(ph[0]));
	if (f->interp)
		at_interp = put(&o, f->interp, strlen(f->interp) + 1);
	at_str = put(&o, st.b, st.len);
	o.len = (o.len + 7) & ~(size_t)7;
	if (vn_len)
		at_vn = put(&o, vn, vn_len);
	if (vd_len)
		at_vd = put(&o, vd, vd_len);
	o.len = (o.len + 7) & ~(size_t)7;

	for (size_t i = 0; i < 8 && f->needed[i]; i++)
		dyn[n_dyn++] = (Elf64_Dyn){ DT_NEEDED, { strtab_of(&st, f->needed[i]) } };
	if (f->soname)
		dyn[n_dyn++] = (Elf64_Dyn){ DT_SONAME, { strtab_of(&st, f->soname) } };
	dyn[n_dyn++] = (Elf64_Dyn){ DT_STRTAB, { BASE + at_str } };
	dyn[n_dyn++] = (Elf64_Dyn){ DT_STRSZ, { st.len } };
	if (n_need) {
		dyn[n_dyn++] = (Elf64_Dyn){ DT_VERNEED, { BASE + at_vn } };
		dyn[n_dyn++] = (Elf64_Dyn){ DT_VERNEEDNUM, { n_need } };
	}
	if (vd_len) {
		dyn[n_dyn++] = (Elf64_Dyn){ DT_VERDEF, { BASE + at_vd } };
		dyn[n_dyn++] = (Elf64_Dyn){ DT_VERDEFNUM, { n_def + 1 } };
	}
	dyn[n_dyn++] = (Elf64_Dyn){ DT_NULL, { 0 } };
	at_dyn = put(&o, dyn, n_dyn * sizeof(dyn[0]));

	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = f->soname ? ET_DYN : ET_EXEC;
	eh.e_machine = f->machine ? f->machine : OWN_MACHINE;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = at_ph;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (uint16_t)n_ph;
	memcpy(o.b, &eh, sizeof(eh));
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD,
			      .p_offset = 0,
			      .p_vaddr = BASE,
			      .p_filesz = o.len,
			      .p_memsz = o.len };
	ph[1] = (Elf64_Phdr){ .p_type = PT_DYNAMIC,
			      .p_offset = at_dyn,
			      .p_vaddr = BASE + at_dyn,
			      .p_filesz = n_dyn * sizeof(dyn[0]) };
	if (f->interp)
		ph[2] = (Elf64_Phdr){ .p_type = PT_INTERP,
				      .p_offset = at_interp,
				      .p_filesz = strlen(f->interp) + 1 };
	memcpy(o.b + at_ph, ph, n_ph * sizeof(ph[0]));
	return o.len;
}

/* ---- elf_read ---- */

static void t_elf_reads_what_it_was_built_with(void **state)
{
	static unsigned char buf[16384];
	static struct elf_info info;
	const struct fake_elf plugin = {
		.interp = "/lib64/ld-linux-x86-64.so.2",
		.needed = { "libmnl.so.0", "libc.so.6" },
		.need = { { "libc.so.6", { "GLIBC_2.2.5", "GLIBC_2.34" } },
			  { "libmnl.so.0", { "LIBMNL_1.0" } } },
	};
	const struct fake_elf libc = {
		.soname = "libc.so.6",
		.def = { "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.31", "GLIBC_PRIVATE" },
	};
	size_t n = fake_elf_build(&plugin, buf, sizeof(buf));

	assert_int_equal(elf_read(buf, n, &info), 0);
	assert_int_equal(info.machine, OWN_MACHINE);
	assert_string_equal(info.interp, "/lib64/ld-linux-x86-64.so.2");
	assert_string_equal(info.soname, "");
	assert_int_equal(info.n_needed, 2);
	assert_string_equal(info.needed[0], "libmnl.so.0");
	assert_string_equal(info.needed[1], "libc.so.6");
	assert_int_equal(info.n_verneed, 3);
	assert_string_equal(info.verneed[1].file, "libc.so.6");
	assert_string_equal(info.verneed[1].name, "GLIBC_2.34");
	assert_string_equal(info.verneed[2].file, "libmnl.so.0");
	assert_string_equal(info.verneed[2].name, "LIBMNL_1.0");
	assert_int_equal(info.n_verdef, 0);

	n = fake_elf_build(&libc, buf, sizeof(buf));
	assert_int_equal(elf_read(buf, n, &info), 0);
	assert_string_equal(info.soname, "libc.so.6");
	assert_string_equal(info.interp, "");
	/* the base entry is the file's name, no version */
	assert_int_equal(info.n_verdef, 4);
	assert_true(elf_defines(&info, "GLIBC_2.31"));
	assert_true(elf_defines(&info, "GLIBC_PRIVATE"));
	assert_false(elf_defines(&info, "GLIBC_2.34"));
	assert_false(elf_defines(&info, "libc.so.6"));
}

/* The libc this process runs on: dl_iterate_phdr's object whose name ends in libc.so.6. */
static int find_libc(struct dl_phdr_info *i, size_t size, void *data)
{
	const char *n = i->dlpi_name;
	size_t len = strlen(n);

	if (len >= 9 && strcmp(n + len - 9, "libc.so.6") == 0) {
		snprintf(data, PATH_MAX, "%s", n);
		return 1;
	}
	return 0;
}

static unsigned char *slurp_bytes(const char *path, size_t *len)
{
	return (unsigned char *)slurp(path, len);
}

static void t_elf_reads_this_process_and_its_libc(void **state)
{
	static struct elf_info self, libc;
	char libc_path[PATH_MAX] = "";
	unsigned char *b;
	size_t n, libc_needs = 0;

	b = slurp_bytes("/proc/self/exe", &n);
	assert_int_equal(elf_read(b, n, &self), 0);
	free(b);
	assert_true(self.interp[0] == '/');
	assert_true(self.n_needed > 0);
	dl_iterate_phdr(find_libc, libc_path);
	assert_true(libc_path[0]);
	b = slurp_bytes(libc_path, &n);
	assert_int_equal(elf_read(b, n, &libc), 0);
	free(b);
	assert_string_equal(libc.soname, "libc.so.6");
	assert_true(libc.n_verdef > 10);
	/* control: this process runs, so its libc defines every version it needs of it */
	for (size_t i = 0; i < self.n_verneed; i++) {
		if (strcmp(self.verneed[i].file, "libc.so.6") != 0)
			continue;
		libc_needs++;
		if (!elf_defines(&libc, self.verneed[i].name))
			fail_msg("%s does not define %s", libc_path, self.verneed[i].name);
	}
	assert_true(libc_needs > 0);
}

static void t_elf_refuses_what_is_not_ours(void **state)
{
	static unsigned char buf[16384];
	static struct elf_info info;
	const struct fake_elf lib = { .soname = "libx.so.1", .def = { "X_1" } };
	size_t n = fake_elf_build(&lib, buf, sizeof(buf));

	assert_int_equal(elf_read("#!/bin/sh\n", 10, &info), -ENOEXEC);
	assert_int_equal(elf_read(buf, 10, &info), -ENOEXEC);
	buf[EI_CLASS] = ELFCLASS32;
	assert_int_equal(elf_read(buf, n, &info), -ENOEXEC);
	buf[EI_CLASS] = ELFCLASS64;
	buf[EI_DATA] = ELFDATA2MSB;
	assert_int_equal(elf_read(buf, n, &info), -ENOEXEC);
	buf[EI_DATA] = ELFDATA2LSB;
	assert_int_equal(elf_read(buf, n, &info), 0);
	/* a failure leaves nothing behind */
	assert_int_equal(elf_read(buf, n - 1, &info), -EBADMSG);
	assert_int_equal(info.n_verdef, 0);
	assert_string_equal(info.soname, "");
}

/*
 * Every cut of a file and many mangled copies: an answer each time, never
 * a read past the buffer (each copy is malloc'ed to its exact size, which
 * the sanitizer build guards).
 */
static void t_elf_cut_and_mangled(void **state)
{
	static unsigned char buf[16384];
	static struct elf_info info;
	const struct fake_elf f = {
		.interp = "/lib/ld-linux-aarch64.so.1",
		.soname = "libmixed.so.2",
		.needed = { "libc.so.6", "libmnl.so.0" },
		.need = { { "libc.so.6", { "GLIBC_2.17", "GLIBC_2.34" } } },
		.def = { "MIXED_1", "MIXED_2" },
	};
	size_t n = fake_elf_build(&f, buf, sizeof(buf));
	unsigned seed = 7;

	assert_int_equal(elf_read(buf, n, &info), 0);
	for (size_t cut = 0; cut < n; cut++) {
		unsigned char *c = malloc(cut ? cut : 1);

		assert_non_null(c);
		memcpy(c, buf, cut);
		assert_true(elf_read(c, cut, &info) < 0);
		free(c);
	}
	for (int i = 0; i < 20000; i++) {
		unsigned char *c = malloc(n);

		assert_non_null(c);
		memcpy(c, buf, n);
		for (int k = 0; k < 1 + i % 4; k++)
			c[rand_r(&seed) % n] = (unsigned char)rand_r(&seed);
		(void)elf_read(c, n, &info);
		free(c);
	}
}

/* ---- rootfs_open ---- */

static char root[256];

static void mk(const char *rel, const char *data)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (data)
		write_file(path, data, strlen(data));
	else
		assert_int_equal(mkdir(path, 0755), 0);
}

static void ln(const char *target, const char *rel)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(symlink(target, path), 0);
}

static int root_setup(void **state)
{
	return tmpdir_make(root, sizeof(root), "/tmp", "hostroot") ? 0 : -1;
}

static int root_teardown(void **state)
{
	tmpdir_remove(root);
	return 0;
}

/* What path reads as, opened under the root ("" when it cannot be: *ret_err). */
static void read_in_root(const char *path, char *buf, size_t size, int *ret_err)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY), fd = -1;
	ssize_t n = 0;

	assert_true(rfd >= 0);
	*ret_err = rootfs_open(rfd, path, O_RDONLY, &fd);
	if (*ret_err == 0) {
		n = read(fd, buf, size - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	close(rfd);
}

static void t_rootfs_symlinks_stay_inside(void **state)
{
	char got[64];
	int err;

	mk("usr", NULL);
	mk("usr/lib", NULL);
	mk("usr/lib/x", NULL);
	mk("usr/lib/x/libfoo", "foo in the root");
	mk("etc", NULL);
	ln("usr/lib", "lib");		    /* relative, as merged /usr has it */
	ln("/lib/x/libfoo", "usr/lib/abs"); /* absolute: the root's /lib, not ours */
	ln("../../../../../../usr/lib/x/libfoo", "etc/up"); /* climbs past the root */
	ln("loop2", "etc/loop1");
	ln("loop1", "etc/loop2");

	static const char *const same[] = {
		"/lib/x/libfoo",
		"usr/lib/abs",
		"/etc/up",
		"/../../usr/./lib//x/../x/libfoo",
	};

	for (size_t i = 0; i < ARRAY_SIZE(same); i++) {
		read_in_root(same[i], got, sizeof(got), &err);
		if (err || strcmp(got, "foo in the root") != 0)
			fail_msg("%s in the root: err %d, read \"%s\"", same[i], err, got);
	}
	read_in_root("/etc/loop1", got, sizeof(got), &err);
	assert_int_equal(err, -ELOOP);
	/* control: this file exists in our root, not in that one */
	assert_int_equal(access("/etc/passwd", R_OK), 0);
	read_in_root("/etc/passwd", got, sizeof(got), &err);
	assert_int_equal(err, -ENOENT);
	ln("/etc/passwd", "etc/ours");
	read_in_root("/etc/ours", got, sizeof(got), &err);
	assert_int_equal(err, -ENOENT);
}

/* ---- the plugin's libraries on a host ---- */

/* A host's file; x86-64 unless f says otherwise, whatever machine the test runs on. */
static void put_elf(const char *rel, const struct fake_elf *f)
{
	static unsigned char buf[16384];
	struct fake_elf c = *f;
	char path[512];
	size_t n;

	if (!c.machine)
		c.machine = EM_X86_64;
	n = fake_elf_build(&c, buf, sizeof(buf));

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	write_file(path, (const char *)buf, n);
}

static const struct fake_elf PLUGIN = {
	.interp = "/lib64/ld-linux-x86-64.so.2",
	.needed = { "libmnl.so.0", "libc.so.6", "ld-linux-x86-64.so.2" },
	.need = { { "libc.so.6", { "GLIBC_2.2.5", "GLIBC_2.33", "GLIBC_2.34" } },
		  { "libmnl.so.0", { "LIBMNL_1.0" } } },
};
static const struct fake_elf LD = { .soname = "ld-linux-x86-64.so.2", .def = { "GLIBC_2.3" } };
static const struct fake_elf MNL = {
	.soname = "libmnl.so.0",
	.needed = { "libc.so.6" },
	.need = { { "libc.so.6", { "GLIBC_2.2.5", "GLIBC_2.14" } } },
	.def = { "LIBMNL_1.0", "LIBMNL_1.1" },
};
static const struct fake_elf LIBC_NEW = {
	.soname = "libc.so.6",
	.needed = { "ld-linux-x86-64.so.2" },
	.def = { "GLIBC_2.2.5", "GLIBC_2.14", "GLIBC_2.31", "GLIBC_2.33", "GLIBC_2.34",
		 "GLIBC_2.36" },
};
static const struct fake_elf LIBC_OLD = {
	.soname = "libc.so.6",
	.needed = { "ld-linux-x86-64.so.2" },
	.def = { "GLIBC_2.2.5", "GLIBC_2.14", "GLIBC_2.30", "GLIBC_2.31" },
};

/* A Debian-like host: merged /usr, the multiarch directory, /lib64's loader an absolute link. */
static void host_layout(bool mnl, const struct fake_elf *libc)
{
	tmpdir_remove(root);
	assert_int_equal(mkdir(root, 0700), 0);
	mk("usr", NULL);
	mk("usr/lib", NULL);
	mk("usr/lib/x86_64-linux-gnu", NULL);
	mk("lib64", NULL);
	ln("usr/lib", "lib");
	put_elf("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", &LD);
	ln("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2");
	if (libc)
		put_elf("usr/lib/x86_64-linux-gnu/libc.so.6", libc);
	if (mnl)
		put_elf("usr/lib/x86_64-linux-gnu/libmnl.so.0", &MNL);
}

static struct agent_lacks lacks;

static void check_host(void)
{
	char plugin[512];

	snprintf(plugin, sizeof(plugin), "%s.plugin", root);
	{
		static unsigned char buf[16384];
		struct fake_elf p = PLUGIN;
		size_t n;

		p.machine = EM_X86_64;
		n = fake_elf_build(&p, buf, sizeof(buf));
		write_file(plugin, (const char *)buf, n);
	}
	memset(&lacks, 0, sizeof(lacks));
	assert_int_equal(agent_host_libraries(root, plugin, &lacks), 0);
	unlink(plugin);
}

static void t_host_complete(void **state)
{
	host_layout(true, &LIBC_NEW);
	check_host();
	if (lacks.n)
		fail_msg("a complete host lacks: %s", lacks.l[0].text);
	assert_false(agent_lacks_blocking(&lacks));
}

static void t_host_without_libmnl(void **state)
{
	host_layout(false, &LIBC_NEW);
	check_host();
	assert_int_equal(lacks.n, 1);
	assert_true(lacks.l[0].blocking);
	assert_true(agent_lacks_blocking(&lacks));
	assert_string_equal(lacks.l[0].key, "lib:libmnl.so.0");
	assert_contains(lacks.l[0].text, "the host has no libmnl.so.0");
	assert_contains(lacks.l[0].text, "install libmnl0 (Debian, Ubuntu) or libmnl");
	assert_contains(lacks.l[0].text, root);
	assert_contains(lacks.l[0].note, "library=libmnl.so.0");
	/* the same file in a directory the loader does not search: still lacking */
	put_elf("libmnl.so.0", &MNL);
	check_host();
	assert_int_equal(lacks.n, 1);
	/* in lib64 (RHEL's): found */
	put_elf("lib64/libmnl.so.0", &MNL);
	check_host();
	assert_int_equal(lacks.n, 0);
}

static void t_host_glibc_too_old(void **state)
{
	host_layout(true, &LIBC_OLD);
	check_host();
	assert_int_equal(lacks.n, 1);
	assert_true(lacks.l[0].blocking);
	assert_string_equal(lacks.l[0].key, "versions:libc.so.6");
	assert_contains(lacks.l[0].text, "the host's glibc is 2.31");
	/* the path the loader finds it by: the multiarch directory, through /lib */
	assert_contains(lacks.l[0].text, "(/lib/x86_64-linux-gnu/libc.so.6 under");
	assert_contains(lacks.l[0].text, "needs GLIBC_2.33, GLIBC_2.34");
	assert_contains(lacks.l[0].text,
			"glibc 2.34 or later (Ubuntu 22.04, Ubuntu 24.04, Debian 12, "
			"RHEL 9, Amazon Linux 2023, Azure Linux 2.0, Azure Linux 3.0)");
	assert_contains(lacks.l[0].note, "glibc=2.31");
}

static void t_host_no_glibc_no_loader(void **state)
{
	host_layout(true, NULL);
	check_host();
	assert_true(agent_lacks_blocking(&lacks));
	assert_int_equal(lacks.n, 1);
	assert_string_equal(lacks.l[0].key, "lib:libc.so.6");
	assert_contains(lacks.l[0].text, "the host has no glibc");
	assert_contains(lacks.l[0].text, "glibc 2.34 or later");
	/* without its loader, which the kernel opens by the plugin's path */
	host_layout(true, &LIBC_NEW);
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/lib64/ld-linux-x86-64.so.2", root);
		assert_int_equal(unlink(path), 0);
	}
	check_host();
	assert_int_equal(lacks.n, 1);
	assert_string_equal(lacks.l[0].key, "interp");
	assert_contains(lacks.l[0].text, "/lib64/ld-linux-x86-64.so.2");
}

static void t_host_of_another_machine(void **state)
{
	struct fake_elf arm = MNL;

	/* an aarch64 libmnl where the x86-64 one belongs: passed over, as the loader does */
	host_layout(false, &LIBC_NEW);
	arm.machine = EM_AARCH64;
	put_elf("usr/lib/x86_64-linux-gnu/libmnl.so.0", &arm);
	check_host();
	assert_int_equal(lacks.n, 1);
	assert_string_equal(lacks.l[0].key, "lib:libmnl.so.0");
}

static void t_host_root_unreadable(void **state)
{
	char plugin[512];
	static unsigned char buf[16384];
	struct fake_elf p = PLUGIN;
	size_t n;

	snprintf(plugin, sizeof(plugin), "%s.plugin", root);
	p.machine = EM_X86_64;
	n = fake_elf_build(&p, buf, sizeof(buf));
	write_file(plugin, (const char *)buf, n);
	memset(&lacks, 0, sizeof(lacks));
	assert_int_equal(agent_host_libraries("/nonexistent/host", plugin, &lacks), 0);
	assert_int_equal(lacks.n, 1);
	assert_true(lacks.l[0].blocking);
	assert_contains(lacks.l[0].text, "/nonexistent/host cannot be read");
	/* the plugin itself unreadable: an error, no lack */
	memset(&lacks, 0, sizeof(lacks));
	unlink(plugin);
	assert_int_equal(agent_host_libraries(root, plugin, &lacks), -ENOENT);
	assert_int_equal(lacks.n, 0);
	/* a static plugin loads nothing: nothing to lack, even on an empty root */
	{
		const struct fake_elf st = { .machine = EM_X86_64 };

		n = fake_elf_build(&st, buf, sizeof(buf));
		write_file(plugin, (const char *)buf, n);
		assert_int_equal(agent_host_libraries("/nonexistent/host", plugin, &lacks), 0);
		assert_int_equal(lacks.n, 0);
		unlink(plugin);
	}
}

/* ---- sysctls ---- */

static void t_sysctls_below_floor(void **state)
{
	tmpdir_remove(root);
	assert_int_equal(mkdir(root, 0700), 0);
	mk("net", NULL);
	mk("net/ipv4", NULL);
	mk("net/ipv4/neigh", NULL);
	mk("net/ipv4/neigh/default", NULL);
	mk("net/ipv4/ip_forward", "0\n");
	mk("net/ipv4/neigh/default/gc_thresh1", "128\n");
	mk("net/ipv4/neigh/default/gc_thresh2", "90000\n"); /* on its floor */
	/* gc_thresh3 absent, as in a network namespace other than the host's first */
	mk("net/ipv4/conf", NULL);
	mk("net/ipv4/conf/all", NULL);
	mk("net/ipv4/conf/default", NULL);
	mk("net/ipv4/conf/all/accept_source_route", "0\n"); /* its pinned value */
	/* pinned: above is as wrong as below (a fresh namespace's default is 1) */
	mk("net/ipv4/conf/default/accept_source_route", "1\n");
	memset(&lacks, 0, sizeof(lacks));
	agent_host_sysctls(root, &lacks);
	assert_int_equal(lacks.n, 3);
	assert_false(agent_lacks_blocking(&lacks));
	assert_string_equal(lacks.l[0].key, "sysctl:net.ipv4.ip_forward");
	assert_contains(lacks.l[0].text, "net.ipv4.ip_forward is 0, below 1");
	assert_contains(lacks.l[0].text, "the plugin raises it at its next ADD");
	assert_contains(lacks.l[0].text, "deploy/90-tollgate.conf");
	assert_contains(lacks.l[0].note, "below its floor and /proc/sys is read-only");
	assert_string_equal(lacks.l[1].key, "sysctl:net.ipv4.neigh.default.gc_thresh1");
	assert_contains(lacks.l[1].text, "is 128, below 80000");
	assert_contains(lacks.l[1].text, "nothing raises it");
	assert_string_equal(lacks.l[2].key, "sysctl:net.ipv4.conf.default.accept_source_route");
	assert_contains(lacks.l[2].text,
			"accept_source_route is 1, not 0, and the agent cannot set it");
	assert_contains(lacks.l[2].text, "nothing sets it (the node forwards source-routed");
	assert_contains(lacks.l[2].note, "off its pinned value");
	assert_contains(lacks.l[2].note, "value=1 pinned=0");
	/* control: at their floors (or above) and pinned values, nothing to say */
	mk("net/ipv4/ip_forward", "1\n");
	mk("net/ipv4/neigh/default/gc_thresh1", "80001\n");
	mk("net/ipv4/conf/default/accept_source_route", "0\n");
	memset(&lacks, 0, sizeof(lacks));
	agent_host_sysctls(root, &lacks);
	assert_int_equal(lacks.n, 0);
}

/* The floors are deploy/90-tollgate.conf's, which the lacks tell operators to install. */
static void t_sysctl_floors_are_the_deploy_files(void **state)
{
	FILE *f = fopen("deploy/90-tollgate.conf", "r");
	char line[256];
	size_t seen = 0;

	if (!f)
		fail_msg("deploy/90-tollgate.conf not found (run from the repository's top)");
	while (fgets(line, sizeof(line), f)) {
		char name[128];
		long v;
		bool found = false;

		if (line[0] == '#' || sscanf(line, "%127s = %ld", name, &v) != 2)
			continue;
		for (size_t i = 0; i < tg_sysctl_floors_n; i++)
			if (strcmp(tg_sysctl_floors[i].name, name) == 0) {
				assert_int_equal(tg_sysctl_floors[i].min, v);
				found = true;
			}
		if (!found)
			fail_msg("%s is in 90-tollgate.conf, not in lib/sysctls.c", name);
		seen++;
	}
	fclose(f);
	assert_int_equal(seen, tg_sysctl_floors_n);
}

/* ---- the conflist's other plugins ---- */

static void t_chained_plugins_missing(void **state)
{
	static const char conflist[] =
		"{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"tollgate\"},"
		"{\"type\":\"portmap\"},{\"type\":\"bandwidth\"},{\"type\":\"../sbin/x\"}]}";
	char path[512];

	memset(&lacks, 0, sizeof(lacks));
	tmpdir_remove(root);
	assert_int_equal(mkdir(root, 0700), 0);
	/* portmap executable, bandwidth not executable, the third no plain name */
	mk("portmap", "#!/bin/sh\n");
	snprintf(path, sizeof(path), "%s/portmap", root);
	assert_int_equal(chmod(path, 0755), 0);
	mk("bandwidth", "#!/bin/sh\n");
	assert_int_equal(agent_host_chained(root, conflist, strlen(conflist), &lacks), 0);
	assert_int_equal(lacks.n, 2);
	assert_string_equal(lacks.l[0].key, "plugin:bandwidth");
	assert_string_equal(lacks.l[1].key, "plugin:../sbin/x");
	assert_true(agent_lacks_blocking(&lacks));
	assert_non_null(strstr(lacks.l[0].text, "the conflist chains plugin 'bandwidth'"));
	assert_non_null(strstr(lacks.l[0].text, root));
	/* the control: with both in place, nothing lacks but the name that is no file name */
	snprintf(path, sizeof(path), "%s/bandwidth", root);
	assert_int_equal(chmod(path, 0755), 0);
	memset(&lacks, 0, sizeof(lacks));
	assert_int_equal(agent_host_chained(root, conflist, strlen(conflist), &lacks), 0);
	assert_int_equal(lacks.n, 1);
	assert_string_equal(lacks.l[0].key, "plugin:../sbin/x");
	/* no plugin list: said, nothing added */
	memset(&lacks, 0, sizeof(lacks));
	assert_int_equal(agent_host_chained(root, "{\"type\":\"tollgate\"}", 19, &lacks), -EINVAL);
	assert_int_equal(lacks.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_elf_reads_what_it_was_built_with),
		cmocka_unit_test(t_elf_reads_this_process_and_its_libc),
		cmocka_unit_test(t_elf_refuses_what_is_not_ours),
		cmocka_unit_test(t_elf_cut_and_mangled),
		cmocka_unit_test(t_rootfs_symlinks_stay_inside),
		cmocka_unit_test(t_host_complete),
		cmocka_unit_test(t_host_without_libmnl),
		cmocka_unit_test(t_host_glibc_too_old),
		cmocka_unit_test(t_host_no_glibc_no_loader),
		cmocka_unit_test(t_host_of_another_machine),
		cmocka_unit_test(t_host_root_unreadable),
		cmocka_unit_test(t_sysctls_below_floor),
		cmocka_unit_test(t_sysctl_floors_are_the_deploy_files),
		cmocka_unit_test(t_chained_plugins_missing),
	};

	return cmocka_run_group_tests_name("host", tests, root_setup, root_teardown);
}
