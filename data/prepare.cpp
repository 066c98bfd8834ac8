// data_tool: builds and inspects the tokenized corpus. Run `data_tool --help`.
// Each command reads as its phases: its flags (core/flags.h, checked at once), what it reads
// (text, a shard, a tokenizer, a haystack), what it makes (a tokenizer, tokens, items,
// documents), what it writes.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/encode_docs.h"
#include "core/io.h"
#include "core/output_path.h"
#include "core/run_lock.h"
#include "data/shard.h"
#include "core/lists.h"
#include "data/quote_tasks.h"
#include "data/tasks.h"
#include "data/tokenizer.h"
#include "data/train_tokenizer.h"
#include "core/error.h"
#include "core/flags.h"

static const char* kUsage =
    "usage: data_tool COMMAND [options]\n"
    "\n"
    "  prepare --raw DIR | --text PATH --out DIR [--vocab 8192] [--val-fraction 0.05] [--max-bytes N]\n"
    "      Train a SentencePiece BPE tokenizer on the raw corpus made by scripts/get_corpus.sh (--raw), or on\n"
    "      your own text (--text: a file, or a directory of files in any layout), and write DIR/tokenizer.model,\n"
    "      DIR/train.bin, DIR/val.bin, DIR/manifest.txt. --text keeps whole files for validation when there\n"
    "      are enough of them, else the last --val-fraction of each file's lines. --text files must be UTF-8 (one\n"
    "      that is not is refused, naming it and the byte: the tokenizer would read such bytes as U+FFFD).\n"
    "      The new corpus is made in DIR/.longnet-prepare and swapped in whole: an interrupted prepare leaves\n"
    "      the corpus that was in DIR.\n"
    "      --max-bytes caps the raw text read (0 = all), for quick tests.\n"
    "  inspect FILE.bin [--tokenizer FILE.model] [--n 32]\n"
    "      Validate a shard and print its header, documents and first tokens.\n"
    "  tasks --data DIR | --tokenizer FILE.model [--haystack SRC] --task passkey[,multikey,multiquery,quote]\n"
    "        --lengths 2K,8K,... [--depths 0,0.25,0.5,0.75,1] [--samples 1] [--needles 4] [--answer-words 2] [--seed 1]\n"
    "        --out FILE.jsonl\n"
    "      Retrieval items (data/task_file.h), each exactly its length in tokens with the asked needle at its\n"
    "      depth to the token. SRC: filler (the classic repeated sentences), a token shard (default DIR/val.bin:\n"
    "      held-out documents), a text file or a directory of text files. Lengths take K (1024) and M suffixes.\n"
    "      quote: the first part of one of the haystack's own lines at the depth, answered by its next word or\n"
    "      two (--answer-words: up to N words); each comes with its control (task quote-control: the same item,\n"
    "      that line taken out).\n"
    "  task-shard --data DIR [--haystack SRC] --doc-tokens 32768 --tokens N [--needle-every 1024]\n"
    "        [--passkey-every 4096] [--filler-fraction 0.1] [--lead-needle 0] [--lead-kind any] [--quote-every 0]\n"
    "        [--repeat-every 0] [--random-every 0] [--repeat-tokens 256] [--copy-min-distance 0] [--copy-first-one-in 8]\n"
    "        [--copy-first-tokens 0] [--seed 1] --out FILE.bin\n"
    "      Training documents of --doc-tokens tokens (haystack: default DIR/train.bin) carrying many needles and\n"
    "      their questions, as a token shard that train --mix FILE.bin:FRACTION mixes with the corpus.\n"
    "      --lead-needle F: a fraction F of the documents open with a needle (depth 0), asked from anywhere later;\n"
    "      --lead-kind multikey: that needle is always a multi-key one (any: the pass key in pass-key documents).\n"
    "      --quote-every N: an earlier whole line of the document again, as a line of its own, per N tokens;\n"
    "      --repeat-every N: a passage of 16 to --repeat-tokens earlier tokens again per N tokens (0: none; from\n"
    "      near, far and the document's first lines, never a needle or question); --random-every N: 16 to\n"
    "      --repeat-tokens words drawn at random, written twice, the second time later, per N tokens;\n"
    "      --copy-min-distance D: every copy's source at least D tokens back (0: anywhere); --copy-first-one-in N:\n"
    "      one quote and one repeated passage in N from the document's first lines (1: every one), those of the\n"
    "      first 4 lines and 64 tokens, or, --copy-first-tokens T, any starting in the first T tokens.\n"
    "  encode --tokenizer FILE.model     text on stdin -> space-separated ids on stdout\n"
    "  decode --tokenizer FILE.model     space-separated ids on stdin -> text on stdout\n";

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

// ---- flags (core/flags.h): each command declares its flags and reads them in one call; an
// unknown flag, a missing value or a bad number is one line naming the flag.

// A command's arguments after its name, parsed into the flags declared on f. Numbers are read as
// strings and checked afterwards (parse_int and friends), so each error gives the range.
// positional: the command's one bare argument (inspect FILE); every other flag of such a command
// takes a value.
static void parse_flags(Flags& f, const std::string& command, const std::vector<std::string>& args,
                        std::string* positional = nullptr) {
    std::vector<std::string> kept = {"data_tool " + command};
    for (size_t i = 0; i < args.size(); i++) {
        const std::string& arg = args[i];
        if (positional && arg.rfind('-', 0) != 0) {
            if (!positional->empty())
                fatal("unexpected argument '%s': `data_tool %s` takes one file (%s)", arg.c_str(), command.c_str(), positional->c_str());
            *positional = arg;
            continue;
        }
        kept.push_back(arg);
        if (positional && arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos && i + 1 < args.size()) kept.push_back(args[++i]);
    }
    std::vector<char*> argv;
    for (std::string& s : kept) argv.push_back(&s[0]);
    f.parse((int)argv.size(), argv.data());
}

// ---- prepare: flags, read the text, train the tokenizer, tokenize, write the corpus

struct PrepareOptions {
    std::string raw, text, out;
    int vocab = 8192;
    double val_fraction = 0.05;
    uint64_t max_bytes = 0;
    const std::string& source() const { return text.empty() ? raw : text; }
};

// One spelling of a path, for comparing two: absolute (weakly_canonical leaves a relative path
// none of which exists relative), links resolved as far as it exists, no trailing slash ("dir/"
// and "dir" are one folder).
static std::string one_spelling(const std::string& path, std::error_code& ec) {
    const std::filesystem::path abs = std::filesystem::absolute(path, ec);
    if (ec) return path;
    std::string s = std::filesystem::weakly_canonical(abs, ec).string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

static PrepareOptions prepare_flags(const std::vector<std::string>& args) {
    PrepareOptions o;
    std::string vocab = "8192", val_fraction = "0.05", max_bytes = "0";
    Flags f("data_tool prepare", "the tokenizer and token shards of a corpus");
    f.add_string("raw", &o.raw, "the raw corpus made by scripts/get_corpus.sh");
    f.add_string("text", &o.text, "your own text: a file, or a directory of files in any layout");
    f.add_string("out", &o.out, "where tokenizer.model, train.bin, val.bin and manifest.txt go");
    f.add_string("vocab", &vocab, "the tokenizer's vocabulary");
    f.add_string("val-fraction", &val_fraction, "the share of the text held out for validation");
    f.add_string("max-bytes", &max_bytes, "cap on the raw text read (0: all)");
    parse_flags(f, "prepare", args);
    o.vocab = int(parse_int("--vocab", vocab, 260, 1 << 20));
    o.val_fraction = parse_fraction("--val-fraction", val_fraction);
    o.max_bytes = uint64_t(parse_int("--max-bytes", max_bytes, 0, LLONG_MAX));
    if (o.raw.empty() == o.text.empty())
        fatal("prepare needs --raw DIR (the output of scripts/get_corpus.sh) or --text PATH (a text file or a directory of them), one of them");
    if (o.out.empty()) fatal("prepare needs --out DIR");
    if (!o.text.empty()) {  // the outputs must not land among the text they are made from
        std::error_code e1, e2;
        const std::string t = one_spelling(o.text, e1), out = one_spelling(o.out, e2);
        if (!e1 && !e2 && (out == t || t == "/" || out.rfind(t + "/", 0) == 0))
            fatal("--out %s lies inside --text %s: its files would become part of the text; choose --out elsewhere", o.out.c_str(), o.text.c_str());
    }
    struct stat st;
    if (::stat(o.out.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
        fatal("--out %s is an existing file, not a folder: give a folder for the corpus", o.out.c_str());
    return o;
}

static SplitCorpus read_corpus(const PrepareOptions& o) {
    int skipped = 0;
    SplitCorpus corpus = o.text.empty() ? read_raw_corpus(o.raw, o.val_fraction, o.max_bytes)
                                        : read_text_corpus(o.text, o.val_fraction, o.max_bytes, &skipped);
    std::printf("prepare: read %llu bytes from %s: %zu train docs, %zu val docs%s\n", (unsigned long long)corpus.bytes_read,
                o.source().c_str(), corpus.train.size(), corpus.val.size(),
                skipped ? (" (" + std::to_string(skipped) + " binary files skipped)").c_str() : "");
    return corpus;
}

// Test hook: LNGPT_PREPARE_KILL_AT=PHASE ends prepare by SIGKILL right after PHASE (read,
// tokenizer, val, manifest, train: the step that made that file; swap: the swap's first
// rename), as a machine that goes down would; PHASE:TERM sends SIGTERM instead, as a user would.
static void prepare_test_hook(const char* phase) {
    const char* env = std::getenv("LNGPT_PREPARE_KILL_AT");
    if (!env) return;
    const std::string s = env, at = s.substr(0, s.find(':'));
    if (at != phase) return;
    std::fflush(stdout);
    ::raise(s.size() > at.size() && s.substr(at.size()) == ":TERM" ? SIGTERM : SIGKILL);
}

// The new corpus is made whole in OUT/.longnet-prepare, then swapped in: an interrupted prepare
// leaves the corpus that was in OUT as it was (never a new tokenizer.model beside an old
// train.bin, which no reader could use). The swap removes the old train.bin first and renames the
// new train.bin last, under SignalsHeld: only a kill -9 or a crash within its few renames can
// stop it half done, and then OUT has no train.bin (no corpus, which make and the readers say,
// and the next prepare makes) rather than a mix. SIGTERM, SIGINT and SIGHUP before the swap
// remove the folder (core/run_lock.h); a folder left by a kill -9 is removed by the next prepare.
class CorpusStage {
  public:
    // tokenizer.model, val.bin and manifest.txt, then train.bin: the swap's order.
    static constexpr const char* kFiles[4] = {"tokenizer.model", "val.bin", "manifest.txt", "train.bin"};

    explicit CorpusStage(const std::string& out) : out_(out), dir_(out + "/.longnet-prepare") {
        remove_stale();
        if (::mkdir(dir_.c_str(), 0755) != 0)
            fatal("--out %s: cannot create %s (%s): check the permissions of %s", out_.c_str(), dir_.c_str(), std::strerror(errno),
                  out_.c_str());
        for (const char* f : kFiles)
            for (const char* tail : {"", ".tmp"}) slots_.push_back(remove_on_signal(path(f) + tail));
        slots_.push_back(remove_on_signal(dir_, /*directory=*/true));
    }
    CorpusStage(const CorpusStage&) = delete;
    CorpusStage& operator=(const CorpusStage&) = delete;
    ~CorpusStage() {
        for (int s : slots_) keep_on_signal(s);
        if (kept_) return;
        for (const char* f : kFiles)
            for (const char* tail : {"", ".tmp"}) ::unlink((path(f) + tail).c_str());
        ::rmdir(dir_.c_str());
    }

    std::string path(const char* name) const { return dir_ + "/" + name; }

    void swap_in() {
        SignalsHeld held;
        const std::string train = out_ + "/train.bin";
        if (::unlink(train.c_str()) != 0 && errno != ENOENT)
            fatal("--out %s: cannot replace %s (%s): check the permissions of %s", out_.c_str(), train.c_str(), std::strerror(errno),
                  out_.c_str());
        for (const char* f : kFiles) {
            const std::string to = out_ + "/" + f;
            if (::rename(path(f).c_str(), to.c_str()) != 0) {
                kept_ = true;  // what is left of the new corpus stays for the hand move the message asks for
                fatal("--out %s: cannot move %s to %s (%s): the new corpus is left in %s; move its files into %s by hand, train.bin "
                      "last", out_.c_str(), path(f).c_str(), to.c_str(), std::strerror(errno), dir_.c_str(), out_.c_str());
            }
            if (f == kFiles[0]) prepare_test_hook("swap");
        }
        kept_ = true;
        ::rmdir(dir_.c_str());
        if (!fsync_parent_dir(train)) fatal("cannot sync %s (%s)", out_.c_str(), std::strerror(errno));
    }

  private:
    // A folder of that name left by a killed prepare holds only files it writes: removed. Anything
    // else there is not ours: refused, left as it is.
    void remove_stale() {
        struct stat st;
        if (::lstat(dir_.c_str(), &st) != 0) return;
        if (!S_ISDIR(st.st_mode))
            fatal("--out %s: %s, where prepare builds the new corpus, exists and is not a folder: move it away", out_.c_str(), dir_.c_str());
        std::vector<std::string> names;
        std::error_code ec;
        for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            bool known = false;
            for (const char* f : kFiles) known = known || name == f || name == std::string(f) + ".tmp";
            if (!known || it->is_symlink() || !it->is_regular_file())
                fatal("--out %s: %s holds %s, which prepare does not write: move that folder away (it is left as it is)", out_.c_str(),
                      dir_.c_str(), name.c_str());
            names.push_back(name);
        }
        if (ec) fatal("--out %s: cannot list %s (%s): move it away", out_.c_str(), dir_.c_str(), ec.message().c_str());
        for (const std::string& n : names) ::unlink((dir_ + "/" + n).c_str());
        if (::rmdir(dir_.c_str()) != 0)
            fatal("--out %s: cannot remove %s, left by an interrupted prepare (%s): remove it", out_.c_str(), dir_.c_str(), std::strerror(errno));
        std::printf("prepare: removed %s, left by an interrupted prepare\n", dir_.c_str());
    }

    std::string out_, dir_;
    std::vector<int> slots_;
    bool kept_ = false;  // swapped in, or left for the user
};

// Trains the tokenizer on the training documents only (validation stays unseen), writes it to
// model_path and returns the model's bytes.
static std::string train_corpus_tokenizer(const PrepareOptions& o, const SplitCorpus& corpus, const std::string& model_path) {
    std::string train_text;
    for (const Document& d : corpus.train) {
        train_text += d.text;
        if (!train_text.empty() && train_text.back() != '\n') train_text += '\n';
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("prepare: training BPE tokenizer, vocab %d ...\n", o.vocab);
    std::fflush(stdout);
    const std::string model = train_bpe_tokenizer(train_text, o.vocab);
    write_file_atomic(model_path, model);
    std::printf("prepare: trained the tokenizer in %.1fs\n", seconds_since(t0));
    return model;
}

// Bytes per token counts text tokens only (BOS markers carry no text).
static double bytes_per_token(const EncodedDocs& e) {
    const double n = double(e.tokens.size() - e.doc_starts.size());
    return n > 0 ? double(e.text_bytes) / n : 0.0;
}

static uint64_t longest_doc(const EncodedDocs& e) {
    uint64_t longest = 0;
    for (size_t d = 0; d < e.doc_starts.size(); d++)
        longest = std::max<uint64_t>(longest, (d + 1 < e.doc_starts.size() ? e.doc_starts[d + 1] : e.tokens.size()) - e.doc_starts[d]);
    return longest;
}

static std::string manifest_text(const PrepareOptions& o, uint64_t bytes_read, const Tokenizer& tok, const std::string& model,
                                 const EncodedDocs& train, const EncodedDocs& val, double baseline) {
    std::ostringstream m;
    m << "# written by data_tool prepare; tokens include one BOS per document\n"
      << (o.text.empty() ? "raw_dir: " : "text: ") << o.source() << "\n"
      << "raw_bytes_read: " << bytes_read << "\n"
      << "max_bytes: " << o.max_bytes << "\n"
      << "val_fraction: " << o.val_fraction << "\n"
      << "vocab_size: " << tok.vocab_size() << "\n"
      << "bos_id: " << tok.bos_id() << "\n"
      << "eos_id: " << tok.eos_id() << "\n"
      << "tokenizer_fnv1a64: " << std::hex << fnv1a64(model) << std::dec << "\n"
      << "train_docs: " << train.doc_starts.size() << "\n"
      << "train_tokens: " << train.tokens.size() << "\n"
      << "train_bytes: " << train.text_bytes << "\n"
      << "train_bytes_per_token: " << bytes_per_token(train) << "\n"
      << "val_docs: " << val.doc_starts.size() << "\n"
      << "val_tokens: " << val.tokens.size() << "\n"
      << "val_bytes: " << val.text_bytes << "\n"
      << "val_bytes_per_token: " << bytes_per_token(val) << "\n"
      << "val_longest_doc_tokens: " << longest_doc(val) << "\n"
      << "# cross-entropy (nats/token) of val.bin tokens 1.. under the add-one-smoothed\n"
      << "# unigram distribution of train.bin: a trained model's val loss must beat this\n"
      << "unigram_baseline_nats: " << baseline << "\n";
    return m.str();
}

static int cmd_prepare(const std::vector<std::string>& args) {
    const PrepareOptions o = prepare_flags(args);
    OutputLock lock;  // one writer per --out (OUT.longnet-lock beside the folder)
    lock.acquire(o.out, "--out");
    const auto t_start = std::chrono::steady_clock::now();
    const SplitCorpus corpus = read_corpus(o);
    prepare_test_hook("read");
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) fatal("--out %s: cannot create directory (%s)", o.out.c_str(), ec.message().c_str());
    CorpusStage stage(o.out);
    const std::string model = train_corpus_tokenizer(o, corpus, stage.path("tokenizer.model"));
    prepare_test_hook("tokenizer");
    Tokenizer tok;
    tok.load_file(stage.path("tokenizer.model"));
    const uint32_t V = uint32_t(tok.vocab_size());
    if (tok.bos_id() != kBosId) fatal("the new tokenizer's bos_id is %d, expected %d", tok.bos_id(), kBosId);

    const auto t0 = std::chrono::steady_clock::now();
    const EncodedDocs train = encode_documents(tok, corpus.train);
    const EncodedDocs val = encode_documents(tok, corpus.val);
    write_shard(stage.path("val.bin"), val.tokens, val.doc_starts, V, tok.fingerprint());
    prepare_test_hook("val");
    std::printf("prepare: encoded %zu train + %zu val tokens in %.1fs\n", train.tokens.size(), val.tokens.size(), seconds_since(t0));

    const double baseline = unigram_baseline(train.tokens, val.tokens, V);
    write_file_atomic(stage.path("manifest.txt"), manifest_text(o, corpus.bytes_read, tok, model, train, val, baseline));
    prepare_test_hook("manifest");
    write_shard(stage.path("train.bin"), train.tokens, train.doc_starts, V, tok.fingerprint());
    prepare_test_hook("train");
    // train.bin arrives last: make treats it as the target for all four files, so its presence
    // (and timestamp) must mean the others are complete too.
    stage.swap_in();
    std::printf("prepare: %.3f bytes/token, unigram baseline %.4f nats/token\n", bytes_per_token(train), baseline);
    std::printf("prepare: wrote %s/{tokenizer.model,train.bin,val.bin,manifest.txt} in %.1fs total\n", o.out.c_str(),
                seconds_since(t_start));
    return 0;
}

// ---- inspect: flags, read the shard, print its header, documents and first tokens

static void print_doc_lengths(const TokenShard& s) {
    if (s.n_docs() == 0) return;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t d = 0; d < s.n_docs(); d++) {
        const uint64_t end = d + 1 < s.n_docs() ? s.doc_starts[d + 1] : s.n_tokens();
        lo = std::min(lo, end - s.doc_starts[d]);
        hi = std::max(hi, end - s.doc_starts[d]);
    }
    std::printf("doc_tokens: min %llu, mean %.1f, max %llu\n", (unsigned long long)lo, double(s.n_tokens()) / double(s.n_docs()),
                (unsigned long long)hi);
}

static int cmd_inspect(const std::vector<std::string>& args) {
    std::string file, tok_path, n_text = "32";
    Flags f("data_tool inspect", "a token shard's header, documents and first tokens");
    f.add_string("tokenizer", &tok_path, "decode the first tokens with this tokenizer");
    f.add_string("n", &n_text, "how many tokens to show");
    parse_flags(f, "inspect", args, &file);
    const long long n_show = parse_int("--n", n_text, 0, 1 << 20);
    if (file.empty()) fatal("inspect needs a shard file, e.g. `data_tool inspect corpus/train.bin`");

    const TokenShard s = read_shard(file);
    std::printf("file: %s\nversion: %u\n", file.c_str(), s.version);
    if (s.version >= 2) std::printf("tokenizer: %016llx\n", (unsigned long long)s.tokenizer_fingerprint);
    std::printf("token_bytes: %u\nvocab_size: %u\nn_tokens: %llu\nn_docs: %llu\n", s.token_bytes, s.vocab_size, (unsigned long long)s.n_tokens(), (unsigned long long)s.n_docs());
    print_doc_lengths(s);
    const size_t n = std::min<uint64_t>(uint64_t(n_show), s.n_tokens());
    const std::vector<int> head(s.tokens.begin(), s.tokens.begin() + long(n));
    std::printf("first %zu tokens:", n);
    for (int t : head) std::printf(" %d", t);
    std::printf("\n");
    if (tok_path.empty()) return 0;
    Tokenizer tok;
    tok.load_file(tok_path);
    require_shard_tokenizer(s, tok.fingerprint(), (uint32_t)tok.vocab_size(), "--tokenizer " + tok_path, file,
                            "use the tokenizer.model made with this shard");
    std::printf("decoded: %s\n", tok.decode(head).c_str());
    return 0;
}

// ---- tasks and task-shard: retrieval evaluation items and training documents (data/tasks.h)

static double parse_depth(const std::string& flag, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || !(std::isdigit((unsigned char)s[0]) || s[0] == '.') || *end != '\0' || !(v >= 0.0 && v <= 1.0)) fatal("%s '%s': a depth is a number in [0, 1]", flag.c_str(), s.c_str());
    return v;
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

// A haystack file that is not a token shard must be UTF-8 text: a binary one (a tokenizer.model,
// an image) would be encoded into byte pieces with no place to cut, and invalid UTF-8 would be
// read as U+FFFD. Refused before any work, naming the file and the byte.
static void check_text_file(const std::string& flag, const std::string& path) {
    const char* fix = "give --haystack filler, a token shard (val.bin), a text file or a directory of them";
    char magic[8] = {0};
    const int fd = open_regular_file(path, kReadFileMaxBytes, nullptr, fix);
    const bool shard = ::pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic && std::memcmp(magic, "LNGSHARD", 8) == 0;
    ::close(fd);
    if (shard) return;  // read_shard checks it
    const std::string bytes = read_file(path, fix);
    const size_t nul = bytes.find('\0'), bad = first_invalid_utf8(bytes);
    if (nul != std::string::npos && nul <= bad)
        fatal("%s: %s is not text (a NUL byte at offset %zu): give filler, a token shard (val.bin), a text file or a directory of text "
              "files", flag.c_str(), path.c_str(), nul);
    if (bad != std::string::npos)
        fatal("%s: %s is not UTF-8 text (at byte offset %zu, 0x%02x begins no well-formed UTF-8 character): give filler, a token "
              "shard (val.bin), a UTF-8 text file or a directory of them", flag.c_str(), path.c_str(), bad,
              (unsigned)(unsigned char)bytes[bad]);
}

static void check_haystack(const std::string& spec) {
    if (spec == "filler" || !file_exists(spec)) return;  // a missing one: load_haystack says so
    if (!is_directory(spec)) return check_text_file("--haystack", spec);
    for (const std::string& name : list_files_sorted(spec)) check_text_file("--haystack " + spec, spec + "/" + name);
}

// tasks: flags, read the tokenizer and the haystack, make the items, write them.
struct TasksOptions {
    std::string data, tokenizer, haystack, out;
    std::vector<TaskKind> kinds;
    std::vector<long long> lengths;
    std::vector<double> depths;
    long long samples = 1, needles = 4, seed = 1, answer_words = 2;
};

static TasksOptions tasks_flags(const std::vector<std::string>& args) {
    TasksOptions o;
    std::string tasks = "passkey", lengths, depths = "0,0.25,0.5,0.75,1", samples = "1", needles = "4", seed = "1", answer_words = "2";
    Flags f("data_tool tasks", "retrieval items, each exactly its length in tokens");
    f.add_string("data", &o.data, "a prepared corpus: its tokenizer and val.bin as the haystack");
    f.add_string("tokenizer", &o.tokenizer, "the tokenizer, without --data");
    f.add_string("haystack", &o.haystack, "filler, a token shard, a text file or a directory of them");
    f.add_string("task", &tasks, "passkey, multikey, multiquery, quote (a comma list)");
    f.add_string("lengths", &lengths, "item lengths in tokens, with K and M suffixes (a comma list)");
    f.add_string("depths", &depths, "needle depths in [0, 1] (a comma list)");
    f.add_string("samples", &samples, "items per cell");
    f.add_string("needles", &needles, "needles of a multikey or multiquery item");
    f.add_string("answer-words", &answer_words, "words in a quote item's answer, at most (fewer where its line ends first)");
    f.add_string("seed", &seed, "the run's seed");
    f.add_string("out", &o.out, "the task file (JSON lines)");
    parse_flags(f, "tasks", args);
    o.samples = parse_int("--samples", samples, 1, 1 << 20);
    o.needles = parse_int("--needles", needles, 1, 1024);
    o.answer_words = parse_int("--answer-words", answer_words, 1, 16);
    o.seed = parse_int("--seed", seed, 0, LLONG_MAX);
    if (o.out.empty()) fatal("tasks needs --out FILE.jsonl");
    check_output_path(o.out, OutputKind::TaskFile, "--out");  // an earlier task file may be overwritten
    if (lengths.empty()) fatal("tasks needs --lengths, e.g. --lengths 2K,8K,32K");
    if (o.haystack.empty()) {
        if (o.data.empty()) fatal("tasks needs --haystack SRC (filler, a token shard, a text file or a directory) or --data DIR");
        o.haystack = o.data + "/val.bin";
    }
    check_output_not_input(o.out, "--out", {{"--haystack", o.haystack}, {"--tokenizer", o.tokenizer},
                                            {"--data", o.data.empty() ? "" : o.data + "/tokenizer.model"}});
    check_haystack(o.haystack);
    for (const std::string& t : split_commas("--tasks", tasks)) o.kinds.push_back(parse_task_kind(t));
    for (const std::string& l : split_commas("--lengths", lengths)) o.lengths.push_back(parse_tokens("--lengths", l));
    for (const std::string& d : split_commas("--depths", depths)) o.depths.push_back(parse_depth("--depths", d));
    // A repeated task or length repeats its items exactly (the same seeds), and a repeated depth
    // doubles that cell's weight: either skews the scores without a word, so it is refused.
    refuse_repeats("--task", o.kinds);
    refuse_repeats("--lengths", o.lengths);
    refuse_repeats("--depths", o.depths);
    if (f.was_set("needles") && std::count(o.kinds.begin(), o.kinds.end(), TaskKind::MultiKey) +
                                        std::count(o.kinds.begin(), o.kinds.end(), TaskKind::MultiQuery) == 0)
        fatal("--needles has no effect on passkey and quote items: drop it, or add multikey or multiquery to --task");
    if (f.was_set("answer-words") && std::count(o.kinds.begin(), o.kinds.end(), TaskKind::Quote) == 0)
        fatal("--answer-words has no effect on needle items: drop it, or add quote to --task");
    return o;
}

// One cell of the grid: task x length x depth x sample, with its item seed.
struct TaskCell {
    TaskSpec spec;
    int sample;
};

static std::vector<TaskCell> task_cells(const TasksOptions& o) {
    std::vector<TaskCell> cells;
    for (TaskKind kind : o.kinds)
        for (long long L : o.lengths)
            for (size_t d = 0; d < o.depths.size(); d++)
                for (int s = 0; s < o.samples; s++) {
                    TaskSpec spec{kind, L, o.depths[d], (int)o.needles, item_seed((uint64_t)o.seed, (int)kind, L, (int)d, s),
                                  (int)o.answer_words};
                    cells.push_back({spec, s});
                }
    return cells;
}

// Every cell's items, made in parallel; the first error (in cell order) ends the run.
static std::vector<std::vector<TaskItem>> make_cells(const std::vector<TaskCell>& cells, const Haystack& hay, const Tokenizer& tok,
                                                     const PieceKinds& kinds_of_pieces) {
    std::vector<std::vector<TaskItem>> made(cells.size());
    std::vector<std::string> errors(cells.size());
#pragma omp parallel for schedule(dynamic)
    for (long long i = 0; i < (long long)cells.size(); i++) {
        try {
            made[i] = cells[i].spec.kind == TaskKind::Quote ? make_quote_items(cells[i].spec, hay, tok, kinds_of_pieces)
                                                            : make_task_items(cells[i].spec, hay, tok, kinds_of_pieces);
        } catch (const FatalError& e) {
            errors[i] = e.what();
        }
    }
    for (const std::string& e : errors)
        if (!e.empty()) fatal("%s", e.c_str());
    return made;
}

static int cmd_tasks(const std::vector<std::string>& args) {
    const TasksOptions o = tasks_flags(args);
    OutputLock lock;  // one writer per --out (FILE.longnet-lock beside it)
    lock.acquire(o.out, "--out");
    const Tokenizer tok = load_task_tokenizer(o.data, o.tokenizer);
    const PieceKinds kinds_of_pieces(tok);
    const Haystack hay = load_haystack(o.haystack, tok, kinds_of_pieces, *std::max_element(o.lengths.begin(), o.lengths.end()));

    const std::vector<TaskCell> cells = task_cells(o);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::vector<TaskItem>> made = make_cells(cells, hay, tok, kinds_of_pieces);

    std::string text;
    size_t n = 0;
    for (size_t i = 0; i < cells.size(); i++)
        for (const TaskItem& it : made[i]) text += task_item_to_json(it, cells[i].spec.seed) + "\n", n++;
    write_file_atomic(o.out, text);
    std::printf("tasks: wrote %zu items (%zu tasks x %zu lengths x %zu depths x %lld samples) to %s in %.1fs; haystack %s (%zu "
                "tokens)\n", n, o.kinds.size(), o.lengths.size(), o.depths.size(), o.samples, o.out.c_str(), seconds_since(t0),
                hay.source.c_str(), hay.tokens.size());
    return 0;
}

// task-shard: flags, read the tokenizer and the haystacks, make the documents, write the shard.
struct TaskShardOptions {
    std::string data, haystack, out, lead_kind = "any";
    long long doc_tokens = 32768, tokens = 0, seed = 1;
    double needle_every = 1024, passkey_every = 4096, filler_fraction = 0.1, lead_needle = 0;
    double quote_every = 0, repeat_every = 0, random_every = 0;
    long long repeat_tokens = 256, copy_min_distance = 0, copy_first_one_in = 8, copy_first_tokens = 0;
    bool repeat_tokens_given = false, copy_first_given = false;
};

// A number of at least lo (a finite one).
static double parse_at_least(const std::string& flag, const std::string& s, double lo) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= lo) || !std::isfinite(v)) fatal("%s '%s' must be a number >= %g", flag.c_str(), s.c_str(), lo);
    return v;
}

// 0 (none) or a number of tokens of at least 16: a copy every 5 tokens would be most of a document.
static double parse_every(const std::string& flag, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || !(v == 0 || v >= 16))
        fatal("%s '%s' must be 0 (none) or a number of tokens >= 16", flag.c_str(), s.c_str());
    return v;
}

// An --X-every flag: a number of tokens, so at most the most tokens a shard holds (core/lists.h's
// parse_tokens). One of more than twice --doc-tokens gives a document none of its kind: allowed
// (a shard without multi-key needles, say), and said, never silent.
static void check_every(const char* flag, const char* what, double every, bool given, long long doc_tokens) {
    const double most = double(1LL << 28);
    if (every > most) fatal("%s %g is more tokens than a shard can hold: give at most %.0f", flag, every, most);
    if (given && every > 0 && std::lround((double)doc_tokens / every) == 0)
        std::printf("task-shard: %s %g gives no %s in a document of --doc-tokens %lld (it takes at most %lld)\n", flag, every, what,
                    doc_tokens, 2 * doc_tokens);
}

static TaskShardOptions task_shard_flags(const std::vector<std::string>& args) {
    TaskShardOptions o;
    std::string doc_tokens = "32768", tokens = "0", seed = "1", needle_every = "1024", passkey_every = "4096", filler = "0.1", lead = "0";
    std::string quote_every = "0", repeat_every = "0", random_every = "0", repeat_tokens = "256", copy_min = "0", copy_first = "8", first_tokens = "0";
    Flags f("data_tool task-shard", "training documents carrying needles, as a token shard");
    f.add_string("data", &o.data, "a prepared corpus: its tokenizer and train.bin as the haystack");
    f.add_string("haystack", &o.haystack, "a token shard, a text file or a directory of them");
    f.add_string("doc-tokens", &doc_tokens, "tokens of a document (K and M suffixes)");
    f.add_string("tokens", &tokens, "tokens in all (K and M suffixes)");
    f.add_string("needle-every", &needle_every, "a needle every this many tokens");
    f.add_string("passkey-every", &passkey_every, "a pass key every this many tokens");
    f.add_string("filler-fraction", &filler, "the fraction of documents on the filler haystack");
    f.add_string("lead-needle", &lead, "the fraction of documents that open with a needle");
    f.add_string("lead-kind", &o.lead_kind, "any or multikey: the opening needle's kind");
    f.add_string("quote-every", &quote_every, "an earlier line quoted again every this many tokens (0: none)");
    f.add_string("repeat-every", &repeat_every, "an earlier passage repeated every this many tokens (0: none)");
    f.add_string("random-every", &random_every, "random words written twice every this many tokens (0: none)");
    f.add_string("repeat-tokens", &repeat_tokens, "a repeated or random passage's longest length (16 to 4096)");
    f.add_string("copy-min-distance", &copy_min, "every copy's source at least this many tokens back (K suffix; 0: anywhere)");
    f.add_string("copy-first-one-in", &copy_first, "one quote and one repeated passage in N from the document's first lines (1: all)");
    f.add_string("copy-first-tokens", &first_tokens, "those copies' opening: the first T tokens (K suffix; 0: the first 4 lines)");
    f.add_string("seed", &seed, "the run's seed");
    f.add_string("out", &o.out, "the token shard");
    parse_flags(f, "task-shard", args);
    if (f.was_set("doc-tokens")) o.doc_tokens = parse_tokens("--doc-tokens", doc_tokens);
    if (f.was_set("tokens")) o.tokens = parse_tokens("--tokens", tokens);
    o.needle_every = parse_at_least("--needle-every", needle_every, 16);
    o.passkey_every = parse_at_least("--passkey-every", passkey_every, 16);
    o.filler_fraction = parse_at_least("--filler-fraction", filler, 0);
    o.lead_needle = parse_at_least("--lead-needle", lead, 0);
    o.quote_every = parse_every("--quote-every", quote_every);
    o.repeat_every = parse_every("--repeat-every", repeat_every);
    o.random_every = parse_every("--random-every", random_every);
    o.repeat_tokens = parse_int("--repeat-tokens", repeat_tokens, 16, 4096);
    o.repeat_tokens_given = f.was_set("repeat-tokens");
    if (copy_min != "0") o.copy_min_distance = parse_tokens("--copy-min-distance", copy_min);
    o.copy_first_one_in = parse_int("--copy-first-one-in", copy_first, 1, 1 << 20);
    o.copy_first_given = f.was_set("copy-first-one-in");
    if (first_tokens != "0") o.copy_first_tokens = parse_tokens("--copy-first-tokens", first_tokens);
    o.seed = parse_int("--seed", seed, 0, LLONG_MAX);
    check_every("--needle-every", "multi-key needle", o.needle_every, f.was_set("needle-every"), o.doc_tokens);
    check_every("--passkey-every", "pass key", o.passkey_every, f.was_set("passkey-every"), o.doc_tokens);
    check_every("--quote-every", "quoted line", o.quote_every, f.was_set("quote-every"), o.doc_tokens);
    check_every("--repeat-every", "repeated passage", o.repeat_every, f.was_set("repeat-every"), o.doc_tokens);
    check_every("--random-every", "random passage", o.random_every, f.was_set("random-every"), o.doc_tokens);
    return o;
}

// Whether two regular files hold the same bytes (read in pieces: a corpus split may be large).
static bool same_bytes(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0 || !S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode) || sa.st_size != sb.st_size)
        return false;
    std::FILE* fa = std::fopen(a.c_str(), "rb");
    std::FILE* fb = std::fopen(b.c_str(), "rb");
    bool same = fa && fb;
    std::vector<char> ba(1 << 20), bb(1 << 20);
    while (same) {
        const size_t na = std::fread(ba.data(), 1, ba.size(), fa), nb = std::fread(bb.data(), 1, bb.size(), fb);
        same = na == nb && std::memcmp(ba.data(), bb.data(), na) == 0;
        if (na < ba.size()) break;
    }
    if (fa) std::fclose(fa);
    if (fb) std::fclose(fb);
    return same;
}

// Whether an existing token shard is one task-shard wrote: its documents are all one length (its
// --doc-tokens), which a corpus's split is not. Reads the header and the document starts only.
static bool looks_like_task_shard(const std::string& path) {
    uint64_t size = 0;
    const int fd = open_regular_file(path, kReadFileMaxBytes, "--out", "give another path", &size);
    unsigned char h[kShardHeaderBytes];
    bool ok = ::pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    const uint64_t n_tokens = ok ? shard_get_le((const char*)h + 16, 8) : 0, n_docs = ok ? shard_get_le((const char*)h + 24, 8) : 0;
    ok = ok && n_docs >= 1 && n_docs <= (size - kShardHeaderBytes) / 8 && n_tokens >= n_docs;
    std::vector<uint64_t> starts;
    if (ok) {
        std::string raw((size_t)(8 * n_docs), '\0');
        ok = ::pread(fd, &raw[0], raw.size(), kShardHeaderBytes) == (ssize_t)raw.size();
        for (uint64_t d = 0; ok && d < n_docs; d++) starts.push_back(shard_get_le(raw.data() + 8 * d, 8));
    }
    ::close(fd);
    if (!ok || starts[0] != 0) return false;
    const uint64_t length = n_docs > 1 ? starts[1] : n_tokens;
    for (uint64_t d = 0; d < n_docs; d++)
        if ((d + 1 < n_docs ? starts[d + 1] : n_tokens) - starts[d] != length) return false;
    return true;
}

// task-shard --out overwrites an earlier task shard only: never a corpus's split, a copy of one
// (check_output_path tells a train.bin or val.bin by its name or its tokenizer.model beside it,
// not a copy elsewhere), nor any other file.
static void check_task_shard_out(const TaskShardOptions& o) {
    if (output_kind_of(o.out) != OutputKind::TokenShard) return;
    for (const char* split : {"train.bin", "val.bin"})
        if (same_bytes(o.out, o.data + "/" + split))
            fatal("--out %s holds the same tokens as %s/%s (a copy of it): give another path (task-shard overwrites only an earlier "
                  "task shard)", o.out.c_str(), o.data.c_str(), split);
    if (!looks_like_task_shard(o.out))
        fatal("--out %s is a token shard whose documents are not all one length, so not one task-shard wrote (a corpus's split, or a "
              "copy of one?): give another path (task-shard overwrites only an earlier task shard)", o.out.c_str());
}

static void check_task_shard_options(TaskShardOptions& o) {
    if (o.data.empty()) fatal("task-shard needs --data DIR (a prepared corpus: its tokenizer, and train.bin as the haystack)");
    if (o.out.empty()) fatal("task-shard needs --out FILE.bin");
    // An earlier task shard may be overwritten, never a corpus's train.bin or val.bin.
    check_output_path(o.out, OutputKind::TokenShard, "--out");
    if (o.tokens < o.doc_tokens) fatal("--tokens %lld is less than one document of --doc-tokens %lld", o.tokens, o.doc_tokens);
    if (o.doc_tokens < 256) fatal("--doc-tokens %lld: a training document needs at least 256 tokens", o.doc_tokens);
    if (o.filler_fraction > 1) fatal("--filler-fraction %g must be in [0, 1]", o.filler_fraction);
    if (o.lead_needle > 1) fatal("--lead-needle %g must be in [0, 1] (the fraction of documents that open with a needle)", o.lead_needle);
    if (o.lead_kind != "any" && o.lead_kind != "multikey") fatal("--lead-kind must be any or multikey (got '%s')", o.lead_kind.c_str());
    if (o.lead_kind != "any" && o.lead_needle == 0)
        fatal("--lead-kind %s has no effect without --lead-needle F > 0: give both, or drop it", o.lead_kind.c_str());
    if (o.repeat_tokens_given && o.repeat_every == 0 && o.random_every == 0)
        fatal("--repeat-tokens %lld has no effect without --repeat-every or --random-every N > 0: give both, or drop it", o.repeat_tokens);
    if (o.copy_min_distance > 0 && o.quote_every == 0 && o.repeat_every == 0 && o.random_every == 0)
        fatal("--copy-min-distance %lld has no effect without --quote-every, --repeat-every or --random-every N > 0: give one, or drop it",
              o.copy_min_distance);
    if (o.copy_first_given && o.quote_every == 0 && o.repeat_every == 0)
        fatal("--copy-first-one-in %lld has no effect without --quote-every or --repeat-every N > 0: give one, or drop it", o.copy_first_one_in);
    if (o.copy_first_tokens > 0 && o.quote_every == 0 && o.repeat_every == 0)
        fatal("--copy-first-tokens %lld has no effect without --quote-every or --repeat-every N > 0: give one, or drop it", o.copy_first_tokens);
    if (o.copy_first_tokens >= o.doc_tokens)
        fatal("--copy-first-tokens %lld is not an opening of documents of --doc-tokens %lld: give less", o.copy_first_tokens, o.doc_tokens);
    if (o.copy_min_distance >= o.doc_tokens / 2)
        fatal("--copy-min-distance %lld leaves no room for copies in documents of --doc-tokens %lld: give less than half of it",
              o.copy_min_distance, o.doc_tokens);
    if (o.haystack.empty()) o.haystack = o.data + "/train.bin";
    check_output_not_input(o.out, "--out", {{"--haystack", o.haystack}, {"--data", o.data + "/tokenizer.model"}});
    check_task_shard_out(o);
    check_haystack(o.haystack);
}

// The documents, made in parallel, each from its own seed; the first error ends the run.
// *copied: the tokens that are copies (a quote's newline included), for the summary.
static std::vector<std::vector<int>> make_documents(const TaskShardOptions& o, const Haystack& text, const Haystack& filler,
                                                    const Tokenizer& tok, const PieceKinds& kinds_of_pieces, long long* copied) {
    const TrainDocSpec spec{(int)o.doc_tokens, o.needle_every, o.passkey_every, o.lead_needle, o.lead_kind == "multikey",
                            o.quote_every, o.repeat_every, (int)o.repeat_tokens, o.random_every, o.copy_min_distance,
                            (int)o.copy_first_one_in, o.copy_first_tokens};
    const long long n_docs = (o.tokens + o.doc_tokens - 1) / o.doc_tokens;
    std::vector<std::vector<int>> docs(n_docs);
    std::vector<std::string> errors(n_docs);
    std::vector<long long> copied_in(n_docs, 0);
#pragma omp parallel for schedule(dynamic)
    for (long long d = 0; d < n_docs; d++) {
        try {
            SplitMix64 rng(item_seed((uint64_t)o.seed, 99, o.doc_tokens, 0, (int)d));
            const bool use_filler = (double)(rng.next() >> 11) * 0x1.0p-53 < o.filler_fraction;
            std::vector<CopyRecord> copies;
            docs[d] = make_training_document(spec, use_filler ? filler : text, tok, kinds_of_pieces, rng, &copies);
            for (const CopyRecord& c : copies) copied_in[d] += c.length + (c.kind == CopyRecord::QuotedLine);
        } catch (const FatalError& e) {
            errors[d] = e.what();
        }
    }
    for (const std::string& e : errors)
        if (!e.empty()) fatal("%s", e.c_str());
    *copied = 0;
    for (long long c : copied_in) *copied += c;
    return docs;
}

static int cmd_task_shard(const std::vector<std::string>& args) {
    TaskShardOptions o = task_shard_flags(args);
    check_task_shard_options(o);
    OutputLock lock;  // one writer per --out (FILE.longnet-lock beside it)
    lock.acquire(o.out, "--out");
    const Tokenizer tok = load_task_tokenizer(o.data, "");
    const PieceKinds kinds_of_pieces(tok);
    const Haystack text = load_haystack(o.haystack, tok, kinds_of_pieces, o.doc_tokens);
    const Haystack filler = filler_haystack(tok, kinds_of_pieces, o.doc_tokens);

    const auto t0 = std::chrono::steady_clock::now();
    long long copied = 0;
    const std::vector<std::vector<int>> docs = make_documents(o, text, filler, tok, kinds_of_pieces, &copied);

    std::vector<uint32_t> all;
    std::vector<uint64_t> starts;
    all.reserve((size_t)(docs.size() * o.doc_tokens));
    for (const std::vector<int>& d : docs) {
        starts.push_back(all.size());
        all.insert(all.end(), d.begin(), d.end());
    }
    write_shard(o.out, all, starts, (uint32_t)tok.vocab_size(), tok.fingerprint());
    char quotes[64] = "", passages[96] = "", randoms[96] = "", far[64] = "", first[64] = "", copies[448] = "";
    if (o.quote_every > 0) std::snprintf(quotes, sizeof quotes, ", a quoted line every %g tokens", o.quote_every);
    if (o.repeat_every > 0)
        std::snprintf(passages, sizeof passages, ", a repeated passage of 16-%lld tokens every %g tokens", o.repeat_tokens, o.repeat_every);
    if (o.random_every > 0)
        std::snprintf(randoms, sizeof randoms, ", random words of 16-%lld tokens twice every %g tokens", o.repeat_tokens, o.random_every);
    if (o.copy_min_distance > 0) std::snprintf(far, sizeof far, ", each from %lld or more tokens back", o.copy_min_distance);
    if (o.copy_first_given || o.copy_first_tokens > 0)
        std::snprintf(first, sizeof first, ", one in %lld from the first %s", o.copy_first_one_in,
                      o.copy_first_tokens > 0 ? (std::to_string(o.copy_first_tokens) + " tokens").c_str() : "lines");
    if (o.quote_every > 0 || o.repeat_every > 0 || o.random_every > 0)
        std::snprintf(copies, sizeof copies, "%s%s%s%s%s (copies: %.1f%% of the tokens)", quotes, passages, randoms, far, first,
                      100.0 * (double)copied / (double)all.size());
    std::printf("task-shard: wrote %zu documents of %lld tokens (%zu tokens; haystack %s, %.0f%% filler, %.0f%% opening with a needle%s) to %s in %.1fs\n",
                docs.size(), o.doc_tokens, all.size(), text.source.c_str(), 100 * o.filler_fraction, 100 * o.lead_needle, copies, o.out.c_str(),
                seconds_since(t0));
    return 0;
}

// ---- encode / decode (used by tests and for quick manual checks)

static std::string tokenizer_flag(const std::string& command, const std::vector<std::string>& args) {
    std::string path;
    Flags f("data_tool " + command, "text to token ids and back");
    f.add_string("tokenizer", &path, "the tokenizer");
    parse_flags(f, command, args);
    if (path.empty()) fatal("%s needs --tokenizer FILE.model", command.c_str());
    return path;
}

static std::string read_stdin() {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

static int cmd_encode(const std::vector<std::string>& args) {
    Tokenizer tok;
    tok.load_file(tokenizer_flag("encode", args));
    const std::vector<int> ids = tok.encode(read_stdin());
    for (size_t i = 0; i < ids.size(); i++) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    return 0;
}

static int cmd_decode(const std::vector<std::string>& args) {
    Tokenizer tok;
    tok.load_file(tokenizer_flag("decode", args));
    std::istringstream in(read_stdin());
    std::vector<int> ids;
    std::string word;
    while (in >> word) ids.push_back(int(parse_int("token id", word, 0, tok.vocab_size() - 1)));
    const std::string text = tok.decode(ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

static int main_body(int argc, char** argv) {
    if (argc < 2) fatal("missing command: see `data_tool --help`");
    const std::string command = argv[1];
    const std::vector<std::string> args(argv + 2, argv + argc);
    const bool help = command == "--help" || command == "-h" || command == "help" ||
                      std::count(args.begin(), args.end(), "--help") || std::count(args.begin(), args.end(), "-h");
    if (help) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (command == "prepare") return cmd_prepare(args);
    if (command == "inspect") return cmd_inspect(args);
    if (command == "tasks") return cmd_tasks(args);
    if (command == "task-shard") return cmd_task_shard(args);
    if (command == "encode") return cmd_encode(args);
    if (command == "decode") return cmd_decode(args);
    fatal("unknown command '%s': see `data_tool --help`", command.c_str());
}

int main(int argc, char** argv) { return guarded_main([&] { return main_body(argc, argv); }); }
