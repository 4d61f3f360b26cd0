#!/bin/bash
# Scenario "options" (scenarios.json): the options land in /etc/claude-sandbox.conf.
set -e
EXPECT_CONF='no-forge\nallow-ip = 10.0.0.5\n' exec bash "$(dirname "$0")/test.sh"
