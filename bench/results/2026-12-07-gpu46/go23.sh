#!/usr/bin/env bash
# GPU call of the forty-sixth session: on an H200, issue 49's kernel speed targets (the
# backlog script's speed part, then dims); on an H100, bench model's GEMM rates by width
# (go22.sh: Llama-3.1-70B's TP-4 shard beside Llama-3.1-8B and the TP-8 preset).
set -u
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
case $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) in
*H200*) DEADLINE=420 bash scripts/gpu_session_backlog.sh "$OUT" speed dims ;;
*) bash .gpu/go22.sh ;;
esac
rm -rf "$OUT/w" # packed in logs.tgz / all.tgz
