#!/usr/bin/env bash
# One interleaved pass against the peers: the harness's TRL and Tunix scripts
# (../shared/peers, their own venvs from its setup.sh) and studio-align's side from
# bench/compare.py (the harness's own sa_*.py call APIs this project has since renamed),
# one after another so each sees the same machine state. Prints one JSON line per run.
#
#   bench/peer_pass.sh [TIMEOUT_S per script, default 300]
#   REPEATS=3 bench/peer_pass.sh                     # three interleaved repeats (for comparisons)
#   PEER_DIMS=dims_large REPEATS=3 bench/peer_pass.sh 1500
#
# Run it with nothing else on the machine; note `uptime` before and after.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-$ROOT/../shared/peers}
T=${1:-300}
LOGS=${LOGS:-/tmp/peer-logs}
mkdir -p "$LOGS"
"$PEERS/setup.sh" >"$LOGS/setup.log" 2>&1 || { echo "{\"error\": \"setup.sh failed, see $LOGS/setup.log\"}"; exit 1; }
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=2
SA_PYTHON=${SA_PYTHON:-$ROOT/.venv/bin/python}
one() {  # one NAME CMD...
  local name=$1 s rc line; shift
  s=$(date +%s)
  timeout "$T" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  line=$(grep '^{"lib"' "$LOGS/$name.log" | tail -1)
  if [ $rc -eq 0 ] && [ -n "$line" ]; then
    echo "${line%\}}, \"wall_s\": $(( $(date +%s) - s ))}"
  else
    echo "{\"script\": \"$name\", \"error\": \"rc=$rc (124 = timeout ${T}s)\", \"log\": \"$LOGS/$name.log\"}"
  fi
}
for _ in $(seq "${REPEATS:-1}"); do
  (cd "$PEERS" && one trl_dpo /tmp/peer-trl/bin/python trl_dpo.py)
  (cd "$PEERS" && one tunix_dpo /tmp/peer-tunix/bin/python tunix_dpo.py)
  one sa_dpo "$SA_PYTHON" "$ROOT/bench/compare.py" dpo
  one sa_dpo_refstep "$SA_PYTHON" "$ROOT/bench/compare.py" dpo_refstep
  (cd "$PEERS" && one trl_grpo /tmp/peer-trl/bin/python trl_grpo.py)
  (cd "$PEERS" && one tunix_grpo /tmp/peer-tunix/bin/python tunix_grpo.py)
  one sa_grpo "$SA_PYTHON" "$ROOT/bench/compare.py" grpo
done
