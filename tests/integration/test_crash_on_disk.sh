#!/usr/bin/env bash
# The crash-safety storm of test_crash.sh with the store on a disk (fsync
# before rename, no cache) instead of tmpfs.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_crash_on_disk.sh
TG_TMP_BASE=/var/tmp exec bash "$(dirname "$0")/test_crash.sh"
