# svc's image for those who build with Docker (or podman build): the same image as `make image`
# (internal/image), which needs no daemon. Build it from the repository root:
#
#   docker build --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t svc:$(git describe --always --dirty) .
#
# An empty base (scratch): CA certificates, /etc/passwd with the non-root user 65532, and the static
# binary as the entrypoint. internal/image's tests check that this file says what the Go code builds.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/svcdev/svc/internal/version.stamped=${VERSION}" \
      -o /out/usr/local/bin/svc ./cmd/svc
RUN mkdir -p /out/etc/ssl/certs /out/tmp /owned/home/nonroot /owned/var/lib/svc \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group \
 && chmod 1777 /out/tmp && chmod 0700 /owned/home/nonroot /owned/var/lib/svc

FROM scratch
COPY --from=build /out/ /
COPY --from=build --chown=65532:65532 /owned/home/nonroot /home/nonroot
COPY --from=build --chown=65532:65532 /owned/var/lib/svc /var/lib/svc
ARG VERSION=""
ARG REVISION=""
ARG SOURCE="https://github.com/svcdev/svc"
LABEL org.opencontainers.image.title="svc" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
ENV PATH=/usr/local/bin HOME=/home/nonroot SVC_ADDR=0.0.0.0:8080 SVC_DATA=/var/lib/svc
USER 65532
WORKDIR /home/nonroot
EXPOSE 8080
VOLUME /var/lib/svc
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["server"]
