// libFuzzer harness: tokenizer loading (data/tokenizer.h), as infer loads the SentencePiece
// model embedded in a checkpoint (Tokenizer::load_serialized) and train/data_tool load
// tokenizer.model.
//
// Feeds the input bytes, as a .model file, to load_serialized; with an accepted model, encodes
// two short texts (ASCII, accents, an emoji, a stray invalid byte), decodes the ids, streams
// them through StreamDecoder as infer prints generated text, and asks every id below 300 for
// its piece and (for byte pieces) its byte value, as StreamDecoder does.
// Checked on acceptance: encode returns ids inside the vocabulary; StreamDecoder keeps its
// contract: push()es + flush() add up to decode(all ids), and after prime(prompt) they add up
// to decode(prompt + ids) less decode(prompt).
// SentencePiece itself is not instrumented (system library): ASan sees its memory errors only
// through intercepted calls, and coverage guides mutations through our wrapper only.
// Findings: see tests/fuzz/fuzz_common.h. Seeds: tests/fuzz/tokenizer/seeds (make_seeds.cpp).
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

static std::string streamed(StreamDecoder& stream, const std::vector<int>& ids) {
    std::string out;
    for (int id : ids) out += stream.push(id);
    return out + stream.flush();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string prompt = "Hello, world! In the beginning 1234 caf\xc3\xa9 \xf0\x9f\x98\x80 \xff end.\n\tx";
    static const std::string more = " na\xc3\xafve \xe2\x88\x91 king";
    try {
        Tokenizer tok;
        tok.load_serialized(std::string(reinterpret_cast<const char*>(data), size));
        const int V = tok.vocab_size();
        const std::vector<int> ids = tok.encode(prompt), ids2 = tok.encode(more);
        for (const std::vector<int>* v : {&ids, &ids2})
            for (int id : *v) FUZZ_CHECK(id >= 0 && id < V, "encode gave id %d outside the vocabulary of %d", id, V);
        const std::string text = tok.decode(ids);
        std::vector<int> all = ids;
        all.insert(all.end(), ids2.begin(), ids2.end());
        const std::string all_text = tok.decode(all);

        StreamDecoder stream(tok);
        const std::string s1 = streamed(stream, ids);
        FUZZ_CHECK(s1 == text, "StreamDecoder printed \"%s\", decode() gives \"%s\"", s1.c_str(), text.c_str());
        stream.reset();
        const std::string s2 = streamed(stream, all);
        FUZZ_CHECK(s2 == all_text, "StreamDecoder printed \"%s\", decode() gives \"%s\"", s2.c_str(), all_text.c_str());
        stream.reset();
        stream.prime(ids);
        const std::string s3 = streamed(stream, ids2);
        FUZZ_CHECK(all_text.size() >= text.size() && s3 == all_text.substr(text.size()),
                   "after prime(prompt) StreamDecoder printed \"%s\", decode() gives \"%s\" after \"%s\"", s3.c_str(),
                   all_text.c_str(), text.c_str());

        for (int id = 0; id < V && id < 300; id++) {
            (void)tok.piece(id);
            if (tok.is_byte(id)) (void)tok.byte_value(id);
        }
        (void)tok.bos_id(), (void)tok.eos_id();
    } catch (const FatalError& e) {
        fuzz_rejected(e);
    }
    return 0;
}
