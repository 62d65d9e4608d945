/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_ELF_H
#define TG_LIB_ELF_H

/*
 * What the dynamic loader needs of an ELF file, read as the loader reads
 * it (program headers, the dynamic section, the dynamic string table): its
 * program interpreter, the libraries it needs, the symbol versions it needs
 * of each, and the versions it defines. The node agent compares the plugin's
 * needs with the host's libraries before it installs the plugin there (a
 * glibc too old, a library missing: the plugin would not start).
 *
 * 64-bit files of the machine's own byte order only (the plugin's and its
 * libraries'); anything else is -ENOEXEC. Every offset, size and count is
 * checked against the buffer before it is read: a short, cut or crafted
 * file is an error, never a read out of bounds.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_NAME_MAX 128 /* a library's or a version's name, NUL included */
#define ELF_NEEDED_MAX 32
#define ELF_VERNEED_MAX 128
#define ELF_VERDEF_MAX 256 /* glibc 2.36 defines 45 */

struct elf_verneed {
	char file[ELF_NAME_MAX]; /* the library it is needed of ("libc.so.6") */
	char name[ELF_NAME_MAX]; /* the version ("GLIBC_2.34") */
};

struct elf_info {
	uint16_t machine;	   /* e_machine: EM_X86_64, EM_AARCH64 */
	char interp[256];	   /* PT_INTERP ("": none) */
	char soname[ELF_NAME_MAX]; /* DT_SONAME ("": none) */
	char needed[ELF_NEEDED_MAX][ELF_NAME_MAX];
	size_t n_needed;
	struct elf_verneed verneed[ELF_VERNEED_MAX];
	size_t n_verneed;
	char verdef[ELF_VERDEF_MAX][ELF_NAME_MAX]; /* defined versions, not the base */
	size_t n_verdef;
};

/*
 * Reads buf (a whole file) into *ret. -ENOEXEC: not an ELF file of this
 * machine's class and byte order; -EBADMSG: a header, table or string out of
 * the file's bounds; -E2BIG: more entries than the limits above. *ret is
 * all zero after a failure.
 */
int elf_read(const void *buf, size_t len, struct elf_info *ret);
/* Whether info defines version `name`. */
bool elf_defines(const struct elf_info *info, const char *name);

#endif
