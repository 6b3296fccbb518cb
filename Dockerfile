# syntax=docker/dockerfile:1
# One image for both halves: `serve` (deploy/deployment.yaml) and `controller`
# (deploy/controller/deployment.yaml) are subcommands of the same binary.
#
#   docker build -t gangplank:0.1.0 .
#
# Base images are pinned by digest (the tag stays for the reader; the digest is what is
# pulled), so that a rebuild takes the bytes that were reviewed, not whatever the tag names
# today. This machine cannot reach docker.io or gcr.io, so the digests were not resolved here:
# each is the multi-architecture index digest that several independent public projects pin
# for the same tag (one a build log of `docker build` resolving it). Re-check and move them
# together, e.g. `crane digest docker.io/library/rust:1.95-bookworm` and
# `crane digest gcr.io/distroless/cc-debian12:nonroot` (RELIABILITY.md "Supply chain").
#
# Build stage: the Rust toolchain the crate is tested with (Cargo.toml rust-version, .ci/run),
# on Debian 12, the same glibc as the runtime stage.
FROM docker.io/library/rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src
# Cargo.toml declares tests and benches by path, so the whole context goes in (.dockerignore
# keeps target/ and .git/ out). --locked: exactly the dependency versions `cargo deny` checked.
COPY . .
RUN cargo build --release --locked --bin gangplank \
    && install -D -m 0755 target/release/gangplank /out/gangplank

# Runtime stage: distroless "cc" (glibc, libgcc_s, CA certificates; no shell, no package
# manager). The binary needs nothing else (tests/container_image.rs checks its NEEDED list).
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
COPY --from=build /out/gangplank /usr/local/bin/gangplank
# The numeric user and group of deploy/'s securityContext (runAsUser/runAsGroup 65532, the
# distroless "nonroot" user): the kubelet can only verify runAsNonRoot against a number.
USER 65532:65532
# mimalloc: commit arenas as they are used, not whole up front (RSS 69 → 42 MiB at 64
# concurrent reviews; BENCHMARKS.md). Read at process start, hence the environment.
ENV MIMALLOC_ARENA_EAGER_COMMIT=0
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/gangplank"]
CMD ["serve", "--addr=0.0.0.0:8443"]
