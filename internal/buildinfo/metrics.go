package buildinfo

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Register registers web3gate_build_info on reg: 1, labeled with info's version, revision
// (the whole commit hash, with "-modified" after it for a build with uncommitted changes,
// "unknown" when not recorded) and goversion.
func Register(reg prometheus.Registerer, info Info) {
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
		Name: "web3gate_build_info",
		Help: "1, labeled with the build's version, VCS revision (\"-modified\": uncommitted changes; \"unknown\") and Go release.",
	}, []string{"version", "revision", "goversion"}).WithLabelValues(info.Version, info.revisionLabel(), info.GoVersion).Set(1)
}

func (i Info) revisionLabel() string {
	switch {
	case i.Revision == "":
		return "unknown"
	case i.Modified:
		return i.Revision + "-modified"
	}
	return i.Revision
}
