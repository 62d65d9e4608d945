// SPDX-License-Identifier: Apache-2.0
/* What the dynamic loader reads of an ELF file (lib/elf.h). */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "lib/elf.h"

#define LOADS_MAX 32
#define TABLE_MAX 1024 /* entries of a version table walked at most */

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OWN_DATA ELFDATA2LSB
#else
#define OWN_DATA ELFDATA2MSB
#endif

struct file {
	const unsigned char *b;
	size_t len;
	/* PT_LOAD: where the dynamic section's addresses are in the file */
	uint64_t vaddr[LOADS_MAX], off[LOADS_MAX], filesz[LOADS_MAX];
	size_t n_loads;
	uint64_t strtab, strsz; /* the dynamic string table: file offset, size */
};

/* n bytes at off, copied whole or not at all. */
static int read_at(const struct file *f, uint64_t off, void *dst, size_t n)
{
	if (off > f->len || n > f->len - off)
		return -EBADMSG;
	memcpy(dst, f->b + off, n);
	return 0;
}

/* A NUL-terminated string of at most size - 1 bytes at off, ending before end. */
static int get_str(const struct file *f, uint64_t off, uint64_t end, char *dst, size_t size)
{
	const unsigned char *nul;

	if (end > f->len)
		end = f->len;
	if (off >= end)
		return -EBADMSG;
	nul = memchr(f->b + off, '\0', end - off);
	if (!nul)
		return -EBADMSG;
	if ((size_t)(nul - (f->b + off)) >= size)
		return -E2BIG;
	memcpy(dst, f->b + off, (size_t)(nul - (f->b + off)) + 1);
	return 0;
}

/* A string of the dynamic string table. */
static int dyn_str(const struct file *f, uint64_t idx, char *dst, size_t size)
{
	if (idx >= f->strsz)
		return -EBADMSG;
	return get_str(f, f->strtab + idx, f->strtab + f->strsz, dst, size);
}

/* The file offset of an address the dynamic section gives. */
static int vaddr_offset(const struct file *f, uint64_t vaddr, uint64_t *ret)
{
	for (size_t i = 0; i < f->n_loads; i++)
		if (vaddr >= f->vaddr[i] && vaddr - f->vaddr[i] < f->filesz[i]) {
			*ret = vaddr - f->vaddr[i] + f->off[i];
			return 0;
		}
	return -EBADMSG;
}

/* Where a version table of num entries starts in the file. */
static int table_at(const struct file *f, uint64_t vaddr, uint64_t num, uint64_t *ret)
{
	if (num > TABLE_MAX)
		return -E2BIG;
	return vaddr_offset(f, vaddr, ret);
}

static int read_verneed(const struct file *f, uint64_t vaddr, uint64_t num, struct elf_info *ret)
{
	uint64_t off;
	int r = table_at(f, vaddr, num, &off);

	if (r < 0)
		return r;
	for (uint64_t i = 0; i < num; i++) {
		Elf64_Verneed vn;
		uint64_t aux;
		char file[ELF_NAME_MAX];

		if ((r = read_at(f, off, &vn, sizeof(vn))) < 0)
			return r;
		if (vn.vn_version != VER_NEED_CURRENT)
			return -EBADMSG;
		if ((r = dyn_str(f, vn.vn_file, file, sizeof(file))) < 0)
			return r;
		aux = off + vn.vn_aux;
		for (unsigned j = 0; j < vn.vn_cnt; j++) {
			Elf64_Vernaux va;
			struct elf_verneed *n;

			if (ret->n_verneed == ELF_VERNEED_MAX)
				return -E2BIG;
			if ((r = read_at(f, aux, &va, sizeof(va))) < 0)
				return r;
			n = &ret->verneed[ret->n_verneed];
			if ((r = dyn_str(f, va.vna_name, n->name, sizeof(n->name))) < 0)
				return r;
			memcpy(n->file, file, sizeof(file));
			ret->n_verneed++;
			if (!va.vna_next)
				break;
			aux += va.vna_next;
		}
		if (!vn.vn_next)
			break;
		off += vn.vn_next;
	}
	return 0;
}

static int read_verdef(const struct file *f, uint64_t vaddr, uint64_t num, struct elf_info *ret)
{
	uint64_t off;
	int r = table_at(f, vaddr, num, &off);

	if (r < 0)
		return r;
	for (uint64_t i = 0; i < num; i++) {
		Elf64_Verdef vd;
		Elf64_Verdaux va;

		if ((r = read_at(f, off, &vd, sizeof(vd))) < 0)
			return r;
		if (vd.vd_version != VER_DEF_CURRENT)
			return -EBADMSG;
		/* the base entry names the file itself, not a version */
		if (vd.vd_cnt && !(vd.vd_flags & VER_FLG_BASE)) {
			if (ret->n_verdef == ELF_VERDEF_MAX)
				return -E2BIG;
			if ((r = read_at(f, off + vd.vd_aux, &va, sizeof(va))) < 0)
				return r;
			r = dyn_str(f, va.vda_name, ret->verdef[ret->n_verdef],
				    sizeof(ret->verdef[0]));
			if (r < 0)
				return r;
			ret->n_verdef++;
		}
		if (!vd.vd_next)
			break;
		off += vd.vd_next;
	}
	return 0;
}

/* The program headers: the interpreter, the loads, where the dynamic section is. */
static int read_phdrs(struct file *f, const Elf64_Ehdr *eh, uint64_t *ret_dyn, uint64_t *ret_dynsz,
		      struct elf_info *ret)
{
	int r;

	*ret_dyn = *ret_dynsz = 0;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph;

		if ((r = read_at(f, eh->e_phoff + (uint64_t)i * sizeof(ph), &ph, sizeof(ph))) < 0)
			return r;
		if (ph.p_type == PT_INTERP) {
			if (ph.p_offset > f->len || ph.p_filesz > f->len - ph.p_offset)
				return -EBADMSG;
			r = get_str(f, ph.p_offset, ph.p_offset + ph.p_filesz, ret->interp,
				    sizeof(ret->interp));
			if (r < 0)
				return r;
		} else if (ph.p_type == PT_DYNAMIC) {
			*ret_dyn = ph.p_offset;
			*ret_dynsz = ph.p_filesz;
		} else if (ph.p_type == PT_LOAD) {
			if (f->n_loads == LOADS_MAX)
				return -E2BIG;
			f->vaddr[f->n_loads] = ph.p_vaddr;
			f->off[f->n_loads] = ph.p_offset;
			f->filesz[f->n_loads] = ph.p_filesz;
			f->n_loads++;
		}
	}
	return 0;
}

static int read_dynamic(struct file *f, uint64_t dyn, uint64_t dynsz, struct elf_info *ret)
{
	uint64_t needed[ELF_NEEDED_MAX], soname = 0, verneed = 0, verneednum = 0, verdef = 0,
					 verdefnum = 0, strtab = 0;
	bool has_soname = false, has_strtab = false;
	int r;

	if (dyn > f->len || dynsz > f->len - dyn)
		return -EBADMSG;
	f->strsz = 0;
	for (uint64_t o = dyn; o + sizeof(Elf64_Dyn) <= dyn + dynsz; o += sizeof(Elf64_Dyn)) {
		Elf64_Dyn d;

		if ((r = read_at(f, o, &d, sizeof(d))) < 0)
			return r;
		if (d.d_tag == DT_NULL)
			break;
		switch (d.d_tag) {
		case DT_NEEDED:
			if (ret->n_needed == ELF_NEEDED_MAX)
				return -E2BIG;
			needed[ret->n_needed++] = d.d_un.d_val;
			break;
		case DT_SONAME:
			soname = d.d_un.d_val;
			has_soname = true;
			break;
		case DT_STRTAB:
			strtab = d.d_un.d_ptr;
			has_strtab = true;
			break;
		case DT_STRSZ:
			f->strsz = d.d_un.d_val;
			break;
		case DT_VERNEED:
			verneed = d.d_un.d_ptr;
			break;
		case DT_VERNEEDNUM:
			verneednum = d.d_un.d_val;
			break;
		case DT_VERDEF:
			verdef = d.d_un.d_ptr;
			break;
		case DT_VERDEFNUM:
			verdefnum = d.d_un.d_val;
			break;
		default:
			break;
		}
	}
	if (!has_strtab)
		return ret->n_needed || has_soname || verneednum || verdefnum ? -EBADMSG : 0;
	if ((r = vaddr_offset(f, strtab, &f->strtab)) < 0)
		return r;
	for (size_t i = 0; i < ret->n_needed; i++)
		if ((r = dyn_str(f, needed[i], ret->needed[i], sizeof(ret->needed[i]))) < 0)
			return r;
	if (has_soname && (r = dyn_str(f, soname, ret->soname, sizeof(ret->soname))) < 0)
		return r;
	if (verneednum && (r = read_verneed(f, verneed, verneednum, ret)) < 0)
		return r;
	if (verdefnum && (r = read_verdef(f, verdef, verdefnum, ret)) < 0)
		return r;
	return 0;
}

int elf_read(const void *buf, size_t len, struct elf_info *ret)
{
	struct file f = { .b = buf, .len = len };
	Elf64_Ehdr eh;
	uint64_t dyn, dynsz;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (len < sizeof(eh))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != OWN_DATA)
		return -ENOEXEC;
	if (eh.e_phnum && eh.e_phentsize != sizeof(Elf64_Phdr))
		return -EBADMSG;
	ret->machine = eh.e_machine;
	r = read_phdrs(&f, &eh, &dyn, &dynsz, ret);
	if (r == 0 && dynsz)
		r = read_dynamic(&f, dyn, dynsz, ret);
	if (r < 0) {
		memset(ret, 0, sizeof(*ret));
		return r;
	}
	return 0;
}

bool elf_defines(const struct elf_info *info, const char *name)
{
	for (size_t i = 0; i < info->n_verdef; i++)
		if (strcmp(info->verdef[i], name) == 0)
			return true;
	return false;
}
