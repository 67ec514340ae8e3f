#!/usr/bin/env bash
# timed.sh NAME COMMAND...: runs COMMAND and prints how long it took, so
# that a CI log shows each target's time ("time: NAME 123 s").
set -uo pipefail
name=$1
shift
start=$SECONDS
"$@"
rc=$?
echo "time: $name $((SECONDS - start)) s (exit $rc)"
exit $rc
