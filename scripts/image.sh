#!/usr/bin/env bash
# image.sh: fencer's container image (`make image`), from the Containerfile
# at the top of the repository, with podman, or docker where its engine
# answers.
#
#   scripts/image.sh [TAG]   build a release archive of the machine's own
#                            linux target (scripts/release.sh, into a
#                            temporary directory), unpack it as the build
#                            context and build TAG (default
#                            fencer:VERSION)
#
# IMAGE_ENGINE names the engine (podman or docker) instead of detecting it;
# IMAGE_ARCHIVE names a release archive to use instead of building one;
# RELEASE_DIRTY=1 is passed on to release.sh. The engine's layers and caches
# stay where the engine keeps them, outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/version/version.go)
tag=${1:-fencer:$version}

engine=${IMAGE_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then
    engine=podman
  elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    engine=docker
  else
    echo "image: neither podman nor a docker with a running engine is here; install podman (scripts/deps.sh does)" >&2
    exit 1
  fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
archive=${IMAGE_ARCHIVE:-}
if [ -z "$archive" ]; then
  arch=$("$GO" env GOARCH)
  RELEASE_TARGETS="linux/$arch" GO="$GO" scripts/release.sh "$tmp/dist" >&2
  archive="$tmp/dist/fencer-$version-linux-$arch.tar.gz"
fi
mkdir "$tmp/ctx"
tar -xzf "$archive" -C "$tmp/ctx" --strip-components=1
mkdir "$tmp/ctx/data"
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
"$engine" build --quiet -f Containerfile --build-arg VERSION="$version" --build-arg REVISION="$revision" -t "$tag" "$tmp/ctx" >&2
echo "$tag"
