#!/usr/bin/env bash
# console-feed.sh: keeps one web console's live feed open, as a browser tab
# does, to measure what an open console costs (docs/performance-log.md):
#
#   scripts/console-feed.sh http://127.0.0.1:7390 user password
#
# It logs in (POST /api/login), then holds POST /api/feed open, reading
# and discarding its lines, and logs in and opens it again whenever it
# ends (the node restarted), until killed. It prints how many lines each
# feed carried.
set -uo pipefail
ui=${1:?usage: $0 console-url user password}
user=${2:?user}
pass=${3:?password}
jar=$(mktemp)
trap 'rm -f "$jar"' EXIT
while :; do
  token=$(curl -sf -c "$jar" -H "Origin: $ui" -X POST --data "{\"user\":\"$user\",\"password\":\"$pass\"}" "$ui/api/login" |
    sed -n 's/.*"token":"\([0-9a-f]*\)".*/\1/p')
  if [ -z "$token" ]; then sleep 0.2; continue; fi
  n=$(curl -sN -b "$jar" -H "Origin: $ui" -H "X-Fencer-Token: $token" -X POST "$ui/api/feed" | wc -l)
  echo "console-feed: a feed ended after $n lines"
done
