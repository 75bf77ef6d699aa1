package integration

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The deployment example in deploy/: compose.yaml, the replicas' web3gate.yaml, haproxy.cfg,
// prometheus.yml and .env.example. `make deploy-check` has docker-compose and haproxy accept
// them; these tests check that web3gate accepts its config as compose hands it over, and that
// the files agree with each other.

// composeFile is the part of deploy/compose.yaml these tests read.
type composeFile struct {
	Services map[string]struct {
		Hostname    string            `yaml:"hostname"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Build       *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	return c
}

// replicas are the compose services built from the repository's Dockerfile, sorted.
func (c composeFile) replicas() []string {
	var names []string
	for name, s := range c.Services {
		if s.Build != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// readEnvExample reads deploy/.env.example: NAME=value lines.
func readEnvExample(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../deploy/.env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("deploy/.env.example: %q is not NAME=value", line)
		}
		env[name] = value
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// composeRef is compose's interpolation: ${NAME}, ${NAME:-default}, ${NAME:?message}; $$ is a
// literal $.
var composeRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-?])([^}]*))?\}`)

// interpolate expands s as compose does with the variables of env; a required variable that
// env lacks fails t.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return composeRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := composeRef.FindStringSubmatch(m)
		if v, ok := env[sub[1]]; ok && v != "" {
			return v
		}
		switch sub[2] {
		case ":-":
			return sub[3]
		case ":?":
			t.Errorf("compose needs %s: %s", sub[1], sub[3])
		default:
			t.Errorf("compose reads %s, which deploy/.env.example does not set", sub[1])
		}
		return ""
	})
}

// TestDeployConfig: `web3gate config check` accepts deploy/web3gate.yaml with the environment
// compose gives each replica from deploy/.env.example (and HOSTNAME, which the container gets
// from the service's hostname).
func TestDeployConfig(t *testing.T) {
	c := readCompose(t)
	example := readEnvExample(t)
	replicas := c.replicas()
	if len(replicas) < 2 {
		t.Fatalf("deploy/compose.yaml builds %d replicas from the Dockerfile (%v), want at least 2", len(replicas), replicas)
	}
	for _, name := range replicas {
		t.Run(name, func(t *testing.T) {
			s := c.Services[name]
			if s.Hostname != name {
				t.Errorf("hostname %q, want %q (cluster.replicaId is ${HOSTNAME})", s.Hostname, name)
			}
			for k, v := range s.Environment {
				t.Setenv(k, interpolate(t, v, example))
			}
			t.Setenv("HOSTNAME", s.Hostname)
			code, out := runCLI(t, "", "config", "check", "--config", "../deploy/web3gate.yaml")
			if code != 0 {
				t.Fatalf("config check deploy/web3gate.yaml: exit %d\n%s", code, out)
			}
			if got, want := out, "../deploy/web3gate.yaml: ok\n"; got != want {
				t.Errorf("config check printed %q, want %q", got, want)
			}
		})
	}
}

// TestDeployFilesAgree: every variable web3gate.yaml reads is in each replica's environment,
// every variable compose reads is in .env.example, the replicas mount web3gate.yaml where the
// image reads its config, and the load balancer and Prometheus name every replica on its API
// and admin ports (the Dockerfile's --listen 0.0.0.0:8545 --admin-listen 0.0.0.0:9545).
func TestDeployFilesAgree(t *testing.T) {
	c := readCompose(t)
	replicas := c.replicas()
	example := readEnvExample(t)

	rawCompose, err := os.ReadFile("../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	interpolate(t, string(rawCompose), example)
	var exampleNames []string
	for name := range example {
		exampleNames = append(exampleNames, name)
	}
	for _, name := range exampleNames {
		if !strings.Contains(string(rawCompose), "${"+name) {
			t.Errorf("deploy/.env.example sets %s, which compose.yaml never reads", name)
		}
	}

	cfg, err := os.ReadFile("../deploy/web3gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var needed []string
	for _, line := range strings.Split(string(cfg), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`).FindAllStringSubmatch(line, -1) {
			if m[2] == "" && m[1] != "HOSTNAME" {
				needed = append(needed, m[1])
			}
		}
	}
	if len(needed) == 0 {
		t.Fatal("deploy/web3gate.yaml reads no environment variable: its secrets would be inline")
	}
	for _, name := range replicas {
		s := c.Services[name]
		for _, v := range needed {
			if _, ok := s.Environment[v]; !ok {
				t.Errorf("%s: web3gate.yaml reads ${%s}, which the service's environment lacks", name, v)
			}
		}
		if !slices.Contains(s.Volumes, "./web3gate.yaml:/etc/web3gate/config.yaml:ro") {
			t.Errorf("%s: volumes %q do not mount ./web3gate.yaml on the image's /etc/web3gate/config.yaml", name, s.Volumes)
		}
	}

	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"--config", "/etc/web3gate/config.yaml"`, `"--listen", "0.0.0.0:8545"`, `"--admin-listen", "0.0.0.0:9545"`} {
		if !strings.Contains(string(dockerfile), want) {
			t.Errorf("the Dockerfile's entrypoint no longer has %s, which deploy/ relies on", want)
		}
	}

	lb, err := os.ReadFile("../deploy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	servers := regexp.MustCompile(`(?m)^\s*server\s+(\S+)\s+(\S+)`).FindAllStringSubmatch(string(lb), -1)
	var lbTargets []string
	for _, m := range servers {
		lbTargets = append(lbTargets, m[2])
	}
	var wantLB, wantProm []string
	for _, name := range replicas {
		wantLB = append(wantLB, name+":8545")
		wantProm = append(wantProm, name+":9545")
	}
	if !slices.Equal(lbTargets, wantLB) {
		t.Errorf("haproxy.cfg servers %q, want %q", lbTargets, wantLB)
	}
	for _, want := range []string{"balance roundrobin", "check port 9545", "uri /readyz", "timeout tunnel"} {
		if !strings.Contains(string(lb), want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}

	rawProm, err := os.ReadFile("../deploy/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(rawProm, &prom); err != nil {
		t.Fatalf("deploy/prometheus/prometheus.yml: %v", err)
	}
	var promTargets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName != "web3gate" {
			continue
		}
		if sc.MetricsPath != "/metrics" {
			t.Errorf("prometheus.yml job web3gate: metrics_path %q, want /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			promTargets = append(promTargets, st.Targets...)
		}
	}
	if !slices.Equal(promTargets, wantProm) {
		t.Errorf("prometheus.yml job web3gate scrapes %q, want %q", promTargets, wantProm)
	}
}
