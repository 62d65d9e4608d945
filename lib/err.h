/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_ERR_H
#define TG_LIB_ERR_H

/*
 * Errors are negative errno values; the optional struct tg_err carries what a
 * person (or the container runtime) needs: the CNI error code and a message,
 * and, when the kernel refused a step with an extended ack, its text (which
 * the message ends with too).
 * The first error recorded wins, so the deepest, most precise cause survives
 * while callers unwind.
 */

enum cni_code {
	CNI_ERR_VERSION = 1, /* incompatible CNI version */
	CNI_ERR_UNSUPPORTED_FIELD = 2,
	CNI_ERR_UNKNOWN_CONTAINER = 3,
	CNI_ERR_ENV = 4, /* invalid necessary environment variables */
	CNI_ERR_IO = 5,
	CNI_ERR_DECODE = 6,
	CNI_ERR_CONFIG = 7, /* invalid network config */
	CNI_ERR_TRY_AGAIN = 11,
	CNI_ERR_NOT_AVAILABLE = 50,
	TG_ERR_DRIFT = 100, /* CHECK: kernel state differs from the store */
};

struct tg_err {
	int code;
	char msg[512];
	char details[512];
	char kernel[256]; /* the kernel's extack text for the failed step ("": none) */
};

int tg_fail(struct tg_err *e, int code, int neg_errno, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void tg_detail(struct tg_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tg_err_set(const struct tg_err *e)
{
	return e && e->code != 0;
}

#endif
