// Tokenizer: a thin wrapper over a SentencePiece BPE model (trained by `data_tool prepare`).
//
// The model's bytes (the standard .model file) are kept verbatim so that a checkpoint can embed
// them and a later run can rebuild exactly the same tokenizer with load_serialized().
// All failures are fatal with one line naming the model file; link with -lsentencepiece.
//
// StreamDecoder turns ids into printable text one id at a time during generation.
#pragma once
#include <memory>
#include <sentencepiece_processor.h>
#include <string>
#include <vector>

#include "core/io.h"
#include "core/error.h"
#include "data/identity.h"

class Tokenizer {
public:
    Tokenizer() : sp_(new sentencepiece::SentencePieceProcessor) {}

    void load_file(const std::string& path) {
        load_bytes(read_file(path, "run `make data` to create it"),
                   path);
    }

    // `bytes` is the content of a .model file, e.g. as embedded in a checkpoint.
    void load_serialized(const std::string& bytes) { load_bytes(bytes, "<embedded tokenizer>"); }

    // The .model file's bytes, exactly as loaded.
    const std::string& serialized_model() const { return model_bytes_; }
    // What a token shard records of the tokenizer it was made with (data/identity.h).
    uint64_t fingerprint() const { return tokenizer_fingerprint(model_bytes_); }

    std::vector<int> encode(const std::string& text) const {
        std::vector<int> ids;
        const auto status = sp_->Encode(text, &ids);
        if (!status.ok()) fatal("%s: encode failed: %s", source_.c_str(), status.ToString().c_str());
        return ids;
    }

    std::string decode(const std::vector<int>& ids) const {
        // Check ids ourselves so that a model emitting an id past the tokenizer's vocabulary
        // (e.g. a padded output layer) gets a clear message.
        for (int id : ids)
            if (id < 0 || id >= vocab_size())
                fatal("token id %d is outside the vocabulary of %s (size %d): was the model "
                      "trained with this tokenizer?", id, source_.c_str(), vocab_size());
        std::string text;
        const auto status = sp_->Decode(ids, &text);
        if (!status.ok()) fatal("%s: decode failed: %s", source_.c_str(), status.ToString().c_str());
        return text;
    }

    int vocab_size() const { return sp_->GetPieceSize(); }
    int bos_id() const { return sp_->bos_id(); }
    int eos_id() const { return sp_->eos_id(); }
    bool is_byte(int id) const { return sp_->IsByte(id); }
    std::string piece(int id) const { return sp_->IdToPiece(id); }
    const std::string& source() const { return source_; }

    // The byte a byte-fallback piece "<0xAB>" stands for; only valid when is_byte(id).
    unsigned char byte_value(int id) const {
        return (unsigned char)std::stoi(sp_->IdToPiece(id).substr(3, 2), nullptr, 16);
    }

private:
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
    std::string model_bytes_;
    std::string source_;  // file name (or "<embedded tokenizer>") for error messages

    void load_bytes(const std::string& bytes, const std::string& source) {
        // SentencePiece throws (not a status) on some corrupt models, e.g. an empty piece that
        // its trie builder rejects; both are the same user error.
        sentencepiece::util::Status status;
        try {
            status = sp_->LoadFromSerializedProto(bytes);
        } catch (const std::exception& e) {
            fatal("%s: not a valid SentencePiece model (%s): re-run `make data` to recreate it", source.c_str(), e.what());
        }
        if (!status.ok())
            fatal("%s: not a valid SentencePiece model (%s): re-run `make data` to recreate it",
                  source.c_str(), status.ToString().c_str());
        model_bytes_ = bytes;
        source_ = source;
    }
};

// Streaming detokenization for generation: push() ids one at a time and print what it returns,
// then flush(). What they return adds up to exactly tok.decode(all ids), byte for byte.
//
// SentencePiece decodes piece by piece, but for two rules that need context:
//  - a character outside the vocabulary arrives as several byte-fallback ids, each of which
//    alone is invalid UTF-8: a run of byte ids is decoded as one UTF-8 string, and bytes that
//    form no character become U+FFFD;
//  - at the start of the text a piece may lose its leading '▁' (add_dummy_prefix or
//    remove_extra_whitespaces: not our tokenizers, but a checkpoint may embed another one).
// (Denormalization rules, which no tokenizer of ours has, would be a third: not supported.)
// So the decoder keeps only the trailing bytes of a character still missing some (at most 3)
// and decodes each new id with them alone: O(1) per id. Re-decoding every id so far on each
// push, as this class once did, cost O(n) per id: a 400 KB prompt took ~25 minutes.
//  - Held-back bytes wait until their character is complete, or until an id that cannot
//    continue it shows that decode() prints replacement characters; they are printed then.
//  - Past the start, ids are decoded behind an "anchor": a piece whose non-empty text is the
//    same wherever it stands (e.g. "e"). decode({anchor} + ids) is the anchor's text followed
//    by what `ids` print mid-text. At the start (while every id so far printed nothing and
//    left the start rules in force, as <s> does) ids are decoded alone, as decode() does.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {
        // Prefer a plain piece (its text is the piece itself); <unk> (" ⁇ ") would do too.
        for (int pass = 0; pass < 2 && anchor_ < 0; pass++)
            for (int id = 0; id < tok.vocab_size() && anchor_ < 0; id++) {
                if (tok.is_byte(id)) continue;
                const std::string t = tok.decode({id});
                if (!t.empty() && (pass == 1 || t == tok.piece(id)) && tok.decode({id, id}) == t + t) {
                    anchor_ = id;
                    anchor_text_ = t;
                }
            }
        if (anchor_ < 0)
            fatal("%s: no piece decodes to the same text everywhere: cannot stream", tok.source().c_str());
        // A '▁' piece, to see whether an id that prints nothing still ends the start (below).
        for (int id = 0; id < tok.vocab_size() && probe_ < 0; id++)
            if (!tok.is_byte(id) && tok.piece(id).rfind("\xe2\x96\x81", 0) == 0) probe_ = id;
    }

    std::string push(int id) {
        check_id(id);
        pending_.push_back(id);
        return emit(pending_.size() - incomplete_utf8_tail());
    }

    // End of generation: return whatever is still held back, exactly as decode() shows it.
    std::string flush() { return emit(pending_.size()); }

    // Take ids whose text is already printed (a prompt, which the caller prints as typed). After
    // prime(p), push() returns exactly what it would after pushing p's ids one by one; so the
    // pushes of r plus flush() return decode(p + r).substr(decode(p).size()), where p does not
    // end in an incomplete UTF-8 character (prompts from encode() never do; if it does, those
    // bytes are held back and printed with what completes them). Cheap: the ids are checked,
    // hardly any decoded.
    void prime(const std::vector<int>& ids) {
        for (int id : ids) check_id(id);
        pending_.insert(pending_.end(), ids.begin(), ids.end());
        commit(pending_.size() - incomplete_utf8_tail());
    }

    void reset() {
        pending_.clear();
        at_start_ = true;
        printed_.clear();
    }

    // Everything push() and flush() returned so far.
    const std::string& text() const { return printed_; }

private:
    const Tokenizer* tok_;
    int anchor_ = -1, probe_ = -1;
    std::string anchor_text_;
    std::vector<int> pending_;  // ids not printed yet: an incomplete UTF-8 character's bytes
    bool at_start_ = true;      // decode() is still in its starting state
    std::string printed_;

    // is_byte() and piece() do not check ids; decode() does, with a clear message.
    void check_id(int id) const {
        if (id < 0 || id >= tok_->vocab_size()) (void)tok_->decode({id});
    }

    // Print the first n pending ids: their text is final.
    std::string emit(size_t n) {
        std::string text;
        if (n > 0) {
            std::vector<int> ids(pending_.begin(), pending_.begin() + long(n));
            if (at_start_) {
                text = tok_->decode(ids);
            } else {
                ids.insert(ids.begin(), anchor_);
                text = tok_->decode(ids);
                // Always true of SentencePiece; if not, the ids' own text is the next best thing.
                if (text.compare(0, anchor_text_.size(), anchor_text_) == 0)
                    text.erase(0, anchor_text_.size());
                else
                    text = tok_->decode({ids.begin() + 1, ids.end()});
            }
        }
        commit(n);
        printed_ += text;
        return text;
    }

    // Drop the first n pending ids, printed (or primed). An id ends the start unless it prints
    // nothing and leaves the next '▁' piece as it is at the start: <s> and </s> keep it; a '▁'
    // that add_dummy_prefix swallowed does not (the next piece keeps its space).
    void commit(size_t n) {
        for (size_t i = 0; i < n && at_start_; i++) {
            const int id = pending_[i];
            at_start_ = tok_->decode({id}).empty() &&
                        (probe_ < 0 || tok_->decode({id, probe_}) == tok_->decode({probe_}));
        }
        pending_.erase(pending_.begin(), pending_.begin() + long(n));
    }

    // How many trailing pending ids are byte pieces of a UTF-8 character still missing bytes.
    // When none are, no later byte can join a character with earlier ones: a character starts
    // at a byte that is not a continuation byte and has at most 3 continuation bytes.
    size_t incomplete_utf8_tail() const {
        size_t n = 0;  // trailing continuation bytes (10xxxxxx) seen so far
        for (size_t i = pending_.size(); i-- > 0 && n < 4;) {
            if (!tok_->is_byte(pending_[i])) return 0;
            const unsigned char c = tok_->byte_value(pending_[i]);
            if ((c & 0xC0) == 0x80) { n++; continue; }
            const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                              : (c & 0xF8) == 0xF0 ? 4 : 1;
            return n + 1 < need ? n + 1 : 0;  // lead byte plus its continuations so far
        }
        return 0;
    }
};
