#!/usr/bin/env bash
# Builds the core test venv from nothing (idempotent): CPU torch 2.13.0 (on local disk), qla-serve[test].
#   usage: .ci/setup-core.sh VENV
set -euo pipefail
venv=${1:?usage: setup-core.sh VENV}
cd "$(dirname "$0")/.."
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
py=$venv/bin/python
$py -m pip install -q --disable-pip-version-check torch==2.13.0
$py -m pip install -q --disable-pip-version-check -e '.[test]'
