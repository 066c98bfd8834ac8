#!/usr/bin/env bash
# The folders' layers: each folder includes only the folders its rule below names, so that a
# lower part never reaches up (the model reads no corpus: what it needs of a run's data, the
# stages of --schedule, is in core/, and train.cu hands it the rest). Fails (exit 1) naming each
# file and include that breaks a rule; a planted include shows the check can fail.
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.sh
source tests/lib.sh
# folder: the folders its files may include
rules=(
    "core: core"
    "data: core data"
    "optim: core comm layers optim"
    "model: core comm layers model optim"
)
breaks() {  # root dir -> one line per include that breaks a rule; nothing when all hold
    local root=$1 rule dir allowed f inc
    for rule in "${rules[@]}"; do
        dir=${rule%%:*} allowed=" ${rule#*: } "
        [ -d "$root/$dir" ] || continue
        while IFS= read -r f; do
            for inc in $(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)/.*|\1|p' "$f" | sort -u); do
                [[ $allowed == *" $inc "* ]] ||
                    echo "  ${f#"$root"/} includes $inc/ (${dir}/ may include: ${rule#*: })"
            done
        done < <(find "$root/$dir" -type f \( -name '*.h' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cpp' \) | sort)
    done
}
out=$(breaks .)
[ -z "$out" ] && pass "every folder includes only the folders its rule allows (model/ includes no data/)" ||
    fail "includes that break the folders' layers:"$'\n'"$out"
# The check can fail: a copy of model/ where the checkpoint includes the batches of data/.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/model"
cp model/checkpoint.h "$tmp/model/"
printf '#include "data/batch_source.h"\n' >> "$tmp/model/checkpoint.h"
canary=$(breaks "$tmp")
grep -q "model/checkpoint.h includes data/" <<< "$canary" &&
    pass "the canary fails: $(head -1 <<< "$canary" | sed 's/^ *//')" ||
    fail "a model/checkpoint.h that includes data/batch_source.h passed the check"
summary
