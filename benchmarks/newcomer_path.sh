#!/usr/bin/env bash
# The newcomer path of issue 23, timed: a fresh clone and a new venv, README's first command, the
# five-minute block, then `rank --dry-run` and `rank` with four systems litellm has no price for.
# A price error is answered the way a newcomer would: each `--price NAME=IN,OUT` the error names is
# added (at 1,3) and the command run again; the attempts are counted. Both messages are read: the one
# error naming every unpriced model (since issue 23), and before it `no known price for model 'NAME'`,
# one model an attempt.
# usage: newcomer_path.sh REPO REF WORKDIR   (needs ../shared/data or LM_EVAL_ADAPTIVE_DATA)
set -u
REPO=$1; REF=$2; W=$3
DATA=${LM_EVAL_ADAPTIVE_DATA:-$(cd "$REPO/../shared/data" && pwd)}
rm -rf "$W"; mkdir -p "$W"; cd "$W"
export LM_EVAL_ADAPTIVE_DATA=$DATA LITELLM_LOCAL_MODEL_COST_MAP=True
unset PYTHONPATH OPENAI_API_BASE OPENAI_API_KEY
now() { date +%s.%N; }
lap() { printf '%-34s %8.1f s %s\n' "$1" "$(echo "$(now) - $2" | bc)" "${3:-}" | tee -a "$W/timings.txt"; }
git clone -q "$REPO" clone && git -C clone checkout -q "$REF" && cd clone
python -m venv "$W/venv" && . "$W/venv/bin/activate"
first=$(sed -n '/^```bash$/{n;p;q}' README.md)
t=$(now); bash -e -c "$first" > "$W/first.out" 2> "$W/first.err"; rc=$?; lap "README first command" "$t" "rc=$rc"
block=$(awk '/^## First adaptive run in five minutes/{s=1} s&&/^```bash$/{b=1;next} b&&/^```$/{exit} b' README.md)
PORT=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
t=$(now); bash -e -c "${block//8123/$PORT}" > "$W/block.out" 2> "$W/block.err"; rc=$?; lap "five-minute block" "$t" "rc=$rc"
lm-eval-adaptive replay-server --port "$PORT" > "$W/server.log" 2>&1 & SERVER=$!
export OPENAI_API_BASE=http://127.0.0.1:$PORT/v1 OPENAI_API_KEY=replay
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; do sleep 1; done
MODELS=(--models litellm:model=openai/Gemini-1.5-Pro litellm:model=openai/Llama3-70B litellm:model=openai/Aya23
        litellm:model=openai/Unbabel-Tower70B)
RANK=(lm-eval-adaptive rank "${MODELS[@]}" --tasks wmt24_en-de --include_path task_configs --apply_chat_template
      --bank wmt24_en-de.bleu --budget-usd 0.05 --no-progress)
PRICES=()
until_priced() {  # run "$@" plus the prices learned so far; add the prices each price error names
  local name=$1; shift; local t0 n=0 rc
  t0=$(now)
  while :; do
    n=$((n + 1)); local t=$(now)
    "$@" ${PRICES[@]+--price "${PRICES[@]}"} > "$W/$name.$n.out" 2> "$W/$name.$n.err"; rc=$?
    lap "  $name attempt $n" "$t" "rc=$rc"
    # since issue 23 one error names every unpriced model: `... add --price A=IN,OUT B=IN,OUT (USD ...)`
    missing=$(grep -o -- '--price [^(;]*' "$W/$name.$n.err" | head -1 | grep -o '[^ ]*=IN,OUT' | sed 's/=IN,OUT$//' | grep -vx default)
    # before it, one model an error: `no known price for model 'A' ...` (also read when no --price line is given)
    [ -n "$missing" ] || missing=$(grep -o "no known price for model '[^']*'" "$W/$name.$n.err" | head -1 | sed "s/^[^']*'//; s/'$//")
    [ "$rc" = 2 ] && [ -n "$missing" ] || break
    for m in $missing; do PRICES+=("$m=1,3"); done
  done
  lap "$name (until priced)" "$t0" "attempts=$n rc=$rc"
}
until_priced dry-run "${RANK[@]}" --dry-run
until_priced rank "${RANK[@]}" --output "$W/rank4"
kill $SERVER; wait $SERVER 2>/dev/null
cat "$W/timings.txt"
