/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_K8SNAME_H
#define TG_LIB_K8SNAME_H

/*
 * Kubernetes' names, checked as its API server checks them (RFC 1123, lower
 * case). s holds n bytes, not necessarily NUL-terminated; a NUL among them
 * is refused.
 */

#include <stdbool.h>
#include <stddef.h>

#define K8S_DNS_LABEL_MAX 63	  /* a namespace's name */
#define K8S_DNS_SUBDOMAIN_MAX 253 /* a node's name */

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes. */
bool k8s_dns_label(const char *s, size_t n);
/* DNS labels joined by '.', at most 253 bytes. */
bool k8s_dns_subdomain(const char *s, size_t n);

#endif
