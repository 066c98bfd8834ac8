// Retrieval task files: JSON Lines, one item a line, with the fields
//   task      "passkey", "multikey", "multiquery" (or any name: the scorer only groups by it). A
//             string of valid UTF-8 with no comma, quote or control character (it is a CSV field
//             and a row of the printed table).
//   context   the text before the question (a haystack with needles): any string
//   question  the question, ending where the answer starts: any non-empty string
//   answer    what the continuation must start with (leading spaces removed): at most 256 bytes of
//             valid UTF-8 with no control character (no newline, tab or NUL: a continuation is
//             decoded text, and the answer its first word or two), not blank
//   length    the item's length class in tokens: the report's column and the batches' key (an
//             integer in [1, 2^28], 2^28 being the longest context infer reads, --ctx). Its prompt
//             (BOS, context, newline, question, under the scoring model's tokenizer) may be
//             shorter (a label of a bucket: scripts/tasks_from_shard.py gives the whole
//             document's length to a prompt cut at its first question) but not longer than
//             length + task_length_slack(length) = length + length/4 + 32 tokens (room for
//             another tokenizer's count, or a hand-written item's estimate); infer --tasks refuses
//             a longer one naming its line (eval/task_eval.h). data_tool tasks builds items of
//             exactly `length` tokens (their text encoded again: within a few tokens).
//   depth     where the asked needle lies, a number in [0, 1], for the report. Depths are kept
//             exactly as given: 0.5 and 0.5000001 are two rows of the report (eval/task_report.h).
// Optional:
//   needle_token  the asked needle's first token in the prompt (BOS = 0), or -1 for none: an
//             integer in [-1, length + length/4 + 32]; null counts as left out.
// A known field of another JSON type (a string for a number, a number for a string) is refused
// naming the field and the type it must have. Other fields are allowed and ignored (data_tool
// tasks adds `seed`, which no reader uses). A model reads BOS, the context, a newline, then the
// question (as Landmark Attention joins its lines), and continues greedily.
// data_tool tasks writes such files; infer --tasks reads them, also when written by hand.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

// A depth as files and reports write it: the shortest decimal that reads back as the same double
// (0.5, 0.25, 0.5000001), so that two depths are never written alike, nor one depth two ways.
inline std::string exact_depth(double d) {
    char buf[32];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    return buf;
}

inline std::string task_item_to_json(const TaskItem& it, uint64_t seed) {
    char num[128];
    snprintf(num, sizeof num, ",\"length\":%lld,\"depth\":%s,\"needle_token\":%lld,\"seed\":%llu}", it.length,
             exact_depth(it.depth).c_str(), it.needle_token, (unsigned long long)seed);
    return "{\"task\":" + json_quote(it.task) + ",\"context\":" + json_quote(it.context) + ",\"question\":" + json_quote(it.question) +
           ",\"answer\":" + json_quote(it.answer) + num;
}

// The longest answer a task item may have, in characters (bytes).
constexpr size_t kMaxTaskAnswerChars = 256;
// The longest `length` an item may have: kMaxSeqLen (model/gpt_config.h), the longest context a
// model of this project reads, and the most data_tool tasks --lengths takes.
constexpr long long kMaxTaskLength = 1LL << 28;

// Where `s` first breaks UTF-8 (a stray continuation byte, a truncated or overlong sequence, a
// surrogate, a code point past U+10FFFF), or npos when it is valid.
inline size_t task_utf8_error(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char)s[i];
        const int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (n < 0 || s.size() - i <= (size_t)n) return i;
        unsigned cp = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        for (int k = 1; k <= n; k++) {
            const unsigned char d = (unsigned char)s[i + k];
            if ((d >> 6) != 2) return i;
            cp = (cp << 6) | (d & 0x3F);
        }
        static const unsigned least[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += (size_t)n + 1;
    }
    return std::string::npos;
}

// Where `s` first holds an ASCII control character (U+0000 to U+001F, U+007F), or npos.
inline size_t task_control_char(const std::string& s) {
    for (size_t i = 0; i < s.size(); i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7F) return i;
    return std::string::npos;
}

// "a string", "a number", ...: what a JSON value is, for messages.
inline const char* json_kind_name(const Json& v) {
    switch (v.kind) {
    case Json::Null: return "null";
    case Json::Bool: return "true or false";
    case Json::Number: return "a number";
    case Json::String: return "a string";
    case Json::Array: return "an array";
    case Json::Object: return "an object";
    }
    return "a JSON value";
}

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
    for (const char* key : {"task", "context", "question", "answer", "length", "depth"})
        if (!j.has(key)) return bad(std::string("no field \"") + key + "\"");
    // Each known field has one JSON type; another is refused naming the field and the type it
    // must have, never skipped as if absent.
    auto typed = [&](const char* key, Json::Kind kind, const char* must) -> const Json& {
        const Json& v = j.at(key);
        if (v.kind != kind) bad(strf("\"%s\" is %s; it must be %s", key, json_kind_name(v), must));
        return v;
    };
    // An integer in [lo, hi]; `what` says what the number is, for the message.
    auto integer = [&](const char* key, long long lo, long long hi, const char* what) -> long long {
        const double v = typed(key, Json::Number, "an integer").num;
        if (v != std::floor(v) || v < (double)lo || v > (double)hi)
            bad(strf("\"%s\" is %.17g; it must be an integer in [%lld, %lld] (%s)", key, v, lo, hi, what));
        return (long long)v;
    };
    TaskItem it;
    it.line = line;
    it.task = typed("task", Json::String, "a string (the task's name)").str;
    it.context = typed("context", Json::String, "a string (the text before the question)").str;
    it.question = typed("question", Json::String, "a string (the question)").str;
    it.answer = typed("answer", Json::String, "a string (what the continuation must start with)").str;
    it.length = integer("length", 1, kMaxTaskLength, "the item's length in tokens, at most the longest context infer reads");
    it.depth = typed("depth", Json::Number, "a number in [0, 1]").num + 0.0;  // + 0.0: -0 is 0
    if (j.has("needle_token") && j.at("needle_token").kind != Json::Null)
        it.needle_token = integer("needle_token", -1, it.length + task_length_slack(it.length),
                                  "the asked needle's first token in the prompt, or -1; the prompt has at most length + length/4 + 32");
    if (it.task.empty()) return bad("the task is empty");
    if (it.answer.find_first_not_of(' ') == std::string::npos) return bad("the answer is empty");
    if (it.question.empty()) return bad("the question is empty");
    // infer decodes answer-length + 2 tokens per item past the context: a 20,000-character answer
    // took 22 s. Retrieval answers are keys and numbers, far under the cap.
    if (it.answer.size() > kMaxTaskAnswerChars)
        return bad("the answer has " + std::to_string(it.answer.size()) + " characters, more than the " +
                   std::to_string(kMaxTaskAnswerChars) + " a task answer may have");
    // A continuation is decoded text (valid UTF-8: a broken byte run decodes as U+FFFD), so an
    // answer that is not, or that holds a NUL or a newline, could never match: refused, not
    // scored wrong without a word.
    if (size_t at = task_utf8_error(it.answer); at != std::string::npos)
        return bad(strf("the answer is not valid UTF-8 (byte %zu): give it as text", at));
    if (size_t at = task_control_char(it.answer); at != std::string::npos)
        return bad(strf("the answer holds the control character 0x%02x at byte %zu: an answer is text on one line, with no "
                        "newline, tab, NUL or other control character", (unsigned char)it.answer[at], at));
    if (!(it.depth >= 0 && it.depth <= 1)) return bad(strf("depth must be in [0, 1] (got %.17g)", it.depth));
    if (size_t at = task_utf8_error(it.task); at != std::string::npos)
        return bad(strf("the task name is not valid UTF-8 (byte %zu): give it as text", at));
    if (it.task.find_first_of(",\"") != std::string::npos || task_control_char(it.task) != std::string::npos)
        return bad("the task name may not hold a comma, quote, newline or carriage return, nor any other control character (NUL, "
                   "tab, DEL): it is a CSV field");
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

// The scorer's rule (as RULER and Landmark Attention's evaluations use it in
// spirit): the continuation, leading spaces removed, starts with the answer. Nothing is asked of
// what follows, so a continuation "123456" counts for the answer 12345.
inline bool answer_matches(const std::string& continuation, const std::string& answer) {
    const size_t from = continuation.find_first_not_of(' ');
    if (from == std::string::npos) return false;
    const size_t a = answer.find_first_not_of(' ');  // an answer written as " 123" means "123"
    return a != std::string::npos && continuation.compare(from, answer.size() - a, answer, a, std::string::npos) == 0;
}
