# web3gate in a container: one static binary and its config.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/web3gate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/web3gate /web3gate
COPY config.yaml /etc/web3gate/config.yaml
# The public API and the admin listener (metrics, health); bind them beyond loopback.
EXPOSE 8545 9545
ENTRYPOINT ["/web3gate", "--config", "/etc/web3gate/config.yaml", "--listen", "0.0.0.0:8545", "--admin-listen", "0.0.0.0:9545"]
