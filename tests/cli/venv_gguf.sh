# Sourced by the GGUF oracle tests: a small venv with the gguf and tokenizers
# packages from PyPI at $PQ_VENV_GGUF (default ~/.cache/pq/venv-gguf, outside
# the clone), installed on first use. When the package index ($PIP_INDEX_URL
# or PyPI) cannot be reached the calling test prints "skip" and exits 0; any
# other failure to install is a FAIL.
VENV_GGUF=${PQ_VENV_GGUF:-$HOME/.cache/pq/venv-gguf}
venv_gguf_python() { # WHAT: prints nothing; sets PY or exits
    what=$1
    PY=$VENV_GGUF/bin/python
    if "$PY" -c 'import gguf, tokenizers, numpy' >/dev/null 2>&1; then return 0; fi
    index=${PIP_INDEX_URL:-https://pypi.org/simple}
    mkdir -p "$(dirname "$VENV_GGUF")"
    log=$VENV_GGUF.log
    if { python3 -m venv "$VENV_GGUF" && "$VENV_GGUF/bin/pip" install -q gguf tokenizers numpy; } >"$log" 2>&1; then
        return 0
    fi
    if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/gguf/", timeout=20)' \
        "$index" >/dev/null 2>&1; then
        echo "skip - $what: $index is not reachable, so the gguf package cannot be installed"
        exit 0
    fi
    echo "FAIL - $what: installing gguf and tokenizers into $VENV_GGUF failed with $index reachable: $(tail -3 "$log" | tr '\n' ' ')"
    exit 1
}
