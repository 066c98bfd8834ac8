// Training the SentencePiece BPE tokenizer (link with -lsentencepiece_train -lsentencepiece).
//
// The options are chosen so that any UTF-8 text, code included, round-trips exactly:
//   byte_fallback, character_coverage 1.0   no <unk>: unseen characters become byte pieces
//   normalization identity, remove_extra_whitespaces=false, add_dummy_prefix=false
//                                            text is not rewritten; indentation and leading
//                                            spaces survive, and decode(encode(s)) == s
//   allow_whitespace_only_pieces             runs of indentation spaces become single pieces
//   split_digits                             numbers are spelled digit by digit
// SentencePiece trains on lines, so no piece contains '\n' (newlines encode as the byte piece
// <0x0A>).
// UTF-8 only: SentencePiece reads its input as Unicode and turns each byte that is not part of a
// well-formed UTF-8 sequence into U+FFFD before byte_fallback sees it, so such bytes do not
// survive a round trip. data_tool prepare --text therefore refuses a file that is not UTF-8,
// naming it and the byte offset (data/corpus.h); the corpora of scripts/get_corpus.sh (--raw)
// are taken as they are. Results are reproducible: all lines are used when there are fewer than
// input_sentence_size, and otherwise SentencePiece samples with a fixed seed.
//
// The lines are fed from memory through SentencePiece's SentenceIterator rather than a temp
// file: a file's path would be recorded in the model, making tokenizer.model depend on --out.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <string>
#include <unordered_map>

#include "core/error.h"

// Ids fixed by the project: the model code and the shards rely on BOS == 1.
constexpr int kUnkId = 0, kBosId = 1, kEosId = 2;

// Feeds the non-empty lines of an in-memory text to the trainer.
class LineIterator : public sentencepiece::SentenceIterator {
public:
    explicit LineIterator(const std::string& text) : text_(text) { Next(); }
    bool done() const override { return done_; }
    void Next() override {
        while (pos_ < text_.size()) {
            size_t end = text_.find('\n', pos_);
            if (end == std::string::npos) end = text_.size();
            line_.assign(text_, pos_, end - pos_);
            pos_ = end + 1;
            if (!line_.empty()) return;
        }
        done_ = true;
    }
    const std::string& value() const override { return line_; }
    sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

private:
    const std::string& text_;
    size_t pos_ = 0;
    std::string line_;
    bool done_ = false;
};

// Train on `text` (one sentence per line) and return the .model file's bytes.
inline std::string train_bpe_tokenizer(const std::string& text, int vocab_size) {
    const std::unordered_map<std::string, std::string> options = {
        {"model_type", "bpe"},
        {"vocab_size", std::to_string(vocab_size)},
        {"byte_fallback", "true"},
        {"character_coverage", "1.0"},
        {"unk_id", std::to_string(kUnkId)},
        {"bos_id", std::to_string(kBosId)},
        {"eos_id", std::to_string(kEosId)},
        {"pad_id", "-1"},
        {"split_digits", "true"},
        {"allow_whitespace_only_pieces", "true"},
        {"remove_extra_whitespaces", "false"},
        {"add_dummy_prefix", "false"},
        {"normalization_rule_name", "identity"},
        {"num_threads", "2"},                // fixed, so results do not depend on the machine
        {"input_sentence_size", "2000000"},  // far above our ~220k lines: no sampling
        {"shuffle_input_sentence", "true"},
        {"minloglevel", "2"},                // keep SentencePiece's INFO and WARNING chatter out of the log
    };
    sentencepiece::SetRandomGeneratorSeed(1234);
    std::string model;
    LineIterator lines(text);
    const auto status = sentencepiece::SentencePieceTrainer::Train(options, &lines, &model);
    if (!status.ok()) {
        // The one failure a user causes: a corpus too small for the vocabulary. SentencePiece says
        // so as an internal check ("Vocabulary size too high (V). Please set it to a value <= N"):
        // turn it into the flag and the fix.
        const std::string why = status.ToString();
        const size_t at = why.find("Please set it to a value <= ");
        if (at != std::string::npos)
            fatal("--vocab %d is more than this corpus can give (%zu bytes of text yield at most %d pieces): give a larger corpus "
                  "(`make data`) or a --vocab of at most %d", vocab_size, text.size(), std::atoi(why.c_str() + at + 28),
                  std::atoi(why.c_str() + at + 28));
        // The other: a vocabulary smaller than the corpus's distinct characters ("Vocabulary size is
        // smaller than required_chars. V vs N."): every character must be a piece of its own.
        const size_t chars = why.find("smaller than required_chars. ");
        if (chars != std::string::npos) {
            int v = 0, need = 0;
            if (std::sscanf(why.c_str() + chars + 29, "%d vs %d", &v, &need) == 2)
                fatal("--vocab %d is less than the %d pieces this corpus needs (each distinct character and the special "
                      "tokens): give a --vocab of at least %d", vocab_size, need, need);
        }
        fatal("--vocab %d: SentencePiece training failed: %s", vocab_size, why.c_str());
    }
    return model;
}
