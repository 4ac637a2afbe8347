#!/bin/sh
# Installs the compilation daemon into a new virtual environment: a wheel of the source tree with the
# `compiler` and `server` extras and nothing else (no dev tools, no CUDA toolkit: the CUDA driver comes
# from the host at run time). The image's build stage runs this, and so does tests/deploy/test_image.py.
#
#     sh deploy/install.sh SOURCE VENV
set -eu
if [ "$#" -ne 2 ]; then
    echo "usage: $0 SOURCE VENV  (SOURCE: the repository's files; VENV: a folder to create)" >&2
    exit 2
fi
source_dir=$1
venv=$2
python3 -m venv "$venv"
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$wheels" "$source_dir"
set -- "$wheels"/despina-*.whl
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$1[compiler,server]"
"$venv/bin/despina" --version
