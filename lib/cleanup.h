/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_CLEANUP_H
#define TG_LIB_CLEANUP_H

/* Scoped cleanup in the systemd manner: a variable frees itself at scope exit. */

#include <stdlib.h>
#include <unistd.h>
#include <json-c/json.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

/*
 * funcp(type *p): calls func(*p) unless *p is NULL, for _cleanup_(funcp)
 * on a pointer to an object of a library that frees with func.
 */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
	static inline void func##p(type *p)     \
	{                                       \
		if (*p)                         \
			func(*p);               \
	}

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static inline void json_putp(json_object **o)
{
	if (*o)
		json_object_put(*o);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_json_ _cleanup_(json_putp)

/* Hands ownership out of a scoped variable. */
#define TAKE_PTR(p)                     \
	({                              \
		__typeof__(p) _p = (p); \
		(p) = NULL;             \
		_p;                     \
	})
#define TAKE_FD(fd)             \
	({                      \
		int _fd = (fd); \
		(fd) = -1;      \
		_fd;            \
	})

#endif
