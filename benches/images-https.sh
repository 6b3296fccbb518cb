#!/usr/bin/env bash
# HTTPS admission load (`gangplank bench`) with image digest pinning on: the shipped examples
# with their images turned into tags of a loopback docker-registry (pushed here with curl over
# the registry HTTP API), and the shipped policies with `imageResolution` enabled for it.
# The server resolves each tag once, then serves it from its digest cache; the bench checks
# every answer against verdicts computed with the same pinning. BENCHMARKS.md has figures.
#
# Usage: benches/images-https.sh [gangplank bench flags...]   (after cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
gangplank=${GANGPLANK:-./target/release/gangplank}
work=$(mktemp -d)
trap 'kill "$registry_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
host="127.0.0.1:$port"
cat > "$work/registry.yml" <<YAML
version: 0.1
log: {level: error, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/data}}
http: {addr: $host}
YAML
/usr/bin/docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do curl -fs "http://$host/v2/" >/dev/null && break; sleep 0.1; done

push_blob() { # repo file -> digest
  local digest="sha256:$(sha256sum "$2" | cut -d' ' -f1)" location
  location=$(curl -fsS -X POST -D - -o /dev/null "http://$host/v2/$1/blobs/uploads/" | tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
  case $location in /*) location="http://$host$location" ;; esac
  # octet-stream: with curl's default form type the registry would parse the body as a form.
  curl -fsS -X PUT -H 'Content-Type: application/octet-stream' --data-binary @"$2" "$location&digest=$digest" >/dev/null
  echo "$digest"
}

# Examples with registry.example.com/<repo>:<tag>@<digest> turned into $host/<repo>:<tag>.
cp -r examples "$work/examples"
grep -rhoE 'registry\.example\.com/[^@" ]+' examples | sort -u | while read -r image; do
  ref=${image#registry.example.com/}; repo=${ref%:*}; tag=${ref##*:}
  echo "{\"seed\":\"$ref\"}" > "$work/config"; echo "layer $ref" > "$work/layer"
  config=$(push_blob "$repo" "$work/config"); layer=$(push_blob "$repo" "$work/layer")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":%d,"digest":"%s"},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":%d,"digest":"%s"}]}' \
    "$(stat -c%s "$work/config")" "$config" "$(stat -c%s "$work/layer")" "$layer" > "$work/manifest"
  curl -fsS -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
    --data-binary @"$work/manifest" "http://$host/v2/$repo/manifests/$tag" >/dev/null
done
find "$work/examples" -name '*.yaml' -exec sed -i -E "s#registry\.example\.com/([^@\" ]+)@sha256:[0-9a-f]{64}#$host/\1#g" {} +

cp -r policies "$work/policies"
# Only the loopback registry may be called: examples/rejected/unpinned-image.yaml keeps its
# registry.example.com tag, which is then refused without a network call.
sed -i -e "s#^  enabled: false#  enabled: true#" \
  -e "s#^  allowedRegistries: \[\]#  allowedRegistries: [\"$host\"]#" \
  -e "s#^  plainHttpRegistries: \[\]#  plainHttpRegistries: [\"$host\"]#" "$work/policies/params.yaml"
echo "# $(grep -rhoE "$host/[^\" ]+" "$work/examples" | sort -u | wc -l) tags at $host; images in the examples: $(grep -rhoE "$host/[^\" ]+" "$work/examples" | wc -l)"
"$gangplank" bench --examples "$work/examples" --policies "$work/policies" "$@"
