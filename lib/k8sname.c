// SPDX-License-Identifier: Apache-2.0
/* Kubernetes' names (lib/k8sname.h). */
#include "lib/k8sname.h"

/* One label's bytes, any length: a-z, 0-9 and '-', not at either end. */
static bool label_ok(const char *s, size_t n)
{
	if (n == 0 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

bool k8s_dns_label(const char *s, size_t n)
{
	return n <= K8S_DNS_LABEL_MAX && label_ok(s, n);
}

bool k8s_dns_subdomain(const char *s, size_t n)
{
	size_t start = 0;

	if (n == 0 || n > K8S_DNS_SUBDOMAIN_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		if (!label_ok(s + start, i - start))
			return false;
		start = i + 1;
	}
	return true;
}
