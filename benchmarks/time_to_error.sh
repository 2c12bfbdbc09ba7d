#!/usr/bin/env bash
# Time to the error (issue 23 item 2): a misspelled bank, a metric the task does not have, four models
# without a price, in `rank` and `run --adaptive`; each run REPEATS times (default 3), the median wall and
# CPU (user + system) seconds printed with the error line. Nothing is called: every case is refused.
# usage, from the repository root:   benchmarks/time_to_error.sh [REPEATS]
#   another checkout, with this venv (its console script imports lm_eval_adaptive.cli.entry, which older
#   checkouts lack: name the command; -P keeps the current folder off sys.path):
#     LM_EVAL_ADAPTIVE_CLI="python -P -m lm_eval_adaptive.cli.main" PYTHONPATH=/path/to/checkout benchmarks/time_to_error.sh
set -u
REPEATS=${1:-3}
read -ra CLI <<< "${LM_EVAL_ADAPTIVE_CLI:-lm-eval-adaptive}"
export LITELLM_LOCAL_MODEL_COST_MAP=True LM_EVAL_ADAPTIVE_DATA=${LM_EVAL_ADAPTIVE_DATA:-$(cd ../shared/data 2>/dev/null && pwd)}
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
M4=(litellm:model=openai/Gemini-1.5-Pro litellm:model=openai/Llama3-70B litellm:model=openai/Aya23
    litellm:model=openai/Unbabel-Tower70B)
P4=(--price openai/Gemini-1.5-Pro=1,3 openai/Llama3-70B=1,3 openai/Aya23=1,3 openai/Unbabel-Tower70B=1,3)
RANK=("${CLI[@]}" rank --tasks wmt24_en-de --include_path task_configs --apply_chat_template --budget-usd 0.05
      --no-progress --models "${M4[@]}")
RUN=("${CLI[@]}" run --model litellm --model_args model=openai/Mistral-Large --tasks wmt24_en-de
     --include_path task_configs --apply_chat_template --output_path "$OUT/run" --adaptive)
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
case_() {
  local name=$1; shift; local walls=() cpus=() rc
  for _ in $(seq "$REPEATS"); do
    /usr/bin/time -f "%e %U %S" -o "$OUT/t" "$@" > "$OUT/o" 2> "$OUT/e"; rc=$?
    read -r w u s < <(tail -n 1 "$OUT/t"); walls+=("$w"); cpus+=("$(echo "$u + $s" | bc)")
  done
  printf '%-34s wall %6.2f s  cpu %5.2f s  rc=%s  %s\n' "$name" "$(printf '%s\n' "${walls[@]}" | median)" \
         "$(printf '%s\n' "${cpus[@]}" | median)" "$rc" "$(grep -m1 '^error:' "$OUT/e" | cut -c1-150)"
}
case_ "rank: misspelled bank" "${RANK[@]}" "${P4[@]}" --bank wmt24_en-de.bleuu --output "$OUT/a"
case_ "rank: misspelled bank, no prices" "${RANK[@]}" --bank wmt24_en-de.bleuu --output "$OUT/a"
case_ "rank: --metric rouge_l" "${RANK[@]}" "${P4[@]}" --metric rouge_l --output "$OUT/b"
case_ "rank: four unpriced models" "${RANK[@]}" --bank wmt24_en-de.bleu --output "$OUT/c"
case_ "run --adaptive: misspelled bank" "${RUN[@]}" --bank wmt24_en-de.bleuu
case_ "run --adaptive: --metric rouge_l" "${RUN[@]}" --metric rouge_l
case_ "rank --help (start-up alone)" "${CLI[@]}" rank --help
