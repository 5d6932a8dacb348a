#!/usr/bin/env bash
# The control-plane binaries for the local test cluster; the script ships inside the package
# (daemonjob/testing/data) so an installed test bed provisions them the same way.
exec bash "$(dirname "$0")/../daemonjob/testing/data/provision-binaries.sh" "$@"
