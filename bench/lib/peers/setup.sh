#!/bin/bash
# Owns installing the push benchmark's peers (BENCH_PUSH_PEERS=1, bench/lib/peers.ts) into .peers/ of this
# checkout, at the versions the figures name: flask-websub 0.4.1 (its Python dependencies from Debian's
# packages, the system python3) and rsscloud-server (apps/server 4.0.0, built with its own pnpm workspace).
# Sources: FLASK_WEBSUB_GIT / RSSCLOUD_GIT (a git dir or URL; GitHub by default). Needs redis on
# 127.0.0.1:6379 (Celery's broker) and Node 22+ on PATH.
set -euo pipefail
cd "$(dirname "$0")/../../.."
FLASK_WEBSUB_GIT=${FLASK_WEBSUB_GIT:-https://github.com/marten-de-vries/Flask-WebSub.git}
RSSCLOUD_GIT=${RSSCLOUD_GIT:-https://github.com/rsscloud/rsscloud-server.git}
FLASK_WEBSUB_COMMIT=c23cbd81f98b7df648df2eb3ead45e9dbf9439a8 # tag 0.4.1
RSSCLOUD_COMMIT=e9d1f33e07660626618ec9d70df9d8121e51f3c4     # 2026-07-01, apps/server 4.0.0

apt-get install -y python3-flask python3-requests python3-celery python3-redis

# Fetches repository $1 at commit $2 into .peers/$3 (a bare mirror or a URL alike).
extract() {
  local tmp
  tmp=$(mktemp -d)
  git clone --quiet --bare "$1" "$tmp/repo"
  rm -rf ".peers/$3" && mkdir -p ".peers/$3"
  git --git-dir="$tmp/repo" archive "$2" | tar -x -C ".peers/$3"
  rm -rf "$tmp"
}
extract "$FLASK_WEBSUB_GIT" "$FLASK_WEBSUB_COMMIT" flask-websub
extract "$RSSCLOUD_GIT" "$RSSCLOUD_COMMIT" rsscloud-server
# The server requires its workspace packages (@rsscloud/core, /express, /xml-rpc) built: they are not on npm.
cd .peers/rsscloud-server
npx -y pnpm@10.11.0 install --frozen-lockfile
npx -y pnpm@10.11.0 --filter './packages/*' run build
