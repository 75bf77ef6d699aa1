# web3gate in a container: one static binary and its config.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What `web3gate version` and web3gate_build_info say: the build context leaves .git out
# (.dockerignore), so the go command has no revision to record; `make image` (or compose's
# build args) passes the checkout's values. Without them the image says "devel".
ARG VERSION=devel
ARG REVISION=
ARG MODIFIED=false
RUN CGO_ENABLED=0 go build -trimpath -o /out/web3gate \
      -ldflags "-s -w -X github.com/web3gate/web3gate/internal/buildinfo.version=${VERSION} -X github.com/web3gate/web3gate/internal/buildinfo.revision=${REVISION} -X github.com/web3gate/web3gate/internal/buildinfo.modified=${MODIFIED}" .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/web3gate /web3gate
COPY config.yaml /etc/web3gate/config.yaml
# The public API and the admin listener (metrics, health); bind them beyond loopback.
EXPOSE 8545 9545
ENTRYPOINT ["/web3gate", "--config", "/etc/web3gate/config.yaml", "--listen", "0.0.0.0:8545", "--admin-listen", "0.0.0.0:9545"]
# The image has no shell or curl: the binary asks its own admin listener. /healthz (the
# process serves) rather than /readyz: a runtime that restarts unhealthy containers should not
# restart every replica when an upstream or the database is down; load balancers probe
# /readyz themselves. docs/cli.md "healthcheck".
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD ["/web3gate", "healthcheck", "--admin-listen", "127.0.0.1:9545", "--timeout", "4s"]
