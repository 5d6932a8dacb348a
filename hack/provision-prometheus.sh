#!/usr/bin/env bash
# prometheus and promtool for the monitoring tests; the script ships inside the package
# (daemonjob/testing/data) so an installed test bed provisions them the same way.
exec bash "$(dirname "$0")/../daemonjob/testing/data/provision-prometheus.sh" "$@"
