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

#include "data/io.h"
#include "layers/common.h"

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
        const auto status = sp_->LoadFromSerializedProto(bytes);
        if (!status.ok())
            fatal("%s: not a valid SentencePiece model (%s): re-run `make data` to recreate it",
                  source.c_str(), status.ToString().c_str());
        model_bytes_ = bytes;
        source_ = source;
    }
};

// Streaming detokenization for generation: push() ids one at a time and print what it returns.
//
// Pieces cannot be decoded one by one: SentencePiece turns '▁' into spaces depending on context
// and a character outside the vocabulary arrives as several byte-fallback ids, each of which
// alone is invalid UTF-8. So every push decodes the whole sequence so far and returns only the
// text not yet returned. Trailing byte ids that form an incomplete UTF-8 character are held
// back until the character is complete (or until a non-byte id shows it never will be, at which
// point the same replacement characters as decode() are printed).
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(&tok) {}

    std::string push(int id) {
        ids_.push_back(id);
        const size_t held = incomplete_utf8_tail();
        return emit(std::vector<int>(ids_.begin(), ids_.end() - long(held)));
    }

    // End of generation: return whatever is still held back, exactly as decode() shows it.
    std::string flush() { return emit(ids_); }

    void reset() {
        ids_.clear();
        printed_.clear();
    }

    const std::string& text() const { return printed_; }

private:
    const Tokenizer* tok_;
    std::vector<int> ids_;
    std::string printed_;  // everything returned so far

    // Decoding a longer sequence only appends to the text of a shorter one (normalization is
    // identity and held-back bytes are never decoded early), so the new text is a suffix.
    std::string emit(const std::vector<int>& ids) {
        std::string text = tok_->decode(ids);
        if (text.size() <= printed_.size()) return "";
        std::string fresh = text.substr(printed_.size());
        printed_ = std::move(text);
        return fresh;
    }

    // How many trailing ids are byte pieces of a UTF-8 character still missing bytes.
    size_t incomplete_utf8_tail() const {
        size_t n = 0;  // trailing continuation bytes (10xxxxxx) seen so far
        for (size_t i = ids_.size(); i-- > 0 && n < 4;) {
            if (!tok_->is_byte(ids_[i])) return 0;
            const unsigned char c = tok_->byte_value(ids_[i]);
            if ((c & 0xC0) == 0x80) { n++; continue; }
            const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                              : (c & 0xF8) == 0xF0 ? 4 : 1;
            return n + 1 < need ? n + 1 : 0;  // lead byte plus its continuations so far
        }
        return 0;
    }
};
