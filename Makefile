# SPDX-License-Identifier: Apache-2.0
# Tollgate: routed alias-IP CNI plugin with per-namespace accounting.

PREFIX     ?= /usr/local
CNI_BINDIR ?= /opt/cni/bin
DESTDIR    ?=
VERSION    ?= 0.1.0

# Hardening of every build: stack protector and clash protection, CET,
# full RELRO with immediate binding; _FORTIFY_SOURCE where the sanitizers
# do not already check the same calls.
HARDEN     = -fstack-protector-strong -fstack-clash-protection $(CF_PROTECT) -fPIE
LDHARDEN   := -pie -Wl,-z,relro -Wl,-z,now
# ARCH=arm64: cross-built with Debian's aarch64-linux-gnu toolchain against the
# arm64 -dev packages (multiarch), into build-arm64/; its tests run under
# qemu-aarch64-static. Any other ARCH is the build host's own.
ARCH       ?= $(shell uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
HOST_ARCH  := $(shell uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/')
PKG_CONFIG ?= pkg-config
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(ARCH),arm64)
$(error ARCH=$(ARCH): only the host's architecture ($(HOST_ARCH)) and arm64 are built)
endif
ifneq ($(FUZZ)$(SAN)$(ANALYZE),)
$(error ARCH=arm64 is the release build only: the sanitizer, fuzz and lint builds are the host's)
endif
CROSS      := aarch64-linux-gnu-
CC         := $(CROSS)gcc
PKG_CONFIG := $(CROSS)pkg-config
BUILD      ?= build-arm64
endif
# CET is x86's; arm64 has its own branch protection (PAC, BTI).
CF_PROTECT := $(if $(filter arm64,$(ARCH)),-mbranch-protection=standard,-fcf-protection)

ifeq ($(FUZZ),1)
# libFuzzer (clang): every object instrumented for coverage, with ASan + UBSan
BUILD      ?= build-fuzz
CC         := clang
SANFLAGS   := -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined
else ifeq ($(SAN),1)
BUILD      ?= build-san
SANFLAGS   := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The sanitizer build is test-only (never installed): it carries the failpoints.
FAILPOINTS ?= 1
else ifeq ($(ANALYZE),1)
# gcc's static analyzer over every product object (`make lint`); -Werror
# turns each of its findings into a failure.
BUILD      ?= build-lint
SANFLAGS   := -fanalyzer
HARDEN     += -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3
else
BUILD      ?= build
SANFLAGS   :=
HARDEN     += -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3
endif

CC       ?= cc
# pkg-config is asked the first time a recipe needs an answer, once, so that
# `make deps`, `make clean` and `make lint`'s first step run on a machine
# without the packages; there a package missing stops the build naming it.
pkg_query = $(foreach p,$(2),$(if $(shell $(PKG_CONFIG) --exists $(p) 2>/dev/null && echo y),,$(error \
	    $(PKG_CONFIG): package $(p) not found (`make deps` installs what the build needs))))$(shell $(PKG_CONFIG) $(1) $(2))
PKGS     := libnl-3.0 libnl-route-3.0 libnftnl libmnl json-c
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(call pkg_query,--cflags,$$(PKGS)))$(PKG_CFLAGS)
PKG_LIBS   = $(eval PKG_LIBS := $$(call pkg_query,--libs,$$(PKGS)) -lm $$(NFCT_LIBS))$(PKG_LIBS)
CMOCKA_LIBS = $(eval CMOCKA_LIBS := $$(call pkg_query,--libs,cmocka))$(CMOCKA_LIBS)
# node/conntrack.c: the plugin deletes a released address's conntrack
# entries, the exporter counts the guard's connections; in every binary that
# links node/.
NFCT_LIBS = $(eval NFCT_LIBS := $$(call pkg_query,--libs,libnetfilter_conntrack))$(NFCT_LIBS)
# The binaries link libnl, libnftnl and json-c statically: a CNI plugin is a
# short-lived process started per pod event, and resolving libnl-route's
# symbols at every start cost more than half of its start-up instructions
# (callgrind: 604k -> 242k per start). libmnl and libnetfilter_conntrack
# ship no static archive.
BIN_LIBS = -Wl,-Bstatic -lnl-route-3 -lnl-3 -lnftnl -ljson-c -Wl,-Bdynamic -lmnl $(NFCT_LIBS) -lpthread -lm
# The allocator (no netlink call) links json-c as a shared library: libcjose's
# jansson names its functions as json-c does (json_object_get, ...), and
# only the two libraries' symbol versions (JSONC_0.14, libjansson.so.4) keep
# each caller on its own; a static json-c's unversioned copies would take
# jansson's calls too.
JSON_BIN_LIBS := -ljson-c -lpthread -lm
# Only the daemons and tollgate-ipam talk HTTP: the plugin binary never links libcurl.
CURL_CFLAGS = $(eval CURL_CFLAGS := $$(call pkg_query,--cflags,libcurl))$(CURL_CFLAGS)
CURL_LIBS = $(eval CURL_LIBS := $$(call pkg_query,--libs,libcurl))$(CURL_LIBS)
# The metrics endpoint's HTTP server (libmicrohttpd): the daemons', never the plugin's.
MHD_LIBS = $(eval MHD_LIBS := $$(call pkg_query,--libs,libmicrohttpd))$(MHD_LIBS)
# The nodes' tokens verified (auth/): libcjose's JWS and JWK over OpenSSL's
# libcrypto (libcurl's TLS library here); the allocator's alone.
# libcjose-dev installs for one architecture at a time (scripts/deps.sh):
# arm64 links libcjose0's library by name, with the host's headers.
ifeq ($(ARCH),$(HOST_ARCH))
AUTH_LIBS = $(eval AUTH_LIBS := $$(call pkg_query,--libs,cjose libcrypto))$(AUTH_LIBS)
else
AUTH_LIBS = $(eval AUTH_LIBS := -l:libcjose.so.0 $$(call pkg_query,--libs,jansson libcrypto))$(AUTH_LIBS)
endif

WARN     := -Wall -Wextra -Werror -Wmissing-prototypes -Wshadow -Wformat=2 -Wvla \
            -Wno-unused-parameter
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) $(HARDEN) $(SANFLAGS) -I. $(PKG_CFLAGS) $(CURL_CFLAGS) -DTG_VERSION='"$(VERSION)"' \
            -D_GNU_SOURCE -MMD -MP
LDFLAGS  += $(LDHARDEN) $(SANFLAGS)
# Failpoints (lib/failpoint.h): only in test builds, never in build/.
ifeq ($(FAILPOINTS),1)
CFLAGS   += -DTG_FAILPOINTS
endif

ifneq ($(V),1)
Q := @
endif

# Every module, once: a folder of its own below the binaries, in layers (a
# module calls only those before it). A module's objects are $(OBJ_<module>);
# apart from them: each daemon's and the plugin's main.c (its binary's own),
# the pool from IMDS (ipam/imds.c, node/sync.c: never in the plugin), and the
# failpoints (lib/failpoint.c: test builds alone).
MODULES  := lib ipam accounting budget shaper config node http httpc etcd auth exporter \
	    cni cli agent allocator
obj_of    = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
MAIN_SRC := cni/main.c agent/main.c allocator/main.c
IMDS_SRC := ipam/imds.c node/sync.c
APART    := $(MAIN_SRC) $(IMDS_SRC) $(if $(filter 1,$(FAILPOINTS)),,lib/failpoint.c)
$(foreach m,$(MODULES),$(eval OBJ_$(m) := $(call obj_of,$(filter-out $(APART),$(wildcard $(m)/*.c)))))
# IMDS asks through the HTTP client (its blocking call, in tollgate-ipam).
IMDS_OBJ := $(call obj_of,$(IMDS_SRC)) $(OBJ_httpc)
# lib/'s node side: netlink, the node's sysctls, the plugin's counters and
# steps, the host's root and its ELF files.
LIB_NODE_OBJ := $(call obj_of,lib/nl.c lib/extack.c lib/sysctls.c lib/cniops.c lib/steps.c \
		lib/rootfs.c lib/elf.c)

# The layers below the node's binaries: addresses, accounting, budgets' wire
# and arithmetic (which namespaces the policy heard budgets), shaping, the
# config, the node's kernel objects.
NODE_OBJ := $(foreach m,lib ipam accounting budget shaper config node,$(OBJ_$(m)))
# Each binary's link: what it calls.
# The plugin: no HTTP code.
PLUGIN_OBJ := $(BUILD)/obj/cni/main.o $(OBJ_cni) $(NODE_OBJ)
# tollgate-ipam: the node's layers and the pool from IMDS.
IPAM_OBJ := $(OBJ_cli) $(IMDS_OBJ) $(NODE_OBJ)
# The node agent: its budget reports, metrics page and the HTTP client too.
AGENT_OBJ := $(BUILD)/obj/agent/main.o $(OBJ_agent) $(OBJ_httpc) $(OBJ_exporter) \
	     $(OBJ_http) $(IMDS_OBJ) $(NODE_OBJ)
# The allocator makes no netlink call: the policy file's parser (config/'s
# alone: nothing of the conflist), budget/, its page written by the exporter's text writer
# (nothing of its collectors), http/, and etcd over libcurl (leader election).
ALLOC_OBJ := $(BUILD)/obj/allocator/main.o $(OBJ_allocator) $(OBJ_budget) \
	     $(call obj_of,config/alloc_policy.c config/read.c) $(filter-out $(LIB_NODE_OBJ),$(OBJ_lib)) \
	     $(call obj_of,exporter/expo.c exporter/http_metrics.c) $(OBJ_http) $(OBJ_httpc) $(OBJ_etcd) \
	     $(OBJ_auth)
# The tests' and benchmarks' objects: every module but the binaries' own front
# ends and auth/ (its libraries are the allocator's: its tests link it themselves).
TEST_OBJ := $(foreach m,$(filter-out cli allocator auth,$(MODULES)),$(OBJ_$(m))) $(IMDS_OBJ)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit_%,$(UNIT_SRC))
# Cases that need the kernel (root, nft, namespaces): cmocka binaries that
# tests/integration/test_kernel_cases.sh runs in a throwaway network
# namespace. Named ktest_*, so that tests/run.sh does not take them for
# unit tests (which need no kernel and pass as any user).
KTEST_SRC := $(wildcard tests/kernel/ktest_*.c)
KTEST_BIN := $(patsubst tests/kernel/%.c,$(BUILD)/tests/%,$(KTEST_SRC))

# Every object of the four binaries, each once (what `make lint` analyzes).
PRODUCT_OBJ := $(sort $(PLUGIN_OBJ) $(IPAM_OBJ) $(AGENT_OBJ) $(ALLOC_OBJ))

ifeq ($(ANALYZE),1)
# gcc 12's analyzer does not count memory reached through a pointer held in
# another struct as reachable: an allocation stored there, in an element of
# ex->series (exporter/series.c set_labels: s->labels) or in the struct a
# callback's context points to (node/reshape.c reshape_update: r->before), is
# reported leaked at the store itself (a 15-line reproducer shows the same).
# Both are freed by their owners (series_clear, node_reshape_free); every
# other analyzer check stays on for these files. auth/cache.c stores a
# name in an element of its table (c->slot[i].node) the same way; the
# table's owner frees it (auth_cache_free, rebuild, clear).
$(BUILD)/obj/exporter/series.o $(BUILD)/obj/node/reshape.o $(BUILD)/obj/auth/cache.o: SANFLAGS += -Wno-analyzer-malloc-leak
endif

BINS := $(BUILD)/tollgate $(BUILD)/tollgate-ipam $(BUILD)/tollgate-agent $(BUILD)/tollgate-allocator
# The allocator's load generator (tests/bench/bench_allocator.sh): libcurl's multi interface.
LOAD_BIN := $(BUILD)/alloc_load
# Benchmarks in C (tests/bench/bench_*.c), built with the rest, run by hand.
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/%,$(wildcard tests/bench/bench_*.c))

.PHONY: all bins release clean install test unit demo bench chaos deps san fuzz fuzz-targets image lint lint-objs format \
	test-builds test-build-plain test-build-san test-build-arm64 test-build-fuzz
all: $(BINS) $(UNIT_BIN) $(KTEST_BIN) $(BENCH_BIN) $(LOAD_BIN)
# The four binaries alone (`make ARCH=arm64 bins`: what the image takes).
bins: $(BINS)

# Whether the objects carry failpoints: a build dir made the other way is rebuilt.
FP_STAMP := $(BUILD)/.failpoints
$(FP_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo 'FAILPOINTS=$(FAILPOINTS)' | cmp -s - $@ || echo 'FAILPOINTS=$(FAILPOINTS)' > $@

.PHONY: FORCE
FORCE:

# The commit and the build's kind, in lib/version.c alone (every binary's
# --version and tollgate_build_info): a stamp that changes with them
# rebuilds that one object, nothing else.
COMMIT      ?= $(or $(shell git rev-parse --short=12 HEAD 2>/dev/null),unknown)
BUILD_FLAGS := $(strip $(if $(filter 1,$(FUZZ)),fuzzer asan ubsan,$(if $(filter 1,$(SAN)),asan ubsan,$(if $(filter 1,$(ANALYZE)),analyzer,release))) \
	       $(if $(filter 1,$(FAILPOINTS)),failpoints) $(shell $(CC) -dumpmachine 2>/dev/null))
VERSION_STAMP := $(BUILD)/.version
$(VERSION_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(VERSION) $(COMMIT) $(BUILD_FLAGS)' | cmp -s - $@ || echo '$(VERSION) $(COMMIT) $(BUILD_FLAGS)' > $@
$(BUILD)/obj/lib/version.o: $(VERSION_STAMP)
$(BUILD)/obj/lib/version.o: CFLAGS += -DTG_COMMIT='"$(COMMIT)"' -DTG_BUILD_FLAGS='"$(BUILD_FLAGS)"'

$(BUILD)/obj/%.o: %.c $(FP_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tollgate: $(PLUGIN_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS)

$(BUILD)/tollgate-ipam: $(IPAM_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS) $(CURL_LIBS)

$(BUILD)/tollgate-agent: $(AGENT_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS) $(MHD_LIBS) $(CURL_LIBS)

$(BUILD)/tollgate-allocator: $(ALLOC_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(JSON_BIN_LIBS) $(MHD_LIBS) $(CURL_LIBS) $(AUTH_LIBS)

$(BUILD)/alloc_load: tests/bench/alloc_load.c
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(CURL_LIBS) -ljson-c -lm

# The election's machine is the allocator's.
$(BUILD)/tests/unit_test_elect: $(BUILD)/obj/allocator/elect.o

# The rate parser's differential test checks it against exact rationals (GMP).
$(BUILD)/tests/unit_test_rate_diff: UNIT_EXTRA_LIBS := -lgmp
# Tests whose nftables netlink ends in a fake nf_tables (tests/unit/fake_nfnl.h):
# libmnl's socket calls, wrapped at link time.
FAKE_NFNL_WRAP := $(foreach f,open bind close get_fd get_portid setsockopt sendto recvfrom,-Wl,--wrap=mnl_socket_$(f))
$(BUILD)/tests/unit_test_accounting: UNIT_EXTRA_LIBS := $(FAKE_NFNL_WRAP) -Wl,--wrap=nftnl_expr_alloc
# exporter_render: its shaper collector's rtnetlink cut at tg_nl_route_open as well.
$(BUILD)/tests/unit_test_expo: UNIT_EXTRA_LIBS := $(FAKE_NFNL_WRAP) -Wl,--wrap=tg_nl_route_open
# gc's test says which PID namespace /proc/self/ns/pid is (a link-time seam).
$(BUILD)/tests/unit_test_gc: UNIT_EXTRA_LIBS := -Wl,--wrap=stat
# The store's test sees every fsync and rename of a save, in order (link-time seams).
$(BUILD)/tests/unit_test_store: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename
# ... and the node daemon's, of a file it installs into the host's CNI directories.
$(BUILD)/tests/unit_test_install: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename
# ... and of a file replaced whole (lib/replace.h: state.json, budgets.json).
$(BUILD)/tests/unit_test_replace: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename
# A node's budgets against a fake kernel and allocator: shaper/'s reads and ceils,
# the netlink socket and the HTTP client cut at link time.
$(BUILD)/tests/unit_test_budget_agent: UNIT_EXTRA_LIBS := $(foreach f,tg_nl_route_open \
	shaper_inet_ifindex shaper_inet_in_ifindex shaper_dump_classes shaper_ns_set_ceil \
	httpc_set_tls httpc_busy httpc_post httpc_take httpc_free,-Wl,--wrap=$(f))
# auth/ is the allocator's, outside TEST_OBJ: its test links it and its libraries.
$(BUILD)/tests/unit_test_auth: $(OBJ_auth)
$(BUILD)/tests/unit_test_auth: UNIT_EXTRA_LIBS = $(AUTH_LIBS)

$(BUILD)/tests/unit_%: tests/unit/%.c $(TEST_OBJ)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(CMOCKA_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(UNIT_EXTRA_LIBS)

$(BUILD)/tests/ktest_%: tests/kernel/ktest_%.c $(TEST_OBJ)
	@mkdir -p $(dir $@)
	@echo "  KTEST   $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(CMOCKA_LIBS) $(CURL_LIBS) $(MHD_LIBS)

$(BUILD)/bench_%: tests/bench/bench_%.c $(NODE_OBJ)
	@echo "  BENCH   $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS)

san:
	$(MAKE) SAN=1

lint-objs: $(PRODUCT_OBJ)

# Static analysis: gcc -fanalyzer over every product object (build-lint/),
# cppcheck over every C source of the product and its tests, shellcheck over
# every shell script. Any finding fails; suppressions carry their reason
# (cppcheck.supp, inline `cppcheck-suppress`, `shellcheck disable`).
CPPCHECK_DIRS := $(MODULES) tests/unit tests/kernel tests/fuzz tests/bench tests/integration/cri
# With TG_FAILPOINTS, as in the test builds: without it each TG_FAILPOINT() is
# a literal 0, and every 'r = TG_FAILPOINT(..); if (r == 0)' reads to cppcheck
# as a condition always true (the failpoint code is checked as well).
CPPCHECK := cppcheck -j2 --quiet --std=c11 --enable=warning,performance,portability,style \
	    --error-exitcode=1 --inline-suppr --suppressions-list=cppcheck.supp \
	    -I. -D_GNU_SOURCE -DTG_VERSION='"$(VERSION)"' -DTG_FAILPOINTS \
	    --template='{file}:{line}: {severity}: {message} [{id}]'
# Every file whose first line is a sh/bash shebang, and the sourced libraries
# (first line `# shellcheck shell=bash`).
# Every C file of the tree, in the house style (.clang-format): `make format` rewrites them.
C_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find . -path './build*' -prune -o -name '*.[ch]' -print)
SH_SCRIPTS = $(shell find . -path ./.git -prune -o -path './build*' -prune -o -type f -print | \
	       while read -r f; do head -n1 "$$f" | grep -qE '^\#!.*\<(ba)?sh\>|^\# shellcheck shell=' && echo "$$f"; done | sort)

format:
	clang-format -i $(C_FILES)

lint: deps
	$(MAKE) ANALYZE=1 lint-objs
	@echo "  CPPCHECK $(CPPCHECK_DIRS)"
	$(Q)$(CPPCHECK) $(CPPCHECK_DIRS)
	@echo "  SHELLCHECK $(words $(SH_SCRIPTS)) scripts"
	$(Q)shellcheck -x $(SH_SCRIPTS)
	@echo "  CLANG-FORMAT $(words $(C_FILES)) files"
	$(Q)clang-format --dry-run --Werror $(C_FILES)

# libFuzzer targets (tests/fuzz/fuzz_*.c): the config, CNI_ARGS and the
# environment, prevResult, rates (differential, against exact rationals),
# address pools and CIDRs, IMDS documents, the store, the metrics endpoint's
# request path, cluster budget reports, answers and redirects, etcd's answers;
# `make fuzz` builds them
# with clang and runs each for FUZZ_SECONDS (default 20); `make test` runs
# each for 3 s.
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/%,$(wildcard tests/fuzz/fuzz_*.c))

# The rate parser's target is differential: against exact rationals (GMP).
$(BUILD)/fuzz_rate: UNIT_EXTRA_LIBS := -lgmp
# The metrics endpoint's request path: the HTTP server over libmicrohttpd.
$(BUILD)/fuzz_http: UNIT_EXTRA_LIBS = $(MHD_LIBS)
$(BUILD)/fuzz_http: $(OBJ_http)
# etcd's answers, as the allocator's election reads them.
$(BUILD)/fuzz_etcd: $(OBJ_etcd)
# A stranger's token and the issuer's keys, as the allocator reads them.
$(BUILD)/fuzz_auth: UNIT_EXTRA_LIBS = $(AUTH_LIBS)
$(BUILD)/fuzz_auth: $(OBJ_auth)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(OBJ_cni) $(NODE_OBJ) $(IMDS_OBJ)
	@echo "  FUZZ    $@"
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -fsanitize=address,undefined,fuzzer -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(CURL_LIBS) $(UNIT_EXTRA_LIBS)

fuzz-targets: $(FUZZ_BIN)

fuzz: deps
	$(MAKE) FUZZ=1 fuzz-targets
	tests/fuzz/run.sh build-fuzz

# Installs every Debian package that the build, lint, tests, demo and bench need.
deps:
	@scripts/deps.sh

# The node agent's OCI image (agent, plugin, tollgate-ipam, the allocator and
# their shared libraries, FROM scratch), built offline with podman into an OCI
# archive whose image index holds linux/amd64 and linux/arm64:
# $(BUILD)/tollgate-image.tar (ctr images import; skopeo/podman push).
image: $(BINS)
	$(MAKE) ARCH=arm64 bins
	scripts/image/build.sh $(BUILD) $(BUILD)/tollgate-image.tar arm64=build-arm64

# A release (scripts/release.sh): dist/$(VERSION)/ holds an archive per
# architecture (binaries, deploy/, docs), the image index and SHA256SUMS.
release: deps
	scripts/release.sh $(VERSION)

install: $(BINS)
	install -d $(DESTDIR)$(CNI_BINDIR)
	install -m 0755 $(BUILD)/tollgate $(DESTDIR)$(CNI_BINDIR)/tollgate
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/tollgate-ipam $(DESTDIR)$(PREFIX)/bin/tollgate-ipam
	install -m 0755 $(BUILD)/tollgate-agent $(DESTDIR)$(PREFIX)/bin/tollgate-agent
	install -m 0755 $(BUILD)/tollgate-allocator $(DESTDIR)$(PREFIX)/bin/tollgate-allocator

# The four trees `make test` needs, built side by side on every core (one
# jobserver: at most JOBS compilers at once, whichever tree they are for).
JOBS ?= $(shell nproc)
test-builds:
	$(MAKE) -j$(JOBS) test-build-plain test-build-san test-build-arm64 test-build-fuzz
test-build-plain:
	+$(MAKE) all
test-build-san:
	+$(MAKE) SAN=1 all
test-build-arm64:
	+$(MAKE) ARCH=arm64 all
test-build-fuzz:
	+$(MAKE) FUZZ=1 fuzz-targets

# make test: the plain and sanitizer trees first (every file needs one of
# them); the arm64 and fuzz trees, which only test_arm64*.sh and the fuzz run
# use, build beside the unit tests and the first files of the pool
# (tests/run.sh's TG_LATE_BUILD).
test: deps
	@t0=$$(date +%s); $(MAKE) -j$(JOBS) test-build-plain test-build-san && \
		echo "##### time: the plain and sanitizer trees $$(($$(date +%s) - t0)) s"
	TG_FUZZ_DIR=build-fuzz TG_LATE_BUILD='$(MAKE) -j$(JOBS) test-build-arm64 test-build-fuzz' \
		tests/run.sh build build-san

demo: deps
	$(MAKE) all
	scripts/demo.sh

bench: deps
	$(MAKE) all
	@for b in tests/bench/bench*.sh; do echo "== $$b"; $$b build || exit 1; done

# The chaos suite (tests/chaos): the SIGKILL storm with shaping, accounting
# and the agent, for minutes, against both builds and with the store on disk.
chaos: deps
	$(MAKE) all
	$(MAKE) SAN=1 all
	tests/chaos/run.sh build build-san

clean:
	rm -rf build build-san build-fuzz build-lint build-arm64 dist

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
