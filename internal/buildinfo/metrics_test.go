package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegister(t *testing.T) {
	tests := []struct {
		name string
		info Info
		want string
	}{
		{"release", Info{Version: "v1.2.3", Revision: "0123456789abcdef", GoVersion: "go1.26.8"},
			`web3gate_build_info{goversion="go1.26.8",revision="0123456789abcdef",version="v1.2.3"} 1`},
		{"modified", Info{Version: Devel, Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26.8"},
			`web3gate_build_info{goversion="go1.26.8",revision="0123456789abcdef-modified",version="devel"} 1`},
		{"no revision", Info{Version: Devel, GoVersion: "go1.26.8"},
			`web3gate_build_info{goversion="go1.26.8",revision="unknown",version="devel"} 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			Register(reg, tt.info)
			want := "# HELP web3gate_build_info 1, labeled with the build's version, VCS revision (\"-modified\": uncommitted changes; \"unknown\") and Go release.\n" +
				"# TYPE web3gate_build_info gauge\n" + tt.want + "\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "web3gate_build_info"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
