// A dependency-free PNG writer and a 5x7 bitmap font: enough to draw plots (the needle-in-a-
// haystack heatmaps of model/heatmap.h) as images without libpng, zlib or a font library.
// The PNG is 8-bit RGB; each scanline takes the cheapest of the five PNG filters, and a small
// deflate compressor of our own (LZ77 over a 32 KiB window, fixed Huffman codes, stored blocks
// where those would be larger) packs them, so a plot of flat cells and text takes a few tens of
// KB rather than 3 bytes a pixel. tests/test_heatmap.cpp decodes the files independently.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/io.h"
#include "layers/common.h"

struct Rgb {
    uint8_t r, g, b;
};

// Larger sides are a bug in the caller, not a plot; the bound also keeps width * height * 3
// far from overflowing an int.
constexpr int kPngMaxSide = 16384;

inline void check_image_size(int w, int h) {
    if (w < 1 || h < 1 || w > kPngMaxSide || h > kPngMaxSide)
        fatal("image size %dx%d is out of range: width and height must be 1..%d", w, h, kPngMaxSide);
}

struct RgbImage {
    int width = 0, height = 0;
    std::vector<uint8_t> px;  // (height, width, 3) row-major

    RgbImage() = default;
    RgbImage(int w, int h, Rgb background) : width(w), height(h) {
        check_image_size(w, h);
        px.resize((size_t)w * h * 3);
        for (size_t i = 0; i < px.size(); i += 3) {
            px[i] = background.r;
            px[i + 1] = background.g;
            px[i + 2] = background.b;
        }
    }

    bool contains(int x, int y) const { return x >= 0 && y >= 0 && x < width && y < height; }

    // Out-of-range pixels are ignored so drawing code can overhang the edges without clipping.
    void set(int x, int y, Rgb c) {
        if (!contains(x, y)) return;
        uint8_t* p = &px[((size_t)y * width + x) * 3];
        p[0] = c.r;
        p[1] = c.g;
        p[2] = c.b;
    }

    Rgb get(int x, int y) const {
        if (!contains(x, y)) fatal("pixel (%d, %d) is outside the %dx%d image", x, y, width, height);
        const uint8_t* p = &px[((size_t)y * width + x) * 3];
        return Rgb{p[0], p[1], p[2]};
    }

    void fill_rect(int x, int y, int w, int h, Rgb c) {
        const int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
        const int x1 = x + w > width ? width : x + w, y1 = y + h > height ? height : y + h;
        for (int yy = y0; yy < y1; yy++)
            for (int xx = x0; xx < x1; xx++) set(xx, yy, c);
    }
};

// ----------------------------------------------------------------------------
// PNG encoding

inline uint32_t png_crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
    // The reflected CRC-32 of PNG and zlib (polynomial 0xEDB88320), one table lookup a byte.
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

inline uint32_t png_adler32(const uint8_t* data, size_t n) {
    // Both sums stay below 2^32 for 5552 bytes between reductions (zlib's NMAX), so the
    // modulo runs once a block rather than once a byte.
    uint32_t a = 1, b = 0;
    while (n > 0) {
        const size_t block = n < 5552 ? n : 5552;
        for (size_t i = 0; i < block; i++) {
            a += data[i];
            b += a;
        }
        a %= 65521;
        b %= 65521;
        data += block;
        n -= block;
    }
    return (b << 16) | a;
}

inline void append_be32(std::string& out, uint32_t v) {
    out += (char)(v >> 24);
    out += (char)(v >> 16);
    out += (char)(v >> 8);
    out += (char)v;
}

// A chunk is length, type, data, then the CRC of type and data.
inline void append_png_chunk(std::string& out, const char type[4], const std::string& data) {
    append_be32(out, (uint32_t)data.size());
    const size_t start = out.size();
    out.append(type, 4);
    out += data;
    append_be32(out, png_crc32((const uint8_t*)out.data() + start, out.size() - start));
}

// ----------------------------------------------------------------------------
// Scanline filters (PNG specification, section 9). Each row is stored as its difference from a
// prediction, which turns flat areas and repeated rows into runs of zeros that deflate shrinks.

constexpr size_t kPngBpp = 3;  // bytes a pixel: a filter predicts a byte from the same channel

enum PngFilter : uint8_t { kPngFilterNone, kPngFilterSub, kPngFilterUp, kPngFilterAverage, kPngFilterPaeth };
constexpr int kPngFilterTypes = 5;

// Of left (a), above (b) and upper-left (c), the one closest to a + b - c; ties go to a, then
// b, in the order the specification fixes so that decoders agree.
inline int png_paeth(int a, int b, int c) {
    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    if (pa <= pb && pa <= pc) return a;
    return pb <= pc ? b : c;
}

// Filters n bytes of `row` with `type` into out; `above` is the previous unfiltered row (all
// zeros for the first row, as the specification has it).
inline void png_filter_row(int type, const uint8_t* row, const uint8_t* above, size_t n, uint8_t* out) {
    for (size_t i = 0; i < n; i++) {
        const int a = i >= kPngBpp ? row[i - kPngBpp] : 0, b = above[i], c = i >= kPngBpp ? above[i - kPngBpp] : 0;
        int predicted = 0;
        switch (type) {
            case kPngFilterSub: predicted = a; break;
            case kPngFilterUp: predicted = b; break;
            case kPngFilterAverage: predicted = (a + b) / 2; break;
            case kPngFilterPaeth: predicted = png_paeth(a, b, c); break;
            default: break;  // None predicts 0
        }
        out[i] = (uint8_t)(row[i] - predicted);
    }
}

// The usual heuristic (libpng's): filtered bytes read as signed, the smaller the sum of their
// absolute values, the more zeros and small numbers deflate will see.
inline uint64_t png_filter_cost(const uint8_t* filtered, size_t n) {
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += (uint64_t)std::abs((int)(int8_t)filtered[i]);
    return sum;
}

// The image as PNG scanlines: per row its filter type byte, then the row filtered with whichever
// of the five types costs least (the lowest type on a tie, so the output is deterministic).
inline std::vector<uint8_t> png_filter_image(const RgbImage& img) {
    const size_t row_bytes = (size_t)img.width * kPngBpp;
    const std::vector<uint8_t> zeros(row_bytes, 0);
    std::vector<uint8_t> out, trial(row_bytes), best(row_bytes);
    out.reserve((row_bytes + 1) * img.height);
    for (int y = 0; y < img.height; y++) {
        const uint8_t* row = img.px.data() + y * row_bytes;
        const uint8_t* above = y > 0 ? row - row_bytes : zeros.data();
        int best_type = 0;
        uint64_t best_cost = UINT64_MAX;
        for (int type = 0; type < kPngFilterTypes; type++) {
            png_filter_row(type, row, above, row_bytes, trial.data());
            const uint64_t cost = png_filter_cost(trial.data(), row_bytes);
            if (cost < best_cost) {
                best_cost = cost;
                best_type = type;
                best.swap(trial);
            }
        }
        out.push_back((uint8_t)best_type);
        out.insert(out.end(), best.begin(), best.end());
    }
    return out;
}

// ----------------------------------------------------------------------------
// Deflate (RFC 1951): LZ77 matching, then the fixed Huffman codes of block type 1. Filtered
// plots are mostly zeros and repeats, so nearly all of the gain is in the matching; fixed codes
// need no code tables in the stream and keep the encoder (and a checking decoder) small.

constexpr int kDeflateMinMatch = 3, kDeflateMaxMatch = 258;
constexpr int64_t kDeflateWindow = 32768;    // the farthest distance a deflate stream can name
constexpr int kDeflateMaxChain = 64;         // candidates tried a position: bounds the time on repetitive data
constexpr int kDeflateNiceMatch = 128;       // long enough to take at once, without trying more candidates
constexpr size_t kDeflateMaxStored = 65535;  // a stored block's LEN is 16 bits

// Bits go out least significant first, filling each byte from its low bit (RFC 1951 3.1.1).
struct DeflateBitWriter {
    std::string out;
    uint64_t acc = 0;
    int nbits = 0;  // pending bits in acc, always < 8 between calls

    void put(uint32_t bits, int n) {
        acc |= (uint64_t)bits << nbits;
        nbits += n;
        for (; nbits >= 8; nbits -= 8, acc >>= 8) out += (char)(acc & 0xFF);
    }
    void align() {
        if (nbits > 0) put(0, 8 - nbits);
    }
};

// Has put() of DeflateBitWriter but only counts, to price a block before writing it.
struct DeflateBitCounter {
    uint64_t bits = 0;
    void put(uint32_t, int n) { bits += (uint64_t)n; }
};

inline uint32_t reverse_bits(uint32_t v, int n) {
    uint32_t r = 0;
    for (int i = 0; i < n; i++, v >>= 1) r = (r << 1) | (v & 1);
    return r;
}

struct HuffmanCode {
    uint16_t bits;  // reversed, ready for put(): Huffman codes are sent most significant bit first
    uint8_t length;
};

// The fixed literal/length code of RFC 1951 3.2.6: symbols 0-143 are 8 bits from 00110000,
// 144-255 9 bits from 110010000, 256-279 7 bits from 0000000, 280-287 8 bits from 11000000.
inline HuffmanCode fixed_litlen_code(int symbol) {
    static const std::array<HuffmanCode, 288> table = [] {
        std::array<HuffmanCode, 288> t{};
        for (int s = 0; s < 288; s++) {
            const int first = s < 144 ? 0 : s < 256 ? 144 : s < 280 ? 256 : 280;
            const int code0 = s < 144 ? 0x30 : s < 256 ? 0x190 : s < 280 ? 0 : 0xC0;
            const int length = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
            t[s] = HuffmanCode{(uint16_t)reverse_bits((uint32_t)(code0 + s - first), length), (uint8_t)length};
        }
        return t;
    }();
    return table[symbol];
}

// Lengths and distances are sent as a symbol naming a range, then extra bits for the offset in
// it (RFC 1951 3.2.5).
struct DeflateRange {
    int symbol, extra_bits;
    uint32_t extra;
};

inline DeflateRange deflate_length_range(int length) {
    static const uint16_t base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const uint8_t extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    const int i = (int)(std::upper_bound(base, base + 29, length) - base) - 1;
    return DeflateRange{257 + i, extra[i], (uint32_t)(length - base[i])};
}

inline DeflateRange deflate_distance_range(int distance) {
    static const uint16_t base[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                      193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static const uint8_t extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    const int i = (int)(std::upper_bound(base, base + 30, distance) - base) - 1;
    return DeflateRange{i, extra[i], (uint32_t)(distance - base[i])};
}

// One LZ77 step: a literal byte (length 0), or a copy of `length` bytes from `distance` back.
struct Lz77Token {
    uint16_t length, distance;
    uint8_t literal;
};

template <class Bits>
void put_fixed_token(Bits& w, const Lz77Token& t) {
    if (t.length == 0) {
        const HuffmanCode c = fixed_litlen_code(t.literal);
        w.put(c.bits, c.length);
        return;
    }
    const DeflateRange len = deflate_length_range(t.length), dist = deflate_distance_range(t.distance);
    const HuffmanCode c = fixed_litlen_code(len.symbol);
    w.put(c.bits, c.length);
    w.put(len.extra, len.extra_bits);  // extra bits are a plain number, least significant bit first
    w.put(reverse_bits((uint32_t)dist.symbol, 5), 5);  // the fixed distance code is the symbol in 5 bits
    w.put(dist.extra, dist.extra_bits);
}

// Finds earlier copies of the bytes at a position: each position of the last 32 KiB sits in a
// chain of the positions whose first 3 bytes hash alike, newest first, so the nearest (cheapest
// to code) candidates come first and the chain length bounds the work.
class Lz77Matcher {
public:
    struct Match {
        int length = 0, distance = 0;  // length 0: none of at least kDeflateMinMatch bytes
    };

    explicit Lz77Matcher(const std::vector<uint8_t>& data)
        : data_(data), head_(kHashSize, -1), prev_((size_t)kDeflateWindow, -1) {}

    // The longest match for pos, the nearest among equals. pos must not decrease between calls:
    // every position before it joins the chains first.
    Match longest(size_t pos) {
        insert_before(pos);
        Match best;
        if (pos + kDeflateMinMatch > data_.size()) return best;
        const int max_length = (int)std::min<size_t>(kDeflateMaxMatch, data_.size() - pos);
        const uint8_t* cur = data_.data() + pos;
        int64_t cand = head_[hash(pos)];
        for (int tries = 0; tries < kDeflateMaxChain && cand >= 0 && (int64_t)pos - cand <= kDeflateWindow; tries++) {
            const uint8_t* old = data_.data() + cand;
            // Only a candidate that also matches at best.length can beat best: one byte rejects most.
            if (old[best.length] == cur[best.length]) {
                int n = 0;
                while (n < max_length && old[n] == cur[n]) n++;
                if (n > best.length) best = Match{n, (int)((int64_t)pos - cand)};
                if (n >= kDeflateNiceMatch || n == max_length) break;
            }
            cand = prev_[(size_t)cand % kDeflateWindow];
        }
        return best.length >= kDeflateMinMatch ? best : Match{};
    }

private:
    static constexpr int kHashBits = 15;
    static constexpr size_t kHashSize = (size_t)1 << kHashBits;

    uint32_t hash(size_t p) const {
        const uint32_t v = data_[p] | (uint32_t)data_[p + 1] << 8 | (uint32_t)data_[p + 2] << 16;
        return (v * 2654435761u) >> (32 - kHashBits);  // multiplicative hashing spreads nearby values
    }

    // A slot of prev_ is reused 32 KiB later; by then its old value is out of the window, which
    // longest() checks before following it.
    void insert_before(size_t pos) {
        for (; next_ < pos; next_++) {
            if (next_ + kDeflateMinMatch > data_.size()) continue;
            int64_t& head = head_[hash(next_)];
            prev_[next_ % kDeflateWindow] = head;
            head = (int64_t)next_;
        }
    }

    const std::vector<uint8_t>& data_;
    std::vector<int64_t> head_, prev_;  // positions; -1 for none
    size_t next_ = 0;                   // the first position not yet in the chains
};

// Tokens for data from `start` until they reach `target` or the end; returns where they stop.
// Matching is lazy by one step, as in zlib: a match is deferred, its first byte going out as a
// literal, when the match one byte further on is longer.
inline size_t lz77_tokens(Lz77Matcher& matcher, const std::vector<uint8_t>& data, size_t start, size_t target,
                          std::vector<Lz77Token>& tokens) {
    size_t i = start;
    Lz77Matcher::Match cur = matcher.longest(i);
    while (i < target) {
        if (cur.length > 0 && cur.length < kDeflateNiceMatch) {
            const Lz77Matcher::Match next = matcher.longest(i + 1);
            if (next.length > cur.length) {  // defer: i goes out as a literal, next is the candidate
                tokens.push_back(Lz77Token{0, 0, data[i++]});
                cur = next;
                continue;
            }
        }
        if (cur.length == 0) {
            tokens.push_back(Lz77Token{0, 0, data[i++]});
        } else {
            tokens.push_back(Lz77Token{(uint16_t)cur.length, (uint16_t)cur.distance, 0});
            i += cur.length;
        }
        cur = matcher.longest(i);
    }
    return i;
}

// Writes the tokens covering bytes[0..n) as one block: fixed Huffman, or stored when that is
// smaller (noise, where fixed codes spend 8 or 9 bits a byte and find no matches).
inline void deflate_block(DeflateBitWriter& w, const std::vector<Lz77Token>& tokens, const uint8_t* bytes, size_t n,
                          bool final_block) {
    DeflateBitCounter fixed;
    for (const Lz77Token& t : tokens) put_fixed_token(fixed, t);
    fixed.bits += fixed_litlen_code(256).length;                      // end of block
    const uint64_t stored_bits = (8 - (w.nbits + 3) % 8) % 8 + 32 + 8 * (uint64_t)n;  // pad, LEN, NLEN, bytes
    w.put(final_block ? 1 : 0, 1);  // BFINAL
    if (fixed.bits <= stored_bits) {
        w.put(1, 2);  // BTYPE 01: fixed Huffman codes
        for (const Lz77Token& t : tokens) put_fixed_token(w, t);
        const HuffmanCode end = fixed_litlen_code(256);
        w.put(end.bits, end.length);
    } else {
        w.put(0, 2);  // BTYPE 00: stored, from the next byte boundary
        w.align();
        w.put((uint32_t)n, 16);
        w.put((uint32_t)~n & 0xFFFF, 16);
        w.out.append((const char*)bytes, n);
    }
}

// A raw deflate stream. Blocks cover at most 65535 bytes so that any of them can fall back to
// a stored block, which bounds the growth of incompressible data to 5 bytes a block.
inline std::string deflate_compress(const std::vector<uint8_t>& data) {
    Lz77Matcher matcher(data);
    DeflateBitWriter w;
    std::vector<Lz77Token> tokens;
    size_t start = 0;
    do {
        // A match starts before target and is at most 258 long, so the block stays <= 65535.
        const size_t target = std::min(data.size(), start + kDeflateMaxStored - kDeflateMaxMatch);
        tokens.clear();
        const size_t end = lz77_tokens(matcher, data, start, target, tokens);
        deflate_block(w, tokens, data.data() + start, end - start, end == data.size());
        start = end;
    } while (start < data.size());
    w.align();
    return w.out;
}

// A zlib stream (RFC 1950): a 2-byte header, the deflate stream, the Adler-32 of the data.
inline std::string zlib_compress(const std::vector<uint8_t>& data) {
    std::string z;
    z += (char)0x78;  // deflate with a 32K window
    z += (char)0x9C;  // no dictionary, "default" level (informational); makes 0x789C a multiple of 31 as required
    z += deflate_compress(data);
    append_be32(z, png_adler32(data.data(), data.size()));
    return z;
}

inline std::string png_encode(const RgbImage& img) {
    check_image_size(img.width, img.height);
    const size_t row_bytes = (size_t)img.width * 3;
    if (img.px.size() != row_bytes * img.height)
        fatal("image %dx%d holds %zu bytes of pixels, expected %zu", img.width, img.height, img.px.size(),
              row_bytes * img.height);

    std::string ihdr;
    append_be32(ihdr, (uint32_t)img.width);
    append_be32(ihdr, (uint32_t)img.height);
    ihdr += (char)8;  // bits per channel
    ihdr += (char)2;  // color type: truecolor RGB
    ihdr += (char)0;  // compression: deflate
    ihdr += (char)0;  // filter method: adaptive (each row names its filter)
    ihdr += (char)0;  // no interlace

    std::string png("\x89PNG\r\n\x1a\n", 8);
    append_png_chunk(png, "IHDR", ihdr);
    append_png_chunk(png, "IDAT", zlib_compress(png_filter_image(img)));
    append_png_chunk(png, "IEND", std::string());
    return png;
}

inline void write_png(const std::string& path, const RgbImage& img) {
    write_file_atomic(path, png_encode(img));
}

// ----------------------------------------------------------------------------
// Text: a 5x7 font drawn in a 6x8 cell (one blank column and row of spacing)

// kGlyphH rows from the cap line to the baseline; the descenders of g j p q y , ; take the
// eighth row, the line spacing, because inside seven rows a g cannot be told from a 9.
constexpr int kGlyphW = 5, kGlyphH = 7, kCharAdvance = 6, kLineHeight = 8;

// One glyph per printable ASCII character 32..126, kLineHeight rows from the top; in each row
// bit 4 is the leftmost column and bit 0 the rightmost.
inline const uint8_t* glyph_rows(char ch) {
    static const uint8_t font[95][kLineHeight] = {
        {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},  // space
        {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04, 0x00},  // !
        {0x0A, 0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00},  // "
        {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A, 0x00},  // #
        {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04, 0x00},  // $
        {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03, 0x00},  // %
        {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D, 0x00},  // &
        {0x0C, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00},  // '
        {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02, 0x00},  // (
        {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08, 0x00},  // )
        {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00, 0x00},  // *
        {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00, 0x00},  // +
        {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08},  // ,
        {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00, 0x00},  // -
        {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C, 0x00},  // .
        {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00, 0x00},  // /
        {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E, 0x00},  // 0
        {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00},  // 1
        {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F, 0x00},  // 2
        {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E, 0x00},  // 3
        {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02, 0x00},  // 4
        {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E, 0x00},  // 5
        {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E, 0x00},  // 6
        {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08, 0x00},  // 7
        {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E, 0x00},  // 8
        {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C, 0x00},  // 9
        {0x00, 0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00},  // :
        {0x00, 0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08},  // ;
        {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02, 0x00},  // <
        {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00, 0x00},  // =
        {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08, 0x00},  // >
        {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04, 0x00},  // ?
        {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E, 0x00},  // @
        {0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x00},  // A
        {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E, 0x00},  // B
        {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E, 0x00},  // C
        {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C, 0x00},  // D
        {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F, 0x00},  // E
        {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10, 0x00},  // F
        {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F, 0x00},  // G
        {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11, 0x00},  // H
        {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00},  // I
        {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C, 0x00},  // J
        {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11, 0x00},  // K
        {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F, 0x00},  // L
        {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11, 0x00},  // M
        {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x00},  // N
        {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E, 0x00},  // O
        {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10, 0x00},  // P
        {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D, 0x00},  // Q
        {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11, 0x00},  // R
        {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E, 0x00},  // S
        {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00},  // T
        {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E, 0x00},  // U
        {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04, 0x00},  // V
        {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A, 0x00},  // W
        {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11, 0x00},  // X
        {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x00},  // Y
        {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F, 0x00},  // Z
        {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E, 0x00},  // [
        {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00, 0x00},  // backslash
        {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E, 0x00},  // ]
        {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00},  // ^
        {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F, 0x00},  // _
        {0x08, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00},  // `
        {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F, 0x00},  // a
        {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E, 0x00},  // b
        {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E, 0x00},  // c
        {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F, 0x00},  // d
        {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E, 0x00},  // e
        {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08, 0x00},  // f
        {0x00, 0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // g
        {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00},  // h
        {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E, 0x00},  // i
        {0x02, 0x00, 0x06, 0x02, 0x02, 0x02, 0x12, 0x0C},  // j
        {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12, 0x00},  // k
        {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00},  // l
        {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11, 0x00},  // m
        {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00},  // n
        {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E, 0x00},  // o
        {0x00, 0x00, 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10},  // p
        {0x00, 0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x01},  // q
        {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10, 0x00},  // r
        {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E, 0x00},  // s
        {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06, 0x00},  // t
        {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D, 0x00},  // u
        {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04, 0x00},  // v
        {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A, 0x00},  // w
        {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x00},  // x
        {0x00, 0x00, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E},  // y
        {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F, 0x00},  // z
        {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02, 0x00},  // {
        {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00},  // |
        {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08, 0x00},  // }
        {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00, 0x00},  // ~
    };
    // Anything else (control bytes, UTF-8) shows as a box, so a missing glyph is visible.
    static const uint8_t box[kLineHeight] = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F, 0x00};
    const unsigned char c = (unsigned char)ch;
    return c >= 32 && c <= 126 ? font[c - 32] : box;
}

// The inked width: n characters of 6*scale columns, less the trailing spacing column, so
// centering on it centers the ink. 0 for an empty string.
inline int text_width(const std::string& text, int scale = 1) {
    return text.empty() ? 0 : ((int)text.size() * kCharAdvance - 1) * scale;
}

// Calls plot(u, v) for every inked font pixel of `text`, u along the text and v down from the
// top of the glyphs, both in font pixels; the horizontal and vertical writers place them.
template <class Plot>
void for_each_text_pixel(const std::string& text, Plot&& plot) {
    for (size_t i = 0; i < text.size(); i++) {
        const uint8_t* rows = glyph_rows(text[i]);
        for (int v = 0; v < kLineHeight; v++)
            for (int col = 0; col < kGlyphW; col++)
                if (rows[v] & (0x10 >> col)) plot((int)i * kCharAdvance + col, v);
    }
}

// (x, y) is the top-left of the text; each font pixel becomes a scale x scale square.
inline void draw_text(RgbImage& img, int x, int y, const std::string& text, Rgb color, int scale = 1) {
    for_each_text_pixel(text, [&](int u, int v) { img.fill_rect(x + u * scale, y + v * scale, scale, scale, color); });
}

// Text turned 90 degrees counter-clockwise, read from bottom to top (a y-axis title). (x, y) is
// the top-left of its box, kLineHeight*scale wide and text_width(text, scale) tall.
inline void draw_text_vertical(RgbImage& img, int x, int y, const std::string& text, Rgb color, int scale = 1) {
    const int bottom = y + text_width(text, scale) - scale;  // top row of the first column's square
    for_each_text_pixel(text, [&](int u, int v) {
        img.fill_rect(x + v * scale, bottom - u * scale, scale, scale, color);
    });
}
