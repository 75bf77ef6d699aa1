package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheckCmd asks the admin listener whether the server is up, for images without a
// shell or curl (distroless) and for scripts: exit 0 on HTTP 200, 1 otherwise.
//
// It asks /healthz by default: the process is up and serving. /readyz (--ready) also needs
// a healthy upstream for every chain and an answering store; a container runtime that
// restarts an unhealthy container would restart every replica when an upstream or the
// database is down, which a restart does not mend, so readiness is for load balancers,
// which probe /readyz themselves.
type healthcheckCmd struct {
	URL         string        `name:"url" placeholder:"URL" help:"The URL to GET (default: /healthz on the admin listener of the config)."`
	Ready       bool          `help:"Ask /readyz (this replica can serve: upstreams and store) instead of /healthz."`
	AdminListen string        `name:"admin-listen" placeholder:"HOST:PORT" help:"Address of the admin listener (overrides admin.listen; no config is read)."`
	Timeout     time.Duration `default:"5s" help:"How long to wait for the answer."`
	configFlag
}

func (c *healthcheckCmd) Run(ctx context.Context, env Env) error {
	url, err := c.target()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usageError{fmt.Errorf("healthcheck: --url: %w", err)}
	}
	// No proxy from the environment: the admin listener is this host's or its pod's.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: HTTP %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(env.Stdout, "%s: HTTP 200 %s\n", url, strings.TrimSpace(string(body)))
	return nil
}

// target is the URL to ask: --url, else /healthz or /readyz on --admin-listen, else on
// admin.listen of the config. A listener bound to every address (0.0.0.0, [::] or no
// host) is asked on loopback.
func (c *healthcheckCmd) target() (string, error) {
	path := "/healthz"
	if c.Ready {
		path = "/readyz"
	}
	switch {
	case c.URL != "" && (c.Ready || c.AdminListen != ""):
		return "", usageError{fmt.Errorf("healthcheck: --url names the whole URL; give it without --ready and --admin-listen")}
	case c.URL != "":
		return c.URL, nil
	}
	addr := c.AdminListen
	if addr == "" {
		cfg, err := c.load()
		if err != nil {
			return "", err
		}
		addr = cfg.Admin.Listen
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usageError{fmt.Errorf("healthcheck: %q is not host:port", addr)}
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
