// Encoding whole documents into one token stream with document boundaries, in parallel.
//
// Documents are cut into ~64 KB chunks that end right after a '\n' and the chunks are encoded
// concurrently (SentencePiece's Encode is const and thread-safe). This gives exactly the ids of
// encoding the document in one piece, because with our training options (train_tokenizer.h)
// no piece contains '\n' and nothing depends on the start of the input (no dummy prefix,
// identity normalization), so no merge can cross a chunk boundary. tests/test_data.cpp checks
// the equality.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/tokenizer.h"
#include "core/error.h"

struct EncodedDocs {
    std::vector<uint32_t> tokens;
    std::vector<uint64_t> doc_starts;
    uint64_t text_bytes = 0;
};

// Byte offsets where chunks begin: 0, then the first line start at or after each multiple of
// chunk_bytes.
inline std::vector<size_t> chunk_starts(const std::string& text, size_t chunk_bytes) {
    std::vector<size_t> starts{0};
    size_t pos = chunk_bytes;
    while (pos < text.size()) {
        const size_t nl = text.find('\n', pos - 1);
        if (nl == std::string::npos || nl + 1 >= text.size()) break;
        starts.push_back(nl + 1);
        pos = nl + 1 + chunk_bytes;
    }
    return starts;
}

// Encode documents in order, each preceded by a BOS token.
inline EncodedDocs encode_documents(const Tokenizer& tok, const std::vector<Document>& docs,
                                    size_t chunk_bytes = 1 << 16) {
    struct Chunk { size_t doc, begin, end; };
    std::vector<Chunk> chunks;
    for (size_t d = 0; d < docs.size(); d++) {
        const std::vector<size_t> starts = chunk_starts(docs[d].text, chunk_bytes);
        for (size_t c = 0; c < starts.size(); c++)
            chunks.push_back({d, starts[c], c + 1 < starts.size() ? starts[c + 1] : docs[d].text.size()});
    }
    std::vector<std::vector<int>> ids(chunks.size());
    // An exception may not leave an OpenMP region: the first error is kept and rethrown after.
    std::string error;
#pragma omp parallel for schedule(dynamic, 1)
    for (long i = 0; i < long(chunks.size()); i++) {
        const Chunk& c = chunks[size_t(i)];
        try {
            ids[size_t(i)] = tok.encode(docs[c.doc].text.substr(c.begin, c.end - c.begin));
        } catch (const std::exception& e) {
#pragma omp critical
            if (error.empty()) error = e.what();
        }
    }
    if (!error.empty()) fatal("%s", error.c_str());

    EncodedDocs out;
    size_t prev_doc = SIZE_MAX;
    for (size_t i = 0; i < chunks.size(); i++) {
        if (chunks[i].doc != prev_doc) {  // first chunk of a new document
            prev_doc = chunks[i].doc;
            out.doc_starts.push_back(out.tokens.size());
            out.tokens.push_back(uint32_t(tok.bos_id()));
            out.text_bytes += docs[prev_doc].text.size();
        }
        out.tokens.insert(out.tokens.end(), ids[i].begin(), ids[i].end());
    }
    return out;
}
