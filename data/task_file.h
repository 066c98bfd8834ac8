// Retrieval task files: JSON Lines, one item a line, with the fields
//   task      "passkey", "multikey", "multiquery" (or any name: the scorer only groups by it)
//   context   the text before the question (a haystack with needles)
//   question  the question, ending where the answer starts
//   answer    what the continuation must start with (leading spaces removed)
//   length    the item's length class in tokens: the report's column and the batches' key (an
//             integer >= 1). Its prompt (BOS, context, newline, question, under the scoring
//             model's tokenizer) may be shorter (a label of a bucket: scripts/tasks_from_shard.py
//             gives the whole document's length to a prompt cut at its first question) but not
//             longer than length + task_length_slack(length) = length + length/4 + 32 tokens (room
//             for another tokenizer's count, or a hand-written item's estimate); infer --tasks
//             refuses a longer one naming its line (eval/task_eval.h). data_tool tasks builds
//             items of exactly `length` tokens (their text encoded again: within a few tokens).
//   depth     where the asked needle lies, in [0, 1], for the report
// Other fields are allowed and ignored (data_tool tasks adds `needle_token` and `seed`). A model
// reads BOS, the context, a newline, then the question (as Landmark Attention joins its lines),
// and continues greedily.
// data_tool tasks writes such files; infer --tasks reads them, also when written by hand.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "core/io.h"
#include "core/error.h"
#include "core/json.h"

struct TaskItem {
    std::string task, context, question, answer;
    long long length = 0;
    double depth = 0;
    int line = 0;  // where it was read from (1-based), for messages; 0 when made in memory
    long long needle_token = -1;  // optional: index of the asked needle's first token in the prompt (BOS = 0)
};

// How many tokens an item's prompt may have past its `length` (see `length` above).
inline long long task_length_slack(long long length) { return length / 4 + 32; }

// The text a model reads for an item (after BOS): context, a newline, question.
inline std::string task_prompt_text(const TaskItem& it) { return it.context + "\n" + it.question; }

inline std::string task_item_to_json(const TaskItem& it, uint64_t seed) {
    char num[96];
    snprintf(num, sizeof num, ",\"length\":%lld,\"depth\":%.6g,\"needle_token\":%lld,\"seed\":%llu}", it.length, it.depth,
             it.needle_token, (unsigned long long)seed);
    return "{\"task\":" + json_quote(it.task) + ",\"context\":" + json_quote(it.context) + ",\"question\":" + json_quote(it.question) +
           ",\"answer\":" + json_quote(it.answer) + num;
}

// The longest answer a task item may have, in characters (bytes).
constexpr size_t kMaxTaskAnswerChars = 256;

// One item from one line; fatal naming the file and line on anything missing or malformed.
inline TaskItem parse_task_line(const std::string& text, const std::string& path, int line) {
    auto bad = [&](const std::string& what) -> TaskItem {
        fatal("%s line %d: %s: each line must be one JSON object with the fields task, context, question, answer, length, "
              "depth (see data/task_file.h)", path.c_str(), line, what.c_str());
    };
    Json j;
    try {
        j = JsonParser(text).parse();
    } catch (const JsonError& e) {
        return bad(std::string("not JSON (") + e.what() + ")");
    }
    if (j.kind != Json::Object) return bad("not a JSON object");
    TaskItem it;
    it.line = line;
    try {
        for (const char* key : {"task", "context", "question", "answer", "length", "depth"})
            if (!j.has(key)) return bad(std::string("no field \"") + key + "\"");
        it.task = j.at("task").as_string(), it.context = j.at("context").as_string();
        it.question = j.at("question").as_string(), it.answer = j.at("answer").as_string();
        it.length = j.at("length").as_int("length", 1, 1LL << 40);
        it.depth = j.at("depth").as_number();
        if (j.has("needle_token") && j.at("needle_token").kind == Json::Number)
            it.needle_token = j.at("needle_token").as_int("needle_token", -1, 1LL << 40);
    } catch (const JsonError& e) {
        return bad(e.what());
    }
    if (it.task.empty()) return bad("the task is empty");
    if (it.answer.find_first_not_of(' ') == std::string::npos) return bad("the answer is empty");
    if (it.question.empty()) return bad("the question is empty");
    // infer decodes answer-length + 2 tokens per item past the context: a 20,000-character answer
    // took 22 s (issue 41). Retrieval answers are keys and numbers, far under the cap.
    if (it.answer.size() > kMaxTaskAnswerChars)
        return bad("the answer has " + std::to_string(it.answer.size()) + " characters, more than the " +
                   std::to_string(kMaxTaskAnswerChars) + " a task answer may have");
    if (!(it.depth >= 0 && it.depth <= 1)) return bad("depth must be in [0, 1]");
    for (char c : it.task)
        if (c == ',' || c == '\n' || c == '\r' || c == '"')
            return bad("the task name may not hold a comma, quote, newline or carriage return (it is a CSV field)");
    return it;
}

// Every item of a task file, in file order. Blank lines are skipped.
inline std::vector<TaskItem> read_task_file(const std::string& path) {
    const std::string text = read_regular_file(path, kReadFileMaxBytes, "--tasks", "check the --tasks path (data_tool tasks writes such files)");
    std::vector<TaskItem> items;
    int line = 0;
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        line++;
        const std::string one = text.substr(at, end - at);
        if (one.find_first_not_of(" \t\r") != std::string::npos) items.push_back(parse_task_line(one, path, line));
        at = end + 1;
    }
    if (items.empty()) fatal("%s holds no task item: give one JSON object per line (data_tool tasks writes such files)", path.c_str());
    return items;
}

// The scorer's rule (issue 22's, as RULER and Landmark Attention's evaluations use it in
// spirit): the continuation, leading spaces removed, starts with the answer. Nothing is asked of
// what follows, so a continuation "123456" counts for the answer 12345.
inline bool answer_matches(const std::string& continuation, const std::string& answer) {
    const size_t from = continuation.find_first_not_of(' ');
    if (from == std::string::npos) return false;
    const size_t a = answer.find_first_not_of(' ');  // an answer written as " 123" means "123"
    return a != std::string::npos && continuation.compare(from, answer.size() - a, answer, a, std::string::npos) == 0;
}
