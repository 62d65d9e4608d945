/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_RATE_REF_H
#define TG_TEST_RATE_REF_H

/*
 * A reference for lib/rate.c's rate_parse, in exact rational arithmetic
 * (GMP), written from rate.h's contract rather than from rate.c: the
 * string's value is its decimal number times its unit (k M G T: powers of
 * 1000; Ki Mi Gi Ti: of 1024; eN: 10^N), and a rate is that value when it
 * is a whole number of bit/s within RATE_MIN_BPS..RATE_MAX_BPS. The two
 * documented limits of the parser are rules here too: at most 19
 * significant fractional digits, exponents up to e18.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gmp.h>

#include "lib/rate.h"

static inline int ref_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/*
 * 0 with *ret set; -EINVAL: not a number of this grammar at all; -EDOM: a
 * number, but not whole bits (or past the fractional digits kept); -ERANGE.
 */
static inline int ref_rate_parse(const char *s, uint64_t *ret)
{
	static const struct {
		const char *suffix;
		unsigned long base, power;
	} units[] = { { "", 1, 1 },	 { "k", 1000, 1 },  { "M", 1000, 2 },
		      { "G", 1000, 3 },	 { "T", 1000, 4 },  { "Ki", 1024, 1 },
		      { "Mi", 1024, 2 }, { "Gi", 1024, 3 }, { "Ti", 1024, 4 } };
	const char *p = s, *whole, *frac = "";
	size_t n_whole, n_frac = 0, sig;
	unsigned long exp10 = 0;
	int r = 0, unit = -1;
	char *digits;
	mpz_t num, mult, lo, hi;
	mpq_t v;

	if (*p == '+')
		p++;
	whole = p;
	while (ref_is_digit(*p))
		p++;
	n_whole = (size_t)(p - whole);
	if (n_whole == 0)
		return -EINVAL;
	if (*p == '.') {
		frac = ++p;
		while (ref_is_digit(*p))
			p++;
		n_frac = (size_t)(p - frac);
		if (n_frac == 0)
			return -EINVAL;
	}
	if ((*p == 'e' || *p == 'E') && ref_is_digit(p[1])) {
		for (p++; ref_is_digit(*p); p++)
			if ((exp10 = exp10 * 10 + (unsigned long)(*p - '0')) > 18)
				exp10 = 19; /* saturate: any of these is out of range */
		if (*p)
			return -EINVAL;
	} else {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(p, units[i].suffix) == 0)
				unit = (int)i;
		if (unit < 0)
			return -EINVAL;
	}
	if (exp10 > 18)
		return -ERANGE;
	for (sig = n_frac; sig && frac[sig - 1] == '0'; sig--)
		;
	if (sig > 19)
		return -EDOM;
	digits = malloc(n_whole + sig + 1);
	if (!digits)
		return -ENOMEM;
	memcpy(digits, whole, n_whole);
	memcpy(digits + n_whole, frac, sig);
	digits[n_whole + sig] = '\0';
	mpz_inits(num, mult, lo, hi, NULL);
	mpq_init(v);
	mpz_set_str(num, digits, 10);
	free(digits);
	if (unit >= 0)
		mpz_ui_pow_ui(mult, units[unit].base, units[unit].power);
	else
		mpz_ui_pow_ui(mult, 10, exp10);
	mpz_mul(num, num, mult);
	mpq_set_num(v, num);
	mpz_ui_pow_ui(mult, 10, sig);
	mpq_set_den(v, mult);
	mpq_canonicalize(v);
	mpz_set_ui(lo, RATE_MIN_BPS);
	mpz_set_ui(hi, RATE_MAX_BPS);
	if (mpz_cmp_ui(mpq_denref(v), 1) != 0)
		r = -EDOM;
	else if (mpz_cmp(mpq_numref(v), lo) < 0 || mpz_cmp(mpq_numref(v), hi) > 0)
		r = -ERANGE;
	else
		*ret = (uint64_t)mpz_get_ui(mpq_numref(v));
	mpq_clear(v);
	mpz_clears(num, mult, lo, hi, NULL);
	return r;
}

/*
 * rate_parse against the reference for one string: NULL when they agree,
 * with *ret_r (if not NULL) set to rate_parse's return; otherwise why not.
 * They agree when both accept it with the same bit/s or both refuse it,
 * rate_parse with -EINVAL or -ERANGE only, and with -EINVAL for whatever
 * is no number of the grammar at all (-EINVAL from the reference), whatever
 * its size. The reason is in a buffer of the caller's file, valid until
 * the next call.
 */
static inline const char *ref_rate_mismatch(const char *s, int *ret_r)
{
	static char why[160];
	uint64_t got = 0, want = 0;
	int r = rate_parse(s, &got), w = ref_rate_parse(s, &want);

	if ((r == 0) != (w == 0))
		snprintf(why, sizeof(why), "rate_parse %d (%llu), reference %d (%llu)", r,
			 (unsigned long long)got, w, (unsigned long long)want);
	else if (r == 0 && got != want)
		snprintf(why, sizeof(why), "rate_parse %llu bit/s, reference %llu",
			 (unsigned long long)got, (unsigned long long)want);
	else if (r != 0 && r != -EINVAL && r != -ERANGE)
		snprintf(why, sizeof(why), "rate_parse returned %d", r);
	else if (w == -EINVAL && r != -EINVAL)
		snprintf(why, sizeof(why),
			 "%d for what is no number of the grammar (the reference: -EINVAL)", r);
	else {
		if (ret_r)
			*ret_r = r;
		return NULL;
	}
	return why;
}

#endif
