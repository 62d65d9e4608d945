// SPDX-License-Identifier: Apache-2.0
#include <stdarg.h>
#include <stdio.h>

#include "lib/err.h"

int tg_fail(struct tg_err *e, int code, int neg_errno, const char *fmt, ...)
{
	va_list ap;

	if (e && e->code == 0) {
		e->code = code;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return neg_errno < 0 ? neg_errno : -neg_errno;
}

void tg_detail(struct tg_err *e, const char *fmt, ...)
{
	va_list ap;

	if (!e || e->details[0])
		return;
	va_start(ap, fmt);
	vsnprintf(e->details, sizeof(e->details), fmt, ap);
	va_end(ap);
}
