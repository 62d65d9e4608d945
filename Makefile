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
PKGS     := libnl-3.0 libnl-route-3.0 libnftnl libmnl json-c
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -lm
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
# node/conntrack.c: the plugin deletes a released address's conntrack
# entries, the exporter counts the guard's connections; in every binary that
# links node/ (the allocator too, for the config's parser there).
NFCT_LIBS := $(shell $(PKG_CONFIG) --libs libnetfilter_conntrack 2>/dev/null)
PKG_LIBS   += $(NFCT_LIBS)
# The binaries link libnl, libnftnl and json-c statically: a CNI plugin is a
# short-lived process started per pod event, and resolving libnl-route's
# symbols at every start cost more than half of its start-up instructions
# (callgrind: 604k -> 242k per start). libmnl and libnetfilter_conntrack
# ship no static archive.
BIN_LIBS := -Wl,-Bstatic -lnl-route-3 -lnl-3 -lnftnl -ljson-c -Wl,-Bdynamic -lmnl $(NFCT_LIBS) -lpthread -lm
# Only tollgate-ipam talks HTTP: the plugin binary never links libcurl.
CURL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
CURL_LIBS := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

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

LIB_SRC  := $(wildcard lib/*.c)
ifneq ($(FAILPOINTS),1)
LIB_SRC  := $(filter-out lib/failpoint.c,$(LIB_SRC))
endif
IPAM_SRC := $(filter-out ipam/imds.c,$(wildcard ipam/*.c))
ACCT_SRC := $(wildcard accounting/*.c)
SHAPER_SRC := $(wildcard shaper/*.c)
NODE_SRC := $(filter-out node/sync.c,$(wildcard node/*.c))
CNI_SRC  := $(filter-out cni/main.c,$(wildcard cni/*.c))
CLI_SRC  := $(wildcard cli/*.c)
AGENT_SRC := $(filter-out agent/main.c,$(wildcard agent/*.c))
BUDGET_SRC := $(wildcard budget/*.c)
ALLOC_SRC := $(filter-out allocator/main.c,$(wildcard allocator/*.c))
# The daemons' HTTP client (libcurl multi in their loops) and etcd's JSON gateway.
HTTPC_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard httpc/*.c))
ETCD_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard etcd/*.c))

# Every layer below the binaries; the plugin links none of the HTTP code.
CORE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC) $(IPAM_SRC) $(ACCT_SRC) $(SHAPER_SRC) $(NODE_SRC) $(BUDGET_SRC))
CNI_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(CNI_SRC))
PLUGIN_OBJ := $(BUILD)/obj/cni/main.o $(CNI_OBJ) $(CORE_OBJ)
# IMDS asks through the HTTP client (its blocking call, in tollgate-ipam).
IMDS_OBJ := $(BUILD)/obj/ipam/imds.o $(BUILD)/obj/node/sync.o $(HTTPC_OBJ)
CLI_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit_%,$(UNIT_SRC))
# Cases that need the kernel (root, nft, namespaces): cmocka binaries that
# tests/integration/test_kernel_cases.sh runs in a throwaway network
# namespace. Named ktest_*, so that tests/run.sh does not take them for
# unit tests (which need no kernel and pass as any user).
KTEST_SRC := $(wildcard tests/kernel/ktest_*.c)
KTEST_BIN := $(patsubst tests/kernel/%.c,$(BUILD)/tests/%,$(KTEST_SRC))

EXPORTER_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard exporter/*.c))
# The metrics endpoint's HTTP server (libmicrohttpd): the exporter's, never the plugin's.
HTTP_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard http/*.c))
MHD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null)

# Cluster budgets' wire format and arithmetic: the agent's and the allocator's.
BUDGET_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard budget/*.c))
ALLOC_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(ALLOC_SRC))
# The allocator's page is written by the exporter's text writer, nothing of its collectors.
ALLOC_EXPO_OBJ := $(BUILD)/obj/exporter/expo.o $(BUILD)/obj/exporter/http_metrics.o

# Every object of the four binaries, each once (what `make lint` analyzes).
PRODUCT_OBJ := $(sort $(PLUGIN_OBJ) $(CLI_OBJ) $(IMDS_OBJ) $(BUILD)/obj/agent/main.o \
	       $(patsubst %.c,$(BUILD)/obj/%.o,$(AGENT_SRC)) $(EXPORTER_OBJ) $(HTTP_OBJ) \
	       $(BUILD)/obj/allocator/main.o $(ALLOC_OBJ) $(BUDGET_OBJ) $(HTTPC_OBJ) $(ETCD_OBJ))

ifeq ($(ANALYZE),1)
# gcc 12's analyzer does not count memory reached through a pointer held in
# another struct as reachable: an allocation stored there, in an element of
# ex->series (exporter/collect.c set_labels: s->labels) or in the struct a
# callback's context points to (node/reshape.c reshape_update: r->before), is
# reported leaked at the store itself (a 15-line reproducer shows the same).
# Both are freed by their owners (series_clear, node_reshape_free); every
# other analyzer check stays on for these two files.
$(BUILD)/obj/exporter/collect.o $(BUILD)/obj/node/reshape.o: SANFLAGS += -Wno-analyzer-malloc-leak
endif

BINS := $(BUILD)/tollgate $(BUILD)/tollgate-ipam $(BUILD)/tollgate-agent $(BUILD)/tollgate-allocator
# The allocator's load generator (tests/bench/bench_allocator.sh): libcurl's multi interface.
LOAD_BIN := $(BUILD)/alloc_load
# Benchmarks in C (tests/bench/bench_*.c), built with the rest, run by hand.
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/%,$(wildcard tests/bench/bench_*.c))

.PHONY: all bins release clean install test unit demo bench chaos deps san fuzz fuzz-targets image lint lint-objs
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

$(BUILD)/tollgate-ipam: $(CLI_OBJ) $(IMDS_OBJ) $(CORE_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS) $(CURL_LIBS)

AGENT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(AGENT_SRC))

$(BUILD)/tollgate-agent: $(BUILD)/obj/agent/main.o $(AGENT_OBJ) $(HTTPC_OBJ) $(EXPORTER_OBJ) $(HTTP_OBJ) $(IMDS_OBJ) $(CORE_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS) $(MHD_LIBS) $(CURL_LIBS)

# No netlink: the config's parser (CORE_OBJ), budget/, http/, the text writer, and
# libcurl for etcd (leader election).
$(BUILD)/tollgate-allocator: $(BUILD)/obj/allocator/main.o $(ALLOC_OBJ) $(BUDGET_OBJ) $(ALLOC_EXPO_OBJ) $(HTTP_OBJ) $(HTTPC_OBJ) $(ETCD_OBJ) $(CORE_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BIN_LIBS) $(MHD_LIBS) $(CURL_LIBS)

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
# exporter_render: its shaper collector's rtnetlink cut at nl_route_open as well.
$(BUILD)/tests/unit_test_expo: UNIT_EXTRA_LIBS := $(FAKE_NFNL_WRAP) -Wl,--wrap=nl_route_open
# gc's test says which PID namespace /proc/self/ns/pid is (a link-time seam).
$(BUILD)/tests/unit_test_gc: UNIT_EXTRA_LIBS := -Wl,--wrap=stat
# The store's test sees every fsync and rename of a save, in order (link-time seams).
$(BUILD)/tests/unit_test_store: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename
# ... and the node daemon's, of a file it installs into the host's CNI directories.
$(BUILD)/tests/unit_test_install: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename
# ... and of a file replaced whole (lib/replace.h: state.json, budgets.json).
$(BUILD)/tests/unit_test_replace: UNIT_EXTRA_LIBS := -Wl,--wrap=fsync -Wl,--wrap=rename

$(BUILD)/tests/unit_%: tests/unit/%.c $(CNI_OBJ) $(CORE_OBJ) $(IMDS_OBJ) $(EXPORTER_OBJ) $(HTTP_OBJ) $(AGENT_OBJ) $(HTTPC_OBJ) $(ETCD_OBJ)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(CMOCKA_LIBS) $(CURL_LIBS) $(MHD_LIBS) $(UNIT_EXTRA_LIBS)

$(BUILD)/tests/ktest_%: tests/kernel/ktest_%.c $(CNI_OBJ) $(CORE_OBJ) $(IMDS_OBJ) $(EXPORTER_OBJ) $(HTTP_OBJ) $(AGENT_OBJ) $(HTTPC_OBJ) $(ETCD_OBJ)
	@mkdir -p $(dir $@)
	@echo "  KTEST   $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) $(CMOCKA_LIBS) $(CURL_LIBS) $(MHD_LIBS)

$(BUILD)/bench_%: tests/bench/bench_%.c $(CORE_OBJ)
	@echo "  BENCH   $@"
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS)

san:
	$(MAKE) SAN=1

lint-objs: $(PRODUCT_OBJ)

# Static analysis: gcc -fanalyzer over every product object (build-lint/),
# cppcheck over every C source of the product and its tests, shellcheck over
# every shell script. Any finding fails; suppressions carry their reason
# (cppcheck.supp, inline `cppcheck-suppress`, `shellcheck disable`).
CPPCHECK_DIRS := lib ipam accounting shaper node cni cli agent allocator exporter http httpc etcd budget tests/unit tests/kernel tests/fuzz tests/bench tests/integration/cri
# With TG_FAILPOINTS, as in the test builds: without it each TG_FAILPOINT() is
# a literal 0, and every 'r = TG_FAILPOINT(..); if (r == 0)' reads to cppcheck
# as a condition always true (the failpoint code is checked as well).
CPPCHECK := cppcheck -j2 --quiet --std=c11 --enable=warning,performance,portability,style \
	    --error-exitcode=1 --inline-suppr --suppressions-list=cppcheck.supp \
	    -I. -D_GNU_SOURCE -DTG_VERSION='"$(VERSION)"' -DTG_FAILPOINTS \
	    --template='{file}:{line}: {severity}: {message} [{id}]'
# Every file whose first line is a sh/bash shebang, and the sourced libraries
# (first line `# shellcheck shell=bash`).
SH_SCRIPTS = $(shell find . -path ./.git -prune -o -path './build*' -prune -o -type f -print | \
	       while read -r f; do head -n1 "$$f" | grep -qE '^\#!.*\<(ba)?sh\>|^\# shellcheck shell=' && echo "$$f"; done | sort)

lint: deps
	$(MAKE) ANALYZE=1 lint-objs
	@echo "  CPPCHECK $(CPPCHECK_DIRS)"
	$(Q)$(CPPCHECK) $(CPPCHECK_DIRS)
	@echo "  SHELLCHECK $(words $(SH_SCRIPTS)) scripts"
	$(Q)shellcheck -x $(SH_SCRIPTS)

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
$(BUILD)/fuzz_http: UNIT_EXTRA_LIBS := $(MHD_LIBS)
$(BUILD)/fuzz_http: $(HTTP_OBJ)
# etcd's answers, as the allocator's election reads them.
$(BUILD)/fuzz_etcd: $(ETCD_OBJ)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(CNI_OBJ) $(CORE_OBJ) $(IMDS_OBJ)
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

test: deps
	$(MAKE) all
	$(MAKE) SAN=1 all
	$(MAKE) ARCH=arm64 all
	$(MAKE) FUZZ=1 fuzz-targets
	TG_FUZZ_DIR=build-fuzz tests/run.sh build build-san

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
