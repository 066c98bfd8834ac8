#!/usr/bin/env bash
# The scripts that run on the GPU machines (benchmarks, peers, study drivers) are not exercised on
# a CPU machine; a syntax error in one would cost a device call to find. Every shell script must
# parse (bash -n) and every Python script compile; the PyTorch LongNet peer's closed-form pair
# count must equal a brute-force count of the spec's pairs (it sets the peer's TFLOP/s).
set -uo pipefail
# shellcheck source=tests/lib.sh
source tests/lib.sh
bad=""
for f in scripts/*.sh tests/*.sh tests/gpu/*.sh tests/fuzz/*.sh bench/*.sh .ci/run; do
    [ -f "$f" ] || continue
    bash -n "$f" 2> /dev/null || bad+=" $f"
done
[ -z "$bad" ] && pass "every shell script parses (bash -n)" || fail "shell scripts that do not parse:$bad"
bad=""
for f in scripts/*.py tests/*.py bench/*.py; do
    [ -f "$f" ] || continue
    python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])" "$f" 2> /dev/null || bad+=" $f"
done
[ -z "$bad" ] && pass "every Python script compiles" || fail "Python scripts that do not compile:$bad"
out=$(python3 - <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_longnet_torch import pairs_kept

def brute(n, h, branches):
    total = 0
    for head in range(h):
        for w, r in branches:
            w = min(w, n)
            for p in range(n):
                for k in range(p // w * w, p + 1):
                    total += (p % w) % r == head % r and (k % w) % r == head % r
    return total

cases = [(300, 6, ((64, 1), (128, 2), (256, 4), (100, 7))), (257, 4, ((256, 2), (96, 3))), (90, 3, ((4096, 2),))]
print(all(pairs_kept(*c) == brute(*c) for c in cases))
PY
)
[ "$out" = True ] && pass "the PyTorch LongNet peer's pair count equals a brute-force count (odd sizes, r > H, w > N)" \
    || fail "bench_longnet_torch.pairs_kept differs from the brute-force count: $out"
# The PyTorch copy-loss peer scores as eval/copy_loss.h does: token_losses[i] is the loss of token
# i + 1, an occurrence at a scores passage tokens 1..P-1 through token_losses[a..a+P-2]; its table
# averages a gap's samples (its training needs PyTorch, run on the GPU machines).
out=$(python3 - <<'PY'
import sys
sys.path.insert(0, "scripts")
from torch_copy_peer import copy_score, copy_table, positions_rows
P, G = 4, 2
row = {"gap": G, "sample": 0, "first_at": 1, "repeat_at": 1 + P + G, "passage": P, "ids": list(range(1 + 2 * P + G))}
losses = [float(i) for i in range(2 * P + G)]             # the loss of token i + 1 is i
first, repeat, half = copy_score(row, losses)
ok = (first, repeat, half) == ((1 + 2 + 3) / 3, (7 + 8 + 9) / 3, (8 + 9) / 2)
# positions_rows: token j of the passage (id first_at + j here), its loss at either occurrence.
ok = ok and positions_rows(dict(row, ids=[100 + i for i in row["ids"]]), losses) == [
    "2,0,1,102,1.000000,7.000000", "2,0,2,103,2.000000,8.000000", "2,0,3,104,3.000000,9.000000"]
t = copy_table([row, dict(row, sample=1)], [(1.0, 0.5, 0.25), (3.0, 1.5, 0.75)]).splitlines()
ok = ok and len(t) == 2 and t[1].split() == ["2", "2", "4", "2.0000", "1.0000", "0.5000"]
print(ok)
PY
)
[ "$out" = True ] && pass "torch_copy_peer scores passage tokens 1..P-1 of each occurrence as infer does, writes their positions rows as infer does, and averages a gap's samples" \
    || fail "torch_copy_peer's copy_score or copy_table: $out"
# Its bad flags: one line naming the flag and the fix, a non-zero exit, before PyTorch is imported.
bad=0
for flags in "--nope-layers 1,9" "--nope-layers 1 --moba 64" "--nope-layers 1 --moba 64,4,late" "--nope-layers 1 --qk-conv 1" \
             "--qk-conv 4" "--nope-layers 1 --logn 1" "--width 100 --heads 3" "--diff-attn" "--nope-layers 1 --moba 64,4 --diff-attn"; do
    # shellcheck disable=SC2086
    msg=$(python3 scripts/torch_copy_peer.py --data /nonexistent --copy-tokens /nonexistent $flags 2>&1)
    code=$?
    flag=${flags##*--}; flag=--${flag%% *}
    { [ $code -ne 0 ] && [ "$(printf '%s\n' "$msg" | wc -l)" -eq 1 ] && [[ $msg == error:*"$flag"* ]]; } ||
        { bad=$((bad + 1)); echo "  $flags -> exit $code: $msg"; }
done
[ $bad -eq 0 ] && pass "torch_copy_peer refuses bad --nope-layers, --moba, --qk-conv, --logn, --diff-attn and widths in one line naming the flag" \
    || fail "torch_copy_peer's refusals: $bad of 9 wrong"
# Its MoBA mask against a brute force written from the rule (own block, causal, and the topk earlier
# blocks by the query's score against each block's mean key), odd sizes and rows with fewer earlier
# blocks than topk; its rotary window. Where a Python has PyTorch (Debian's python3 here may).
torch_py=$(torch_python)
if [ -n "$torch_py" ]; then
    out=$("$torch_py" - <<'PY'
import itertools, sys
sys.path.insert(0, "scripts")
import torch
from torch_copy_peer import moba_mask, window_mask
torch.manual_seed(3)
wrong = 0
for B, H, T, D, block, topk in [(2, 3, 37, 8, 8, 2), (1, 2, 64, 4, 16, 1), (1, 1, 5, 4, 8, 3), (2, 1, 50, 6, 7, 10), (1, 1, 40, 4, 8, 0)]:
    q, k = torch.randn(B, H, T, D, dtype=torch.float64), torch.randn(B, H, T, D, dtype=torch.float64)
    m = moba_mask(torch, q, k, block, topk)
    for b, h, i in itertools.product(range(B), range(H), range(T)):
        own = i // block
        means = [k[b, h, j * block:(j + 1) * block].mean(0) for j in range(own)]
        chosen = sorted(range(own), key=lambda j: -float(q[b, h, i] @ means[j]))[:topk] + [own]
        want = torch.tensor([j // block in chosen and j <= i for j in range(T)])
        wrong += not torch.equal(m[b, h, i], want)
    # lagged: block j keeps itself, j - 1 and the topk before j - 1 by block j - 1's mean query
    m = moba_mask(torch, q, k, block, topk, lagged=True)
    for b, h, i in itertools.product(range(B), range(H), range(T)):
        j = i // block
        chosen = [j, j - 1]
        if j >= 2:
            qm = q[b, h, (j - 1) * block:j * block].mean(0)
            means = [k[b, h, c * block:(c + 1) * block].mean(0) for c in range(j - 1)]
            chosen += sorted(range(j - 1), key=lambda c: -float(qm @ means[c]))[:topk]
        want = torch.tensor([c // block in chosen and c <= i for c in range(T)])
        wrong += not torch.equal(m[b, h, i], want)
w = window_mask(torch, 9, 3, "cpu")
print(wrong == 0 and torch.equal(w, torch.tensor([[0 <= i - j < 3 for j in range(9)] for i in range(9)])))
PY
)
    [ "$out" = True ] && pass "torch_copy_peer's MoBA masks (a choice per query, and per block from the block before) equal a brute force of their rule (odd sizes, fewer blocks than topk, topk 0); its window mask" \
        || fail "torch_copy_peer's moba_mask or window_mask: $out"
    # The q/k convolution against a loop over its definition (odd sizes, a width past the sequence).
    out=$("$torch_py" - <<'PY'
import sys
sys.path.insert(0, "scripts")
import torch
from torch_copy_peer import causal_depthwise_conv
torch.manual_seed(5)
wrong = 0
for B, T, C, W in [(2, 7, 3, 4), (1, 5, 4, 2), (3, 2, 5, 3)]:
    x, w = torch.randn(B, T, C, dtype=torch.float64), torch.randn(C, 1, W, dtype=torch.float64)
    y = causal_depthwise_conv(torch, x, w)
    want = torch.zeros(B, T, C, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            for c in range(C):
                want[b, t, c] = sum(w[c, 0, j] * x[b, t - (W - 1) + j, c] for j in range(W) if t - (W - 1) + j >= 0)
    wrong += not torch.allclose(y, want, atol=1e-12)
print(wrong == 0)
PY
)
    [ "$out" = True ] && pass "torch_copy_peer's q/k convolution equals a loop over its definition (causal, channel by channel; odd sizes)" \
        || fail "torch_copy_peer's causal_depthwise_conv: $out"
    # Differential attention against a loop over its definition (causal; odd sizes).
    out=$("$torch_py" - <<'PY'
import math, sys
sys.path.insert(0, "scripts")
import torch
from torch_copy_peer import diff_attend
torch.manual_seed(7)
wrong = 0
for B, H, T, D in [(2, 3, 7, 6), (1, 1, 5, 4), (1, 2, 1, 8)]:
    q, k, v = (torch.randn(B, H, T, D, dtype=torch.float64) for _ in range(3))
    lam, subln, init = torch.tensor(0.37, dtype=torch.float64), torch.randn(D, dtype=torch.float64), 0.2
    y = diff_attend(torch, q, k, v, None, lam, subln, init)
    want = torch.zeros(B, H, T, D, dtype=torch.float64)
    h = D // 2
    for b in range(B):
        for n in range(H):
            for i in range(T):
                w = []
                for lo in (0, h):
                    s = torch.tensor([float(q[b, n, i, lo:lo + h] @ k[b, n, j, lo:lo + h]) / math.sqrt(h) for j in range(i + 1)], dtype=torch.float64)
                    w.append(torch.softmax(s, 0))
                o = sum((w[0][j] - 0.37 * w[1][j]) * v[b, n, j] for j in range(i + 1))
                want[b, n, i] = o / torch.sqrt((o * o).mean() + 1e-5) * subln * (1 - init)
    wrong += not torch.allclose(y, want, atol=1e-9)
print(wrong == 0)
PY
)
    [ "$out" = True ] && pass "torch_copy_peer's differential attention equals a loop over its definition (two softmaxes from the halves, lambda, the head's RMS norm)" \
        || fail "torch_copy_peer's diff_attend: $out"
    # The pointer-generator mixture against a loop over its definition (the null key, keys from the
    # state before, a position with no key, a target of -1; odd sizes).
    out=$("$torch_py" - <<'PY'
import math, sys
sys.path.insert(0, "scripts")
import torch
from torch_copy_peer import pointer_token_losses
torch.manual_seed(11)
wrong = 0
for B, T, Dp, V in [(2, 7, 3, 5), (1, 1, 4, 3), (3, 5, 2, 4)]:
    q, k = torch.randn(B, T, Dp, dtype=torch.float64), torch.randn(B, T, Dp, dtype=torch.float64)
    tokens, targets = torch.randint(V, (B, T)), torch.randint(V, (B, T))
    targets[0, -1] = -1
    lm, gate = torch.randn(B, T, V, dtype=torch.float64), torch.randn(B, T, dtype=torch.float64)
    got = pointer_token_losses(torch, q, k, tokens, lm, gate, targets)
    for b in range(B):
        for t in range(T):
            y = int(targets[b, t])
            if y < 0:
                wrong += float(got[b, t]) != 0.0
                continue
            scores = [0.0] + [float(q[b, t] @ k[b, s]) / math.sqrt(Dp) for s in range(1, t + 1)]
            z = sum(math.exp(x) for x in scores)
            p_copy = sum(math.exp(scores[s]) / z for s in range(1, t + 1) if int(tokens[b, s]) == y)
            p_lm = math.exp(float(lm[b, t, y])) / sum(math.exp(float(x)) for x in lm[b, t])
            g = 1 / (1 + math.exp(-float(gate[b, t])))
            wrong += abs(float(got[b, t]) + math.log((1 - g) * p_lm + g * p_copy)) > 1e-9
print(wrong == 0)
PY
)
    [ "$out" = True ] && pass "torch_copy_peer's pointer mixture equals a loop over its definition (the null key, keys from the state before, no target)" \
        || fail "torch_copy_peer's pointer_token_losses: $out"
else
    echo "skip: torch_copy_peer's MoBA mask, q/k convolution, differential attention and pointer mixture (no Python here has PyTorch)"
fi
summary
