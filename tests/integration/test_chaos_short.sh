#!/usr/bin/env bash
# A short round of the chaos suite (tests/chaos/chaos_kill.sh, `make chaos`
# runs it long): two rounds of 12 pods with shaping, per-pod accounting, the
# agent SIGKILLed and restarted, and the node exactly as before at the end.
#
# Standalone: TOLLGATE_BIN_DIR=build bash tests/integration/test_chaos_short.sh
CHAOS_ROUNDS=${CHAOS_ROUNDS:-2} CHAOS_PODS=${CHAOS_PODS:-12} exec bash "$(dirname "$0")/../chaos/chaos_kill.sh"
