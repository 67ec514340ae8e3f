#!/usr/bin/env bash
# release.sh: fencer's release archives, reproducibly (`make release`,
# `make release-check`).
#
#   scripts/release.sh [OUT]   build into OUT (default dist): for each of
#                              linux and darwin on amd64 and arm64, a
#                              fencer-VERSION-OS-ARCH.tar.gz with static
#                              fencerd and fencer, LICENSE, the third-party
#                              licences, README.md, CHANGELOG.md and the
#                              systemd unit and config example; and SHA256SUMS
#   scripts/release.sh --check build into dist, then again from an export
#                              of the commit in another directory with an
#                              empty GOCACHE, and fail unless the two
#                              SHA256SUMS are the same
#
# VERSION is internal/version's constant; a v* tag on HEAD must name it.
# The binaries carry the commit and the commit's time, not the build's
# (internal/version), and the archives the commit's time as every file's
# time, so that a build is a function of the commit and the Go toolchain.
# A checkout with uncommitted changes is refused (RELEASE_DIRTY=1 builds it
# anyway, marked +dirty). RELEASE_REVISION, RELEASE_COMMIT_TIME and
# RELEASE_EPOCH stand in for git where there is none (--check's export).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# The platforms a release ships; internal/release and the licence check
# read this line.
TARGETS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"
# RELEASE_TARGETS builds only some of them (the image test builds the
# machine's own linux target: scripts/image.sh).
TARGETS=${RELEASE_TARGETS:-$TARGETS}
VERSION_PKG=github.com/fencerlock/fencer/internal/version

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/version/version.go)
[ -n "$version" ] || { echo "release: no Version constant in internal/version/version.go" >&2; exit 1; }

if [ "${1:-}" = "--check" ]; then
  tmp=$(mktemp -d)
  trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
  "$0" dist
  mkdir "$tmp/src" "$tmp/gocache"
  git archive HEAD | tar -x -C "$tmp/src"
  RELEASE_REVISION=$(git rev-parse HEAD) \
    RELEASE_COMMIT_TIME=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ) \
    RELEASE_EPOCH=$(git log -1 --format=%ct) \
    GOCACHE="$tmp/gocache" GO="$GO" "$tmp/src/scripts/release.sh" "$tmp/out"
  echo "== first build (dist/SHA256SUMS)"
  cat dist/SHA256SUMS
  echo "== second build ($tmp/out/SHA256SUMS: source in $tmp/src, GOCACHE=$tmp/gocache, empty at the start)"
  cat "$tmp/out/SHA256SUMS"
  if ! cmp -s dist/SHA256SUMS "$tmp/out/SHA256SUMS"; then
    echo "release-check: the two builds differ" >&2
    diff dist/SHA256SUMS "$tmp/out/SHA256SUMS" >&2 || true
    exit 1
  fi
  echo "release-check: the two builds are identical"
  exit 0
fi

out=${1:-dist}
modified=""
if [ -n "${RELEASE_REVISION:-}" ]; then
  revision=$RELEASE_REVISION
  commit_time=${RELEASE_COMMIT_TIME:?}
  epoch=${RELEASE_EPOCH:?}
else
  revision=$(git rev-parse HEAD)
  commit_time=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
  epoch=$(git log -1 --format=%ct)
  for tag in $(git tag --points-at HEAD 'v*'); do
    if [ "$tag" != "v$version" ]; then
      echo "release: HEAD is tagged $tag, but internal/version says $version" >&2
      exit 1
    fi
  done
  if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    if [ "${RELEASE_DIRTY:-}" != 1 ]; then
      echo "release: the checkout has uncommitted changes; commit them (or RELEASE_DIRTY=1)" >&2
      exit 1
    fi
    modified=true
  fi
fi

ldflags="-s -w -X $VERSION_PKG.revision=$revision -X $VERSION_PKG.commitTime=$commit_time -X $VERSION_PKG.modified=$modified"
rm -rf "$out"
stage="$out/.stage"
mkdir -p "$stage"
# -buildvcs=false: the commit comes from ldflags alone, the same in a clone,
# a worktree and an export.
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false -mod=readonly" GOTOOLCHAIN=local
"$GO" run ./internal/cmd/licenses -out "$stage/THIRD_PARTY_LICENSES" ./cmd/fencerd ./cmd/fencer

for target in $TARGETS; do
  goos=${target%/*} goarch=${target#*/}
  name="fencer-$version-$goos-$goarch"
  dir="$stage/$name"
  mkdir -p "$dir"
  for cmd in fencerd fencer; do
    GOOS=$goos GOARCH=$goarch "$GO" build -ldflags "$ldflags" -o "$dir/$cmd" "./cmd/$cmd"
  done
  cp LICENSE README.md CHANGELOG.md docs/fencerd.service docs/fencerd.yaml "$dir/"
  cp -R "$stage/THIRD_PARTY_LICENSES" "$dir/"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=gnu -C "$stage" -cf - "$name" | gzip -n -9 > "$out/$name.tar.gz"
  echo "release: $out/$name.tar.gz"
done
rm -rf "$stage"
(cd "$out" && sha256sum -- *.tar.gz > SHA256SUMS)
echo "release: $out/SHA256SUMS"
