#!/bin/bash
# Scenario "remote_user" (scenarios.json): the feature for a non-root remoteUser.
set -e
[ "$(id -un)" = vscode ] || { echo "FAIL: runs as $(id -un), not the remoteUser vscode"; exit 1; }
exec bash "$(dirname "$0")/test.sh"
