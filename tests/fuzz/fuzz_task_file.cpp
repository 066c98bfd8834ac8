// libFuzzer harness: retrieval task files (data/task_file.h), JSON Lines as `infer --tasks` and
// data_tool read them.
//
// Input: the file's bytes, verbatim (NUL bytes, lone '\r', invalid UTF-8 and all). The file goes
// to read_task_file, the reader infer --tasks calls. FatalError is its only clean way out
// (parse_task_line turns a JsonError into a FatalError naming the line; fuzz_common.h: anything
// else escaping, a sanitizer report, a failed FUZZ_CHECK is a finding). Checked on acceptance:
//   - at least one item, lines increasing from 1, each item within what the reader promises
//     (a task name that is a clean CSV field of valid UTF-8 with no control character, a
//     non-blank answer of valid UTF-8 with no control character within kMaxTaskAnswerChars, a
//     question, length in [1, kMaxTaskLength], depth in [0, 1] and never -0, needle_token in
//     [-1, length + task_length_slack(length)]);
//   - each item written back by task_item_to_json (what data_tool tasks writes) parses back to
//     the same strings, length and needle_token: what data_tool writes, infer reads.
// Seeds: tests/fuzz/task_file/seeds: lines of `data_tool tasks` output as tests/test_tasks_cli.sh
// makes it (passkey, multikey, multiquery; taken verbatim, so make_seeds does not write them) and
// one hand-written file (blank lines, CRLF, escapes, extra fields). Dictionary task_file.dict.
#include "data/task_file.h"
#include "tests/fuzz/fuzz_common.h"

static void check_item(const TaskItem& it, int prev_line) {
    FUZZ_CHECK(it.line > prev_line, "item lines not increasing (%d after %d)", it.line, prev_line);
    FUZZ_CHECK(!it.task.empty() && it.task.find_first_of(",\"") == std::string::npos && task_control_char(it.task) == std::string::npos &&
                   task_utf8_error(it.task) == std::string::npos,
               "task name '%s' accepted", it.task.c_str());
    FUZZ_CHECK(it.answer.find_first_not_of(' ') != std::string::npos && it.answer.size() <= kMaxTaskAnswerChars,
               "answer of %zu characters accepted", it.answer.size());
    FUZZ_CHECK(task_control_char(it.answer) == std::string::npos && task_utf8_error(it.answer) == std::string::npos,
               "an answer with a control character or invalid UTF-8 accepted");
    FUZZ_CHECK(!it.question.empty(), "an empty question accepted");
    FUZZ_CHECK(it.length >= 1 && it.length <= kMaxTaskLength, "length %lld accepted", it.length);
    FUZZ_CHECK(it.depth >= 0 && it.depth <= 1 && !std::signbit(it.depth), "depth %g accepted", it.depth);
    FUZZ_CHECK(it.needle_token >= -1 && it.needle_token <= it.length + task_length_slack(it.length), "needle_token %lld accepted",
               it.needle_token);
    // What data_tool tasks would write for it, read back as infer --tasks reads it.
    TaskItem back;
    try {
        back = parse_task_line(task_item_to_json(it, 1), "written", 1);
    } catch (const FatalError& e) {
        FUZZ_CHECK(false, "an accepted item, written back by task_item_to_json, is refused: %s", e.what());
    }
    FUZZ_CHECK(back.task == it.task && back.context == it.context && back.question == it.question && back.answer == it.answer,
               "an item's text changes through task_item_to_json");
    FUZZ_CHECK(back.length == it.length && back.needle_token == it.needle_token, "an item's numbers change through task_item_to_json");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FuzzFile file("fuzz_task_file");
    const std::string& path = file.write(data, size);
    std::vector<TaskItem> items;
    try {
        items = read_task_file(path);
    } catch (const FatalError& e) {
        fuzz_rejected(e);
        return 0;
    }
    FUZZ_CHECK(!items.empty(), "a task file with no item accepted");
    int prev = 0;
    for (const TaskItem& it : items) check_item(it, prev), prev = it.line;
    return 0;
}
