#!/usr/bin/env bash
# monitoring-check.sh: checks the monitoring files of deploy/ with Prometheus's own tool.
#  - promtool accepts deploy/prometheus/alerts.yml and deploy/prometheus/prometheus.yml
#    (which loads those rules).
# Debian's prometheus package (prometheus and promtool) is installed when missing; its
# service is not started. The Go test of ./deploy (TestDashboardAndAlerts, in make test's
# go test step) goes further: it starts that prometheus against a built web3gate and runs
# every expression of the dashboard and of the rules.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
	scripts/apt-install.sh prometheus
fi

promtool check rules deploy/prometheus/alerts.yml
promtool check config deploy/prometheus/prometheus.yml
echo "monitoring-check: promtool accepts deploy/prometheus"
