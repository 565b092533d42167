#!/usr/bin/env bash
# The two commands of the README:
#   ./dev.sh demo   set up .venv, export a demo model, run it in onnxruntime, print the difference to eager
#   ./dev.sh test   set up .venv, then lint (ruff), type-check (mypy), build the docs site and run the test suite
set -euo pipefail
cd "$(dirname "$0")"

setup() {
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
    fi
    # Re-install only when what is installed could have changed.
    local stamp=.venv/.pt2onnx-setup
    local digest
    digest=$(cat requirements-dev.txt constraints-dev.txt $(git ls-files '*pyproject.toml' 2>/dev/null || find . -name pyproject.toml -not -path './.venv/*') | sha256sum | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
        .venv/bin/python -m pip install -q --upgrade pip
        .venv/bin/python -m pip install -q -r requirements-dev.txt
        # pt2onnx-torchvision's tests and the zoo take torchvision (and timm, which imports it) from
        # a folder of their own, put on the path where needed: the torchvision wheel matching the CPU
        # torch is a CUDA build whose C++ ops do not load, and installed in .venv its failing import
        # breaks transformers.
        .venv/bin/python -m pip install -q --no-deps -e ./contrib/torchvision
        .venv/bin/python -m pip install -q --no-deps --upgrade --target .venv/torchvision-site torchvision==0.28.0 timm==1.0.31
        echo "$digest" > "$stamp"
    fi
}

case "${1:-}" in
    demo)
        setup
        .venv/bin/pt2onnx export docs/examples/demo.py:make_model -o demo.onnx --verify
        ;;
    test)
        setup
        .venv/bin/ruff check .
        .venv/bin/ruff format --check .
        .venv/bin/mypy
        # The documentation site: warnings are errors (broken links, API docstrings). No --quiet:
        # it hides warnings from --strict's count (tests/test_docs.py checks this line fails on one).
        NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$(mktemp -d)"
        # A fresh hypothesis seed each run, so CI explores; printed so a failure can be replayed.
        seed="${HYPOTHESIS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
        echo "hypothesis seed: $seed (replay: HYPOTHESIS_SEED=$seed ./dev.sh test ...)"
        # The whole suite also proves every registration of every pack it tests.
        prove=()
        if [ $# -le 1 ]; then
            for pack in aten hops decomp fusions template transformers quant torchvision pt2onnx_ort pt2onnx_ort.attention; do
                prove+=(--pt2onnx-prove "$pack")
            done
        fi
        # --durations: CI's log then says where its time goes (the suite's budget is 30 minutes there).
        HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" .venv/bin/python -m pytest -n 2 --durations=30 \
            --hypothesis-seed="$seed" "${prove[@]}" "${@:2}"
        ;;
    *)
        echo "usage: ./dev.sh demo | ./dev.sh test [pytest args]" >&2
        exit 2
        ;;
esac
