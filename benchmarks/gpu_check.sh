#!/usr/bin/env bash
# sci-moe GPU check: device and versions, the GPU tests (core, then every method on cuda),
# the layer benchmark's GPU section.
#
# The benchmark section: bfloat16, d in {1024, 2048, 4096} x E in {8, 64, 128} (ffn = d/2,
# top-2 at E=8 else top-8, T=8192): sci-moe's Triton kernels, the fused-gather/scatter
# kernels and torch grouped_mm, against a dense SwiGLU of equal active FLOPs and
# transformers' MixtralSparseMoeBlock (grouped_mm); moe_layer_gpu.json records the device
# name (machine.cuda), capability and the measured dense GEMM rate. Not yet run on a GPU
# (no device lent so far; docs/results/moe_layer.rst says so).
#
#   [OUT=dir] [PYTHON=python] bash benchmarks/gpu_check.sh [--quick]
#
# Finishes in under 9 minutes: every stage runs under a deadline (GPU_CHECK_BUDGET_S,
# default 520 s, for the whole script); the benchmark switches to --quick by itself when
# little time is left. With $OUT set it writes there: env.txt (nvidia-smi, versions),
# pytest_gpu.log (the core: kernels, Triton scan, engine), pytest_gpu_methods.log (every
# method's end-to-end --device cuda run), moe_layer_gpu.log and moe_layer_gpu.json.
#
# Python: $PYTHON, else ./.venv/bin/python (after `make setup`), else python3: the first
# whose torch sees a CUDA device. The checkout goes on PYTHONPATH (no install needed).
# Test dependencies missing from that Python (pytest, numpy, triton, transformers; the
# pins of pyproject.toml's `test` extra) are pip-installed when the network allows;
# otherwise the tests and contestants that need them are skipped.
# Exit status: 0 when the tests and the benchmark both succeeded.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
BUDGET=${GPU_CHECK_BUDGET_S:-520}
QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick"
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    LOGS="$OUT"
else
    LOGS=$(mktemp -d)
fi
left() { echo $((BUDGET - SECONDS)); }
say() { echo "[gpu_check $(printf '%3d' "$SECONDS") s] $*"; }

# ------------------------------------------------------------------ python + deps
has_cuda_torch() {
    "$1" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        >/dev/null 2>&1
}
PY=""
for cand in "${PYTHON:-}" "$ROOT/.venv/bin/python" python3 python; do
    [ -n "$cand" ] || continue
    command -v "$cand" >/dev/null 2>&1 || continue
    if has_cuda_torch "$cand"; then PY=$(command -v "$cand"); break; fi
done

{
    echo "== nvidia-smi"
    nvidia-smi 2>&1 || echo "nvidia-smi not available"
    echo
    echo "== versions"
    rev=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
    git -C "$ROOT" diff --quiet HEAD 2>/dev/null || rev="$rev+dirty"
    echo "git: $rev"
} 2>&1 | tee "$LOGS/env.txt"

if [ -z "$PY" ]; then
    echo "no Python with a CUDA-enabled torch found (tried \$PYTHON, .venv, python3);" \
        "install one (e.g. pip install torch) and rerun with PYTHON=..." | tee -a "$LOGS/env.txt"
    exit 2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

missing=$("$PY" - <<'EOF'
import importlib.util as u
pins = {"pytest": "pytest>=8", "numpy": "numpy>=1.24", "triton": "triton>=3.2",
        "transformers": "transformers>=4.57"}
print(" ".join(spec for mod, spec in pins.items() if u.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ]; then
    say "installing missing test dependencies: $missing"
    # shellcheck disable=SC2086
    timeout 120 "$PY" -m pip install -q --disable-pip-version-check $missing 2>&1 | tail -5 \
        || say "pip install failed (offline?); continuing without: $missing"
fi

"$PY" - <<'EOF' 2>&1 | tee -a "$LOGS/env.txt"
import importlib, platform
import torch
print(f"python {platform.python_version()}, torch {torch.__version__} "
      f"(CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()})")
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print(f"cuda:{i} {p.name}, sm{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB, "
          f"{p.multi_processor_count} SMs")
for mod in ("triton", "transformers", "numpy", "pytest", "sci_moe"):
    try:
        print(f"{mod} {importlib.import_module(mod).__version__}")
    except Exception as e:
        print(f"{mod}: not importable ({type(e).__name__}: {e})")
print("torch._grouped_mm:", hasattr(torch, "_grouped_mm"))
EOF

# ------------------------------------------------------------------ GPU tests
# First the core (the MoE kernels, the Triton scan, the engine's device handling): what
# every method relies on, so a short budget never cuts it off; then every method's
# end-to-end GPU runs (sci-moe train <method> --device cuda and their unit checks).
CORE_TESTS="tests/moe tests/language/mamba/test_triton_scan.py tests/train"
t_core=$(( $(left) - 250 ))
[ "$t_core" -gt 180 ] && t_core=180
[ "$t_core" -lt 30 ] && t_core=30
say "pytest -m gpu (core: $CORE_TESTS; timeout ${t_core} s)"
# shellcheck disable=SC2086
timeout --kill-after=10 "$t_core" "$PY" -m pytest -m gpu $CORE_TESTS -q -rs \
    -p no:cacheprovider --continue-on-collection-errors --durations=10 2>&1 \
    | tee "$LOGS/pytest_gpu.log"
rc_core=${PIPESTATUS[0]}
say "pytest (core) exit status $rc_core"
t_methods=$(( $(left) - 150 ))
[ "$t_methods" -gt 240 ] && t_methods=240
[ "$t_methods" -lt 30 ] && t_methods=30
say "pytest -m gpu (the methods, the rest of tests/; timeout ${t_methods} s)"
ignore=""
for t in $CORE_TESTS; do ignore="$ignore --ignore=$t"; done
# shellcheck disable=SC2086
timeout --kill-after=10 "$t_methods" "$PY" -m pytest -m gpu tests/ $ignore -q -rs \
    -p no:cacheprovider --continue-on-collection-errors --durations=15 2>&1 \
    | tee "$LOGS/pytest_gpu_methods.log"
rc_methods=${PIPESTATUS[0]}
say "pytest (methods) exit status $rc_methods"
rc_tests=$(( rc_core != 0 ? rc_core : rc_methods ))

# ------------------------------------------------------------------ benchmark
t_bench=$(( $(left) - 10 ))
if [ -z "$QUICK" ] && [ "$t_bench" -lt 200 ]; then
    QUICK="--quick"
    say "less than 200 s left: benchmark in --quick mode"
fi
say "benchmarks/moe_layer/run.py --gpu $QUICK (timeout ${t_bench} s)"
if [ "$t_bench" -gt 30 ]; then
    # shellcheck disable=SC2086
    timeout --kill-after=10 "$t_bench" "$PY" benchmarks/moe_layer/run.py --gpu $QUICK \
        --json "$LOGS/moe_layer_gpu.json" 2>&1 | tee "$LOGS/moe_layer_gpu.log"
    rc_bench=${PIPESTATUS[0]}
else
    echo "not enough time left for the benchmark" | tee "$LOGS/moe_layer_gpu.log"
    rc_bench=124
fi
say "benchmark exit status $rc_bench"

say "done: tests $rc_tests, benchmark $rc_bench; outputs in $LOGS"
[ "$rc_tests" -eq 0 ] && [ "$rc_bench" -eq 0 ]
