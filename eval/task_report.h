// The report of scored retrieval items (eval/task_eval.h): accuracy per (task, length, depth), per
// (task, length) and per length, as the table infer prints and as CSVs (infer --tasks-out P:
// P.csv, P_items.csv). The heatmap is drawn from P.csv by scripts/plot_heatmap.sh (gnuplot); the
// CSV's columns are read by it and by scripts/study_table.sh, so they stay as they are.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "data/task_file.h"
#include "eval/task_outcome.h"

// 2048 -> "2K", 1536 -> "1.5K", 1048576 -> "1M": context lengths are powers of two, so K and M
// are 1024 and 1048576 here; lengths below 1K print whole.
inline std::string format_length(long long tokens) {
    char buf[32];
    const long long unit = tokens >= 1048576 ? 1048576 : 1024;
    const char* suffix = unit == 1048576 ? "M" : "K";
    if (tokens < 1024) std::snprintf(buf, sizeof buf, "%lld", tokens);
    else if (tokens % unit == 0) std::snprintf(buf, sizeof buf, "%lld%s", tokens / unit, suffix);
    else std::snprintf(buf, sizeof buf, "%.1f%s", (double)tokens / unit, suffix);
    return buf;
}

// Rows and columns of the report: the values given, each exactly (depths 0.5 and 0.5000001 are
// two rows, as a file that gives both asks), or bins when there are too many (hand-written files
// may have any lengths and depths): depths to the nearest 0.1, lengths to the nearest power of 2.
// The table says when it bins; P_items.csv keeps each item's own values.
inline double depth_bin(double d, bool binned) { return binned ? std::round(d * 10) / 10 : d; }
inline long long length_bin(long long n, bool binned) {
    return binned ? (long long)std::llround(std::exp2(std::round(std::log2((double)n)))) : n;
}

struct TaskCell {
    long long items = 0, correct = 0;
    double accuracy() const { return items ? (double)correct / (double)items : 0.0; }
};

struct TaskReport {
    std::vector<std::string> tasks;                                        // in order of appearance
    std::vector<long long> lengths;                                        // sorted
    std::vector<double> depths;                                            // sorted
    std::map<std::string, std::map<long long, std::map<double, TaskCell>>> cells;  // task -> length -> depth
    bool binned_lengths = false, binned_depths = false;
    size_t distinct_lengths = 0, distinct_depths = 0;  // in the items, before any binning
};

inline TaskReport summarize_tasks(const std::vector<TaskItem>& items, const std::vector<TaskOutcome>& out) {
    TaskReport r;
    std::map<long long, int> lens;
    std::map<double, int> deps;
    for (const TaskItem& it : items) lens[it.length]++, deps[it.depth]++;
    r.distinct_lengths = lens.size(), r.distinct_depths = deps.size();
    r.binned_lengths = lens.size() > 16, r.binned_depths = deps.size() > 21;
    std::map<long long, int> L;
    std::map<double, int> D;
    for (size_t i = 0; i < items.size(); i++) {
        const TaskItem& it = items[i];
        if (std::find(r.tasks.begin(), r.tasks.end(), it.task) == r.tasks.end()) r.tasks.push_back(it.task);
        const long long l = length_bin(it.length, r.binned_lengths);
        const double d = depth_bin(it.depth, r.binned_depths);
        L[l]++, D[d]++;
        TaskCell& c = r.cells[it.task][l][d];
        c.items++, c.correct += out[i].correct;
    }
    for (const auto& [l, n] : L) r.lengths.push_back(l);
    for (const auto& [d, n] : D) r.depths.push_back(d);
    return r;
}

// Two decimals (the grid's depths: 0.25 as 0.25, 0.5 as 0.50), else exact_depth (0.501, 0.5000001).
inline std::string format_depth(double d) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.2f", d);
    return std::strtod(buf, nullptr) == d ? std::string(buf) : exact_depth(d);
}

// The table a person reads: per task, depths down and lengths across (as the heatmap that
// scripts/plot_heatmap.sh draws from the CSV), then the
// accuracy per length of each task and of all tasks.
inline std::string format_task_report(const TaskReport& r) {
    std::string s;
    char buf[64];
    if (r.binned_depths)
        s += "depths: " + std::to_string(r.distinct_depths) + " distinct values, shown to the nearest 0.1 (each item's own in the "
             "items CSV)\n";
    if (r.binned_lengths)
        s += "lengths: " + std::to_string(r.distinct_lengths) + " distinct values, shown to the nearest power of 2 (each item's own "
             "in the items CSV)\n";
    // Row labels padded to the widest, so that the columns stay aligned.
    size_t width = 5;
    for (double d : r.depths) width = std::max(width, format_depth(d).size());
    auto label = [&](const std::string& text) { return "  " + text + std::string(width - text.size(), ' ') + " "; };
    for (const std::string& task : r.tasks) {
        const auto& by_len = r.cells.at(task);
        s += "task " + task + ": accuracy (%) by depth (rows) and length (columns)\n" + label("depth");
        for (long long l : r.lengths) snprintf(buf, sizeof buf, " %7s", format_length(l).c_str()), s += buf;
        s += "\n";
        for (double d : r.depths) {
            s += label(format_depth(d));
            for (long long l : r.lengths) {
                auto a = by_len.find(l);
                const TaskCell* c = nullptr;
                if (a != by_len.end() && a->second.count(d)) c = &a->second.at(d);
                if (c) snprintf(buf, sizeof buf, " %7.0f", 100 * c->accuracy());
                else snprintf(buf, sizeof buf, " %7s", "-");
                s += buf;
            }
            s += "\n";
        }
    }
    s += "accuracy by length:\n";
    auto line = [&](const std::string& name, const std::vector<std::string>& tasks) {
        s += "  " + name;
        for (long long l : r.lengths) {
            TaskCell t;
            for (const std::string& task : tasks) {
                auto a = r.cells.at(task).find(l);
                if (a == r.cells.at(task).end()) continue;
                for (const auto& [d, c] : a->second) t.items += c.items, t.correct += c.correct;
            }
            if (t.items) snprintf(buf, sizeof buf, " | %s %.1f%% (%lld/%lld)", format_length(l).c_str(), 100 * t.accuracy(), t.correct, t.items);
            else snprintf(buf, sizeof buf, " | %s -", format_length(l).c_str());
            s += buf;
        }
        s += "\n";
    };
    for (const std::string& task : r.tasks) line(task, {task});
    if (r.tasks.size() > 1) line("all", r.tasks);
    // A task beside its control (the same items with what they ask taken out of the context,
    // data/quote_tasks.h): the guess rate the task's score has to stand above.
    for (const std::string& task : r.tasks) {
        const std::string control = task + "-control";
        if (std::find(r.tasks.begin(), r.tasks.end(), control) == r.tasks.end()) continue;
        s += "  " + task + " against " + control + " (%):";
        for (long long l : r.lengths) {
            TaskCell t[2];
            for (int c = 0; c < 2; c++) {
                auto a = r.cells.at(c ? control : task).find(l);
                if (a == r.cells.at(c ? control : task).end()) continue;
                for (const auto& [d, cell] : a->second) t[c].items += cell.items, t[c].correct += cell.correct;
            }
            if (t[0].items && t[1].items) snprintf(buf, sizeof buf, " | %s %.0f vs %.0f", format_length(l).c_str(), 100 * t[0].accuracy(), 100 * t[1].accuracy());
            else snprintf(buf, sizeof buf, " | %s -", format_length(l).c_str());
            s += buf;
        }
        s += "\n";
    }
    return s;
}

inline std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

// task,length,depth,items,correct,accuracy: one row per cell, then per (task, length) with
// depth "all", then per length with task "all".
inline std::string task_report_csv(const TaskReport& r) {
    std::string s = "task,length,depth,items,correct,accuracy\n";
    char buf[160];
    std::map<long long, TaskCell> all;
    for (const std::string& task : r.tasks) {
        for (const auto& [l, by_depth] : r.cells.at(task)) {
            TaskCell t;
            for (const auto& [d, c] : by_depth) {
                snprintf(buf, sizeof buf, ",%lld,%s,%lld,%lld,%.6f\n", l, exact_depth(d).c_str(), c.items, c.correct, c.accuracy());
                s += task + buf;
                t.items += c.items, t.correct += c.correct;
            }
            snprintf(buf, sizeof buf, ",%lld,all,%lld,%lld,%.6f\n", l, t.items, t.correct, t.accuracy());
            s += task + buf;
            all[l].items += t.items, all[l].correct += t.correct;
        }
    }
    for (const auto& [l, c] : all) {
        snprintf(buf, sizeof buf, "all,%lld,all,%lld,%lld,%.6f\n", l, c.items, c.correct, c.accuracy());
        s += buf;
    }
    return s;
}

// line,task,length,depth,tokens,answer,output,correct: one row per item.
inline std::string task_items_csv(const std::vector<TaskItem>& items, const std::vector<TaskOutcome>& out) {
    std::string s = "line,task,length,depth,tokens,answer,output,correct\n";
    char buf[96];
    for (size_t i = 0; i < items.size(); i++) {
        snprintf(buf, sizeof buf, "%d,", items[i].line);
        s += buf + csv_field(items[i].task);
        snprintf(buf, sizeof buf, ",%lld,%s,%lld,", items[i].length, exact_depth(items[i].depth).c_str(), out[i].tokens);
        s += buf + csv_field(items[i].answer) + "," + csv_field(out[i].output) + (out[i].correct ? ",1\n" : ",0\n");
    }
    return s;
}
