// Tests for the retrieval tasks: the generators (data/tasks.h: items exactly their length with
// the needle at its depth to the token, deterministic by seed; training documents), task files
// and the scoring rule (data/task_file.h), the batches of a mixed, scheduled run
// (data/batch_source.h), and the scorer's whole path (eval/task_eval.h, its report
// eval/task_report.h) with a mock model that reads the needle back from its context: a reader that
// sees everything scores 100%, one that sees only its last W tokens scores 0% wherever the needle
// lies further back, so the test measures context. Prints PASS/FAIL lines and "N passed, M failed".
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>

#include "data/batch_source.h"
#include "data/quote_tasks.h"
#include "core/output_path.h"
#include "core/rng.h"
#include "data/task_file.h"
#include "data/tasks.h"
#include "data/train_tokenizer.h"
#include "eval/task_eval.h"
#include "eval/task_report.h"
#include "tests/check.h"
#include "tests/test_text.h"


static std::string trained_tokenizer() {
    std::string text = test_text(3, 4000);
    // The needles' words and digits too, as a corpus would hold them.
    text += std::string(task_text::kPasskeyIntro) + "\n" + task_text::kMultiKeyIntro + "\n" + task_text::kFiller + "\n";
    for (int i = 0; i < 40; i++) text += task_text::passkey_needle(std::to_string(1000 + 37 * i)) + "\n" +
                                         task_text::multikey_question(needle_words()[i * 97]) + "\n";
    return train_bpe_tokenizer(text, 600);
}

// How many haystack tokens come before the asked needle of an item, counted from its text
// alone: the tokens of the context before the needle's line, less the intro, the newlines and
// the other needles' lines before it.
static long long haystack_before(const TaskItem& it, const Tokenizer& tok, const std::string& needle_start, long long* fixed_before) {
    const size_t at = it.context.find("\n" + needle_start);
    if (at == std::string::npos) return -1;
    const long long before = (long long)tok.encode(it.context.substr(0, at + 1)).size();
    const std::string intro = it.context.substr(0, it.context.find('\n'));
    long long other = 0;
    for (size_t p = it.context.find("\nOne of the special magic numbers for "); p != std::string::npos && p < at;
         p = it.context.find("\nOne of the special magic numbers for ", p + 1)) {
        const size_t end = it.context.find('\n', p + 1);
        other += (long long)tok.encode(it.context.substr(p + 1, end - p - 1)).size() + 2;
    }
    *fixed_before = (long long)tok.encode(intro).size() + 1 + other + 1;
    return before - *fixed_before;
}

static void test_items(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 6; d++) docs.push_back(tok.encode(test_text(100 + d, 300)));
    const Haystack hay = haystack_from_docs(docs, "test text", k);
    const Haystack filler = filler_haystack(tok, k, 5000);
    for (const Haystack* h : {&hay, &filler})
        for (TaskKind kind : {TaskKind::Passkey, TaskKind::MultiKey, TaskKind::MultiQuery}) {
            bool exact = true, placed = true, answered = true;
            std::string detail;
            for (long long L : {700LL, 1237LL, 3000LL})
                for (double d : {0.0, 0.3, 0.5, 1.0}) {
                    const TaskSpec spec{kind, L, d, 4, 1000 + (uint64_t)L * 7 + (uint64_t)(d * 10)};
                    const std::vector<TaskItem> items = make_task_items(spec, *h, tok, k);
                    const TaskItem& it = items[0];
                    std::vector<int> ids = tok.encode(task_prompt_text(it));
                    ids.insert(ids.begin(), tok.bos_id());
                    exact = exact && (long long)ids.size() == L;
                    // The needle's line, its text and answer, where the item says.
                    const std::string needle = kind == TaskKind::Passkey ? task_text::passkey_needle(it.answer) : "";
                    const std::string start = kind == TaskKind::Passkey ? needle : "One of the special magic numbers for ";
                    long long fixed = 0;
                    const long long before = haystack_before(it, tok, kind == TaskKind::Passkey ? needle : start, &fixed);
                    // The haystack's tokens M: the length less everything else.
                    long long others = 0;
                    for (size_t p = it.context.find('\n'); p != std::string::npos; p = it.context.find('\n', p + 1)) {
                        const size_t end = it.context.find('\n', p + 1);
                        const std::string line = it.context.substr(p + 1, end == std::string::npos ? std::string::npos : end - p - 1);
                        if (line.rfind("The pass key is ", 0) == 0 || line.rfind("One of the special magic numbers for ", 0) == 0)
                            others += (long long)tok.encode(line).size() + 2;
                    }
                    const long long M = L - (1 + (long long)tok.encode(it.context.substr(0, it.context.find('\n'))).size() + 1 + 1 +
                                             (long long)tok.encode(it.question).size() + others);
                    if (kind == TaskKind::Passkey && before != std::llround(d * (double)M)) {
                        placed = false;
                        detail = "L " + std::to_string(L) + " depth " + std::to_string(d) + ": " + std::to_string(before) +
                                 " haystack tokens before the needle, want " + std::to_string(std::llround(d * (double)M));
                    }
                    if (kind != TaskKind::Passkey) {  // the asked needle: find it by its answer
                        const std::string line = "\nOne of the special magic numbers for ";
                        const size_t q = it.question.find(" for ") + 5, e = it.question.find(" mentioned");
                        const std::string word = it.question.substr(q, e - q);
                        const std::string asked = task_text::multikey_needle(word, it.answer);
                        long long fb = 0;
                        const long long b2 = haystack_before(it, tok, asked, &fb);
                        answered = answered && b2 >= 0;
                        if (b2 != std::llround(d * (double)M)) {
                            placed = false;
                            detail = "L " + std::to_string(L) + " depth " + std::to_string(d) + ": " + std::to_string(b2) + " vs " +
                                     std::to_string(std::llround(d * (double)M));
                        }
                    }
                    // needle_token: the asked needle's first token in the prompt.
                    const std::string text = kind == TaskKind::Passkey ? needle : "One of the special";
                    std::vector<int> from(ids.begin() + it.needle_token, ids.end());
                    placed = placed && tok.decode(from).rfind(text, 0) == 0;
                    answered = answered && it.context.find(kind == TaskKind::Passkey ? needle : " is: " + it.answer + ".") != std::string::npos;
                    if (kind == TaskKind::MultiQuery) answered = answered && items.size() == 4;
                }
            const std::string name = std::string(task_kind_name(kind)) + " on " + h->source;
            check(exact, name + ": every item is exactly its length in tokens");
            check(placed, name + ": the asked needle lies at round(depth x haystack) to the token", detail);
            check(answered, name + ": the context holds the answer's needle (multiquery: one item per needle)");
        }
    // Deterministic by seed.
    const TaskSpec a{TaskKind::MultiKey, 2000, 0.5, 4, 42};
    TaskSpec b = a;
    b.seed = 43;
    const std::vector<TaskItem> x = make_task_items(a, hay, tok, k), y = make_task_items(a, hay, tok, k), z = make_task_items(b, hay, tok, k);
    check(task_item_to_json(x[0], 42) == task_item_to_json(y[0], 42) && x[0].context != z[0].context && x[0].answer != z[0].answer,
          "the same seed gives the same item, another seed another");
    // Multi-query depths: the other needles evenly around the first.
    const std::vector<TaskItem> mq = make_task_items({TaskKind::MultiQuery, 3000, 0.25, 4, 7}, hay, tok, k);
    check(mq.size() == 4 && mq[1].depth == 0.5 && mq[2].depth == 0.75 && mq[3].depth == 0.0, "multiquery needles at depth + i/4");
    // With 3 needles, 0 + 1/3 and frac(1 + 1/3) differ in their last bit: one depth all the same.
    const std::vector<TaskItem> m0 = make_task_items({TaskKind::MultiQuery, 3000, 0.0, 3, 7}, hay, tok, k),
                                m1 = make_task_items({TaskKind::MultiQuery, 3000, 1.0, 3, 7}, hay, tok, k);
    check(m0.size() == 3 && m1.size() == 3 && m0[1].depth == m1[1].depth && m0[2].depth == m1[2].depth,
          "multiquery needles at depth + i/3 from depths 0 and 1 report one depth each (1/3, 2/3), not two that differ in the last bit");
    // Bad requests: one line naming the flag.
    expect_fatal("a length shorter than the needles and question", [&] { make_task_items({TaskKind::Passkey, 40, 0.5, 4, 1}, hay, tok, k); },
                   {"--lengths 40", "too short"});
    expect_fatal("a haystack too short for the length", [&] { make_task_items({TaskKind::Passkey, 1 << 20, 0.5, 4, 1}, hay, tok, k); },
                   {"--haystack", "fewer than", "lower --lengths"});
    expect_fatal("more needles than distinct words", [&] { make_task_items({TaskKind::MultiKey, 3000, 0.5, 7000, 1}, hay, tok, k); },
                   {"distinct words"});
}

static void test_tokenizer_checks(const Tokenizer& tok) {
    // A tokenizer that adds a dummy prefix encodes the needle alone ("▁The ...") otherwise than
    // after a newline: the generator must say so, not misplace it.
    const std::unordered_map<std::string, std::string> options = {
        {"model_type", "bpe"}, {"vocab_size", "350"}, {"byte_fallback", "true"}, {"character_coverage", "1.0"},
        {"unk_id", "0"}, {"bos_id", "1"}, {"eos_id", "2"}, {"pad_id", "-1"}, {"normalization_rule_name", "identity"},
        {"num_threads", "1"}, {"add_dummy_prefix", "true"}, {"remove_extra_whitespaces", "false"}, {"split_digits", "true"},
        {"minloglevel", "1"}};
    sentencepiece::SetRandomGeneratorSeed(1234);
    std::string model;
    const std::string text = test_text(5, 3000) + task_text::passkey_needle("123") + "\n";
    LineIterator lines(text);
    Tokenizer dummy;
    if (sentencepiece::SentencePieceTrainer::Train(options, &lines, &model).ok()) {
        dummy.load_serialized(model);
        // Refused before any item is made (its newline is two pieces), or at the item (its needle
        // encodes otherwise in the text): either way one line naming the tokenizer and the fix.
        expect_fatal("a tokenizer that splits the needle differently in the text", [&] {
            const PieceKinds dk(dummy);
            const Haystack h = haystack_from_docs({dummy.encode(test_text(9, 300))}, "text", dk);
            make_task_items({TaskKind::Passkey, 1500, 0.5, 4, 1}, h, dummy, dk);
        }, {"tokenizer", "data_tool prepare"});
    } else {
        check(false, "training the dummy-prefix tokenizer");
    }
    (void)tok;
}

static void test_task_file() {
    const std::string good = "{\"task\":\"passkey\",\"context\":\"a\\nb\",\"question\":\"q?\",\"answer\":\"123\",\"length\":9,\"depth\":0.5,\"x\":[1]}";
    const TaskItem it = parse_task_line(good, "f.jsonl", 3);
    check(it.task == "passkey" && it.context == "a\nb" && it.answer == "123" && it.length == 9 && it.depth == 0.5 && it.line == 3,
          "a task line is read; unknown fields are ignored");
    TaskItem w;
    w.task = "t", w.context = "c \"quoted\"\n\ttab", w.question = "q", w.answer = "7", w.length = 5, w.depth = 1;
    const TaskItem back = parse_task_line(task_item_to_json(w, 1), "f", 1);
    check(back.context == w.context && back.question == w.question && back.answer == w.answer, "an item round-trips through JSON");
    bool depths_exact = true;
    for (double d : {0.0, 0.25, 0.5, 0.5000001, 0.4999999, 0.50000000001, 1.0 / 3, 1.0}) {
        w.depth = d;
        depths_exact = depths_exact && parse_task_line(task_item_to_json(w, 1), "f", 1).depth == d;
    }
    check(depths_exact, "a depth is written as the shortest decimal that reads back exactly (0.5 and 0.5000001 stay two depths)");
    check(task_prompt_text(w) == w.context + "\n" + w.question, "the prompt is context, newline, question");
    auto refused = [&](const std::string& name, const std::string& line, const std::string& want) {
        expect_fatal(name, [&] { parse_task_line(line, "tasks.jsonl", 7); }, {"tasks.jsonl line 7", want});
    };
    refused("not JSON", "{\"task\": ", "not JSON");
    refused("an array, not an object", "[1, 2]", "not a JSON object");
    refused("a missing field", "{\"task\":\"t\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"1\",\"length\":3}", "no field \"depth\"");
    refused("an empty answer", "{\"task\":\"t\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"  \",\"length\":3,\"depth\":0}", "answer is empty");
    refused("a depth past 1", "{\"task\":\"t\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"1\",\"length\":3,\"depth\":1.5}", "depth must be in [0, 1]");
    refused("a length of 0", "{\"task\":\"t\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"1\",\"length\":0,\"depth\":0}", "length");
    refused("a context that is a number", "{\"task\":\"t\",\"context\":5,\"question\":\"q\",\"answer\":\"1\",\"length\":3,\"depth\":0}",
            "\"context\" is a number; it must be a string");
    refused("a task name with a comma", "{\"task\":\"a,b\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"1\",\"length\":3,\"depth\":0}", "comma");
    // A CR in a task name would break the CSV; a long answer costs answer-length decode steps.
    refused("a task name with a CR", "{\"task\":\"a\\rb\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"1\",\"length\":3,\"depth\":0}",
            "carriage return");
    auto with_answer = [](size_t n) {
        return "{\"task\":\"t\",\"context\":\"c\",\"question\":\"q\",\"answer\":\"" + std::string(n, '7') + "\",\"length\":3,\"depth\":0}";
    };
    check(parse_task_line(with_answer(kMaxTaskAnswerChars), "f", 1).answer.size() == kMaxTaskAnswerChars, "an answer at the cap is read");
    refused("an answer of 20,000 characters", with_answer(20000), "more than the 256");
}

// A task line from its fields, each given as JSON text (a field given as "" is left out).
static std::string task_line(const std::string& task, const std::string& answer, const std::string& length = "3",
                             const std::string& depth = "0", const std::string& extra = "") {
    std::string s = "{\"context\":\"c\",\"question\":\"q\"";
    if (!task.empty()) s += ",\"task\":" + task;
    if (!answer.empty()) s += ",\"answer\":" + answer;
    if (!length.empty()) s += ",\"length\":" + length;
    if (!depth.empty()) s += ",\"depth\":" + depth;
    return s + extra + "}";
}

// What a task file may hold, field by field: each case refused in one line naming the line and
// the field, beside a control that is read.
static void test_task_fields() {
    auto refused = [&](const std::string& name, const std::string& line, const std::vector<std::string>& want) {
        std::vector<std::string> all = {"tasks.jsonl line 4: "};
        all.insert(all.end(), want.begin(), want.end());
        expect_fatal(name, [&] { parse_task_line(line, "tasks.jsonl", 4); }, all);
    };
    auto read = [&](const std::string& line) { return parse_task_line(line, "tasks.jsonl", 4); };
    // length: an integer number of tokens up to the longest context a model reads.
    check(read(task_line("\"t\"", "\"1\"", "268435456")).length == kMaxTaskLength, "a length of 2^28 tokens is read");
    refused("a length of 1e9", task_line("\"t\"", "\"1\"", "1e9"), {"\"length\" is 1000000000", "[1, 268435456]"});
    refused("a length of 2^40", task_line("\"t\"", "\"1\"", "1099511627776"), {"\"length\" is 1099511627776", "[1, 268435456]"});
    refused("a length of 2^28 + 1", task_line("\"t\"", "\"1\"", "268435457"), {"\"length\" is 268435457"});
    refused("a length of 2.5", task_line("\"t\"", "\"1\"", "2.5"), {"\"length\" is 2.5; it must be an integer"});
    // Known fields of the wrong JSON type: refused naming the field and the type, never skipped.
    check(read(task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":2")).needle_token == 2, "a needle_token is read");
    check(read(task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":null")).needle_token == -1 &&
              read(task_line("\"t\"", "\"1\"", "3", "0")).needle_token == -1,
          "a needle_token of null, or none, is -1");
    refused("needle_token \"abc\"", task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":\"abc\""),
            {"\"needle_token\" is a string; it must be an integer"});
    refused("needle_token true", task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":true"), {"\"needle_token\" is true or false"});
    refused("needle_token -2", task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":-2"), {"\"needle_token\" is -2"});
    refused("needle_token past the prompt", task_line("\"t\"", "\"1\"", "3", "0", ",\"needle_token\":36"), {"\"needle_token\" is 36", "[-1, 35]"});
    refused("length \"2048\"", task_line("\"t\"", "\"1\"", "\"2048\""), {"\"length\" is a string; it must be an integer"});
    refused("depth \"0.5\"", task_line("\"t\"", "\"1\"", "3", "\"0.5\""), {"\"depth\" is a string; it must be a number in [0, 1]"});
    refused("depth null", task_line("\"t\"", "\"1\"", "3", "null"), {"\"depth\" is null; it must be a number"});
    refused("answer 5", task_line("\"t\"", "5"), {"\"answer\" is a number; it must be a string"});
    refused("task [\"t\"]", task_line("[\"t\"]", "\"1\""), {"\"task\" is an array; it must be a string"});
    refused("question {}", "{\"task\":\"t\",\"context\":\"c\",\"question\":{},\"answer\":\"1\",\"length\":3,\"depth\":0}",
            {"\"question\" is an object; it must be a string"});
    check(read(task_line("\"t\"", "\"1\"", "3", "0", ",\"seed\":\"abc\",\"note\":{\"x\":[null]}")).answer == "1",
          "fields the reader does not know are ignored, of any type");
    // Task names: valid UTF-8, no comma, quote or control character (a CSV field, a table row).
    check(read(task_line("\"passkey-\\u00e9 \\u65e5\"", "\"1\"")).task == "passkey-\xc3\xa9 \xe6\x97\xa5", "a task name in UTF-8 is read");
    refused("a NUL in a task name (\\u0000)", task_line("\"pass\\u0000key\"", "\"1\""), {"the task name", "control character"});
    refused("a raw NUL byte in a task name", task_line(std::string("\"pass\0key\"", 10), "\"1\""), {"the task name", "control character"});
    refused("a tab in a task name", task_line("\"pass\\tkey\"", "\"1\""), {"the task name", "control character"});
    refused("a DEL in a task name", task_line("\"pass\x7fkey\"", "\"1\""), {"the task name", "control character"});
    refused("invalid UTF-8 in a task name", task_line("\"pass\xffkey\"", "\"1\""), {"the task name is not valid UTF-8 (byte 4)"});
    // Answers: what a continuation (decoded text: valid UTF-8) can start with.
    check(read(task_line("\"t\"", "\" 12 caf\\u00e9\"")).answer == " 12 caf\xc3\xa9" && read(task_line("\"t\"", "\"\xe6\x97\xa5\"")).answer == "\xe6\x97\xa5",
          "answers in UTF-8, with a space inside, are read");
    refused("an answer with \\u0000", task_line("\"t\"", "\"12\\u000034\""), {"the answer holds the control character 0x00 at byte 2"});
    refused("an answer with a raw NUL byte", task_line("\"t\"", std::string("\"12\0\"", 5)), {"the answer holds the control character 0x00"});
    refused("an answer with \\n", task_line("\"t\"", "\"12\\n34\""), {"the answer holds the control character 0x0a"});
    refused("an answer with a tab", task_line("\"t\"", "\"12\\t\""), {"the answer holds the control character 0x09"});
    refused("an answer with a raw 0xff byte", task_line("\"t\"", "\"12\xff\""), {"the answer is not valid UTF-8 (byte 2)"});
    refused("an answer with a truncated character", task_line("\"t\"", "\"12\xe6\x97\""), {"the answer is not valid UTF-8 (byte 2)"});
    refused("an answer with an overlong '/'", task_line("\"t\"", "\"\xc0\xaf\""), {"the answer is not valid UTF-8 (byte 0)"});
    refused("an answer with a raw surrogate", task_line("\"t\"", "\"\xed\xa0\x80\""), {"the answer is not valid UTF-8 (byte 0)"});
    refused("an answer past U+10FFFF", task_line("\"t\"", "\"\xf4\x90\x80\x80\""), {"the answer is not valid UTF-8 (byte 0)"});
    check(read(task_line("\"t\"", "\"\xf0\x9f\x98\x80\"")).answer == "\xf0\x9f\x98\x80", "an answer with a 4-byte character is read");
    // Depths exactly as given; -0 is 0.
    check(read(task_line("\"t\"", "\"1\"", "3", "0.50000000001")).depth == 0.50000000001 &&
              read(task_line("\"t\"", "\"1\"", "3", "0.4999999")).depth == 0.4999999,
          "depths are read exactly");
    const TaskItem neg = read(task_line("\"t\"", "\"1\"", "3", "-0"));
    check(neg.depth == 0 && !std::signbit(neg.depth), "a depth of -0 is read as 0");
}

// infer --tasks-out P writes P.csv and P_items.csv: P names a file to be, never a folder.
static void test_output_prefix() {
    char tmpl[] = "/tmp/test_tasks_prefix.XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    for (const std::string& p : {dir + "/", dir + "//", dir, dir + "/.", dir + "/..", std::string("/"), std::string(".")})
        expect_fatal("--tasks-out " + p + " is refused", [&] { check_output_prefix(p, "--tasks-out"); },
                     {"--tasks-out " + p + " names a folder; give a file name", "results.csv"});
    bool ok = true;
    for (const std::string& p : {dir + "/results", dir + "/r.", dir + "/.r", std::string("needles")}) {
        try {
            check_output_prefix(p, "--tasks-out");
        } catch (const FatalError& e) {
            ok = check(false, "--tasks-out " + p + " is a file name", e.what());
        }
    }
    check(ok, "--tasks-out DIR/results, DIR/r., DIR/.r and a bare name are file names");
    rmdir(dir.c_str());
}

static void test_scoring_rule() {
    check(answer_matches("12345", "12345"), "exact answer: right");
    check(answer_matches("   12345", "12345"), "leading spaces are removed: right");
    check(answer_matches(" 12345. Remember", "12345"), "a longer continuation that starts with the answer: right");
    check(!answer_matches(" 1234", "12345"), "a prefix of the answer: wrong");
    check(!answer_matches(" 54321", "12345"), "another number: wrong");
    check(!answer_matches("\n12345", "12345"), "only spaces are removed (a newline first: wrong)");
    check(!answer_matches("", "12345") && !answer_matches("   ", "12345"), "an empty continuation: wrong");
    check(answer_matches("77", " 77"), "an answer written with a leading space means the same");
}

// make_training_document on `spec` must end in a fatal error whose message holds each of `want`.
static void expect_document_fatal(const std::string& name, const TrainDocSpec& spec, const Haystack& hay, const Tokenizer& tok,
                                  const PieceKinds& k, const std::vector<std::string>& want) {
    expect_fatal(name, [&] {
        SplitMix64 rng(1);
        make_training_document(spec, hay, tok, k, rng);
    }, want);
}

static void test_training_documents(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 8; d++) docs.push_back(tok.encode(test_text(200 + d, 400)));
    const Haystack hay = haystack_from_docs(docs, "train text", k);
    bool exact = true, answers = true, passkeys = true;
    long long longest = 0;
    for (int d = 0; d < 36; d++) {
        // The study's density, and pass-key episodes so dense that stretches of length 0 occur
        // (an episode's question and the next one's needle at one position).
        const TrainDocSpec spec = d < 6 ? TrainDocSpec{4096, 256, 1024} : TrainDocSpec{8192, 1e9, 96};
        SplitMix64 rng(77 + d);
        const std::vector<int> doc = make_training_document(spec, hay, tok, k, rng);
        exact = exact && (int)doc.size() == spec.doc_tokens && doc[0] == tok.bos_id();
        const std::string text = tok.decode(std::vector<int>(doc.begin() + 1, doc.end()));
        // Every multi-key question's answer is its word's number; every pass-key question's the latest key.
        std::map<std::string, std::pair<std::string, size_t>> numbers;
        std::string latest;
        for (size_t at = 0; at < text.size();) {
            const size_t end = std::min(text.find('\n', at), text.size());
            const std::string line = text.substr(at, end - at);
            const std::string mk = "One of the special magic numbers for ", pk = "The pass key is ";
            if (line.rfind(mk, 0) == 0) {
                const size_t is = line.find(" is: ");
                numbers[line.substr(mk.size(), is - mk.size())] = {line.substr(is + 5, line.size() - is - 6), at};
            } else if (line.rfind(pk, 0) == 0) {
                latest = line.substr(pk.size(), line.find('.') - pk.size());
            } else if (line.rfind("What is the special magic number for ", 0) == 0) {
                const size_t f = line.find(" for ") + 5, m = line.find(" mentioned");
                const std::string word = line.substr(f, m - f);
                const std::string ans = line.substr(line.rfind(" is ") + 4, line.size() - line.rfind(" is ") - 5);
                answers = answers && numbers.count(word) && numbers[word].first == ans;
                if (numbers.count(word)) longest = std::max(longest, (long long)(at - numbers[word].second));
            } else if (line.rfind("What is the pass key? The pass key is ", 0) == 0) {
                passkeys = passkeys && !latest.empty() && line == "What is the pass key? The pass key is " + latest + ".";
            }
            at = end + 1;
        }
        answers = answers && (d >= 6 || !numbers.empty());
    }
    check(exact, "training documents are exactly --doc-tokens long and start with BOS");
    check(answers, "every multi-key question in a training document is answered by its word's needle");
    check(passkeys, "every pass-key question is answered by the latest pass key before it");
    check(longest > 4096, "questions are asked far from their needles too (longest " + std::to_string(longest) + " bytes)");
    // --lead-needle 1: every document's haystack opens with a needle (after BOS, the intro and a
    // newline, where an item at depth 0 has its own), and that needle is asked later, far at times.
    int opened = 0, opened_pk = 0;
    long long lead_far = 0;
    for (int d = 0; d < 24; d++) {
        TrainDocSpec spec{8192, 512, d % 2 ? 1e9 : 1024, 1.0};  // odd documents: multi-key needles alone
        SplitMix64 rng(500 + d);
        const std::string text = tok.decode(make_training_document(spec, hay, tok, k, rng));
        const size_t intro_end = text.find('\n'), next = text.find('\n', intro_end + 2);
        const std::string first = text.substr(intro_end + 2, next - intro_end - 2);  // intro \n \n needle \n
        const bool mk = first.rfind("One of the special magic numbers for ", 0) == 0, pk = first.rfind("The pass key is ", 0) == 0;
        if (text.compare(intro_end, 2, "\n\n") != 0 || !(mk || pk)) continue;
        opened++, opened_pk += pk;
        // Its question: the first one naming its word (multi-key) or the first pass-key question.
        const std::string q = pk ? "What is the pass key? The pass key is " + first.substr(16, first.find('.') - 16) + "."
                                 : "What is the special magic number for " + first.substr(37, first.find(" is: ") - 37) + " mentioned";
        const size_t asked = text.find(pk ? "What is the pass key?" : q.c_str(), next);
        if (asked == std::string::npos || text.compare(asked, q.size(), q) != 0) { opened = -1000; break; }
        lead_far = std::max(lead_far, (long long)asked);
    }
    check(opened == 24 && opened_pk > 0, "--lead-needle 1: every document opens with a needle, and pass keys lead too (" +
                                          std::to_string(opened) + " of 24, " + std::to_string(opened_pk) + " pass keys)");
    check(lead_far > 8000, "a leading needle is asked far from it at times (furthest " + std::to_string(lead_far) + " bytes)");
    // Multi-key lead needles only: the same documents, none opening with a pass key (those with
    // multi-key needles open with one, whatever their intro).
    int opened_mk_only = 0, led_by_pk = 0;
    for (int d = 0; d < 24; d++) {
        TrainDocSpec spec{8192, 512, d % 2 ? 1e9 : 1024, 1.0, /*lead_multikey_only=*/true};
        SplitMix64 rng(500 + d);
        const std::string text = tok.decode(make_training_document(spec, hay, tok, k, rng));
        const size_t intro_end = text.find('\n');
        const std::string first = text.substr(intro_end + 2, text.find('\n', intro_end + 2) - intro_end - 2);
        opened_mk_only += first.rfind("One of the special magic numbers for ", 0) == 0;
        led_by_pk += first.rfind("The pass key is ", 0) == 0;
    }
    check(opened_mk_only == 24 && led_by_pk == 0, "--lead-kind multikey: every document opens with a multi-key needle, none with a "
                                                  "pass key (" + std::to_string(opened_mk_only) + " of 24, " + std::to_string(led_by_pk) + ")");
    expect_document_fatal("more multi-key needles a document than distinct words", {1 << 20, 16, 1e9}, hay, tok, k,
                          {"--needle-every 16", "distinct words"});
    expect_document_fatal("needles too dense for the document", {512, 16, 16}, hay, tok, k, {"--doc-tokens 512", "too short"});
}

// Copies of a document's own text (TrainDocSpec's quote_every, repeat_every): each copy is its
// source token for token, a quote is a whole earlier line on a line of its own, no needle or
// question is copied, sources lie near, far and in the first lines; the needles and questions are
// those of the document without copies, and without copies the document is the one made before
// copies existed (pinned hashes).
static void test_reading_documents(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 8; d++) docs.push_back(tok.encode(test_text(200 + d, 400)));
    const Haystack hay = haystack_from_docs(docs, "train text", k);
    const Haystack filler = filler_haystack(tok, k, 8192);
    auto fnv = [](const std::vector<int>& doc) { return fnv1a64(std::string((const char*)doc.data(), doc.size() * sizeof(int))); };

    // Without copies: the documents (and the rng's next draw) as computed before copies existed.
    struct Pinned {
        TrainDocSpec spec;
        const Haystack* hay;
        uint64_t seed, hash, next;
    };
    const Pinned pins[] = {{TrainDocSpec{4096, 256, 1024}, &hay, 77, 0x39cd91aafdadc37dULL, 0xe0cc67d0ad2ea6daULL},
                           {TrainDocSpec{8192, 512, 1024, 0.5}, &hay, 78, 0xcbdfb9faeccd963bULL, 0xd2521adffa13429aULL},
                           {TrainDocSpec{4096, 256, 1024}, &filler, 79, 0x9130268d6a0d4fccULL, 0x50f3ccd80bf8352eULL}};
    for (const Pinned& p : pins) {
        TrainDocSpec spec = p.spec;
        spec.repeat_tokens = 999;  // no effect without repeat_every
        SplitMix64 rng(p.seed);
        std::vector<CopyRecord> copies(3);
        const std::vector<int> doc = make_training_document(spec, *p.hay, tok, k, rng, &copies);
        const uint64_t hash = fnv(doc), next = rng.next();
        char got[64];
        std::snprintf(got, sizeof got, "%016llx, rng then %016llx", (unsigned long long)hash, (unsigned long long)next);
        check(hash == p.hash && next == p.next && copies.empty(), "without copies a document on " + p.hay->source +
                                                                      " is the one made before copies existed, its rng left as it was (FNV-1a " + got + ")");
    }

    bool exact = true, equal = true, whole = true, clean = true, kept = true, answers = true, same_seed = true;
    std::string detail;
    long long quotes = 0, passages = 0, asked_quotes = 0, asked_passages = 0, copied = 0, total = 0;
    long long text_q = 0, text_p = 0, near_q = 0, far_q = 0, near_p = 0, far_p = 0, early_dest = 0, late_dest = 0, questions = 0;
    long long first_q = 0, first_p = 0, late_q = 0, late_p = 0;  // of the copies in a text's second half: from its first lines
    for (int d = 0; d < 28; d++) {
        const bool on_filler = d >= 24;  // no newlines in the haystack: lines only between needles
        TrainDocSpec spec{8192, 512, 2048, d % 3 == 0 ? 1.0 : 0};  // every third opens with a needle: never copied
        spec.quote_every = 128, spec.repeat_every = 512, spec.repeat_tokens = d % 2 ? 256 : 48;
        TrainDocSpec plain_spec = spec;
        plain_spec.quote_every = plain_spec.repeat_every = 0;
        SplitMix64 rng(900 + d), plain_rng(900 + d), rng2(900 + d);
        std::vector<CopyRecord> copies, copies2;
        const Haystack& h = on_filler ? filler : hay;
        const std::vector<int> doc = make_training_document(spec, h, tok, k, rng, &copies);
        const std::vector<int> plain = make_training_document(plain_spec, h, tok, k, plain_rng);
        same_seed = same_seed && make_training_document(spec, h, tok, k, rng2, &copies2) == doc && copies2.size() == copies.size();
        const long long N = spec.doc_tokens;
        exact = exact && (long long)doc.size() == N && doc[0] == tok.bos_id();
        const long long body = std::find(doc.begin(), doc.end(), k.newline) - doc.begin() + 1;  // after the intro's line
        asked_quotes += N / 128, asked_passages += N / 512, total += N;
        // The document is the one without copies everywhere but where a copy is written, and the
        // copies' rooms do not overlap.
        std::vector<uint8_t> written((size_t)N, 0);
        for (const CopyRecord& c : copies)
            for (long long i = c.dest; i < c.dest + c.length + (c.kind == CopyRecord::QuotedLine) && i < N; i++) {
                kept = kept && !written[(size_t)i];
                written[(size_t)i] = 1;
            }
        for (long long i = 0; i < N && (long long)plain.size() == N; i++) kept = kept && (written[(size_t)i] || doc[(size_t)i] == plain[(size_t)i]);
        kept = kept && (long long)plain.size() == N;
        for (const CopyRecord& c : copies) {
            const bool quote = c.kind == CopyRecord::QuotedLine;
            quotes += quote, passages += !quote, copied += c.length + quote;
            const bool inside = c.source >= body && c.source + c.length + quote <= c.dest && c.dest + c.length + quote <= N;
            if (!inside || !std::equal(doc.begin() + c.source, doc.begin() + c.source + c.length, doc.begin() + c.dest)) {
                equal = false;
                detail = "document " + std::to_string(d) + ": " + std::to_string(c.length) + " tokens from " + std::to_string(c.source) +
                         " to " + std::to_string(c.dest);
                continue;
            }
            const std::vector<int> src(doc.begin() + c.source, doc.begin() + c.source + c.length);
            if (quote) {
                const long long words = std::count_if(src.begin(), src.end(), [&](int t) { return k.word_start[t] != 0; });
                whole = whole && doc[c.dest - 1] == k.newline && doc[c.dest + c.length] == k.newline && doc[c.source - 1] == k.newline &&
                        doc[c.source + c.length] == k.newline && std::count(src.begin(), src.end(), k.newline) == 0 && c.length <= 128 &&
                        words >= 4;
            } else {  // a passage starts where the text may be cut, and is as long as asked
                const int a = doc[c.source - 1], b = doc[c.source];
                whole = whole && (a == k.newline || b == k.newline || (k.word_start[b] && !k.blank[a])) && c.length >= 16 &&
                        c.length <= spec.repeat_tokens;
            }
            const std::string text = tok.decode(src);
            for (const char* event : {"pass key", "magic number", "What is", "One of the", "Remember"})
                if (text.find(event) != std::string::npos) clean = false, detail = "copied: " + text;
            if (on_filler) continue;  // its few lines lie far apart: no measure of the distances drawn
            const long long dist = c.dest - c.source;
            const bool in_first_lines = c.source < body + 128;
            (quote ? text_q : text_p)++;
            (quote ? near_q : near_p) += dist < 64 && !in_first_lines;  // near and far by the distance drawn
            (quote ? far_q : far_p) += dist > N / 2 && !in_first_lines;
            if (c.dest > N / 2) (quote ? late_q : late_p)++, (quote ? first_q : first_p) += in_first_lines;
            early_dest += c.dest < N / 4, late_dest += c.dest > 3 * N / 4;
        }
        // Every complete question is answered by its needle (the cut tail may end in a partial line).
        const std::string text = tok.decode(std::vector<int>(doc.begin() + 1, doc.end()));
        std::map<std::string, std::string> numbers;
        std::string latest;
        for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
            const std::string line = text.substr(at, end - at);
            const std::string mk = "One of the special magic numbers for ", pk = "The pass key is ";
            if (line.rfind(mk, 0) == 0) {
                const size_t is = line.find(" is: ");
                numbers[line.substr(mk.size(), is - mk.size())] = line.substr(is + 5, line.size() - is - 6);
            } else if (line.rfind(pk, 0) == 0) {
                latest = line.substr(pk.size(), line.find('.') - pk.size());
            } else if (line.rfind("What is the special magic number for ", 0) == 0) {
                const size_t f = line.find(" for ") + 5, m = line.find(" mentioned");
                const std::string word = line.substr(f, m - f), ans = line.substr(line.rfind(" is ") + 4, line.size() - line.rfind(" is ") - 5);
                answers = answers && numbers.count(word) && numbers[word] == ans, questions++;
            } else if (line.rfind("What is the pass key? The pass key is ", 0) == 0) {
                answers = answers && !latest.empty() && line == "What is the pass key? The pass key is " + latest + ".", questions++;
            }
        }
    }
    check(exact, "documents with copies are exactly --doc-tokens long and start with BOS");
    check(equal, "every copy is its source token for token, the source wholly before it", detail);
    check(whole, "a quote is a whole earlier line of 4+ words on a line of its own; a passage starts at a cut, 16..repeat_tokens long");
    check(clean, "no copy holds a needle, a question or the intro", detail);
    check(kept && answers && questions > 100, "outside the rooms its copies are written in the document is the one without them, and its " + std::to_string(questions) +
                                                  " questions are answered by their needles");
    check(same_seed, "the same seed gives the same document and copies");
    check(quotes * 2 > asked_quotes && passages * 2 > asked_passages,
          "about doc_tokens / N copies of each kind (" + std::to_string(quotes) + " of " + std::to_string(asked_quotes) + " quotes, " +
              std::to_string(passages) + " of " + std::to_string(asked_passages) + " passages written; " +
              std::to_string(100 * copied / total) + "% of the tokens)");
    check(std::min(near_q, far_q) * 50 > text_q && std::min(near_p, far_p) * 50 > text_p,
          "quotes and passages from near (< 64 tokens back: " + std::to_string(near_q) + ", " + std::to_string(near_p) +
              ") and far (> half the document: " + std::to_string(far_q) + ", " + std::to_string(far_p) + "), not counting those from " +
              "the first lines, of " + std::to_string(text_q) + " quotes and " + std::to_string(text_p) + " passages");
    // By the distance alone a copy in a document's second half comes from its first 128 tokens
    // about once in 60.
    check(first_q * 16 > late_q && first_p * 16 > late_p,
          "one copy in 8 or so from the document's first lines (of those in a document's second half, within 128 tokens of the "
          "intro: " + std::to_string(first_q) + " of " + std::to_string(late_q) + " quotes, " + std::to_string(first_p) + " of " +
              std::to_string(late_p) + " passages)");
    check(early_dest > 0 && late_dest > 0, "copies land all over the document (first and last quarter)");
    TrainDocSpec short_passage{4096, 256, 1024};
    short_passage.repeat_every = 512, short_passage.repeat_tokens = 8;
    expect_document_fatal("a repeated passage shorter than 16 tokens", short_passage, hay, tok, k, {"--repeat-tokens 8"});
}

// Random passages (TrainDocSpec's random_every): random words written twice, the second time
// later; beside quotes and repeated passages, each copy of any kind is still its source token for
// token, no room is written twice, and outside the rooms (destinations, and the random passages'
// sources) the document is the one without copies, needles and questions included.
static void test_random_passages(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 8; d++) docs.push_back(tok.encode(test_text(300 + d, 400)));
    const Haystack hay = haystack_from_docs(docs, "train text", k);
    bool equal = true, words = true, kept = true, apart = true, fresh = true, lengths_ok = true;
    long long randoms = 0, asked = 0, near = 0, far = 0, others = 0;
    std::string detail;
    for (int d = 0; d < 12; d++) {
        TrainDocSpec spec{8192, 512, 2048};
        spec.random_every = 256, spec.repeat_tokens = d % 2 ? 64 : 16;
        if (d >= 6) spec.quote_every = 128, spec.repeat_every = 512;  // with the other copies
        TrainDocSpec plain_spec = spec;
        plain_spec.quote_every = plain_spec.repeat_every = plain_spec.random_every = 0;
        SplitMix64 rng(700 + d), plain_rng(700 + d);
        std::vector<CopyRecord> copies;
        const std::vector<int> doc = make_training_document(spec, hay, tok, k, rng, &copies);
        const std::vector<int> plain = make_training_document(plain_spec, hay, tok, k, plain_rng);
        const long long N = spec.doc_tokens;
        asked += N / 256;
        std::vector<uint8_t> written((size_t)N, 0);
        auto room = [&](long long a, long long b) {
            for (long long i = a; i < b && i < N; i++) {
                apart = apart && !written[(size_t)i];
                written[(size_t)i] = 1;
            }
        };
        for (const CopyRecord& c : copies) {
            const bool random = c.kind == CopyRecord::RandomPassage, quote = c.kind == CopyRecord::QuotedLine;
            room(c.dest, c.dest + c.length + quote);
            if (random) room(c.source, c.source + c.length);
            if (!(c.source + c.length <= c.dest && c.dest + c.length <= N) ||
                !std::equal(doc.begin() + c.source, doc.begin() + c.source + c.length, doc.begin() + c.dest)) {
                equal = false, detail = "document " + std::to_string(d) + ": " + std::to_string(c.length) + " tokens from " +
                                        std::to_string(c.source) + " to " + std::to_string(c.dest);
                continue;
            }
            if (!random) {
                others++;
                continue;
            }
            randoms++;
            near += c.dest - c.source < 2 * c.length + 64, far += c.dest - c.source > N / 2;
            for (long long j = 0; j < c.length; j++) words = words && k.word_start[doc[(size_t)(c.dest + j)]] != 0;
            fresh = fresh && !std::equal(doc.begin() + c.source, doc.begin() + c.source + c.length, plain.begin() + c.source);
            lengths_ok = lengths_ok && c.length >= 16 && c.length <= spec.repeat_tokens;
        }
        for (long long i = 0; i < N; i++) kept = kept && (written[(size_t)i] || doc[(size_t)i] == plain[(size_t)i]);
    }
    check(equal, "with random passages every copy (random, quoted, repeated) is its source token for token, the source before it", detail);
    check(words && fresh && lengths_ok, "a random passage is 16..repeat_tokens pieces that each start a word, not the text it replaced");
    check(apart && kept, "no room is written twice, and outside the rooms the document is the one without copies (needles and questions kept)");
    check(randoms * 2 > asked && others > 0, "about doc_tokens / N random passages (" + std::to_string(randoms) + " of " + std::to_string(asked) +
                                                  ") beside " + std::to_string(others) + " quotes and repeated passages");
    check(near > 0 && far > 0, "random passages repeated from near (" + std::to_string(near) + ") and far (" + std::to_string(far) + ")");
    TrainDocSpec short_random{4096, 256, 1024};
    short_random.random_every = 512, short_random.repeat_tokens = 8;
    expect_document_fatal("a random passage shorter than 16 tokens", short_random, hay, tok, k, {"--repeat-tokens 8"});
}

// Far copies only (TrainDocSpec's copy_min_distance): every copy of each kind starts its source at
// least that far before its destination, is still its source token for token, and a good share of
// those asked are written; at 0 the documents are the ones made before it existed.
static void test_far_copies(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 8; d++) docs.push_back(tok.encode(test_text(500 + d, 400)));
    const Haystack hay = haystack_from_docs(docs, "train text", k);
    auto fnv = [](const std::vector<int>& doc) { return fnv1a64(std::string((const char*)doc.data(), doc.size() * sizeof(int))); };
    const long long kFar = 2048;
    // At 0: the documents with copies as made before copy_min_distance existed (pinned hashes of
    // the document, the rng's next draw and the number of copies).
    const uint64_t pinned[2][2] = {{0xb830cf3fbed2195cULL, 0xa2859d201dc2c693ULL}, {0xf790b950c0444ee7ULL, 0x2ebda73a0fa37e78ULL}};
    const size_t pinned_copies[2] = {35, 40};
    bool equal = true, far_enough = true, same_at_zero = true;
    long long by_kind[3] = {0, 0, 0}, asked = 0, nearest = LLONG_MAX;
    std::string detail;
    for (int d = 0; d < 10; d++) {
        TrainDocSpec spec{8192, 512, 2048};
        spec.quote_every = 256, spec.repeat_every = 512, spec.random_every = 1024;
        if (d < 2) {
            SplitMix64 rng(600 + d);
            std::vector<CopyRecord> copies;
            const uint64_t hash = fnv(make_training_document(spec, hay, tok, k, rng, &copies));
            same_at_zero = same_at_zero && hash == pinned[d][0] && rng.next() == pinned[d][1] && copies.size() == pinned_copies[d];
        }
        spec.copy_min_distance = kFar;
        SplitMix64 rng(600 + d);
        std::vector<CopyRecord> copies;
        const std::vector<int> doc = make_training_document(spec, hay, tok, k, rng, &copies);
        const long long N = spec.doc_tokens;
        asked += N / 256 + N / 512 + N / 1024;
        for (const CopyRecord& c : copies) {
            by_kind[c.kind]++;
            nearest = std::min(nearest, c.dest - c.source);
            far_enough = far_enough && c.dest - c.source >= kFar;
            if (!(c.source + c.length <= c.dest && c.dest + c.length <= N) ||
                !std::equal(doc.begin() + c.source, doc.begin() + c.source + c.length, doc.begin() + c.dest))
                equal = false, detail = "document " + std::to_string(d) + ": " + std::to_string(c.length) + " tokens from " +
                                        std::to_string(c.source) + " to " + std::to_string(c.dest);
        }
    }
    check(same_at_zero, "at copy_min_distance 0 the documents, copies and rng are those made before it existed (pinned)");
    check(far_enough && nearest != LLONG_MAX, "with copy_min_distance 2048 every source starts 2048 or more tokens back (nearest: " +
                                                  std::to_string(nearest) + ")");
    check(equal, "far copies are their sources token for token", detail);
    const long long written = by_kind[0] + by_kind[1] + by_kind[2];
    check(by_kind[0] > 0 && by_kind[1] > 0 && by_kind[2] > 0 && written * 3 > asked,
          "far quotes, passages and random passages are all written (" + std::to_string(by_kind[0]) + ", " + std::to_string(by_kind[1]) +
              ", " + std::to_string(by_kind[2]) + "; " + std::to_string(written) + " of " + std::to_string(asked) + " asked)");
}

// Copies from the document's first lines (TrainDocSpec's copy_first_one_in): the share of quotes
// and repeated passages whose source lies in the document's opening rises as N falls (1: nearly
// all; 8: as before, pinned by test_far_copies), every copy is still its source token for token,
// and N < 1 is refused.
static void test_first_copies(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 8; d++) docs.push_back(tok.encode(test_text(700 + d, 400)));
    const Haystack hay = haystack_from_docs(docs, "train text", k);
    const long long kOpening = 1024;  // a document of 8192: its first eighth
    double share[3] = {0, 0, 0};
    const int one_in[3] = {1, 2, 8};
    bool equal = true;
    std::string detail;
    for (int i = 0; i < 3; i++) {
        long long from_opening = 0, all = 0;
        for (int d = 0; d < 10; d++) {
            TrainDocSpec spec{8192, 512, 2048};
            spec.quote_every = 256, spec.repeat_every = 512, spec.copy_first_one_in = one_in[i];
            SplitMix64 rng(800 + d);
            std::vector<CopyRecord> copies;
            const std::vector<int> doc = make_training_document(spec, hay, tok, k, rng, &copies);
            for (const CopyRecord& c : copies) {
                all++, from_opening += c.source < kOpening;
                if (!std::equal(doc.begin() + c.source, doc.begin() + c.source + c.length, doc.begin() + c.dest))
                    equal = false, detail = "1 in " + std::to_string(one_in[i]) + ", document " + std::to_string(d);
            }
        }
        share[i] = all ? (double)from_opening / (double)all : 0;
    }
    char text[160];
    std::snprintf(text, sizeof text, "(sources in the first 1024 tokens: %.2f / %.2f / %.2f at 1 in 1 / 2 / 8)", share[0], share[1], share[2]);
    check(share[0] > 0.9 && share[0] > share[1] && share[1] > share[2] + 0.2,
          std::string("copy_first_one_in: the fewer N, the more copies from the document's opening ") + text);
    check(equal, "copies from the opening are their sources token for token", detail);
    // A wider opening (copy_first_tokens): its quotes spread over more lines, so fewer repeat a line
    // quoted before; with every copy from it (1 in 1), every source starts inside it (the body
    // starts after an intro of fewer than 64 tokens).
    long long distinct[2] = {0, 0}, opening_quotes[2] = {0, 0};
    bool inside = true, spread = false;
    for (int wide = 0; wide < 3; wide++)
        for (int d = 0; d < 10; d++) {
            TrainDocSpec spec{8192, 512, 2048};
            spec.quote_every = 256, spec.repeat_every = wide == 2 ? 512 : 0;
            spec.copy_first_one_in = wide == 2 ? 1 : 2, spec.copy_first_tokens = wide ? 1024 : 0;
            SplitMix64 rng(900 + d);
            std::vector<CopyRecord> copies;
            make_training_document(spec, hay, tok, k, rng, &copies);
            std::set<long long> sources;
            for (const CopyRecord& c : copies) {
                if (wide == 2)
                    inside = inside && c.source < 1024 + 64, spread = spread || (c.kind == CopyRecord::RepeatedPassage && c.source >= 256);
                if (wide < 2 && c.kind == CopyRecord::QuotedLine && c.source < 1024 + 64) sources.insert(c.source), opening_quotes[wide]++;
            }
            if (wide < 2) distinct[wide] += (long long)sources.size();
        }
    const double repeats[2] = {1 - (double)distinct[0] / std::max(1LL, opening_quotes[0]), 1 - (double)distinct[1] / std::max(1LL, opening_quotes[1])};
    char shares[160];
    std::snprintf(shares, sizeof shares, "(quotes of the opening repeating a line quoted before: %.0f%%, with 4 lines %.0f%%; %lld and %lld quotes)",
                  100 * repeats[1], 100 * repeats[0], opening_quotes[1], opening_quotes[0]);
    check(2 * repeats[1] < repeats[0] && opening_quotes[1] * 2 > opening_quotes[0],
          std::string("copy_first_tokens 1024: the opening's quotes spread over its lines ") + shares);
    check(inside && spread, "copy_first_tokens 1024, every copy from the opening: every quote's and passage's source starts inside it, "
                            "passages past its first 256 tokens too");
    TrainDocSpec whole_opening{4096, 256, 1024}, none_in{4096, 256, 1024};
    whole_opening.quote_every = 256, whole_opening.copy_first_tokens = 4096;
    none_in.quote_every = 256, none_in.copy_first_one_in = 0;
    expect_document_fatal("copy_first_tokens as long as the document", whole_opening, hay, tok, k, {"--copy-first-tokens 4096"});
    expect_document_fatal("copy_first_one_in 0", none_in, hay, tok, k, {"--copy-first-one-in 0"});
}

// ---- the batches of a mixed, scheduled run

static TokenShard counting_shard(uint32_t base, size_t n, size_t doc) {
    TokenShard s;
    s.path = "shard" + std::to_string(base), s.vocab_size = 1 << 16;
    for (size_t i = 0; i < n; i++) s.tokens.push_back(i % doc == 0 ? 1 : base + (uint32_t)(i % 997) + 2);
    for (size_t i = 0; i < n; i += doc) s.doc_starts.push_back(i);
    return s;
}

static void test_batch_source() {
    const TokenShard corpus = counting_shard(1000, 200000, 777), tasks = counting_shard(20000, 100000, 256);
    const std::vector<TrainStage> stages = parse_schedule("64x8@10,128x4@20", {0, 32, 16}, 40, 1 << 20);
    check(stages.size() == 3 && stages[1].seq_len == 64 && stages[1].batch == 8 && stages[2].first_step == 20, "--schedule parses");
    const auto mix = parse_mix("tasks.bin:0.25", 3);
    check(mix.size() == 3 && mix[2][0].fraction == 0.25, "one --mix list serves every stage");
    expect_fatal("a --mix with stages of its own that do not match", [] { parse_mix("a:0.5;b:0.5", 3); }, {"gives 2 stages", "has 3"});
    expect_fatal("fractions over 1", [] { parse_mix("a:0.7,b:0.5", 1); }, {"more than 1"});
    expect_fatal("a fraction of 0", [] { parse_mix("a:0", 1); }, {"SHARD:FRACTION"});
    expect_fatal("a schedule step out of order", [] { parse_schedule("64x8@10,128x4@5", {0, 32, 16}, 40, 1 << 20); }, {"steps must increase"});
    // Numbers that wrapped, stray commas, tiny or repeated --mix fractions.
    expect_fatal("a schedule window of 2^32 + 64 (wrapped to 64)", [] { parse_schedule("4294967360x1@2", {0, 32, 16}, 40, 1 << 20); },
                 {"SEQ_LENxBATCH@STEP", "'4294967360x1@2'"});
    expect_fatal("a schedule step with a sign", [] { parse_schedule("64x8@+10", {0, 32, 16}, 40, 1 << 20); }, {"SEQ_LENxBATCH@STEP"});
    expect_fatal("a schedule with a trailing comma", [] { parse_schedule("64x8@10,", {0, 32, 16}, 40, 1 << 20); }, {"got ''"});
    check(parse_schedule("64x8@10", {0, 32, 16}, 40, 1 << 20).size() == 2, "the same schedule without the comma parses");
    expect_fatal("a --mix fraction of 1e-300", [] { parse_mix("a:1e-300", 1); }, {"SHARD:FRACTION", "[1e-06, 1]"});
    check(parse_mix("a:1e-6", 1)[0][0].fraction == 1e-6, "a --mix fraction of 1e-6 is taken");
    expect_fatal("a --mix fraction with a sign", [] { parse_mix("a:+0.5", 1); }, {"SHARD:FRACTION"});
    expect_fatal("a --mix with a trailing comma", [] { parse_mix("a:0.5,", 1); }, {"SHARD:FRACTION"});
    expect_fatal("one --mix shard twice in a stage", [] { parse_mix("a:0.25,a:0.25", 1); }, {"a is given twice"});
    check(parse_mix("a:0.25;a:0.5", 2).size() == 2, "one shard in two stages is taken");
    expect_fatal("a schedule entry without a batch", [] { parse_schedule("64@10", {0, 32, 16}, 40, 1 << 20); }, {"SEQ_LENxBATCH@STEP"});
    expect_fatal("a schedule stage of more tokens a step than allowed", [] { parse_schedule("4096x512@10", {0, 32, 16}, 40, 1 << 20); },
                   {"--schedule entry '4096x512@10'", "tokens per step"});

    std::vector<std::vector<std::pair<const TokenShard*, double>>> m(3, {{&tasks, 0.25}});
    BatchSource a(corpus, m, stages, 9, 1);
    std::vector<std::vector<int>> batches;
    bool shares = true, masked = true;
    for (int step = 0; step < 40; step++) {
        const TrainStage& st = a.stage_at(step);
        std::vector<int> in((size_t)st.batch * st.seq_len), tg(in.size()), ds(in.size());
        a.next_batch(step, in.data(), tg.data(), ds.data());
        int from_tasks = 0;
        for (int b = 0; b < st.batch; b++) from_tasks += in[(size_t)b * st.seq_len + 1] >= 20000 || in[(size_t)b * st.seq_len + 2] >= 20000;
        shares = shares && std::abs(from_tasks - 0.25 * st.batch) <= 1.0;  // every batch holds its share
        for (size_t i = 0; i < tg.size(); i++) masked = masked && !(tg[i] == 1 && (in[i] >= 20000));
        batches.push_back(in);
    }
    check(shares, "every batch holds its fraction of --mix windows (within one)");
    check(masked, "in --mix windows the next document's BOS is no target");
    bool resumed = true;
    for (int from : {0, 7, 10, 15, 20, 33}) {
        BatchSource r(corpus, m, stages, 9, 1);
        r.seek(from);
        for (int step = from; step < 40; step++) {
            const TrainStage& st = r.stage_at(step);
            std::vector<int> in((size_t)st.batch * st.seq_len), tg(in.size()), ds(in.size());
            r.next_batch(step, in.data(), tg.data(), ds.data());
            resumed = resumed && in == batches[step];
        }
    }
    check(resumed, "seek(step) draws exactly the batches of the uninterrupted run, across stages");
    // Without --mix or --schedule, the windows DataLoader(B, T) always drew.
    BatchSource plain(corpus, {{}}, {{0, 32, 16}}, 5, 1);
    DataLoader old(corpus, 16, 32, 5, true);
    bool same = true;
    for (int step = 0; step < 30; step++) {
        std::vector<int> i1(512), t1(512), d1(512), i2(512), t2(512), d2(512);
        plain.next_batch(step, i1.data(), t1.data(), d1.data());
        old.next_batch(i2.data(), t2.data(), d2.data());
        same = same && i1 == i2 && t1 == t2 && d1 == d2;
    }
    check(same, "a run without --mix or --schedule draws the batches it always did");
    const LoaderState st = plain.expected_corpus_state(30);
    check(st.epoch == (30ull * 16) / old.n_windows() && st.cursor == (30ull * 16) % old.n_windows(), "the corpus position a checkpoint records");
}

// ---- the scorer's whole path, with a mock model that reads the answer from its context

// A cache that holds the tokens of each sequence and lets a mock "model" read them: the
// bookkeeping the mocks below share; each says only what it predicts (logits).
class TextMock : public IncrementalModel {
   public:
    TextMock(const Tokenizer& tok, int B, int chunk) : tok_(tok), seqs_(B), chunk_(chunk) {}
    void append(const int* tokens, int n) override {
        if (n < 1 || n > chunk_) fatal("TextMock: chunk of %d", n);
        for (size_t b = 0; b < seqs_.size(); b++) seqs_[b].insert(seqs_[b].end(), tokens + b * n, tokens + (b + 1) * n);
        n_ = n;
    }
    void losses(float*, const int*) override { fatal("TextMock: no losses"); }
    long long position() const override { return seqs_.empty() ? 0 : (long long)seqs_[0].size(); }
    size_t bytes() const override { return 0; }
    int max_chunk() const override { return chunk_; }
    State export_state() override { fatal("TextMock: no state"); }
    void import_state(const State&) override { fatal("TextMock: no state"); }
    int batch() const override { return (int)seqs_.size(); }
    void gather(const IncrementalModel& src, const std::vector<int>& from) override {
        const TextMock& r = dynamic_cast<const TextMock&>(src);
        for (size_t b = 0; b < seqs_.size(); b++) seqs_[b] = r.seqs_[from[b]];
        n_ = 1;
        gathers++;
    }
    static inline int gathers = 0;

   protected:
    // The text of sequence b up to and including the i-th token of the last append.
    std::string text_through(int b, int i, long long window) const {
        const std::vector<int>& s = seqs_[b];
        const long long end = (long long)s.size() - n_ + i + 1, from = window > 0 ? std::max(0LL, end - window) : 0;
        return tok_.decode(std::vector<int>(s.begin() + from, s.begin() + end));
    }
    void one_hot(float* out, int next) const {
        for (int v = 0; v < tok_.vocab_size(); v++) out[v] = v == next ? 1.0f : 0.0f;
    }
    const Tokenizer& tok_;

   private:
    std::vector<std::vector<int>> seqs_;
    int chunk_, n_ = 0;
};

// A mock that reads the text it holds (its last `window` tokens, or all): after a question it
// answers with the pass key or magic number its context gives, token by token.
class ReaderModel : public TextMock {
   public:
    ReaderModel(const Tokenizer& tok, int B, int chunk, long long window) : TextMock(tok, B, chunk), window_(window) {}
    void logits(float* out, int b, int i) override {
        const std::string text = text_through(b, i, window_);
        int next = tok_.eos_id();
        for (const std::string& q : {std::string("The pass key is"), std::string("mentioned in the provided text is")}) {
            const size_t at = text.rfind(q);
            if (at == std::string::npos) continue;
            std::string answer = "?";
            const std::string before = text.substr(0, at);
            if (q[0] == 'T') {  // the latest needle "The pass key is K." before the question
                const size_t n = before.rfind("\nThe pass key is ");
                if (n != std::string::npos) answer = before.substr(n + 17, before.find('.', n) - n - 17);
            } else {  // the number of the word the question asks
                const size_t f = text.rfind("magic number for ") + 17;
                const std::string word = text.substr(f, text.find(' ', f) - f);
                const size_t n = before.find("numbers for " + word + " is: ");
                if (n != std::string::npos) answer = before.substr(n + 17 + word.size(), 7);
            }
            const std::vector<int> want = tok_.encode(" " + answer + ".");
            const std::vector<int> q_ids = tok_.encode(text.substr(0, at + q.size()));
            const size_t made = tok_.encode(text).size() - q_ids.size();  // tokens after the question
            next = made < want.size() ? want[made] : tok_.eos_id();
            break;
        }
        one_hot(out, next);
    }

   private:
    long long window_;
};

// The lengths of the printed report (scripts/plot_heatmap.sh labels its columns the same way).
static void test_format_length() {
    const std::vector<std::pair<long long, std::string>> cases = {
        {2048, "2K"}, {131072, "128K"}, {1048576, "1M"}, {1536, "1.5K"}, {1000, "1000"}, {1024, "1K"},
        {1, "1"}, {0, "0"}, {1023, "1023"}, {3145728, "3M"}, {1572864, "1.5M"}, {1048576LL * 1024, "1024M"}};
    for (const auto& c : cases) {
        const std::string got = format_length(c.first);
        check(got == c.second, "format_length(" + std::to_string(c.first) + ") = " + got);
    }
}

static void test_scoring(const Tokenizer& tok, const PieceKinds& k) {
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 6; d++) docs.push_back(tok.encode(test_text(300 + d, 300)));
    const Haystack hay = haystack_from_docs(docs, "held-out text", k);
    std::vector<TaskItem> items;
    for (TaskKind kind : {TaskKind::Passkey, TaskKind::MultiKey, TaskKind::MultiQuery})
        for (long long L : {600LL, 2500LL})
            for (double d : {0.0, 0.5, 1.0})
                for (const TaskItem& it : make_task_items({kind, L, d, 4, (uint64_t)(L * 3 + d * 100) + (uint64_t)kind}, hay, tok, k))
                    items.push_back(it);
    for (size_t i = 0; i < items.size(); i++) items[i].line = (int)i + 1;
    const TaskEvalOptions opt{4096, false, "mem"};
    const std::vector<TaskPrompt> prompts = tokenize_tasks(items, tok, opt);
    size_t last_done = 0, last_correct = 0, reports = 0;  // what the progress callback last said
    auto run = [&](long long window, int batch, int chunk) {
        TextMock::gathers = 0;
        reports = 0;
        return run_tasks(items, prompts, tok, tok.vocab_size(), chunk,
                         [&](int B, int ch) { return std::make_unique<ReaderModel>(tok, B, ch, window); },
                         [&](long long) { return batch; },
                         [&](size_t done, size_t, size_t correct) { last_done = done, last_correct = correct, reports++; });
    };
    auto accuracy = [&](const std::vector<TaskOutcome>& out, long long length, double depth) {
        int n = 0, c = 0;
        for (size_t i = 0; i < items.size(); i++)
            if (items[i].length == length && (depth < 0 || items[i].depth == depth)) n++, c += out[i].correct;
        return n ? (double)c / n : -1.0;
    };
    const std::vector<TaskOutcome> all = run(0, 8, 300);
    const int gathers = TextMock::gathers;
    check(accuracy(all, 600, -1) == 1.0 && accuracy(all, 2500, -1) == 1.0, "a reader of the whole context answers every item");
    check(gathers > 0, "multi-query items share their context's prefill (gathered into one sequence per item)");
    const std::vector<TaskOutcome> one = run(0, 1, 7);
    bool same = true;
    for (size_t i = 0; i < all.size(); i++) same = same && all[i].output == one[i].output && all[i].tokens == one[i].tokens;
    check(same, "batches of 8 and chunks of 300 give each item what one at a time in chunks of 7 gives");
    // The control: a reader of its last 400 tokens finds needles only there.
    const std::vector<TaskOutcome> near = run(400, 8, 300);
    check(accuracy(near, 2500, 0.0) == 0.0 && accuracy(near, 2500, 0.5) == 0.0, "a reader of its last 400 tokens scores 0 on far needles");
    check(accuracy(near, 2500, 1.0) == 1.0, "... and 100% on needles within them: the test measures context");
    const size_t near_correct = (size_t)std::count_if(near.begin(), near.end(), [](const TaskOutcome& o) { return o.correct; });
    check(reports > 1 && last_done == items.size() && last_correct == near_correct && near_correct < items.size(),
          "progress after each batch counts the items scored and the correct ones (" + std::to_string(last_correct) + " of " +
              std::to_string(last_done) + " in " + std::to_string(reports) + " reports)");

    // The report: cells, per length, CSV (scripts/plot_heatmap.sh draws the heatmap from it).
    const TaskReport r = summarize_tasks(items, near);
    const std::string csv = task_report_csv(r);
    check(r.tasks.size() == 3 && r.lengths.size() == 2 && csv.find("passkey,2500,0,") != std::string::npos &&
              csv.find("all,2500,all,") != std::string::npos,
          "the report has a row per (task, length, depth), per (task, length) and per length");
    const std::string table = format_task_report(r);
    check(table.find("task multikey") != std::string::npos && table.find("accuracy by length") != std::string::npos, "the printed report");
    const std::string items_csv = task_items_csv(items, near);
    check(std::count(items_csv.begin(), items_csv.end(), '\n') >= (long)items.size() + 1, "one CSV row per item");
    // Lengths and depths of hand-written files: binned when there are many.
    std::vector<TaskItem> many;
    std::vector<TaskOutcome> outs;
    for (int i = 0; i < 40; i++) {
        TaskItem it = items[0];
        it.length = 1000 + 37 * i, it.depth = i / 39.0;
        many.push_back(it), outs.push_back(TaskOutcome{});
    }
    const TaskReport rb = summarize_tasks(many, outs);
    check(rb.binned_lengths && rb.binned_depths && rb.depths.size() <= 11 && rb.lengths.size() <= 3, "many distinct lengths and depths are binned");
    check(format_task_report(rb).find("depths: 40 distinct values, shown to the nearest 0.1") != std::string::npos &&
              format_task_report(rb).find("lengths: 40 distinct values, shown to the nearest power of 2") != std::string::npos,
          "the table says when it bins depths and lengths");
    check(format_task_report(summarize_tasks(items, near)).find("distinct values") == std::string::npos, "... and says nothing when it does not");
    // Depths exactly as given: values that differ are rows that differ, each printed so that it
    // reads back as itself; the same value spelled three ways is one row.
    std::vector<TaskItem> six(6, items[0]);
    const double given[6] = {0.5, 0.50000000001, 0.5000001, 0.4999999, 0.51, 0.25};
    for (int i = 0; i < 6; i++) six[i].depth = given[i];
    const TaskReport rd = summarize_tasks(six, std::vector<TaskOutcome>(6));
    const std::string rd_csv = task_report_csv(rd), rd_table = format_task_report(rd), rd_items = task_items_csv(six, std::vector<TaskOutcome>(6));
    bool rows = rd.depths.size() == 6;
    for (const char* d : {",0.5,1,", ",0.50000000001,1,", ",0.5000001,1,", ",0.4999999,1,", ",0.51,1,", ",0.25,1,"})
        rows = rows && rd_csv.find(d) != std::string::npos;
    check(rows, "depths 0.5, 0.50000000001, 0.5000001, 0.4999999 are four cells of one item each, printed exactly", rows ? "" : rd_csv);
    bool labels = true;
    for (const char* d : {"\n  0.50          ", "\n  0.50000000001 ", "\n  0.5000001     ", "\n  0.4999999     ", "\n  0.51          ", "\n  0.25          "})
        labels = labels && rd_table.find(d) != std::string::npos;
    check(labels, "the table has a row of its own for each, labels padded alike", labels ? "" : rd_table);
    check(rd_items.find(",0.50000000001,") != std::string::npos && rd_items.find(",0.4999999,") != std::string::npos,
          "the items CSV prints each item's depth exactly");
    std::vector<TaskItem> spelled;
    for (const char* d : {"0.5", "0.50", "5e-1"}) spelled.push_back(parse_task_line(task_line("\"t\"", "\"1\"", "3", d), "f", 1));
    const std::string same_csv = task_report_csv(summarize_tasks(spelled, std::vector<TaskOutcome>(3)));
    check(same_csv.find("t,3,0.5,3,") != std::string::npos, "depths 0.5, 0.50 and 5e-1 (one value) are one cell of 3 items");
    for (double d : {0.0, 1.0, 0.1, 0.3, 1.0 / 3, 0.1 + 0.2, 1e-300, 0.333333})
        check(std::strtod(exact_depth(d).c_str(), nullptr) == d && std::strtod(format_depth(d).c_str(), nullptr) == d,
              "depth " + exact_depth(d) + " prints as itself (table: " + format_depth(d) + ")");
    check(exact_depth(0.1) == "0.1" && exact_depth(0.25) == "0.25" && format_depth(0.5) == "0.50" && format_depth(0.333333) == "0.333333",
          "depths print short: 0.1, 0.25; the table's grid with two decimals");

    // `length` against the prompt's tokens (data/task_file.h). Items data_tool tasks
    // makes are `length` tokens as made (their text re-encoded: a few more or less); a shorter prompt (a bucket's label, as
    // scripts/tasks_from_shard.py writes) is scored; one past length + length/4 + 32 is refused.
    long long most_over = -1000000, most_under = 1000000;
    for (size_t i = 0; i < items.size(); i++) {
        const long long d = (long long)(prompts[i].context.size() + prompts[i].question.size()) - items[i].length;
        most_over = std::max(most_over, d), most_under = std::min(most_under, d);
    }
    check(most_over <= 32 && most_under >= -32,
          "the items data_tool tasks makes read back within a few tokens of their length (their text re-encoded moves a few "
          "boundaries: " + std::to_string(most_under) + " to +" + std::to_string(most_over) + " tokens), well inside the slack");
    std::vector<TaskItem> labelled(1, items[0]);
    labelled[0].length = 4 * items[0].length;  // a document's length for a prompt cut short
    check(tokenize_tasks(labelled, tok, opt).size() == 1, "a prompt shorter than its length (a bucket's label) is accepted");
    const long long n0 = (long long)(prompts[0].context.size() + prompts[0].question.size());
    labelled[0].length = n0 * 4 / 5 - 32;  // just inside: length + length/4 + 32 >= the prompt
    while (labelled[0].length + task_length_slack(labelled[0].length) < n0) labelled[0].length++;
    check(tokenize_tasks(labelled, tok, opt).size() == 1, "a prompt within length + length/4 + 32 is accepted");
    labelled[0].length--;
    expect_fatal("a prompt one token past length + length/4 + 32", [&] { tokenize_tasks(labelled, tok, opt); },
                 {"mem line 1: the prompt is " + std::to_string(n0) + " tokens, more than its \"length\" " +
                  std::to_string(labelled[0].length) + " allows"});

    // A prompt longer than --ctx: refused naming its line, or read in its last tokens.
    expect_fatal("a prompt longer than --ctx", [&] { tokenize_tasks(items, tok, TaskEvalOptions{1000, false, "tasks.jsonl"}); },
                   {"tasks.jsonl line", "longer than the model reads (--ctx 1000)", "--truncate"});
    const std::vector<TaskPrompt> cut = tokenize_tasks(items, tok, TaskEvalOptions{1000, true, "tasks.jsonl"});
    bool within = true;
    for (const TaskPrompt& p : cut) within = within && p.context.size() + p.question.size() <= 1000;
    check(within, "--truncate reads a long prompt in its last --ctx tokens");
}

// A mock that copies: it continues the prompt's last line as the context's line with that
// start goes on (or stops, when no line of its context starts so). It scores every quote item
// and no control: the controls' contexts hold no such line.
class CopyReader : public TextMock {
   public:
    CopyReader(const Tokenizer& tok, int B, int chunk) : TextMock(tok, B, chunk) {}
    void logits(float* out, int b, int i) override {
        const std::string text = text_through(b, i, 0);
        const size_t nl = text.rfind('\n');
        int next = tok_.eos_id();
        if (nl != std::string::npos) {
            const std::string cur = text.substr(nl + 1), before = text.substr(0, nl);
            size_t at = before.find("\n" + cur);
            at = before.compare(0, cur.size(), cur) == 0 ? 0 : at == std::string::npos ? at : at + 1;
            if (at != std::string::npos && !cur.empty()) {
                const std::vector<int> whole = tok_.encode(before.substr(at, before.find('\n', at) - at)), start = tok_.encode(cur);
                if (whole.size() > start.size() && std::equal(start.begin(), start.end(), whole.begin())) next = whole[start.size()];
            }
        }
        one_hot(out, next);
    }
};

// Quote items (data/quote_tasks.h): exact lengths, a question that occurs once and goes on as
// the answer says, the line at its depth, the control without it; scored end to end by a mock
// that copies (100% on quotes, 0% on their controls) and reported side by side.
static void test_quote_items(const Tokenizer& tok, const PieceKinds& k) {
    // An answer with a control character is passed over for the next cut of the line: a task
    // file may not hold one (data/task_file.h), so data_tool would write a file infer refuses.
    const std::string esc_line = "one two three four fi\x1bve six seven";
    std::string esc_q, esc_a;
    const bool esc_cut = quote_detail::cut_line(esc_line, esc_line, esc_q, esc_a);
    check(esc_cut && esc_a == "six seven" && esc_q == "one two three four fi\x1bve",
          "a quote's answer holds no control character (the cut moves past one)", "answer '" + esc_a + "'");
    // The answer's words: up to answer_words, fewer where the line ends or a space is not single.
    const std::string words_line = "alpha beta gamma delta epsilon zeta eta";
    std::string wq, w1, w2, w3, w5, wd;
    const bool cuts = quote_detail::cut_line(words_line, words_line, wq, w1, 1) && quote_detail::cut_line(words_line, words_line, wq, w2) &&
                      quote_detail::cut_line(words_line, words_line, wq, w3, 3) && quote_detail::cut_line(words_line, words_line, wq, w5, 5) &&
                      quote_detail::cut_line("alpha beta gamma delta epsilon  zeta eta", words_line, wq, wd, 3);
    check(cuts && wq == "alpha beta gamma" && w1 == "delta" && w2 == "delta epsilon" && w3 == "delta epsilon zeta" &&
              w5 == "delta epsilon zeta eta" && wd == "delta epsilon",
          "a quote's answer holds up to answer_words words (1, 2, 3; 5 stops at the line's end, 3 at a double space)",
          "'" + w1 + "' '" + w2 + "' '" + w3 + "' '" + w5 + "' '" + wd + "'");
    std::vector<std::vector<int>> docs;
    for (int d = 0; d < 6; d++) docs.push_back(tok.encode(test_text(500 + d, 300)));
    const Haystack hay = haystack_from_docs(docs, "book", k);
    // Three-word answers: the same lines and questions as two-word ones where the cut allows it,
    // the two-word answer their start, the context going on as the answer says.
    bool three_ok = true, some_three = false, same_questions = true;
    for (double d : {0.0, 0.5, 1.0}) {
        TaskSpec spec{TaskKind::Quote, 1237, d, 4, 31};
        const std::vector<TaskItem> two = make_quote_items(spec, hay, tok, k);
        spec.answer_words = 3;
        const std::vector<TaskItem> three = make_quote_items(spec, hay, tok, k);
        const TaskItem &a2 = two[0], &a3 = three[0];
        const size_t at = a3.context.find(a3.question);
        const long long n_words = std::count(a3.answer.begin(), a3.answer.end(), ' ') + 1;
        three_ok = three_ok && n_words <= 3 && a3.context.compare(at + a3.question.size(), a3.answer.size() + 1, " " + a3.answer) == 0 &&
                   three[1].answer == a3.answer;
        some_three = some_three || n_words == 3;
        same_questions = same_questions && a2.question == a3.question && a3.answer.rfind(a2.answer, 0) == 0;
    }
    check(three_ok && some_three && same_questions, "--answer-words 3: answers of up to three words (some of three), the same questions, "
                                                    "the two-word answers their start");
    bool exact = true, once = true, goes_on = true, control_ok = true, near_depth = true, at_line = true;
    std::string detail;
    std::vector<TaskItem> items;
    for (long long L : {300LL, 1237LL, 3000LL})
        for (double d : {0.0, 0.3, 0.5, 1.0}) {
            const std::vector<TaskItem> two = make_quote_items({TaskKind::Quote, L, d, 4, 77 + (uint64_t)L}, hay, tok, k);
            if (two.size() != 2) { exact = false; continue; }
            const TaskItem &q = two[0], &c = two[1];
            std::vector<int> ids = tok.encode(task_prompt_text(q));
            ids.insert(ids.begin(), tok.bos_id());
            exact = exact && (long long)ids.size() == L && q.task == "quote" && c.task == "quote-control";
            const size_t at = q.context.find(q.question);
            once = once && at != std::string::npos && q.context.find(q.question, at + 1) == std::string::npos;
            at_line = at_line && (at == 0 || q.context[at - 1] == '\n');
            goes_on = goes_on && q.context.compare(at + q.question.size(), q.answer.size() + 1, " " + q.answer) == 0;
            // The control is the context less that line and its newline.
            const size_t end = q.context.find('\n', at);
            control_ok = control_ok && c.question == q.question && c.answer == q.answer && c.length == q.length &&
                         c.context == q.context.substr(0, at) + q.context.substr(end + 1) && c.context.find(q.question) == std::string::npos;
            // needle_token is the line's first token: the line starts where depth x M says, give or
            // take the lines that cannot be quoted (short ones, or starts that recur).
            const long long M = L - 1 - (long long)tok.encode(q.question).size() - 1;
            const long long line_at = q.needle_token - 1, want = std::llround(d * (double)M);
            const long long slack = d == 1.0 ? 300 : 150;
            if (std::llabs(line_at - want) > slack || tok.decode(std::vector<int>(ids.begin() + q.needle_token, ids.end())).rfind(q.question, 0) != 0) {
                near_depth = false;
                detail = "L " + std::to_string(L) + " depth " + std::to_string(d) + ": line at token " + std::to_string(line_at) +
                         ", depth x M = " + std::to_string(want);
            }
            items.push_back(q), items.push_back(c);
        }
    check(exact, "quote items are exactly their length in tokens, each followed by its control");
    check(once && at_line, "a quote's question is the start of a line and occurs once in its context");
    check(goes_on, "the context goes on after the question as \" \" + the answer");
    check(control_ok, "the control is the same item with the quoted line taken out of the context");
    check(near_depth, "the quoted line lies at its depth", detail);
    const std::vector<TaskItem> a = make_quote_items({TaskKind::Quote, 2000, 0.5, 4, 9}, hay, tok, k),
                                b = make_quote_items({TaskKind::Quote, 2000, 0.5, 4, 9}, hay, tok, k),
                                c = make_quote_items({TaskKind::Quote, 2000, 0.5, 4, 10}, hay, tok, k);
    check(task_item_to_json(a[0], 9) == task_item_to_json(b[0], 9) && a[0].context != c[0].context, "the same seed gives the same quote item, another seed another");
    expect_fatal("a haystack with no line to quote", [&] { make_quote_items({TaskKind::Quote, 500, 0.5, 4, 1}, filler_haystack(tok, k, 5000), tok, k); },
                 {"no line to quote"});
    expect_fatal("a haystack too short for the length", [&] { make_quote_items({TaskKind::Quote, 1 << 20, 0.5, 4, 1}, hay, tok, k); },
                 {"--haystack", "fewer than", "lower --lengths"});

    // Scored: a copying reader answers every quote and no control; the report pairs them.
    for (size_t i = 0; i < items.size(); i++) items[i].line = (int)i + 1;
    const std::vector<TaskPrompt> prompts = tokenize_tasks(items, tok, TaskEvalOptions{4096, false, "quotes"});
    const std::vector<TaskOutcome> out = run_tasks(items, prompts, tok, tok.vocab_size(), 256,
                                                   [&](int B, int ch) { return std::make_unique<CopyReader>(tok, B, ch); },
                                                   [&](long long) { return 4; }, nullptr);
    int quotes = 0, quotes_right = 0, controls_right = 0;
    for (size_t i = 0; i < items.size(); i++) {
        const bool is_control = items[i].task == "quote-control";
        quotes += !is_control;
        (is_control ? controls_right : quotes_right) += out[i].correct;
    }
    check(quotes > 0 && quotes_right == quotes && controls_right == 0,
          "a reader that copies answers every quote (" + std::to_string(quotes_right) + " of " + std::to_string(quotes) +
              ") and no control (" + std::to_string(controls_right) + ")");
    const std::string table = format_task_report(summarize_tasks(items, out));
    check(table.find("quote against quote-control (%): | 300 100 vs 0") != std::string::npos, "the report shows a quote beside its control", table);
}

static int main_body() {
    Tokenizer tok;
    tok.load_serialized(trained_tokenizer());
    const PieceKinds k(tok);
    check(tok.encode("\n").size() == 1 && k.newline == tok.encode("\n")[0], "our tokenizer keeps '\\n' a piece of its own");
    test_items(tok, k);
    test_tokenizer_checks(tok);
    test_task_file();
    test_task_fields();
    test_output_prefix();
    test_scoring_rule();
    test_training_documents(tok, k);
    test_reading_documents(tok, k);
    test_random_passages(tok, k);
    test_far_copies(tok, k);
    test_first_copies(tok, k);
    test_batch_source();
    test_format_length();
    test_scoring(tok, k);
    test_quote_items(tok, k);
    return check_report();
}

int main() { return guarded_main([&] { return main_body(); }); }
