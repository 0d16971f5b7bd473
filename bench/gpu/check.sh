#!/bin/bash
# The GPU check, in one device call (docs/gpu.md): install the wheels bench/gpu/prepare.sh put in
# .gpu/ and the project, build a random-weight Llama-shaped model, run the engine's tests on the
# default device (CUDA there), then the benches. Every step has its own time limit (T_* seconds), so
# one call fits the device budget; output goes to $OUT/log.txt and files beside it.
#   STEPS  which steps, of: tests nproc train train_trees sample dpo sl memory nf4 cudnn profile
#          profile_sl
#          (default "tests train sample dpo sl memory"; e.g. STEPS="cudnn profile profile_sl")
#   SIZE   the model: 1b (default), 135m or test (seconds on a CPU)
#   TESTS  what the tests step runs (default "tests/local_engine tests/export")
#   LOCAL=1  a dry run with the local environment (PY as in prepare.sh): the checkout's code on
#          PYTHONPATH, TRL and py-spy from .gpu/whl into a scratch folder, nothing installed into
#          the environment
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root"
SCRATCH=${SCRATCH:-/tmp/kitchen-gpu}; OUT=${OUT:-$SCRATCH/out}; SIZE=${SIZE:-1b}
STEPS=${STEPS:-"tests train sample dpo sl memory"}; TESTS=${TESTS:-"tests/local_engine tests/export"}
mkdir -p "$OUT" "$SCRATCH"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$SECONDS
step() { echo; echo "=== [$((SECONDS - t0)) s] $*"; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
step info
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
step install
site=$SCRATCH/site
if [ "${LOCAL:-0}" = 1 ]; then
  main=$(cd "$(git rev-parse --git-common-dir)/.." && pwd)
  PY=${PY:-$( [ -x .venv/bin/python ] && echo "$root/.venv/bin/python" || echo "$main/.venv/bin/python" )}
  KIT=$(dirname "$PY")/kitchen
  tools=$(ls .gpu/whl/trl-*.whl .gpu/whl/py_spy-*.whl 2>/dev/null)
  # shellcheck disable=SC2086
  [ -z "$tools" ] || "$PY" -m pip install -q --no-deps --no-compile --upgrade --target "$site" $tools
  export PYTHONPATH=$root:$site
  DEV=cpu
else
  PY=${PY:-python3}; KIT=$SCRATCH/kit/bin/kitchen
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .gpu/whl/*.whl || exit 1
  "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade \
    --target "$SCRATCH/kit" . || exit 1
  export PYTHONPATH=$site:$SCRATCH/kit
  DEV=cuda
  [ ! -d .gpu/bnb ] || PYTHONPATH=$PYTHONPATH:$root/.gpu/bnb  # prepare.sh: bitsandbytes, cut down
fi
SPY=$site/bin/py-spy
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false KITCHEN_CACHE=$SCRATCH/kcache
"$PY" -c "import sys, torch, transformers, peft
print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      'transformers', transformers.__version__, 'peft', peft.__version__)
from importlib.metadata import version
print('bitsandbytes', version('bitsandbytes'))" 2>&1 | grep -v Traceback
step "model: random-weight Llama, size $SIZE"
tok=$(dirname "$(ls .gpu/*/tokenizer.json | head -1)")  # the folder prepare.sh copied
M=$("$PY" -c "import sys; sys.path.insert(0, 'bench')
from model_options import random_llama; print(random_llama('$SIZE', '$tok'))" | tail -1)
[ -d "$M" ] || { echo "no model folder: $M"; exit 1; }
echo "$M"
if want tests; then
  step "tests ($TESTS) on the default device"
  # shellcheck disable=SC2086
  timeout "${T_TESTS:-110}" "$PY" -m pytest $TESTS -v -p no:cacheprovider --no-header -o addopts="" \
    > "$OUT/tests.txt" 2>&1
  echo "pytest exit $?"; grep -E " (FAILED|ERROR)" "$OUT/tests.txt" | grep "::" | head -40
  tail -1 "$OUT/tests.txt"
fi
if want nproc; then
  step "--nproc: sl_basic at N=1 before issue 34, now, and as a world of one rank; then --nproc 2"
  timeout "${T_NPROC:-150}" "$PY" bench/gpu/nproc.py --model "$M" --steps 8 --batch-size 32 \
    --rounds "${ROUNDS:-2}" --out "$SCRATCH/nproc" --timeout 100
  # more ranks than GPUs: refused in one line before any rank starts (a CPU runs them)
  timeout 60 "$KIT" run sl_basic --model "$M" --nproc 2 --max-steps 1 \
    --log-path "$SCRATCH/runs/nproc2" --if-exists delete 2>&1 | tail -3
  echo "exit ${PIPESTATUS[0]}"
fi
if want train; then
  step "training: engine vs hand loop, fp32 and bf16"
  timeout "${T_TRAIN:-80}" "$PY" bench/local_engine.py --model "$M" --only training \
    --dtypes float32,auto --batch "${BATCH:-16}" --seq "${SEQ:-512}" --steps 3 --repeats 2
fi
if want train_trees; then
  step "training, bf16, at each older tree of .gpu/tree-* (prepare.sh's TREES), then now"
  for tree in .gpu/tree-* "$root"; do
    [ -d "$tree/kitchen" ] || continue
    name=$(basename "$tree"); echo "-- $name"
    (cd "$tree" && PYTHONPATH=$PWD:$PYTHONPATH timeout "${T_TRAIN:-80}" "$PY" bench/local_engine.py \
      --model "$M" --only training --dtypes auto --batch "${BATCH:-16}" --seq "${SEQ:-512}" \
      --steps 3 --repeats 2 > "$OUT/train-$name.txt" 2>&1)
    grep -E "^  (engine|hand loop|ratio) " "$OUT/train-$name.txt" || tail -3 "$OUT/train-$name.txt"
  done
fi
if want sample; then
  step "sampling: engine vs HF generate; 32 concurrent vs per call"
  timeout "${T_SAMPLE:-80}" "$PY" bench/local_engine.py --model "$M" --only sampling \
    --sampling-dtype bfloat16 --num-samples 16 --new-tokens "${NEW:-64}" --repeats 1
fi
if want dpo; then
  step "DPO: kitchen vs TRL DPOTrainer vs hand loop"
  timeout "${T_DPO:-120}" "$PY" bench/dpo.py --model "$M" --pairs "${PAIRS:-16}" --steps 3 2>&1 | tail -9
fi
if want sl; then
  step "kitchen run sl_basic, 8 steps of 32"
  s0=$SECONDS
  timeout "${T_SL:-60}" "$KIT" run sl_basic --model "$M" --max-steps 8 --batch-size 32 \
    --log-path "$SCRATCH/runs/sl" --if-exists delete --eval-every 0 --num-samples-to-show 0 2>&1 | tail -2
  echo "sl_basic wall $((SECONDS - s0)) s including start-up"
fi
if want memory; then
  step "memory: one row of 32k tokens, then a mixed batch at 8k (bench/memory.py, bf16)"
  [ "${MEM_LONG:-32768}" = 0 ] || timeout "${T_MEM:-150}" "$PY" bench/memory.py --model "$M" --dtype auto --single \
    --lengths "${MEM_LONG:-32768}" --modes off,checkpointing --steps 2
  timeout "${T_MEM:-150}" "$PY" bench/memory.py --model "$M" --dtype auto \
    --lengths "${MEM_MIXED:-8192}" --modes off,checkpointing,packing,both --steps 2
fi
if want nf4; then
  step "4-bit base (nf4) against the bf16-autocast base, LoRA (bench/quantized_base.py)"
  timeout "${T_NF4:-120}" "$PY" bench/quantized_base.py --model "$M" --device "$DEV" --dtype auto \
    --length "${NF4_LONG:-4096}" --steps 3
fi
if want cudnn; then
  step "DPO kitchen side with cuDNN attention allowed (the 2026-11-26 slowdown's cause)"
  KITCHEN_CUDNN_ATTENTION=1 timeout "${T_CUDNN:-60}" "$PY" bench/dpo.py --model "$M" \
    --pairs "${PAIRS:-16}" --steps 3 --sides kitchen 2>&1 | tail -3
fi
profile() {  # NAME FRAME -- COMMAND...: py-spy over every thread, then the top leaves under FRAME
  local name=$1 frame=$2; shift 3
  [ -x "$SPY" ] || { echo "no py-spy at $SPY (bench/gpu/prepare.sh downloads it)"; return; }
  # SIGINT at the limit: py-spy then writes what it has so far (a SIGTERM loses it all)
  timeout -s INT -k 10 "${T_PROF:-60}" "$SPY" record -r 200 -f raw -o "$OUT/$name.txt" -- "$@" \
    2>&1 | tail -2
  [ ! -s "$OUT/$name.txt" ] || "$PY" bench/gpu/stacks.py "$OUT/$name.txt" "$frame" | head -16
}
if want profile; then
  step "py-spy: the DPO kitchen side"
  profile dpo_kitchen sdpa_attention_forward -- \
    "$PY" bench/dpo.py --model "$M" --pairs "${PAIRS:-16}" --steps 3 --side kitchen
fi
if want profile_sl; then
  step "py-spy: kitchen run sl_basic, 5 steps of 32"
  profile sl_basic sdpa_attention_forward -- "$KIT" run sl_basic --model "$M" \
    --max-steps 5 --batch-size 32 --log-path "$SCRATCH/runs/sl_prof" --if-exists delete \
    --eval-every 0 --num-samples-to-show 0
fi
step done
