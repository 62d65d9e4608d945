// SPDX-License-Identifier: Apache-2.0
/*
 * Tokens verified (auth/auth.h), by their SHA-256: a report whose token was
 * verified before costs a digest and a lookup, not a signature check. Only
 * verified tokens get in, so an attacker adds nothing here; the table holds
 * at most `max` (each node's token, and its next one while kubelet rotates).
 * Open addressing, linear probing, at most half full; no deletion but a
 * rebuild that drops what has expired.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "auth/auth.h"

struct entry {
	unsigned char digest[32];
	int64_t exp;
	char *node; /* NULL: a free slot */
};

struct auth_cache {
	size_t max, n, mask;
	struct entry *slot;
};

static bool digest_of(const char *token, size_t len, unsigned char md[32])
{
	unsigned int n = 0;

	return EVP_Digest(token, len, md, &n, EVP_sha256(), NULL) == 1 && n == 32;
}

static size_t home(const struct auth_cache *c, const unsigned char md[32])
{
	size_t h;

	memcpy(&h, md, sizeof(h)); /* SHA-256's bytes are as good as any hash */
	return h & c->mask;
}

struct auth_cache *auth_cache_new(size_t max)
{
	struct auth_cache *c = calloc(1, sizeof(*c));
	size_t slots = 16;

	if (!c || !max)
		goto fail;
	while (slots < 2 * max)
		slots *= 2;
	c->slot = calloc(slots, sizeof(*c->slot));
	if (!c->slot)
		goto fail;
	c->max = max;
	c->mask = slots - 1;
	return c;
fail:
	free(c);
	return NULL;
}

static void free_names(struct entry *slot, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(slot[i].node);
}

void auth_cache_free(struct auth_cache *c)
{
	if (!c)
		return;
	free_names(c->slot, c->mask + 1);
	free(c->slot);
	free(c);
}

size_t auth_cache_count(const struct auth_cache *c)
{
	return c ? c->n : 0;
}

void auth_cache_clear(struct auth_cache *c)
{
	size_t slots = c->mask + 1;
	struct entry *fresh;

	if (!c->n)
		return;
	free_names(c->slot, slots);
	/* fresh zero pages rather than writing every slot: a large table costs nothing idle */
	fresh = calloc(slots, sizeof(*fresh));
	if (fresh) {
		free(c->slot);
		c->slot = fresh;
	} else {
		memset(c->slot, 0, slots * sizeof(*c->slot));
	}
	c->n = 0;
}

static struct entry *lookup(struct auth_cache *c, const unsigned char md[32])
{
	for (size_t i = home(c, md);; i = (i + 1) & c->mask) {
		if (!c->slot[i].node || memcmp(c->slot[i].digest, md, 32) == 0)
			return &c->slot[i];
	}
}

bool auth_cache_find(struct auth_cache *c, const char *token, size_t len, int64_t now,
		     struct auth_identity *ret)
{
	unsigned char md[32];
	struct entry *e;

	if (!c->n || !digest_of(token, len, md))
		return false;
	e = lookup(c, md);
	if (!e->node || now >= e->exp)
		return false;
	if (ret) {
		snprintf(ret->node, sizeof(ret->node), "%s", e->node);
		ret->exp = e->exp;
	}
	return true;
}

/*
 * Puts every entry again, but those expired at now and (with drop_first)
 * the one that expires first: room for one more.
 */
static void rebuild(struct auth_cache *c, int64_t now, bool drop_first)
{
	size_t slots = c->mask + 1, first = slots;
	struct entry *old = c->slot, *fresh = calloc(slots, sizeof(*fresh));

	if (!fresh) {
		auth_cache_clear(c); /* no memory to sort them out: verify them again */
		return;
	}
	for (size_t i = 0; drop_first && i < slots; i++)
		if (old[i].node && now < old[i].exp &&
		    (first == slots || old[i].exp < old[first].exp))
			first = i;
	c->slot = fresh;
	c->n = 0;
	for (size_t i = 0; i < slots; i++) {
		if (!old[i].node)
			continue;
		if (now >= old[i].exp || i == first) {
			free(old[i].node);
			continue;
		}
		*lookup(c, old[i].digest) = old[i];
		c->n++;
	}
	free(old);
}

int auth_cache_put(struct auth_cache *c, const char *token, size_t len,
		   const struct auth_identity *id, int64_t now)
{
	unsigned char md[32];
	struct entry *e;
	char *node = strdup(id->node);

	if (!node || !digest_of(token, len, md)) {
		free(node);
		return -ENOMEM;
	}
	e = lookup(c, md);
	if (!e->node) {
		if (c->n >= c->max) {
			rebuild(c, now, true);
			e = lookup(c, md);
		}
		c->n++;
	}
	free(e->node);
	e->node = node;
	memcpy(e->digest, md, 32);
	e->exp = id->exp;
	return 0;
}
