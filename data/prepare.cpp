// data_tool: builds and inspects the tokenized corpus. Run `data_tool --help`.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/encode_docs.h"
#include "core/io.h"
#include "core/output_path.h"
#include "data/shard.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "data/train_tokenizer.h"
#include "core/error.h"

static const char* kUsage =
    "usage: data_tool COMMAND [options]\n"
    "\n"
    "  prepare --raw DIR | --text PATH --out DIR [--vocab 8192] [--val-fraction 0.05] [--max-bytes N]\n"
    "      Train a SentencePiece BPE tokenizer on the raw corpus made by scripts/get_corpus.sh (--raw), or on\n"
    "      your own text (--text: a file, or a directory of files in any layout), and write DIR/tokenizer.model,\n"
    "      DIR/train.bin, DIR/val.bin, DIR/manifest.txt. --text keeps whole files for validation when there\n"
    "      are enough of them, else the last --val-fraction of each file's lines.\n"
    "      --max-bytes caps the raw text read (0 = all), for quick tests.\n"
    "  inspect FILE.bin [--tokenizer FILE.model] [--n 32]\n"
    "      Validate a shard and print its header, documents and first tokens.\n"
    "  tasks --data DIR | --tokenizer FILE.model [--haystack SRC] --task passkey[,multikey,multiquery]\n"
    "        --lengths 2K,8K,... [--depths 0,0.25,0.5,0.75,1] [--samples 1] [--needles 4] [--seed 1] --out FILE.jsonl\n"
    "      Retrieval items (data/task_file.h), each exactly its length in tokens with the asked needle at its\n"
    "      depth to the token. SRC: filler (the classic repeated sentences), a token shard (default DIR/val.bin:\n"
    "      held-out documents), a text file or a directory of text files. Lengths take K (1024) and M suffixes.\n"
    "  task-shard --data DIR [--haystack SRC] --doc-tokens 32768 --tokens N [--needle-every 1024]\n"
    "        [--passkey-every 4096] [--filler-fraction 0.1] [--lead-needle 0] [--lead-kind any] [--seed 1] --out FILE.bin\n"
    "      Training documents of --doc-tokens tokens (haystack: default DIR/train.bin) carrying many needles and\n"
    "      their questions, as a token shard that train --mix FILE.bin:FRACTION mixes with the corpus.\n"
    "      --lead-needle F: a fraction F of the documents open with a needle (depth 0), asked from anywhere later;\n"
    "      --lead-kind multikey: that needle is always a multi-key one (any: the pass key in pass-key documents).\n"
    "  encode --tokenizer FILE.model     text on stdin -> space-separated ids on stdout\n"
    "  decode --tokenizer FILE.model     space-separated ids on stdin -> text on stdout\n";

// ---- small argument helpers: every problem is one line naming the flag.

struct Args {
    std::string command;
    std::vector<std::string> rest;
    size_t i = 0;
    bool done() const { return i >= rest.size(); }
    std::string value(const std::string& flag) {
        if (i >= rest.size()) fatal("%s needs a value: see `data_tool --help`", flag.c_str());
        return rest[i++];
    }
    [[noreturn]] void unknown(const std::string& arg) const {
        fatal("unknown argument '%s' for `data_tool %s`: see `data_tool --help`", arg.c_str(),
              command.c_str());
    }
};

static long long parse_int(const std::string& flag, const std::string& s, long long lo, long long hi) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
        fatal("%s '%s' must be an integer in [%lld, %lld]", flag.c_str(), s.c_str(), lo, hi);
    return v;
}

static double parse_fraction(const std::string& flag, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v > 0.0 && v < 0.5))
        fatal("%s '%s' must be a number with 0 < value < 0.5", flag.c_str(), s.c_str());
    return v;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Cross-entropy (nats/token) of `val` under the add-one-smoothed unigram distribution of
// `train`: the loss of a model that ignores context, i.e. the bar a trained model must beat.
// Position 0 is skipped because the loader never uses the first token as a target.
static double unigram_baseline(const std::vector<uint32_t>& train, const std::vector<uint32_t>& val,
                               uint32_t vocab) {
    std::vector<uint64_t> counts(vocab, 0);
    for (uint32_t t : train) counts[t]++;
    const double denom = double(train.size()) + double(vocab);
    double nll = 0.0;
    for (size_t i = 1; i < val.size(); i++) nll -= std::log((double(counts[val[i]]) + 1.0) / denom);
    return val.size() > 1 ? nll / double(val.size() - 1) : 0.0;
}

// ---- prepare

static int cmd_prepare(Args& a) {
    std::string raw, text, out;
    int vocab = 8192;
    double val_fraction = 0.05;
    uint64_t max_bytes = 0;
    while (!a.done()) {
        const std::string flag = a.rest[a.i++];
        if (flag == "--raw") raw = a.value(flag);
        else if (flag == "--text") text = a.value(flag);
        else if (flag == "--out") out = a.value(flag);
        else if (flag == "--vocab") vocab = int(parse_int(flag, a.value(flag), 260, 1 << 20));
        else if (flag == "--val-fraction") val_fraction = parse_fraction(flag, a.value(flag));
        else if (flag == "--max-bytes") max_bytes = uint64_t(parse_int(flag, a.value(flag), 0, LLONG_MAX));
        else a.unknown(flag);
    }
    if (raw.empty() == text.empty())
        fatal("prepare needs --raw DIR (the output of scripts/get_corpus.sh) or --text PATH (a text file or a directory of them), one of them");
    if (out.empty()) fatal("prepare needs --out DIR");
    const auto t_start = std::chrono::steady_clock::now();

    if (!text.empty()) {  // the outputs must not land among the text they are made from
        namespace fs = std::filesystem;
        std::error_code e1, e2;
        const std::string t = fs::weakly_canonical(text, e1).string(), o = fs::weakly_canonical(out, e2).string();
        if (!e1 && !e2 && (o == t || o.rfind(t + "/", 0) == 0))
            fatal("--out %s lies inside --text %s: its files would become part of the text; choose --out elsewhere", out.c_str(), text.c_str());
    }
    int skipped = 0;
    SplitCorpus corpus = text.empty() ? read_raw_corpus(raw, val_fraction, max_bytes) : read_text_corpus(text, val_fraction, max_bytes, &skipped);
    const std::string source = text.empty() ? raw : text;
    std::printf("prepare: read %llu bytes from %s: %zu train docs, %zu val docs%s\n", (unsigned long long)corpus.bytes_read,
                source.c_str(), corpus.train.size(), corpus.val.size(),
                skipped ? (" (" + std::to_string(skipped) + " binary files skipped)").c_str() : "");

    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) fatal("--out %s: cannot create directory (%s)", out.c_str(), ec.message().c_str());

    // The tokenizer sees only training text, so validation stays unseen.
    std::string train_text;
    for (const Document& d : corpus.train) {
        train_text += d.text;
        if (!train_text.empty() && train_text.back() != '\n') train_text += '\n';
    }
    auto t0 = std::chrono::steady_clock::now();
    std::printf("prepare: training BPE tokenizer, vocab %d ...\n", vocab);
    std::fflush(stdout);
    const std::string model = train_bpe_tokenizer(train_text, vocab);
    train_text = std::string();
    const std::string model_path = out + "/tokenizer.model";
    write_file_atomic(model_path, model);
    std::printf("prepare: wrote %s in %.1fs\n", model_path.c_str(), seconds_since(t0));

    Tokenizer tok;
    tok.load_file(model_path);
    const uint32_t V = uint32_t(tok.vocab_size());
    if (tok.bos_id() != kBosId) fatal("%s: bos_id is %d, expected %d", model_path.c_str(), tok.bos_id(), kBosId);

    t0 = std::chrono::steady_clock::now();
    const EncodedDocs train = encode_documents(tok, corpus.train);
    const EncodedDocs val = encode_documents(tok, corpus.val);
    write_shard(out + "/val.bin", val.tokens, val.doc_starts, V);
    std::printf("prepare: encoded %zu train + %zu val tokens in %.1fs\n", train.tokens.size(),
                val.tokens.size(), seconds_since(t0));

    // Bytes per token counts text tokens only (BOS markers carry no text).
    auto bpt = [](const EncodedDocs& e) {
        const double n = double(e.tokens.size() - e.doc_starts.size());
        return n > 0 ? double(e.text_bytes) / n : 0.0;
    };
    auto longest_doc = [](const EncodedDocs& e) {
        uint64_t longest = 0;
        for (size_t d = 0; d < e.doc_starts.size(); d++)
            longest = std::max<uint64_t>(longest, (d + 1 < e.doc_starts.size() ? e.doc_starts[d + 1] : e.tokens.size()) -
                                                      e.doc_starts[d]);
        return longest;
    };
    const double baseline = unigram_baseline(train.tokens, val.tokens, V);
    std::ostringstream m;
    m << "# written by data_tool prepare; tokens include one BOS per document\n"
      << (text.empty() ? "raw_dir: " : "text: ") << source << "\n"
      << "raw_bytes_read: " << corpus.bytes_read << "\n"
      << "max_bytes: " << max_bytes << "\n"
      << "val_fraction: " << val_fraction << "\n"
      << "vocab_size: " << V << "\n"
      << "bos_id: " << tok.bos_id() << "\n"
      << "eos_id: " << tok.eos_id() << "\n"
      << "tokenizer_fnv1a64: " << std::hex << fnv1a64(model) << std::dec << "\n"
      << "train_docs: " << train.doc_starts.size() << "\n"
      << "train_tokens: " << train.tokens.size() << "\n"
      << "train_bytes: " << train.text_bytes << "\n"
      << "train_bytes_per_token: " << bpt(train) << "\n"
      << "val_docs: " << val.doc_starts.size() << "\n"
      << "val_tokens: " << val.tokens.size() << "\n"
      << "val_bytes: " << val.text_bytes << "\n"
      << "val_bytes_per_token: " << bpt(val) << "\n"
      << "val_longest_doc_tokens: " << longest_doc(val) << "\n"
      << "# cross-entropy (nats/token) of val.bin tokens 1.. under the add-one-smoothed\n"
      << "# unigram distribution of train.bin: a trained model's val loss must beat this\n"
      << "unigram_baseline_nats: " << baseline << "\n";
    write_file_atomic(out + "/manifest.txt", m.str());
    // train.bin goes last: make treats it as the target for all four files, so its presence
    // (and timestamp) must mean the others are complete too.
    write_shard(out + "/train.bin", train.tokens, train.doc_starts, V);
    std::printf("prepare: %.3f bytes/token, unigram baseline %.4f nats/token\n", bpt(train), baseline);
    std::printf("prepare: wrote %s/{tokenizer.model,train.bin,val.bin,manifest.txt} in %.1fs total\n",
                out.c_str(), seconds_since(t_start));
    return 0;
}

// ---- inspect

static int cmd_inspect(Args& a) {
    std::string file, tok_path;
    long long n_show = 32;
    while (!a.done()) {
        const std::string arg = a.rest[a.i++];
        if (arg == "--tokenizer") tok_path = a.value(arg);
        else if (arg == "--n") n_show = parse_int(arg, a.value(arg), 0, 1 << 20);
        else if (!arg.empty() && arg[0] == '-') a.unknown(arg);
        else if (file.empty()) file = arg;
        else a.unknown(arg);
    }
    if (file.empty()) fatal("inspect needs a shard file, e.g. `data_tool inspect corpus/train.bin`");
    const TokenShard s = read_shard(file);
    std::printf("file: %s\nversion: %u\ntoken_bytes: %u\nvocab_size: %u\nn_tokens: %llu\nn_docs: %llu\n",
                file.c_str(), kShardVersion, s.token_bytes, s.vocab_size,
                (unsigned long long)s.n_tokens(), (unsigned long long)s.n_docs());
    if (s.n_docs() > 0) {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t d = 0; d < s.n_docs(); d++) {
            const uint64_t end = d + 1 < s.n_docs() ? s.doc_starts[d + 1] : s.n_tokens();
            lo = std::min(lo, end - s.doc_starts[d]);
            hi = std::max(hi, end - s.doc_starts[d]);
        }
        std::printf("doc_tokens: min %llu, mean %.1f, max %llu\n", (unsigned long long)lo,
                    double(s.n_tokens()) / double(s.n_docs()), (unsigned long long)hi);
    }
    const size_t n = std::min<uint64_t>(uint64_t(n_show), s.n_tokens());
    std::vector<int> head(s.tokens.begin(), s.tokens.begin() + long(n));
    std::printf("first %zu tokens:", n);
    for (int t : head) std::printf(" %d", t);
    std::printf("\n");
    if (!tok_path.empty()) {
        Tokenizer tok;
        tok.load_file(tok_path);
        if (uint32_t(tok.vocab_size()) != s.vocab_size)
            fatal("--tokenizer %s has vocab %d but %s has vocab %u: use the tokenizer.model made "
                  "with this shard", tok_path.c_str(), tok.vocab_size(), file.c_str(), s.vocab_size);
        std::printf("decoded: %s\n", tok.decode(head).c_str());
    }
    return 0;
}

// ---- tasks and task-shard: retrieval evaluation items and training documents (data/tasks.h)

// "2048", "2K" (2048), "1M" (1048576).
static long long parse_tokens(const std::string& flag, const std::string& s) {
    if (s.empty()) fatal("%s: an empty length", flag.c_str());
    const char unit = s.back();
    const long long mult = unit == 'K' || unit == 'k' ? 1024 : unit == 'M' || unit == 'm' ? 1048576 : 1;
    const long long v = parse_int(flag, mult == 1 ? s : s.substr(0, s.size() - 1), 1, (1LL << 28) / mult);
    return v * mult;
}

static std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, ',');) out.push_back(item);
    if (out.empty()) out.push_back("");
    return out;
}

static double parse_depth(const std::string& flag, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= 0.0 && v <= 1.0)) fatal("%s '%s': a depth is a number in [0, 1]", flag.c_str(), s.c_str());
    return v;
}

// The first value of a comma list given twice (1K and 1024 are the same length), or none.
template <typename T>
static void refuse_repeats(const char* flag, const std::vector<T>& values) {
    for (size_t i = 0; i < values.size(); i++)
        for (size_t j = 0; j < i; j++)
            if (values[i] == values[j]) fatal("%s lists entry %zu again as entry %zu: give each once", flag, j + 1, i + 1);
}

// --data DIR gives DIR/tokenizer.model; --tokenizer names one.
static Tokenizer load_task_tokenizer(const std::string& data, const std::string& tokenizer_path) {
    if (data.empty() && tokenizer_path.empty()) fatal("give --data DIR (a prepared corpus) or --tokenizer FILE.model");
    Tokenizer tok;
    tok.load_file(tokenizer_path.empty() ? data + "/tokenizer.model" : tokenizer_path);
    return tok;
}

// A seed per item from the run's seed and the item's place in the grid: the same item whatever
// else is asked for, in any order, on any number of threads.
static uint64_t item_seed(uint64_t seed, int task, long long length, int depth_index, int sample) {
    SplitMix64 r(seed);
    uint64_t h = r.next();
    for (uint64_t v : {(uint64_t)task, (uint64_t)length, (uint64_t)depth_index, (uint64_t)sample}) h = SplitMix64(h ^ v).next();
    return h;
}

static int cmd_tasks(Args& a) {
    std::string data, tokenizer_path, haystack, out, tasks = "passkey", lengths, depths = "0,0.25,0.5,0.75,1";
    long long samples = 1, needles = 4, seed = 1;
    bool needles_given = false;
    while (!a.done()) {
        const std::string flag = a.rest[a.i++];
        if (flag == "--data") data = a.value(flag);
        else if (flag == "--tokenizer") tokenizer_path = a.value(flag);
        else if (flag == "--haystack") haystack = a.value(flag);
        else if (flag == "--task") tasks = a.value(flag);
        else if (flag == "--lengths") lengths = a.value(flag);
        else if (flag == "--depths") depths = a.value(flag);
        else if (flag == "--samples") samples = parse_int(flag, a.value(flag), 1, 1 << 20);
        else if (flag == "--needles") needles = parse_int(flag, a.value(flag), 1, 1024), needles_given = true;
        else if (flag == "--seed") seed = parse_int(flag, a.value(flag), 0, LLONG_MAX);
        else if (flag == "--out") out = a.value(flag);
        else a.unknown(flag);
    }
    if (out.empty()) fatal("tasks needs --out FILE.jsonl");
    check_output_path(out, OutputKind::TaskFile, "--out");  // an earlier task file may be overwritten
    if (lengths.empty()) fatal("tasks needs --lengths, e.g. --lengths 2K,8K,32K");
    if (haystack.empty()) {
        if (data.empty()) fatal("tasks needs --haystack SRC (filler, a token shard, a text file or a directory) or --data DIR");
        haystack = data + "/val.bin";
    }
    std::vector<TaskKind> kinds;
    for (const std::string& t : split_commas(tasks)) kinds.push_back(parse_task_kind(t));
    std::vector<long long> lens;
    for (const std::string& l : split_commas(lengths)) lens.push_back(parse_tokens("--lengths", l));
    std::vector<double> ds;
    for (const std::string& d : split_commas(depths)) ds.push_back(parse_depth("--depths", d));
    // A repeated task or length repeats its items exactly (the same seeds), and a repeated depth
    // doubles that cell's weight: either skews the scores without a word, so it is refused.
    refuse_repeats("--task", kinds);
    refuse_repeats("--lengths", lens);
    refuse_repeats("--depths", ds);
    if (needles_given && std::count(kinds.begin(), kinds.end(), TaskKind::Passkey) == (long)kinds.size())
        fatal("--needles has no effect on passkey items (one needle each): drop it, or add multikey or multiquery to --task");
    const Tokenizer tok = load_task_tokenizer(data, tokenizer_path);
    const PieceKinds kinds_of_pieces(tok);
    const Haystack hay = load_haystack(haystack, tok, kinds_of_pieces, *std::max_element(lens.begin(), lens.end()));

    struct Cell { TaskSpec spec; int sample; };
    std::vector<Cell> cells;
    for (size_t t = 0; t < kinds.size(); t++)
        for (long long L : lens)
            for (size_t d = 0; d < ds.size(); d++)
                for (int s = 0; s < samples; s++) {
                    TaskSpec spec{kinds[t], L, ds[d], (int)needles, item_seed((uint64_t)seed, (int)kinds[t], L, (int)d, s)};
                    cells.push_back({spec, s});
                }
    std::vector<std::vector<TaskItem>> made(cells.size());
    std::vector<std::string> errors(cells.size());
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic)
    for (long long i = 0; i < (long long)cells.size(); i++) {
        try {
            made[i] = make_task_items(cells[i].spec, hay, tok, kinds_of_pieces);
        } catch (const FatalError& e) {
            errors[i] = e.what();
        }
    }
    for (const std::string& e : errors)
        if (!e.empty()) fatal("%s", e.c_str());
    std::string text;
    size_t n = 0;
    for (size_t i = 0; i < cells.size(); i++)
        for (const TaskItem& it : made[i]) text += task_item_to_json(it, cells[i].spec.seed) + "\n", n++;
    write_file_atomic(out, text);
    std::printf("tasks: wrote %zu items (%zu tasks x %zu lengths x %zu depths x %lld samples) to %s in %.1fs; haystack %s (%zu "
                "tokens)\n", n, kinds.size(), lens.size(), ds.size(), samples, out.c_str(), seconds_since(t0), hay.source.c_str(),
                hay.tokens.size());
    return 0;
}

static int cmd_task_shard(Args& a) {
    std::string data, haystack, out;
    long long doc_tokens = 32768, tokens = 0, seed = 1;
    double needle_every = 1024, passkey_every = 4096, filler_fraction = 0.1, lead_needle = 0;
    std::string lead_kind = "any";
    auto positive = [&](const std::string& flag, const std::string& s, double lo) {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(v >= lo) || !std::isfinite(v)) fatal("%s '%s' must be a number >= %g", flag.c_str(), s.c_str(), lo);
        return v;
    };
    while (!a.done()) {
        const std::string flag = a.rest[a.i++];
        if (flag == "--data") data = a.value(flag);
        else if (flag == "--haystack") haystack = a.value(flag);
        else if (flag == "--doc-tokens") doc_tokens = parse_tokens(flag, a.value(flag));
        else if (flag == "--tokens") tokens = parse_tokens(flag, a.value(flag));
        else if (flag == "--needle-every") needle_every = positive(flag, a.value(flag), 16);
        else if (flag == "--passkey-every") passkey_every = positive(flag, a.value(flag), 16);
        else if (flag == "--filler-fraction") filler_fraction = positive(flag, a.value(flag), 0);
        else if (flag == "--lead-needle") lead_needle = positive(flag, a.value(flag), 0);
        else if (flag == "--lead-kind") lead_kind = a.value(flag);
        else if (flag == "--seed") seed = parse_int(flag, a.value(flag), 0, LLONG_MAX);
        else if (flag == "--out") out = a.value(flag);
        else a.unknown(flag);
    }
    if (data.empty()) fatal("task-shard needs --data DIR (a prepared corpus: its tokenizer, and train.bin as the haystack)");
    if (out.empty()) fatal("task-shard needs --out FILE.bin");
    // An earlier task shard may be overwritten, never a corpus's train.bin or val.bin.
    check_output_path(out, OutputKind::TokenShard, "--out");
    if (tokens < doc_tokens) fatal("--tokens %lld is less than one document of --doc-tokens %lld", tokens, doc_tokens);
    if (doc_tokens < 256) fatal("--doc-tokens %lld: a training document needs at least 256 tokens", doc_tokens);
    if (filler_fraction > 1) fatal("--filler-fraction %g must be in [0, 1]", filler_fraction);
    if (lead_needle > 1) fatal("--lead-needle %g must be in [0, 1] (the fraction of documents that open with a needle)", lead_needle);
    if (lead_kind != "any" && lead_kind != "multikey") fatal("--lead-kind must be any or multikey (got '%s')", lead_kind.c_str());
    if (lead_kind != "any" && lead_needle == 0) fatal("--lead-kind %s has no effect without --lead-needle F > 0: give both, or drop it", lead_kind.c_str());
    if (haystack.empty()) haystack = data + "/train.bin";
    const Tokenizer tok = load_task_tokenizer(data, "");
    const PieceKinds kinds_of_pieces(tok);
    const Haystack text = load_haystack(haystack, tok, kinds_of_pieces, doc_tokens);
    const Haystack filler = filler_haystack(tok, kinds_of_pieces, doc_tokens);
    const TrainDocSpec spec{(int)doc_tokens, needle_every, passkey_every, lead_needle, lead_kind == "multikey"};
    const long long n_docs = (tokens + doc_tokens - 1) / doc_tokens;
    std::vector<std::vector<int>> docs(n_docs);
    std::vector<std::string> errors(n_docs);
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic)
    for (long long d = 0; d < n_docs; d++) {
        try {
            SplitMix64 rng(item_seed((uint64_t)seed, 99, doc_tokens, 0, (int)d));
            const bool use_filler = (double)(rng.next() >> 11) * 0x1.0p-53 < filler_fraction;
            docs[d] = make_training_document(spec, use_filler ? filler : text, tok, kinds_of_pieces, rng);
        } catch (const FatalError& e) {
            errors[d] = e.what();
        }
    }
    for (const std::string& e : errors)
        if (!e.empty()) fatal("%s", e.c_str());
    std::vector<uint32_t> all;
    std::vector<uint64_t> starts;
    all.reserve((size_t)(n_docs * doc_tokens));
    for (const std::vector<int>& d : docs) {
        starts.push_back(all.size());
        all.insert(all.end(), d.begin(), d.end());
    }
    write_shard(out, all, starts, (uint32_t)tok.vocab_size());
    std::printf("task-shard: wrote %lld documents of %lld tokens (%zu tokens; haystack %s, %.0f%% filler, %.0f%% opening with a needle) to %s in %.1fs\n",
                n_docs, doc_tokens, all.size(), text.source.c_str(), 100 * filler_fraction, 100 * lead_needle, out.c_str(), seconds_since(t0));
    return 0;
}

// ---- encode / decode (used by tests and for quick manual checks)

static std::string tokenizer_flag(Args& a) {
    std::string path;
    while (!a.done()) {
        const std::string arg = a.rest[a.i++];
        if (arg == "--tokenizer") path = a.value(arg);
        else a.unknown(arg);
    }
    if (path.empty()) fatal("%s needs --tokenizer FILE.model", a.command.c_str());
    return path;
}

static std::string read_stdin() {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

static int cmd_encode(Args& a) {
    Tokenizer tok;
    tok.load_file(tokenizer_flag(a));
    const std::vector<int> ids = tok.encode(read_stdin());
    for (size_t i = 0; i < ids.size(); i++) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
}

static int cmd_decode(Args& a) {
    Tokenizer tok;
    tok.load_file(tokenizer_flag(a));
    std::istringstream in(read_stdin());
    std::vector<int> ids;
    std::string word;
    while (in >> word) ids.push_back(int(parse_int("token id", word, 0, tok.vocab_size() - 1)));
    const std::string text = tok.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

static int main_body(int argc, char** argv) {
    Args a;
    if (argc < 2) fatal("missing command: see `data_tool --help`");
    a.command = argv[1];
    a.rest.assign(argv + 2, argv + argc);
    if (a.command == "--help" || a.command == "-h" || a.command == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    for (const std::string& arg : a.rest)
        if (arg == "--help" || arg == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
    if (a.command == "prepare") return cmd_prepare(a);
    if (a.command == "inspect") return cmd_inspect(a);
    if (a.command == "tasks") return cmd_tasks(a);
    if (a.command == "task-shard") return cmd_task_shard(a);
    if (a.command == "encode") return cmd_encode(a);
    if (a.command == "decode") return cmd_decode(a);
    fatal("unknown command '%s': see `data_tool --help`", a.command.c_str());
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
