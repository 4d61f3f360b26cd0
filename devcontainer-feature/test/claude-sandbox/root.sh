#!/bin/bash
# Scenario "root" (scenarios.json): the feature with its defaults, as root.
set -e
exec bash "$(dirname "$0")/test.sh"
