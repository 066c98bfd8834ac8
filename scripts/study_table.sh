#!/usr/bin/env bash
# scripts/study_table.sh DIR LENGTH...: the retrieval study's tables from the CSVs that
# `infer --tasks --tasks-out` wrote in DIR (retrieval_study.sh's eval step):
#   1. every run's accuracy by task and length (RUN_needles*.csv, several files of a run merged);
#   2. every recipe with runs M@S: the median and, in brackets, the worst run, by task and length,
#      and by depth at each length (a result is the median and the worst of several runs); a cell
#      that fewer of the runs were scored at says how many;
#   3. the same over the files off the grid (RUN_offgrid*.csv: other lengths, depths and seed;
#      RUN_tree*.csv: a source tree no model trained on; RUN_qbook*.csv, RUN_qtree*.csv: quote items
#      over a book and a source tree no model trained on; RUN_start*.csv: pass keys and quotes at
#      depth 0, more items than the grid's);
#   4. the copy loss on the repeat by gap (RUN_copy.csv, infer --copy-loss --copy-out), nats a
#      token: every run's, then every recipe's median and, in brackets, its worst (highest) run.
# The median of an even count is the mean of the middle two.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/study_table.sh DIR LENGTH..." >&2; exit 2; }
dir=$1; shift
lengths="$*"
# The awk functions both tables use: the median of n numbers in a list, the worst of them (the
# lowest, or with high the highest), and in-place sorts of arr[1..n] by number or by text.
AWK_STATS='
function median(list, n,   i, j, t, a) {
    split(list, a, " ")
    sort_num(a, n)
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function worst(list, n, high,   i, a, w) {
    split(list, a, " "); w = a[1]
    for (i = 2; i <= n; i++) if (high ? a[i] + 0 > w + 0 : a[i] + 0 < w + 0) w = a[i]
    return w
}
function sort_num(arr, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && arr[j - 1] + 0 > arr[j] + 0; j--) { t = arr[j]; arr[j] = arr[j - 1]; arr[j - 1] = t } }
function sort_text(arr, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && arr[j - 1] > arr[j]; j--) { t = arr[j]; arr[j] = arr[j - 1]; arr[j - 1] = t } }
'
table() {  # kind (needles, offgrid, tree), then the CSV files
    local kind=$1; shift
    [ $# -gt 0 ] || return 0
    awk -F, -v kind="$kind" -v lengths="$lengths" "$AWK_STATS"'
    function fmt(x) { return sprintf("%.0f%%", 100 * x) }
    # median [worst] of the m runs scored there, and "(m of n runs)" when fewer than all n runs were;
    # the worst of a control (task T-control, the guess rate) is its highest
    function cell(list, m, n, task) {
        if (!m) return "-"
        return fmt(median(substr(list, 2), m)) " [" fmt(worst(substr(list, 2), m, task ~ /-control$/)) "]" (m < n ? " (" m " of " n " runs)" : "")
    }
    FNR == 1 { run = FILENAME; sub(/.*\//, "", run); sub("_" kind ".*", "", run); runs[run] = 1; next }
    $1 == "all" { next }
    {
        key = run SUBSEP $1 SUBSEP $2 SUBSEP $3
        items[key] += $4; correct[key] += $5
        tasks[$1] = 1; seen_len[$2] = 1; if ($3 != "all") depths[$3] = 1
    }
    END {
        nl = split(lengths, L, " ")
        if (kind != "needles") { nl = 0; for (l in seen_len) L[++nl] = l; sort_num(L, nl) }
        head = ""; for (i = 1; i <= nl; i++) head = head " " L[i] " |"
        nd = 0; for (d in depths) D[++nd] = d
        sort_num(D, nd)
        # 1. each run
        print ""; print "| " (kind == "needles" ? "run" : "run (" kind ")") " | task |" head
        nr = 0; for (r in runs) R[++nr] = r
        sort_text(R, nr)
        for (i = 1; i <= nr; i++) for (task in tasks) {
            row = "| " R[i] " | " task " |"
            for (l = 1; l <= nl; l++) { k = R[i] SUBSEP task SUBSEP L[l] SUBSEP "all"; row = row " " ((k in items) && items[k] ? fmt(correct[k] / items[k]) : "-") " |" }
            print row
        }
        # 2. each recipe of several runs: median [worst]
        for (i = 1; i <= nr; i++) if (R[i] ~ /@/) { rec = R[i]; sub(/@.*/, "", rec); nruns[rec]++; members[rec] = members[rec] " " R[i] }
        any = 0
        for (rec in nruns) if (nruns[rec] >= 2) any = 1
        if (!any) exit
        print ""; print "| recipe: median [worst] of its runs" (kind == "needles" ? "" : " (" kind ")") " | task |" head
        for (rec in nruns) if (nruns[rec] >= 2) for (task in tasks) {
            n = split(substr(members[rec], 2), M, " ")
            row = "| " rec " (" n " runs) | " task " |"
            for (l = 1; l <= nl; l++) {
                list = ""; m = 0
                for (x = 1; x <= n; x++) { k = M[x] SUBSEP task SUBSEP L[l] SUBSEP "all"; if ((k in items) && items[k]) { list = list " " correct[k] / items[k]; m++ } }
                row = row " " cell(list, m, n, task) " |"
            }
            print row
        }
        if (kind != "needles") exit
        dh = ""; for (d = 1; d <= nd; d++) dh = dh " depth " D[d] " |"
        print ""; print "| recipe: median [worst] by depth | task | length |" dh
        for (rec in nruns) if (nruns[rec] >= 2) for (task in tasks) for (l = 1; l <= nl; l++) {
            n = split(substr(members[rec], 2), M, " ")
            row = "| " rec " | " task " | " L[l] " |"; have = 0
            for (d = 1; d <= nd; d++) {
                list = ""; m = 0
                for (x = 1; x <= n; x++) { k = M[x] SUBSEP task SUBSEP L[l] SUBSEP D[d]; if ((k in items) && items[k]) { list = list " " correct[k] / items[k]; m++ } }
                row = row " " cell(list, m, n, task) " |"; have += m
            }
            if (have) print row
        }
    }' "$@"
}
copy_table() {  # the RUN_copy.csv files
    awk -F, "$AWK_STATS"'
    FNR == 1 { run = FILENAME; sub(/.*\//, "", run); sub(/_copy\.csv$/, "", run); runs[run] = 1; next }
    { loss[run SUBSEP $1] = $5; gaps[$1] = 1 }
    END {
        ng = 0; for (g in gaps) G[++ng] = g; sort_num(G, ng)
        head = ""; for (i = 1; i <= ng; i++) head = head " " G[i] " |"
        nr = 0; for (r in runs) R[++nr] = r
        sort_text(R, nr)
        print ""; print "| run: copy loss on the repeat, by gap |" head
        for (i = 1; i <= nr; i++) {
            row = "| " R[i] " |"
            for (g = 1; g <= ng; g++) { k = R[i] SUBSEP G[g]; row = row " " ((k in loss) ? sprintf("%.2f", loss[k]) : "-") " |" }
            print row
            if (R[i] ~ /@/) { rec = R[i]; sub(/@.*/, "", rec); nruns[rec]++; members[rec] = members[rec] " " R[i] }
        }
        any = 0; for (rec in nruns) if (nruns[rec] >= 2) any = 1
        if (!any) exit
        print ""; print "| recipe: copy loss, median [worst] of its runs |" head
        for (rec in nruns) if (nruns[rec] >= 2) {
            n = split(substr(members[rec], 2), M, " ")
            row = "| " rec " (" n " runs) |"
            for (g = 1; g <= ng; g++) {
                list = ""; m = 0
                for (x = 1; x <= n; x++) { k = M[x] SUBSEP G[g]; if (k in loss) { list = list " " loss[k]; m++ } }
                row = row " " (m ? sprintf("%.2f [%.2f]", median(substr(list, 2), m), worst(substr(list, 2), m, 1)) (m < n ? " (" m " of " n " runs)" : "") : "-") " |"
            }
            print row
        }
    }' "$@"
}
shopt -s nullglob
for kind in needles offgrid tree qbook qtree start; do
    files=()
    for f in "$dir"/*_"$kind"*.csv; do [[ $f == *_items.csv ]] || files+=("$f"); done
    [ ${#files[@]} -eq 0 ] || table "$kind" "${files[@]}"
done
copies=("$dir"/*_copy.csv)
[ ${#copies[@]} -eq 0 ] || copy_table "${copies[@]}"
