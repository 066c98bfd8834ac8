// Retrieval tasks made from a haystack: evaluation items (data/task_file.h) and training
// documents that carry many needles and questions each. `data_tool tasks` and
// `data_tool task-shard` run them.
//
// Formats, exactly as the benchmarks write them:
//   passkey (Landmark Attention): an intro line, then the haystack with the needle
//     "The pass key is {K}. Remember it. {K} is the pass key." (K in [1, 50000]) on a line of its
//     own, then the question "What is the pass key? The pass key is"; the answer is K.
//   multikey (RULER's multi-key needle): RULER's intro line, then the haystack with `needles`
//     needles "One of the special magic numbers for {word} is: {number}." (distinct words,
//     7-digit numbers) each on a line of its own; the question asks one word:
//     "What is the special magic number for {word} mentioned in the provided text? The special
//     magic number for {word} mentioned in the provided text is"; the answer is its number.
//   multiquery: the same context, every needle asked in turn (one item per question).
// Lines are joined by '\n' as Landmark Attention's generator joins them.
//
// Placement to the token. An item is exactly `length` tokens of the tokenizer: BOS, the context,
// '\n', the question. The haystack takes what the rest leaves (M tokens), and the asked needle
// is preceded by exactly round(depth * M) haystack tokens. This holds because the tokenizers of
// data_tool prepare never put '\n' inside a piece: text joined at a newline encodes as the
// concatenation of its parts' encodings, so the needle encodes in place exactly as alone. The
// haystack is cut only where a piece starts a word (or at a newline), where its decoded text
// encodes back to the same pieces; every item is encoded whole once more and compared, so a
// tokenizer that splits differently is caught (one line naming it), never silently misplaced.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "core/io.h"
#include "core/rng.h"
#include "data/shard.h"
#include "data/task_file.h"
#include "data/tokenizer.h"
#include "core/error.h"

namespace task_text {
inline const char* const kPasskeyIntro =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the "
    "important information there.";
inline const char* const kPasskeyQuestion = "What is the pass key? The pass key is";
inline std::string passkey_needle(const std::string& key) {
    return "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}
inline const char* const kMultiKeyIntro =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the "
    "numbers afterwards.";
inline std::string multikey_needle(const std::string& word, const std::string& number) {
    return "One of the special magic numbers for " + word + " is: " + number + ".";
}
inline std::string multikey_question(const std::string& word) {
    return "What is the special magic number for " + word + " mentioned in the provided text? The special magic number for " +
           word + " mentioned in the provided text is";
}
inline const char* const kFiller = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
}  // namespace task_text

// Quote items (a line of the haystack itself, asked by its first part) are made by
// data/quote_tasks.h; the others here.
enum class TaskKind { Passkey, MultiKey, MultiQuery, Quote };

inline const char* task_kind_name(TaskKind k) {
    return k == TaskKind::Passkey ? "passkey" : k == TaskKind::MultiKey ? "multikey" : k == TaskKind::MultiQuery ? "multiquery" : "quote";
}
inline TaskKind parse_task_kind(const std::string& s) {
    if (s == "passkey") return TaskKind::Passkey;
    if (s == "multikey") return TaskKind::MultiKey;
    if (s == "multiquery") return TaskKind::MultiQuery;
    if (s == "quote") return TaskKind::Quote;
    fatal("--task '%s' is unknown: use passkey, multikey, multiquery or quote", s.c_str());
}

// The keys of multi-key needles, RULER-style "adjective-noun" (80 x 80 = 6400 of them).
inline const std::vector<std::string>& needle_words() {
    static const std::vector<std::string> words = [] {
        const char* adjectives[] = {
            "amber",   "ancient", "bitter",  "bold",    "brave",   "brief",   "bright",  "broad",   "calm",    "clever",
            "cold",    "crisp",   "curious", "damp",    "dark",    "deep",    "distant", "dry",     "dusty",   "eager",
            "early",   "empty",   "faint",   "fancy",   "fierce",  "flat",    "fresh",   "gentle",  "giant",   "glad",
            "golden",  "grand",   "green",   "happy",   "heavy",   "hidden",  "hollow",  "honest",  "humble",  "icy",
            "idle",    "jolly",   "keen",    "kind",    "large",   "lazy",    "little",  "lively",  "lonely",  "loud",
            "lucky",   "mellow",  "mighty",  "modern",  "narrow",  "noble",   "odd",     "olive",   "pale",    "plain",
            "polite",  "proud",   "quick",   "quiet",   "rapid",   "rare",    "rough",   "round",   "royal",   "rusty",
            "scarlet", "shiny",   "silent",  "silver",  "simple",  "sleepy",  "smooth",  "solid",   "steady",  "sweet"};
        const char* nouns[] = {
            "anchor",  "apple",   "arrow",   "badge",   "basket",  "beacon",  "bell",    "blanket", "bottle",  "bridge",
            "bucket",  "cabin",   "camera",  "candle",  "canyon",  "castle",  "cherry",  "cloud",   "comet",   "compass",
            "cookie",  "copper",  "crater",  "desert",  "diamond", "dragon",  "drum",    "eagle",   "engine",  "falcon",
            "feather", "fiddle",  "forest",  "fountain", "garden", "glacier", "guitar",  "hammer",  "harbor",  "helmet",
            "island",  "jacket",  "jungle",  "kettle",  "ladder",  "lantern", "lemon",   "magnet",  "maple",   "marble",
            "meadow",  "mirror",  "monkey",  "needle",  "ocean",   "orchard", "paddle",  "parrot",  "pebble",  "pepper",
            "pillow",  "planet",  "pocket",  "puzzle",  "rabbit",  "ribbon",  "river",   "rocket",  "saddle",  "shadow",
            "spider",  "statue",  "tiger",   "tomato",  "tower",   "trumpet", "tunnel",  "valley",  "violin",  "wagon"};
        std::vector<std::string> out;
        for (const char* a : adjectives)
            for (const char* n : nouns) out.push_back(std::string(a) + "-" + n);
        return out;
    }();
    return words;
}

// A haystack: text as tokens (documents joined by a newline) and where it may be cut.
struct Haystack {
    std::string source;          // what it was read from, for messages
    std::vector<int> tokens;
    std::vector<uint8_t> cut_ok;  // (tokens.size() + 1): the text may be cut before token i
};

// What a piece looks like, per vocabulary id: '\n', a word start ("▁x"), whitespace only.
struct PieceKinds {
    int newline = -1;
    std::vector<uint8_t> word_start, blank;
    explicit PieceKinds(const Tokenizer& tok) : word_start(tok.vocab_size()), blank(tok.vocab_size()) {
        const std::vector<int> nl = tok.encode("\n");
        if (nl.size() != 1)
            fatal("%s encodes a newline as %zu pieces, not one: retrieval tasks need a tokenizer that keeps '\\n' a piece of "
                  "its own (data_tool prepare makes one)", tok.source().c_str(), nl.size());
        newline = nl[0];
        const std::string sp = "\xe2\x96\x81";  // '▁', SentencePiece's space
        for (int id = 0; id < tok.vocab_size(); id++) {
            if (tok.is_byte(id)) continue;
            const std::string p = tok.piece(id);
            bool all_space = !p.empty();
            for (size_t i = 0; i < p.size() && all_space; i += sp.size()) all_space = p.compare(i, sp.size(), sp) == 0;
            blank[id] = all_space;
            word_start[id] = !all_space && p.compare(0, sp.size(), sp) == 0;
        }
    }
};

inline void mark_cuts(Haystack& h, const PieceKinds& k) {
    const size_t n = h.tokens.size();
    h.cut_ok.assign(n + 1, 0);
    h.cut_ok[0] = h.cut_ok[n] = 1;
    for (size_t i = 1; i < n; i++) {
        const int a = h.tokens[i - 1], b = h.tokens[i];
        h.cut_ok[i] = a == k.newline || b == k.newline || (k.word_start[b] && !k.blank[a]);
    }
}

// Documents (without BOS) joined by a newline where one does not already end them.
inline Haystack haystack_from_docs(const std::vector<std::vector<int>>& docs, const std::string& source, const PieceKinds& k) {
    Haystack h;
    h.source = source;
    for (const std::vector<int>& d : docs) {
        if (d.empty()) continue;
        h.tokens.insert(h.tokens.end(), d.begin(), d.end());
        if (h.tokens.back() != k.newline) h.tokens.push_back(k.newline);
    }
    mark_cuts(h, k);
    return h;
}

// The classic filler, repeated to at least min_tokens tokens: "F F F ..." joined by spaces.
inline Haystack filler_haystack(const Tokenizer& tok, const PieceKinds& k, long long min_tokens) {
    const std::vector<int> first = tok.encode(task_text::kFiller), more = tok.encode(std::string(" ") + task_text::kFiller);
    Haystack h;
    h.source = "the filler";
    h.tokens = first;
    while ((long long)h.tokens.size() < min_tokens) h.tokens.insert(h.tokens.end(), more.begin(), more.end());
    mark_cuts(h, k);
    return h;
}

// A haystack named on the command line: "filler", a token shard (its documents, in order), a
// text file (one document) or a directory (each file a document, in path order).
inline Haystack load_haystack(const std::string& spec, const Tokenizer& tok, const PieceKinds& k, long long min_tokens) {
    if (spec == "filler") return filler_haystack(tok, k, min_tokens);
    std::vector<std::vector<int>> docs;
    if (is_directory(spec)) {
        for (const std::string& name : list_files_sorted(spec)) docs.push_back(tok.encode(read_file(spec + "/" + name, "check --haystack")));
    } else {
        const char* fix = "give --haystack filler, a token shard (val.bin), a text file or a directory";
        if (starts_as_shard(spec, "--haystack", fix)) {
            const TokenShard s = read_shard(spec, "--haystack");
            require_shard_tokenizer(s, tok.fingerprint(), (uint32_t)tok.vocab_size(), tok.source(), "--haystack " + spec,
                                    "regenerate it with this corpus's tokenizer, or use a shard of this tokenizer's corpus (its val.bin or "
                                    "train.bin)");
            for (size_t d = 0; d < s.n_docs(); d++) {
                const uint64_t b = s.doc_starts[d], e = d + 1 < s.n_docs() ? s.doc_starts[d + 1] : s.n_tokens();
                std::vector<int> doc;
                for (uint64_t i = b; i < e; i++)
                    if ((int)s.tokens[i] != tok.bos_id()) doc.push_back((int)s.tokens[i]);
                docs.push_back(std::move(doc));
            }
        } else {
            docs.push_back(tok.encode(read_file(spec, fix)));
        }
    }
    Haystack h = haystack_from_docs(docs, spec, k);
    if (h.tokens.empty()) fatal("--haystack %s holds no text", spec.c_str());
    return h;
}

// ---- evaluation items

struct TaskSpec {
    TaskKind kind = TaskKind::Passkey;
    long long length = 0;  // tokens of the prompt: BOS, context, '\n', question
    double depth = 0;      // of the (first) asked needle, in [0, 1]
    int needles = 4;       // multikey and multiquery: needles in the context
    uint64_t seed = 0;     // the item's own seed (make_task_items derives everything from it)
    int answer_words = 2;  // quote: words in the answer, at most (data/quote_tasks.h)
};

namespace task_detail {
struct Needle {
    std::string text, answer, question;
    long long at = 0;  // haystack tokens before it
    std::vector<int> ids;
};
// 7-digit numbers, pass keys in [1, 50000], distinct words: as the benchmarks draw them.
inline std::string random_passkey(SplitMix64& rng) { return std::to_string(1 + rng.below(50000)); }
inline std::string random_number(SplitMix64& rng) { return std::to_string(1000000 + rng.below(9000000)); }
inline std::vector<std::string> distinct_words(SplitMix64& rng, int n) {
    const std::vector<std::string>& all = needle_words();
    if (n > (int)all.size()) fatal("%d needles need %d distinct words, but the list has %zu: use fewer needles", n, n, all.size());
    std::vector<std::string> out;
    std::vector<uint8_t> used(all.size(), 0);
    while ((int)out.size() < n) {
        const size_t i = (size_t)rng.below(all.size());
        if (!used[i]) used[i] = 1, out.push_back(all[i]);
    }
    return out;
}
// The first position >= at (and <= limit) where the haystack may be cut, or -1.
inline long long next_cut(const Haystack& h, long long at, long long limit) {
    for (; at <= limit; at++)
        if (h.cut_ok[(size_t)at]) return at;
    return -1;
}
inline std::vector<int> slice(const Haystack& h, long long from, long long to) {
    return std::vector<int>(h.tokens.begin() + from, h.tokens.begin() + to);
}
// The needles of a passkey item (one) or a multi-key or multi-query one (n, distinct words),
// their positions still to be placed.
inline std::vector<Needle> draw_needles(SplitMix64& rng, bool passkey, int n_needles) {
    std::vector<Needle> needles(n_needles);
    if (passkey) {
        const std::string key = random_passkey(rng);
        needles[0] = {task_text::passkey_needle(key), key, task_text::kPasskeyQuestion, 0, {}};
    } else {
        const std::vector<std::string> words = distinct_words(rng, n_needles);
        for (int i = 0; i < n_needles; i++) {
            const std::string number = random_number(rng);
            needles[i] = {task_text::multikey_needle(words[i], number), number, task_text::multikey_question(words[i]), 0, {}};
        }
    }
    return needles;
}
// An item's context as tokens (ids, from BOS) and text, piece by piece: intro \n H0 \n needle \n
// H1 ... (the question follows), the haystack's M tokens from s cut at the placed needles (in
// `order`, by position); needle_token[i]: where needle i's tokens start in ids.
inline void assemble_context(std::vector<int>& ids, std::string& context, std::vector<long long>& needle_token,
                             const Haystack& hay, long long s, long long M, const std::vector<Needle>& placed,
                             const std::vector<int>& order, const std::string& intro, const std::vector<int>& intro_ids,
                             const Tokenizer& tok, const PieceKinds& k) {
    ids.assign({tok.bos_id()});
    ids.insert(ids.end(), intro_ids.begin(), intro_ids.end());
    ids.push_back(k.newline);
    context = intro + "\n";
    needle_token.assign(placed.size(), 0);
    long long done = 0;
    for (int i : order) {
        const std::vector<int> piece = slice(hay, s + done, s + placed[i].at);
        ids.insert(ids.end(), piece.begin(), piece.end());
        context += tok.decode(piece) + "\n";
        ids.push_back(k.newline);
        needle_token[i] = (long long)ids.size();
        ids.insert(ids.end(), placed[i].ids.begin(), placed[i].ids.end());
        ids.push_back(k.newline);
        context += placed[i].text + "\n";
        done = placed[i].at;
    }
    const std::vector<int> tail = slice(hay, s + done, s + M);
    ids.insert(ids.end(), tail.begin(), tail.end());
    context += tok.decode(tail);
}
// What a training document holds besides its haystack: a needle, a question (with its answer),
// after `at` haystack tokens.
struct DocEvent {
    long long at;      // haystack tokens before it
    int order;         // at one position: a needle before its question, one pass-key episode before the next
    std::vector<int> ids;
};
// The document's body after doc's intro: M haystack tokens from a random cut, the events (sorted
// by at) at the first cut at or after their place; spans gets each event's [start, end) in doc.
inline void lay_out_events(std::vector<int>& doc, std::vector<std::pair<long long, long long>>& spans, const Haystack& hay,
                           long long M, const std::vector<DocEvent>& ev, SplitMix64& rng) {
    const long long room = (long long)hay.tokens.size() - M;
    long long s = (long long)rng.below((uint64_t)room + 1);
    s = std::max(0LL, next_cut(hay, s, room));  // no cut after s: start at 0, which always is one
    long long done = 0;
    for (const DocEvent& e : ev) {
        long long at = next_cut(hay, s + std::max(e.at, done), s + M);  // events may move to the next cut
        at = at < 0 ? M : at - s;
        doc.insert(doc.end(), hay.tokens.begin() + s + done, hay.tokens.begin() + s + at);
        spans.push_back({(long long)doc.size(), (long long)(doc.size() + e.ids.size())});
        doc.insert(doc.end(), e.ids.begin(), e.ids.end());
        done = at;
    }
    doc.insert(doc.end(), hay.tokens.begin() + s + done, hay.tokens.begin() + s + M);
}
}  // namespace task_detail

// The items of one spec: one for passkey and multikey, one per needle for multiquery (the first
// asked needle at spec.depth, the others where they fell). Deterministic in spec.seed.
inline std::vector<TaskItem> make_task_items(const TaskSpec& spec, const Haystack& hay, const Tokenizer& tok, const PieceKinds& k) {
    using namespace task_detail;
    if (spec.kind == TaskKind::Quote) fatal("internal: quote items are made by make_quote_items (data/quote_tasks.h)");
    SplitMix64 rng(spec.seed);
    const bool passkey = spec.kind == TaskKind::Passkey;
    const int n_needles = passkey ? 1 : spec.needles;
    if (n_needles < 1) fatal("--needles must be at least 1 (got %d)", n_needles);
    std::vector<Needle> needles = draw_needles(rng, passkey, n_needles);
    const std::string intro = passkey ? task_text::kPasskeyIntro : task_text::kMultiKeyIntro;
    const std::vector<int> intro_ids = tok.encode(intro), question_ids = tok.encode(needles[0].question);
    long long fixed = 1 + (long long)intro_ids.size() + 1 + 1 + (long long)question_ids.size();
    for (Needle& n : needles) n.ids = tok.encode(n.text), fixed += (long long)n.ids.size() + 2;
    const long long M = spec.length - fixed;  // haystack tokens
    if (M < 0)
        fatal("--lengths %lld is too short for a %s item: its intro, needles and question alone take %lld tokens", spec.length,
              task_kind_name(spec.kind), fixed);
    if (M > (long long)hay.tokens.size())
        fatal("--haystack %s holds %zu tokens, fewer than the %lld a %lld-token %s item needs: give a larger haystack (more "
              "documents) or lower --lengths", hay.source.c_str(), hay.tokens.size(), M, spec.length, task_kind_name(spec.kind));
    // The asked needle at its depth; multi-key distractors anywhere; multi-query needles evenly
    // around the depths (needle i at depth frac(depth + i / needles)), so that with the default
    // depths 0, 0.25, ..., 1 and 4 needles every asked needle lies on the grid too.
    needles[0].at = std::llround(spec.depth * (double)M);
    for (int i = 1; i < n_needles; i++) {
        const double d = std::fmod(spec.depth + (double)i / n_needles, 1.0);
        needles[i].at = spec.kind == TaskKind::MultiQuery ? std::llround(d * (double)M) : (long long)rng.below((uint64_t)M + 1);
    }
    const long long room = (long long)hay.tokens.size() - M;  // haystack starts s in [0, room]

    // A start s where the haystack may be cut at s, s + M and before the asked needle; the other
    // needles move to the next cut after where they were drawn. Then the whole prompt is encoded
    // once more: if it does not give the same tokens (a haystack cut that re-encodes otherwise), the
    // next start is tried.
    long long s = (long long)rng.below((uint64_t)room + 1);
    for (int attempt = 0; attempt < 64; attempt++, s = (s + 1) % (room + 1)) {
        long long tries = 0;
        while (!(hay.cut_ok[(size_t)s] && hay.cut_ok[(size_t)(s + M)] && hay.cut_ok[(size_t)(s + needles[0].at)])) {
            s = (s + 1) % (room + 1);
            if (++tries > room) fatal("--haystack %s: found no place to cut it around the needle", hay.source.c_str());
        }
        std::vector<Needle> placed = needles;
        for (int i = 1; i < n_needles; i++) placed[i].at = next_cut(hay, s + placed[i].at, s + M) - s;
        std::vector<int> order(n_needles);
        for (int i = 0; i < n_needles; i++) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return placed[a].at < placed[b].at; });

        std::vector<int> ids;
        std::string context;
        std::vector<long long> needle_token;
        assemble_context(ids, context, needle_token, hay, s, M, placed, order, intro, intro_ids, tok, k);

        std::vector<TaskItem> items;
        const int asked = spec.kind == TaskKind::MultiQuery ? n_needles : 1;
        bool same = true;
        for (int q = 0; q < asked && same; q++) {
            TaskItem it;
            it.task = task_kind_name(spec.kind);
            it.context = context;
            it.question = placed[q].question;
            it.answer = placed[q].answer;
            // Needle q > 0 of a multi-query context sits at the first cut after its depth (its
            // needle_token says exactly where); the report takes the depth it was placed for,
            // rounded to 12 decimals: files keep depths exactly, and 0 + 1/3 and frac(1 + 1/3)
            // differ in their last bit, two rows of one depth.
            it.depth = q == 0 ? spec.depth : std::round(std::fmod(spec.depth + (double)q / n_needles, 1.0) * 1e12) / 1e12;
            it.needle_token = needle_token[q];
            std::vector<int> want = ids;
            want.push_back(k.newline);
            const std::vector<int> qids = tok.encode(it.question);
            want.insert(want.end(), qids.begin(), qids.end());
            it.length = spec.length;  // the other questions of a multi-query context differ by a few tokens
            std::vector<int> got = tok.encode(task_prompt_text(it));
            got.insert(got.begin(), tok.bos_id());
            if (q == 0 && (long long)want.size() != spec.length) fatal("internal: a %lld-token item came out %zu tokens long", spec.length, want.size());
            if (got != want) {
                size_t at = 0;
                while (at < got.size() && at < want.size() && got[at] == want[at]) at++;
                for (int i = 0; i < n_needles; i++)
                    if ((long long)at >= needle_token[i] - 1 && (long long)at <= needle_token[i] + (long long)placed[i].ids.size())
                        fatal("the tokenizer %s splits the needle \"%s\" differently inside the text than alone (token %zu): "
                              "use a tokenizer made by data_tool prepare, which keeps '\\n' a piece of its own",
                              tok.source().c_str(), placed[i].text.c_str(), at);
                if (at + qids.size() + 1 >= want.size())
                    fatal("the tokenizer %s splits the question differently after the context than alone: use a tokenizer "
                          "made by data_tool prepare", tok.source().c_str());
                same = false;  // a haystack cut that does not re-encode the same: try another start
                break;
            }
            items.push_back(it);
        }
        if (same) return items;
    }
    fatal("--haystack %s: 64 places tried, none re-encodes to the same tokens with the tokenizer %s: use the tokenizer the "
          "haystack was encoded with", hay.source.c_str(), tok.source().c_str());
}

// ---- training documents

struct TrainDocSpec {
    int doc_tokens = 32768;     // tokens of each document, BOS included
    double needle_every = 1024;  // one multi-key needle (and its question) per this many tokens
    double passkey_every = 4096; // one pass-key episode (needle, later its question) per this many tokens
    // The fraction of documents whose haystack opens with a needle (right after the intro, where
    // an evaluation item puts its needle at depth 0), asked from anywhere later: the pass key
    // when the document's intro is the pass-key one, else a multi-key needle. Without it a
    // needle in a window's first tokens is rare (1 in ~doc_tokens / needle_every positions), and
    // a model trained on such documents misses far needles at depth 0 (see
    // notes/long-context-retrieval.md, needles at the start of training documents).
    double lead_needle = 0;
    // Lead needles of the multi-key kind only (asked by their word), never a pass key: a leading pass
    // key teaches a shortcut ("a far pass-key question asks the first key"; same note).
    bool lead_multikey_only = false;
    // Copies of the document's own text, asked again from far: the task a book or a source tree
    // in the context poses (continue one of its lines as written), which needles alone never
    // train. 0: none, and no draw at all, so such documents are the same as before these existed.
    double quote_every = 0;   // one quoted line (an earlier whole line, again as a line) per this many tokens
    double repeat_every = 0;  // one repeated passage (earlier tokens from a cut point) per this many tokens
    int repeat_tokens = 256;  // a repeated passage's longest length (its length is uniform in [16, this])
    // Random passages: words drawn at random, written twice, the second time later (as far back as
    // a repeated passage's source): text nothing predicts the first time and only a copy predicts
    // the second, the task that forms an induction circuit fastest in small models. Their lengths
    // are drawn as a repeated passage's. 0: none, and no draw.
    double random_every = 0;
    // Far copies only: every copy's source starts at least this many tokens before where it is
    // written, its distance drawn as before over what lies beyond (a model whose near copies
    // already form learns the far ones from these). 0: anywhere, with the same draws as before.
    long long copy_min_distance = 0;
    // One quote and one repeated passage in this many take their source from the document's
    // opening (copy_first_tokens), the rest from a drawn distance: a question about a long
    // context's opening is the one recency never answers. The default, 8, is the read recipes'
    // share; readfirst takes 2 (scripts/retrieval_study.sh).
    int copy_first_one_in = 8;
    // The opening those copies come from. 0: a quote's source is one of the first 4 usable lines
    // and a passage's starts in the first 64 tokens. T > 0: any usable line starting in the first T
    // tokens of the body, and a passage starting there: with a pool of 4 lines, one quote in 2
    // would quote each of them ~16 times in a 32K document, every repeat copyable from the one
    // before it rather than from the opening.
    long long copy_first_tokens = 0;
};

// One copy in a finished training document: tokens [source, source + length) appear again at
// [dest, dest + length), positions in the document (BOS is token 0).
struct CopyRecord {
    enum Kind { QuotedLine, RepeatedPassage, RandomPassage } kind = QuotedLine;
    long long source = 0, dest = 0, length = 0;
};

namespace task_detail {
// The copies of a finished training document `base` (TrainDocSpec's quote_every, repeat_every,
// random_every). A copy is written over the haystack text at its destination, so the document keeps
// its length and every needle and question keeps its place (inserting copies would push the
// document's tail, and with it a quarter of its questions, the far ones most, out of the window).
// `events`: the [start, end) of its needles and questions, never copied from nor written over;
// `body`: its first token after the intro. A destination never covers an event, a source or another
// destination, and a source never lies in a destination: every copy is of the original text, and
// stays whole. `distance` draws how far back a source lies, as a question's distance is drawn. A
// random passage's source is written too (random words over the text there), so it takes a room as
// a destination does. The three kinds are drawn from rng in that order, quotes first.
template <typename Distance>
class CopyWriter {
   public:
    std::vector<int> doc;          // base with the copies written over it
    std::vector<CopyRecord> made;  // where each copy lies

    CopyWriter(const TrainDocSpec& spec, const std::vector<int>& base, const std::vector<std::pair<long long, long long>>& events,
               long long body, const PieceKinds& k, SplitMix64& rng, Distance& distance)
        : doc(base), spec_(spec), base_(base), body_(body), k_(k), rng_(rng), distance_(distance), N_((long long)base.size()),
          far_(spec.copy_min_distance), use_((size_t)N_, Free) {
        for (const auto& e : events) mark(e.first, e.second, Event);
        cuts_.tokens = base;
        mark_cuts(cuts_, k);
        find_lines();
        for (long long p = body_ + 1; p < N_; p++) {  // destinations: a line start (quotes), a cut point (passages)
            if (base_[(size_t)p - 1] == k_.newline && !lines_.empty() && p > lines_[0].start + lines_[0].length) line_starts_.push_back(p);
            if (cuts_.cut_ok[(size_t)p]) cut_points_.push_back(p);
        }
    }

    // Quoted lines: a line start d, then the free line nearest before d - distance (or after it), or
    // (one in copy_first_one_in) one of the first lines; written at d with its newline, when that room is free.
    void add_quoted_lines() {
        const long long n_quotes = spec_.quote_every > 0 ? std::lround((double)N_ / spec_.quote_every) : 0;
        for (long long i = 0; i < n_quotes && !line_starts_.empty(); i++) {
            const long long d = line_starts_[rng_.below(line_starts_.size())];
            const long long before = std::lower_bound(lines_.begin(), lines_.end(), d, [](const Line& l, long long p) { return l.start < p; }) -
                                     lines_.begin();  // the lines that start before d
            const long long pick = rng_.below(spec_.copy_first_one_in) == 0 ? first_line_for(d, before) : line_near(d, before);
            if (pick >= 0) write({CopyRecord::QuotedLine, lines_[(size_t)pick].start, d, lines_[(size_t)pick].length});
        }
    }

    // Repeated passages: a cut point d, then a source of L tokens starting at a cut point near
    // d - distance (or near the intro, one in copy_first_one_in), both free; a few draws of d before giving up.
    void add_repeated_passages() {
        const long long n_passages = spec_.repeat_every > 0 ? std::lround((double)N_ / spec_.repeat_every) : 0;
        for (long long i = 0; i < n_passages && !cut_points_.empty(); i++) {
            const long long L = passage_length();
            for (long long attempt = 0; attempt < kTries; attempt++) {
                const long long d = cut_points_[rng_.below(cut_points_.size())];
                if (d - body_ < L || !free_for(d, d + L, false)) continue;
                const long long t = rng_.below(spec_.copy_first_one_in) == 0 ? std::min(d - L, body_ + (long long)rng_.below(first_tokens()))
                                                       : d - std::max(L, back(d - body_));
                const long long found = source_near(t, d, L, /*readable=*/true);
                if (found >= 0) {
                    write({CopyRecord::RepeatedPassage, found, d, L});
                    break;
                }
            }
        }
    }

    // Random passages: a cut point d, and a free room of L tokens at a cut point near d - distance
    // (never overlapping d's), both written with the same words drawn at random.
    void add_random_passages() {
        const long long n_random = spec_.random_every > 0 ? std::lround((double)N_ / spec_.random_every) : 0;
        std::vector<int> words;
        for (int id = 0; n_random > 0 && id < (int)k_.word_start.size(); id++)
            if (k_.word_start[id]) words.push_back(id);
        for (long long i = 0; i < n_random && !cut_points_.empty() && !words.empty(); i++) {
            const long long L = passage_length();
            for (long long attempt = 0; attempt < kTries; attempt++) {
                const long long d = cut_points_[rng_.below(cut_points_.size())];
                if (d - body_ < L || !free_for(d, d + L, false)) continue;
                const long long found = source_near(d - std::max(L, back(d - body_)), d, L, /*readable=*/false);
                if (found < 0) continue;
                for (long long j = 0; j < L; j++) doc[(size_t)(found + j)] = doc[(size_t)(d + j)] = words[rng_.below(words.size())];
                mark(found, found + L, Dest);
                mark(d, d + L, Dest);
                made.push_back({CopyRecord::RandomPassage, found, d, L});
                break;
            }
        }
    }

   private:
    static constexpr long long kLongestLine = 128, kFirstLines = 4, kFirstTokens = 64, kTries = 4;
    enum : uint8_t { Free, Event, Source, Dest };
    struct Line {
        long long start, length;
    };
    const TrainDocSpec& spec_;
    const std::vector<int>& base_;
    const long long body_;
    const PieceKinds& k_;
    SplitMix64& rng_;
    Distance& distance_;
    const long long N_, far_;
    std::vector<uint8_t> use_;
    Haystack cuts_;  // where the document may be cut: a passage starts there, and is written there
    std::vector<Line> lines_;  // quote sources: whole lines of the body, short, of words (not a lone brace or number)
    std::vector<long long> line_starts_, cut_points_;

    // How far back a source starts: the question's draw over what lies beyond far_ (at far_ = 0
    // the same draw as distance's).
    long long back(long long max) { return far_ + distance_(std::max(0LL, max - far_)); }
    long long passage_length() { return 16 + (long long)rng_.below((uint64_t)std::max(1, spec_.repeat_tokens - 15)); }
    // [s, e) may be a source (others may read it too) or a destination (nothing else may touch it).
    bool free_for(long long s, long long e, bool source) const {
        if (s < body_ - 1 || e > N_) return false;
        for (long long i = s; i < e; i++)
            if (use_[(size_t)i] == Event || use_[(size_t)i] == Dest || (!source && use_[(size_t)i] == Source)) return false;
        return true;
    }
    void mark(long long s, long long e, uint8_t what) {
        for (long long i = s; i < e; i++) use_[(size_t)i] = what;
    }
    void find_lines() {
        for (long long s = body_; s < N_;) {
            long long e = s, words = 0;
            for (; e < N_ && base_[(size_t)e] != k_.newline; e++) words += k_.word_start[base_[(size_t)e]];
            if (e < N_ && e - s <= kLongestLine && words >= 4) lines_.push_back({s, e - s});
            s = e + 1;
        }
    }
    // Whether line l can be quoted at line start d: before d, far_ or more back, its room and d's free.
    bool usable(const Line& l, long long d) const {
        return l.start + l.length + 1 <= d && d - l.start >= far_ && free_for(l.start - 1, l.start + l.length + 1, true) &&
               free_for(d, d + l.length + 1, false) && doc[(size_t)d - 1] == k_.newline;
    }
    // Depth 0: one of the first usable lines after the intro (of the `before` lines that start
    // before d): the first kFirstLines, or those starting in the first copy_first_tokens.
    long long first_line_for(long long d, long long before) {
        std::vector<long long> first;
        const long long span = spec_.copy_first_tokens;
        for (long long j = 0; j < before && (span > 0 ? lines_[(size_t)j].start < body_ + span : (long long)first.size() < kFirstLines); j++)
            if (usable(lines_[(size_t)j], d)) first.push_back(j);
        return first.empty() ? -1 : first[rng_.below(first.size())];
    }
    uint64_t first_tokens() const { return spec_.copy_first_tokens > 0 ? (uint64_t)spec_.copy_first_tokens : (uint64_t)kFirstTokens; }
    // The usable line nearest before d - distance (or, failing 64 of them, after it).
    long long line_near(long long d, long long before) {
        const long long t = d - back(d - body_);
        const long long at = std::upper_bound(lines_.begin(), lines_.begin() + before, t, [](long long p, const Line& l) { return p < l.start; }) -
                             lines_.begin() - 1;
        long long pick = -1;
        for (long long j = at, n = 0; j >= 0 && pick < 0 && n < 64; j--, n++)
            if (usable(lines_[(size_t)j], d)) pick = j;
        for (long long j = at + 1, n = 0; j < before && pick < 0 && n < 64; j++, n++)
            if (usable(lines_[(size_t)j], d)) pick = j;
        return pick;
    }
    // A source of L tokens for a destination at d: the cut point nearest before t (or after it, up
    // to d - L), far_ or more before d, whose room is free: to read (with the token before it kept)
    // or, readable false, to be written (a random passage's first copy).
    long long source_near(long long t, long long d, long long L, bool readable) const {
        auto ok = [&](long long s) {
            return d - s >= far_ && cuts_.cut_ok[(size_t)s] && (readable ? free_for(s - 1, s + L, true) : free_for(s, s + L, false));
        };
        for (long long s = t, n = 0; s >= body_ && n < 256; s--, n++)
            if (ok(s)) return s;
        for (long long s = t + 1, n = 0; s + L <= d && n < 256; s++, n++)
            if (ok(s)) return s;
        return -1;
    }
    void write(CopyRecord c) {
        const bool quote = c.kind == CopyRecord::QuotedLine;
        // The token before a source (a newline, or what makes its start a cut) and the newline
        // before a quote stay as they are.
        mark(c.source - 1, c.source + c.length + quote, Source);
        if (quote && use_[(size_t)c.dest - 1] == Free) use_[(size_t)c.dest - 1] = Source;
        mark(c.dest, c.dest + c.length + quote, Dest);
        std::copy(base_.begin() + c.source, base_.begin() + c.source + c.length, doc.begin() + c.dest);
        if (quote) doc[(size_t)(c.dest + c.length)] = k_.newline;
        made.push_back(c);
    }
};

template <typename Distance>
std::vector<int> add_copies(const TrainDocSpec& spec, const std::vector<int>& base, const std::vector<std::pair<long long, long long>>& events,
                            long long body, const PieceKinds& k, SplitMix64& rng, Distance& distance, std::vector<CopyRecord>* records) {
    CopyWriter<Distance> w(spec, base, events, body, k, rng, distance);
    w.add_quoted_lines();
    w.add_repeated_passages();
    w.add_random_passages();
    if (records) *records = w.made;
    return w.doc;
}
}  // namespace task_detail

// One training document: BOS, an intro, haystack text carrying multi-key needles and pass-key
// needles, each followed somewhere later by its question and answer ("... is 1234567."). A
// question's distance to its needle is drawn half log-uniform and half uniform over what the
// document leaves, so a long window holds retrieval examples at every distance. Pass-key episodes
// do not overlap (a question asks the latest pass key); multi-key words are distinct in a document.
// Then, when spec asks for them, copies of its own text written over its haystack text
// (task_detail::add_copies), drawn from rng only after the document above is whole, so that its
// needles and questions are the same with or without them; `copies` (when given) receives where
// each copy lies.
inline std::vector<int> make_training_document(const TrainDocSpec& spec, const Haystack& hay, const Tokenizer& tok,
                                               const PieceKinds& k, SplitMix64& rng, std::vector<CopyRecord>* copies = nullptr) {
    using namespace task_detail;
    using Event = DocEvent;
    const int n_mk = std::max(0, (int)std::lround(spec.doc_tokens / spec.needle_every));
    const int n_pk = std::max(0, (int)std::lround(spec.doc_tokens / spec.passkey_every));
    if (n_mk > (int)needle_words().size())
        fatal("--needle-every %g with --doc-tokens %d asks for %d multi-key needles in a document, more than the %zu distinct words: "
              "raise --needle-every or lower --doc-tokens", spec.needle_every, spec.doc_tokens, n_mk, needle_words().size());
    const bool passkey_intro = rng.below(2) == 0;
    const std::vector<int> intro = tok.encode(passkey_intro ? task_text::kPasskeyIntro : task_text::kMultiKeyIntro);
    auto line = [&](const std::string& text) {  // '\n' text '\n'
        std::vector<int> ids{k.newline};
        const std::vector<int> t = tok.encode(text);
        ids.insert(ids.end(), t.begin(), t.end());
        ids.push_back(k.newline);
        return ids;
    };
    std::vector<Event> ev;
    long long used = 1 + (long long)intro.size() + 1;
    // Contents first (their sizes fix the haystack's), positions after.
    const std::vector<std::string> words = distinct_words(rng, n_mk);
    std::vector<std::pair<std::vector<int>, std::vector<int>>> mk, pk;  // (needle, question + answer)
    for (int i = 0; i < n_mk; i++) {
        const std::string number = random_number(rng);
        mk.push_back({line(task_text::multikey_needle(words[i], number)), line(task_text::multikey_question(words[i]) + " " + number + ".")});
    }
    for (int i = 0; i < n_pk; i++) {
        const std::string key = random_passkey(rng);
        pk.push_back({line(task_text::passkey_needle(key)), line(std::string(task_text::kPasskeyQuestion) + " " + key + ".")});
    }
    for (auto* set : {&mk, &pk})
        for (auto& e : *set) used += (long long)e.first.size() + (long long)e.second.size();
    const long long M = spec.doc_tokens - used;
    if (M < spec.doc_tokens / 4)
        fatal("--doc-tokens %d is too short for its needles (%d multi-key, %d pass-key take %lld tokens): raise --needle-every "
              "and --passkey-every or --doc-tokens", spec.doc_tokens, n_mk, n_pk, used);
    if (M > (long long)hay.tokens.size())
        fatal("--haystack %s holds %zu tokens, fewer than a %d-token document needs: give more text or lower --doc-tokens",
              hay.source.c_str(), hay.tokens.size(), spec.doc_tokens);
    auto distance = [&](long long max) {  // in [min(8, max), max]
        if (max <= 8) return max;
        if (rng.below(2)) return 8 + (long long)rng.below((uint64_t)(max - 8 + 1));
        const double u = (double)(rng.next() >> 11) * 0x1.0p-53;
        return std::min(max, (long long)std::exp(std::log(8.0) + u * (std::log((double)max) - std::log(8.0))));
    };
    // No draw when lead_needle is 0, so that such shards are the same as before it existed.
    const bool lead = spec.lead_needle > 0 && (double)(rng.next() >> 11) * 0x1.0p-53 < spec.lead_needle;
    const bool lead_passkey = lead && passkey_intro && n_pk > 0 && !spec.lead_multikey_only;
    const bool lead_multikey = lead && !lead_passkey && n_mk > 0;
    for (size_t i = 0; i < mk.size(); i++) {
        const long long a = lead_multikey && i == 0 ? 0 : (long long)rng.below((uint64_t)M);
        ev.push_back({a, 0, mk[i].first});
        ev.push_back({a + distance(M - a), 1, mk[i].second});
    }
    // Pass-key episodes one after another, each in its own stretch of the haystack: the stretches
    // are cut at uniform random points, so some are long (a pass key asked far from its needle).
    // A leading pass key opens the first stretch, whose end (where it is asked) is drawn as a
    // question's distance, and the other cuts fall after it.
    std::vector<long long> cuts{0, M};
    const long long lead_end = lead_passkey ? distance(M) : 0;  // the other cuts fall in [lead_end, M]
    if (lead_passkey && n_pk > 1) cuts.push_back(lead_end);
    while ((int)cuts.size() < n_pk + 1) cuts.push_back(lead_end + (long long)rng.below((uint64_t)(M - lead_end) + 1));
    std::sort(cuts.begin(), cuts.end());
    for (int i = 0; i < n_pk; i++) {
        const long long from = cuts[i], len = cuts[i + 1] - cuts[i];
        if (lead_passkey && i == 0) {
            ev.push_back({0, 0, pk[0].first});
            ev.push_back({std::max(0LL, lead_end - 1), 1, pk[0].second});
            continue;
        }
        const long long a = from + (long long)rng.below((uint64_t)std::max(1LL, len / 4));
        ev.push_back({a, 2 * i, pk[i].first});
        ev.push_back({a + distance(std::max(0LL, from + len - 1 - a)), 2 * i + 1, pk[i].second});  // a short stretch: asked at once
    }
    std::stable_sort(ev.begin(), ev.end(), [](const Event& x, const Event& y) { return x.at != y.at ? x.at < y.at : x.order < y.order; });

    std::vector<int> doc{tok.bos_id()};
    doc.insert(doc.end(), intro.begin(), intro.end());
    doc.push_back(k.newline);
    const long long body = (long long)doc.size();
    std::vector<std::pair<long long, long long>> spans;  // each event's [start, end) in doc
    lay_out_events(doc, spans, hay, M, ev, rng);
    if ((long long)doc.size() != spec.doc_tokens) fatal("internal: a training document came out %zu tokens, not %d", doc.size(), spec.doc_tokens);
    if (copies) copies->clear();
    if (spec.quote_every <= 0 && spec.repeat_every <= 0 && spec.random_every <= 0) return doc;  // no draw: as before copies existed
    if ((spec.repeat_every > 0 || spec.random_every > 0) && spec.repeat_tokens < 16)
        fatal("--repeat-tokens %d: a repeated passage is at least 16 tokens; give 16 to 4096", spec.repeat_tokens);
    if (spec.copy_first_one_in < 1)
        fatal("--copy-first-one-in %d: one copy in N from the first lines needs N >= 1 (1: every copy)", spec.copy_first_one_in);
    if (spec.copy_first_tokens < 0 || spec.copy_first_tokens >= spec.doc_tokens)
        fatal("--copy-first-tokens %lld: the opening must be 0 (the first 4 lines) or shorter than --doc-tokens %d", spec.copy_first_tokens,
              spec.doc_tokens);
    return add_copies(spec, doc, spans, body, k, rng, distance, copies);
}
