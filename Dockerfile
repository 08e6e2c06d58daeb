# Capstan's image for those who build with docker (or podman, buildah, kaniko).
#
#   docker build --build-arg CAPSTAN_COMMIT=$(git rev-parse HEAD) \
#     --build-arg SOURCE=https://github.com/OWNER/capstan -t capstan:dev .
#
# Not built or tested in Capstan's CI (no container daemon there): `scripts/build-image` is the
# tested way, and makes the same kind of image (one binary, its runtime libraries, user 65532,
# no shell, the OpenSSH client for ssh:// GitRepositories) without a daemon. Keep the two in
# step: same user, entrypoint, labels and files.

FROM docker.io/library/rust:1-bookworm AS build
ARG CAPSTAN_COMMIT=""
WORKDIR /src
COPY . .
RUN CAPSTAN_COMMIT="${CAPSTAN_COMMIT}" cargo build --release --locked -p capstan \
 && cp target/release/capstan /capstan
# The OpenSSH client (GitRepositories with ssh:// URLs run it, without a shell) and exactly the
# libraries ldd lists for it, gathered under /ssh-root at their own paths; distroless has none.
RUN (command -v ssh >/dev/null || (apt-get update && apt-get install -y --no-install-recommends openssh-client)) \
 && mkdir -p /ssh-root/usr/bin && cp -L "$(command -v ssh)" /ssh-root/usr/bin/ssh \
 && for lib in $(ldd "$(command -v ssh)" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do \
      cp -L --parents "$lib" /ssh-root; \
    done

# distroless "cc": glibc, libgcc, CA certificates and the nonroot user (65532); no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG CAPSTAN_COMMIT=""
ARG VERSION="0.1.0"
ARG SOURCE=""
ARG CREATED=""
LABEL org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${CAPSTAN_COMMIT}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.title="capstan" \
      org.opencontainers.image.description="Pull-based continuous delivery for Kubernetes, drop-in for Flux v2"
COPY --from=build /capstan /capstan
COPY --from=build /ssh-root/ /
USER 65532:65532
ENTRYPOINT ["/capstan"]
