package store

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// RegisterMetrics registers web3gate_store_up on reg: at each scrape, 1 when the database
// answers a query within timeout (as /readyz asks it), else 0, labeled with the driver.
func (db *DB) RegisterMetrics(reg prometheus.Registerer, timeout time.Duration) {
	promauto.With(reg).NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "web3gate_store_up",
		Help:        "1 when the store's database answered a query within admin.readyTimeout at this scrape, else 0.",
		ConstLabels: prometheus.Labels{"driver": db.Driver()},
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if db.Ping(ctx) != nil {
			return 0
		}
		return 1
	})
}
