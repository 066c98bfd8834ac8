// Tests for the PNG writer (model/png.h) and the needle-in-a-haystack heatmaps (model/heatmap.h).
// The PNG checks trust nothing of the encoder: the test has its own bitwise CRC-32 and Adler-32,
// its own inflate (stored and fixed-Huffman blocks) and PNG unfiltering, and compares every
// decoded pixel with the image; where python3 is installed, its zlib inflates the example too.
// Also writes build/test_heatmap_example.png, a two-panel heatmap to look at.
// Prints one PASS/FAIL line per check, then "N passed, M failed"; exits non-zero on failure.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "layers/common.h"
#include "model/heatmap.h"
#include "model/png.h"

static int g_passed = 0, g_failed = 0;

static void check(bool ok, const std::string& name) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", name.c_str());
    (ok ? g_passed : g_failed)++;
}

// Pass if `body` ends in fatal() with a one-line message containing `expect`.
static void expect_fatal(const std::string& name, const std::function<void()>& body, const std::string& expect) {
    try {
        body();
        check(false, name + " (no error)");
    } catch (const FatalError& e) {
        const std::string msg = e.what();
        const bool ok = msg.find('\n') == std::string::npos && msg.find(expect) != std::string::npos;
        check(ok, name + ": " + msg);
    }
}

// ----------------------------------------------------------------------------
// An independent PNG reader: CRC and Adler bit by bit, as their definitions read; inflate of
// stored and fixed-Huffman blocks and the five scanline filters as RFC 1951 and the PNG
// specification describe them, sharing no code with model/png.h.

static uint32_t crc32_bitwise(const uint8_t* p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return crc ^ 0xFFFFFFFFu;
}

static uint32_t adler32_simple(const std::vector<uint8_t>& v) {
    uint32_t a = 1, b = 0;
    for (uint8_t x : v) {
        a = (a + x) % 65521;
        b = (b + a) % 65521;
    }
    return (b << 16) | a;
}

static uint32_t be32(const std::string& s, size_t at) {
    return (uint32_t)(uint8_t)s[at] << 24 | (uint32_t)(uint8_t)s[at + 1] << 16 | (uint32_t)(uint8_t)s[at + 2] << 8 |
           (uint32_t)(uint8_t)s[at + 3];
}

struct Decoded {
    int width = 0, height = 0;
    int stored_blocks = 0, fixed_blocks = 0;
    int max_length = 0, max_distance = 0;  // of the back-references
    long long matches = 0, matches_258 = 0;
    int filters[5] = {0, 0, 0, 0, 0};  // rows per filter type
    std::vector<uint8_t> raw;          // the inflated scanlines, filter bytes included
    std::vector<uint8_t> px;
};

// Deflate's bits come least significant first within each byte (RFC 1951 3.1.1).
struct BitReader {
    const std::string& s;
    size_t pos;
    int bit = 0;
    bool overrun = false;

    uint32_t bit1() {
        if (pos >= s.size()) {
            overrun = true;
            return 0;
        }
        const uint32_t b = ((uint8_t)s[pos] >> bit) & 1;
        if (++bit == 8) bit = 0, pos++;
        return b;
    }
    // A number of n bits (LEN, extra bits): its least significant bit comes first.
    uint32_t number(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; i++) v |= bit1() << i;
        return v;
    }
    // A Huffman code of n bits: its most significant bit comes first.
    uint32_t code(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; i++) v = v << 1 | bit1();
        return v;
    }
    void align() {
        if (bit != 0) bit = 0, pos++;
    }
};

// The fixed literal/length code as RFC 1951 3.2.6 tabulates it, read a bit at a time: the first
// 7 bits tell whether the code is 7, 8 or 9 bits long.
static int read_fixed_litlen(BitReader& br) {
    uint32_t c = br.code(7);
    if (c <= 0x17) return 256 + (int)c;  // 0000000 .. 0010111: 256-279
    c = c << 1 | br.bit1();
    if (c >= 0x30 && c <= 0xBF) return (int)c - 0x30;       // 00110000 .. 10111111: 0-143
    if (c >= 0xC0 && c <= 0xC7) return 280 + (int)c - 0xC0;  // 11000000 .. 11000111: 280-287
    c = c << 1 | br.bit1();
    return 144 + (int)c - 0x190;  // 110010000 .. 111111111: 144-255
}

// Base and extra bits of length symbols 257..285 and distance symbols 0..29, derived from the
// rules behind RFC 1951's tables instead of copied from them: the extra bits grow by one every
// 4 length (2 distance) symbols, each range starts where the previous ends, and 285 is 258.
static void length_symbol(int sym, int& base, int& extra) {
    base = 3;
    for (int s = 257;; s++) {
        extra = s < 265 ? 0 : (s - 261) / 4;
        if (s == sym) break;
        base += 1 << extra;
    }
    if (sym == 285) base = 258, extra = 0;
}

static void distance_symbol(int sym, int& base, int& extra) {
    base = 1;
    for (int s = 0;; s++) {
        extra = s < 4 ? 0 : s / 2 - 1;
        if (s == sym) break;
        base += 1 << extra;
    }
}

static std::string inflate_stored_block(BitReader& br, std::vector<uint8_t>& out) {
    br.align();
    const std::string& z = br.s;
    if (br.pos + 4 > z.size()) return "stored block header truncated";
    const uint32_t len = (uint8_t)z[br.pos] | (uint8_t)z[br.pos + 1] << 8;
    const uint32_t nlen = (uint8_t)z[br.pos + 2] | (uint8_t)z[br.pos + 3] << 8;
    if ((len ^ 0xFFFF) != nlen) return "NLEN is not the complement of LEN";
    br.pos += 4;
    if (br.pos + len > z.size()) return "stored block data truncated";
    out.insert(out.end(), z.begin() + br.pos, z.begin() + br.pos + len);
    br.pos += len;
    return "";
}

static std::string inflate_fixed_block(BitReader& br, std::vector<uint8_t>& out, Decoded& d) {
    for (;;) {
        const int sym = read_fixed_litlen(br);
        if (br.overrun) return "fixed block runs past the stream";
        if (sym < 256) {
            out.push_back((uint8_t)sym);
            continue;
        }
        if (sym == 256) return "";
        if (sym > 285) return "length symbol " + std::to_string(sym) + " is reserved";
        int base, extra;
        length_symbol(sym, base, extra);
        const int length = base + (int)br.number(extra);
        const int dsym = (int)br.code(5);  // fixed distance codes: the symbol itself in 5 bits
        if (dsym > 29) return "distance symbol " + std::to_string(dsym) + " is reserved";
        distance_symbol(dsym, base, extra);
        const int distance = base + (int)br.number(extra);
        if (br.overrun) return "fixed block runs past the stream";
        if (length > 258) return "length over 258";
        if ((size_t)distance > out.size()) return "distance reaches before the start of the data";
        for (int k = 0; k < length; k++) out.push_back(out[out.size() - distance]);  // may overlap itself
        d.max_length = std::max(d.max_length, length);
        d.max_distance = std::max(d.max_distance, distance);
        d.matches++;
        d.matches_258 += length == 258;
    }
}

// Undo a zlib stream of stored and fixed-Huffman blocks into d.raw; "" on success, else what is wrong.
static std::string inflate_zlib(const std::string& z, Decoded& d) {
    if (z.size() < 2) return "zlib stream too short";
    const uint8_t cmf = (uint8_t)z[0], flg = (uint8_t)z[1];
    if ((cmf & 0x0F) != 8 || (cmf >> 4) > 7) return "zlib header is not deflate with a <=32K window";
    if ((cmf * 256 + flg) % 31 != 0) return "zlib header check bits wrong";
    if (flg & 0x20) return "zlib preset dictionary set";
    BitReader br{z, 2};
    for (bool final_block = false; !final_block;) {
        final_block = br.bit1();
        const uint32_t type = br.number(2);
        if (br.overrun) return "block header truncated";
        std::string err;
        if (type == 0) {
            err = inflate_stored_block(br, d.raw);
            d.stored_blocks++;
        } else if (type == 1) {
            err = inflate_fixed_block(br, d.raw, d);
            d.fixed_blocks++;
        } else {
            return type == 2 ? "dynamic Huffman block (this decoder reads only stored and fixed)" : "block type 3 is reserved";
        }
        if (!err.empty()) return err;
    }
    br.align();
    if (br.pos + 4 != z.size()) return "zlib stream does not end with exactly 4 Adler-32 bytes";
    if (be32(z, br.pos) != adler32_simple(d.raw)) return "Adler-32 mismatch";
    return "";
}

// The predictor of each filter type from left (a), above (b) and upper-left (c), PNG section 9.
static int predict(int type, int a, int b, int c) {
    if (type == 1) return a;
    if (type == 2) return b;
    if (type == 3) return (a + b) / 2;
    if (type == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
    }
    return 0;
}

// Rebuilds d.px from the filtered scanlines in d.raw.
static std::string unfilter(Decoded& d) {
    const size_t stride = (size_t)d.width * 3, row = stride + 1;
    if (d.raw.size() != row * d.height) return "raw size is not height * (1 + 3 * width)";
    d.px.assign(stride * d.height, 0);
    for (int y = 0; y < d.height; y++) {
        const int type = d.raw[y * row];
        if (type > 4) return "row " + std::to_string(y) + " has filter type " + std::to_string(type);
        d.filters[type]++;
        const uint8_t* f = &d.raw[y * row + 1];
        uint8_t* cur = &d.px[y * stride];
        const uint8_t* up = y > 0 ? cur - stride : nullptr;
        for (size_t i = 0; i < stride; i++) {
            const int a = i >= 3 ? cur[i - 3] : 0, b = up ? up[i] : 0, c = up && i >= 3 ? up[i - 3] : 0;
            cur[i] = (uint8_t)(f[i] + predict(type, a, b, c));
        }
    }
    return "";
}

static std::string decode_png(const std::string& png, Decoded& out) {
    static const std::string sig("\x89PNG\r\n\x1a\n", 8);
    if (png.compare(0, 8, sig) != 0) return "bad signature";
    std::vector<std::string> types;
    std::string ihdr, zlib;
    size_t at = 8;
    while (at < png.size()) {
        if (at + 12 > png.size()) return "chunk header truncated";
        const uint32_t len = be32(png, at);
        if (at + 12 + (size_t)len > png.size()) return "chunk length runs past the file";
        const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, len);
        if (be32(png, at + 8 + len) != crc32_bitwise((const uint8_t*)png.data() + at + 4, 4 + len))
            return "CRC mismatch in chunk " + type;
        if (type == "IHDR") ihdr = data;
        if (type == "IDAT") {
            if (!types.empty() && types.back() != "IDAT" && types.back() != "IHDR") return "IDAT chunks not consecutive";
            zlib += data;
        }
        types.push_back(type);
        at += 12 + len;
    }
    if (types.empty() || types.front() != "IHDR" || types.back() != "IEND") return "chunks not IHDR ... IEND";
    if (ihdr.size() != 13) return "IHDR is not 13 bytes";
    if (png.compare(png.size() - 12, 4, std::string(4, '\0')) != 0) return "IEND has data";
    out.width = (int)be32(ihdr, 0);
    out.height = (int)be32(ihdr, 4);
    if (ihdr.substr(8) != std::string("\x08\x02\x00\x00\x00", 5)) return "IHDR is not 8-bit RGB, deflate, no interlace";
    const std::string err = inflate_zlib(zlib, out);
    return err.empty() ? unfilter(out) : err;
}

// ----------------------------------------------------------------------------
// A PNG built by the test itself: stored blocks and the filter type of each row chosen by the
// caller, so the decoder meets every filter type and block boundaries the encoder may never make.

static void put_be32(std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s += (char)(v >> shift);
}

static void put_chunk(std::string& png, const std::string& type, const std::string& data) {
    put_be32(png, (uint32_t)data.size());
    const std::string body = type + data;
    png += body;
    put_be32(png, crc32_bitwise((const uint8_t*)body.data(), body.size()));
}

static std::string stored_png(const RgbImage& img, const std::function<int(int)>& filter_of_row) {
    const size_t stride = (size_t)img.width * 3;
    std::vector<uint8_t> raw;
    for (int y = 0; y < img.height; y++) {
        const int type = filter_of_row(y);
        raw.push_back((uint8_t)type);
        const uint8_t* cur = &img.px[y * stride];
        const uint8_t* up = y > 0 ? cur - stride : nullptr;
        for (size_t i = 0; i < stride; i++) {
            const int a = i >= 3 ? cur[i - 3] : 0, b = up ? up[i] : 0, c = up && i >= 3 ? up[i - 3] : 0;
            raw.push_back((uint8_t)(cur[i] - predict(type, a, b, c)));
        }
    }
    std::string z("\x78\x01", 2);
    for (size_t pos = 0; pos == 0 || pos < raw.size();) {
        const size_t len = std::min<size_t>(raw.size() - pos, 65535);
        z += (char)(pos + len == raw.size() ? 1 : 0);
        z += (char)(len & 0xFF);
        z += (char)(len >> 8);
        z += (char)(~len & 0xFF);
        z += (char)((~len >> 8) & 0xFF);
        z.append(raw.begin() + pos, raw.begin() + pos + len);
        pos += len;
    }
    put_be32(z, adler32_simple(raw));
    std::string ihdr;
    put_be32(ihdr, (uint32_t)img.width);
    put_be32(ihdr, (uint32_t)img.height);
    ihdr += std::string("\x08\x02\x00\x00\x00", 5);
    std::string png("\x89PNG\r\n\x1a\n", 8);
    put_chunk(png, "IHDR", ihdr);
    put_chunk(png, "IDAT", z);
    put_chunk(png, "IEND", "");
    return png;
}

// ----------------------------------------------------------------------------
// PNG round trips

// Encode, decode independently, compare every pixel.
static Decoded check_roundtrip(const RgbImage& img, const std::string& name) {
    Decoded d;
    const std::string err = decode_png(png_encode(img), d);
    check(err.empty(), name + " decodes" + (err.empty() ? "" : ": " + err));
    check(d.width == img.width && d.height == img.height, name + " IHDR size " + std::to_string(d.width) + "x" +
                                                              std::to_string(d.height));
    check(d.px == img.px, name + " every pixel matches");
    return d;
}

static size_t raw_size(const RgbImage& img) { return (size_t)img.height * (1 + (size_t)img.width * 3); }

static RgbImage pattern_image(int w, int h) {
    RgbImage img(w, h, Rgb{0, 0, 0});
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) img.set(x, y, Rgb{(uint8_t)(x * 7 + y), (uint8_t)(y * 13 + 5), (uint8_t)(x ^ y)});
    return img;
}

// Deterministic noise (a 64-bit LCG's high bytes): incompressible to deflate.
static RgbImage noise_image(int w, int h, uint64_t seed) {
    RgbImage img(w, h, Rgb{0, 0, 0});
    for (uint8_t& v : img.px) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v = (uint8_t)(seed >> 56);
    }
    return img;
}

static void test_png_format() {
    const uint8_t iend[4] = {'I', 'E', 'N', 'D'};
    check(crc32_bitwise(iend, 4) == 0xAE426082u, "independent CRC-32 of an empty IEND chunk is 0xAE426082");
    check(crc32_bitwise((const uint8_t*)"123456789", 9) == 0xCBF43926u, "independent CRC-32 check value");
    check(png_crc32((const uint8_t*)"123456789", 9) == 0xCBF43926u, "png_crc32 check value");
    const std::string png = png_encode(RgbImage(2, 2, Rgb{1, 2, 3}));
    check(png.substr(png.size() - 12) == std::string("\0\0\0\0IEND\xAE\x42\x60\x82", 12), "file ends in the known IEND chunk");
    // Spot checks of the derived tables against RFC 1951's: the last ranges of each.
    int b1, e1, b2, e2, b3, e3, b4, e4;
    length_symbol(284, b1, e1);
    length_symbol(285, b2, e2);
    distance_symbol(29, b3, e3);
    length_symbol(265, b4, e4);
    check(b1 == 227 && e1 == 5 && b2 == 258 && e2 == 0 && b3 == 24577 && e3 == 13 && b4 == 11 && e4 == 1,
          "derived length and distance ranges match RFC 1951");
}

// Every filter type and stored-block boundary, through PNGs the test builds itself.
static void test_decoder_filters() {
    const RgbImage img = pattern_image(300, 300);
    for (int type = 0; type < 5; type++) {
        Decoded d;
        const std::string err = decode_png(stored_png(img, [&](int) { return type; }), d);
        check(err.empty() && d.px == img.px && d.filters[type] == 300,
              "decoder undoes filter type " + std::to_string(type) + (err.empty() ? "" : ": " + err));
    }
    Decoded mixed;
    const std::string err = decode_png(stored_png(img, [](int y) { return (y * 7) % 5; }), mixed);
    check(err.empty() && mixed.px == img.px, "decoder undoes a different filter each row" + (err.empty() ? "" : ": " + err));
    // 300 rows of 1 + 900 bytes: 270300 raw bytes, five stored blocks. 771 rows of 1 + 84 bytes
    // are exactly 65535, one block; 16384 rows of 1 + 3 bytes are 65536, one byte into a second.
    check(mixed.stored_blocks == 5, "270300 raw bytes: 5 stored blocks, got " + std::to_string(mixed.stored_blocks));
    const std::vector<std::pair<RgbImage, int>> cases = {{pattern_image(28, 771), 1}, {pattern_image(1, 16384), 2}};
    for (const auto& c : cases) {
        Decoded d;
        const std::string e = decode_png(stored_png(c.first, [](int y) { return y % 5; }), d);
        check(e.empty() && d.px == c.first.px && d.stored_blocks == c.second,
              std::to_string(raw_size(c.first)) + " raw bytes: " + std::to_string(c.second) + " stored blocks");
    }
}

static void test_png_roundtrip() {
    check_roundtrip(RgbImage(1, 1, Rgb{10, 200, 30}), "1x1");
    for (const auto& wh : std::vector<std::pair<int, int>>{{2, 1}, {1, 2}, {3, 7}, {7, 3}, {13, 11}, {301, 199}})
        check_roundtrip(pattern_image(wh.first, wh.second), std::to_string(wh.first) + "x" + std::to_string(wh.second));
    check_roundtrip(pattern_image(1, 16384), "1x16384");
    check_roundtrip(pattern_image(16384, 1), "16384x1");
    check_roundtrip(noise_image(1, 1, 7), "1x1 noise");
    check_roundtrip(noise_image(17, 9, 8), "17x9 noise");

    // Noise: no matches, and fixed codes spend 8 or 9 bits a byte, so blocks fall back to stored.
    const RgbImage noise = noise_image(300, 300, 1);
    const Decoded n = check_roundtrip(noise, "300x300 noise");
    const size_t n_size = png_encode(noise).size();
    check(n.stored_blocks >= 5 && n.fixed_blocks == 0, "noise goes into stored blocks: " +
                                                           std::to_string(n.stored_blocks) + " stored, " +
                                                           std::to_string(n.fixed_blocks) + " fixed");
    check(n_size <= raw_size(noise) + 5 * 5 + 100, "noise PNG grows by block headers only: " + std::to_string(n_size) +
                                                        " bytes for " + std::to_string(raw_size(noise)) + " raw");
    // Noise on top, flat below: both block types in one stream.
    RgbImage half = noise_image(300, 300, 2);
    half.fill_rect(0, 150, 300, 150, Rgb{20, 40, 60});
    const Decoded h = check_roundtrip(half, "half noise, half flat");
    check(h.stored_blocks > 0 && h.fixed_blocks > 0, "stored and fixed blocks in one stream");
    check_roundtrip(pattern_image(1000, 120), "1000x120 pattern");
}

// Long runs and far repeats: the longest length (258) and the farthest distance (32768).
static void test_png_matches() {
    const RgbImage flat(1000, 1000, Rgb{200, 100, 50});
    const Decoded f = check_roundtrip(flat, "1000x1000 flat");
    const size_t f_size = png_encode(flat).size();
    check(f.matches_258 > 10000 && f.max_length == 258,
          "a flat image is runs of 258-byte matches: " + std::to_string(f.matches_258));
    check(f_size * 100 < raw_size(flat), "flat 1000x1000 compresses over 100 times: " + std::to_string(f_size) + " bytes");

    // Rows of 1 + 3 * 5461 = 16384 bytes; the image is two noise rows over and over, so the
    // nearest copy of a filtered row is two rows (32768 bytes) back, the window's far edge.
    RgbImage far = noise_image(5461, 8, 3);
    const size_t two_rows = 2 * (size_t)5461 * 3;
    for (size_t i = two_rows; i < far.px.size(); i++) far.px[i] = far.px[i - two_rows];
    const Decoded d = check_roundtrip(far, "two noise rows repeated");
    check(d.max_distance == 32768, "matches reach 32768 bytes back: max distance " + std::to_string(d.max_distance));
    check(d.matches_258 > 100, "far matches are 258 long: " + std::to_string(d.matches_258));
    const size_t size = png_encode(far).size();
    check(size < raw_size(far) / 2, "repeated rows cost little: " + std::to_string(size) + " of " +
                                        std::to_string(raw_size(far)) + " bytes");
}

static void test_png_errors() {
    expect_fatal("empty image refused", [] { png_encode(RgbImage()); }, "out of range");
    expect_fatal("width 0 refused", [] { RgbImage(0, 5, Rgb{0, 0, 0}); }, "0x5");
    expect_fatal("width 16385 refused", [] { RgbImage(16385, 1, Rgb{0, 0, 0}); }, "16385x1");
    expect_fatal("pixels of the wrong size refused", [] {
        RgbImage img(4, 4, Rgb{0, 0, 0});
        img.px.pop_back();
        png_encode(img);
    }, "expected 48");
}

static void test_drawing() {
    RgbImage img(10, 10, Rgb{0, 0, 0});
    img.set(-1, 0, Rgb{9, 9, 9});
    img.set(10, 3, Rgb{9, 9, 9});
    img.set(2, 3, Rgb{9, 8, 7});
    check(img.get(2, 3).r == 9 && img.get(2, 3).g == 8 && img.get(2, 3).b == 7, "set then get");
    img.fill_rect(-5, 8, 100, 100, Rgb{1, 1, 1});
    int filled = 0;
    for (int y = 0; y < 10; y++)
        for (int x = 0; x < 10; x++) filled += img.get(x, y).r == 1;
    check(filled == 20, "fill_rect clips to the image (" + std::to_string(filled) + " pixels)");

    check(text_width("") == 0 && text_width("A") == 5 && text_width("100", 2) == 34, "text_width is the inked width");
    RgbImage t(40, 20, Rgb{255, 255, 255});
    draw_text(t, 1, 1, "L", Rgb{0, 0, 0});
    bool l_ok = true;
    for (int v = 0; v < 7; v++) l_ok = l_ok && t.get(1, 1 + v).r == 0 && t.get(2, 1 + v).r == (v == 6 ? 0 : 255);
    check(l_ok, "'L' draws its stem and foot");
    t = RgbImage(40, 20, Rgb{255, 255, 255});
    draw_text(t, 0, 0, "\x01", Rgb{0, 0, 0});
    check(t.get(0, 0).r == 0 && t.get(4, 6).r == 0 && t.get(2, 3).r == 255, "unknown character draws a box");

    // The vertical text is the horizontal one turned 90 degrees counter-clockwise.
    const std::string s = "Depth (%) 0.5 gjpqy";
    const int sc = 2, w = text_width(s, sc), h = kLineHeight * sc;
    RgbImage hor(w, h, Rgb{255, 255, 255}), ver(h, w, Rgb{255, 255, 255});
    draw_text(hor, 0, 0, s, Rgb{0, 0, 0}, sc);
    draw_text_vertical(ver, 0, 0, s, Rgb{0, 0, 0}, sc);
    bool rot_ok = true;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) rot_ok = rot_ok && hor.get(x, y).r == ver.get(y, w - 1 - x).r;
    check(rot_ok, "draw_text_vertical is draw_text rotated counter-clockwise");
}

// ----------------------------------------------------------------------------
// Heatmaps

static bool green_dominant(Rgb c) { return c.g > c.r + 40 && c.g > c.b + 40; }
static bool red_dominant(Rgb c) { return c.r > c.g + 40 && c.r > c.b + 40; }
static bool dark(Rgb c) { return c.r < 90 && c.g < 90 && c.b < 90; }

static int dark_pixels(const RgbImage& img, int x, int y, int w, int h) {
    int n = 0;
    for (int yy = y; yy < y + h; yy++)
        for (int xx = x; xx < x + w; xx++) n += dark(img.get(xx, yy));
    return n;
}

static void test_format_length() {
    const std::vector<std::pair<long long, std::string>> cases = {
        {2048, "2K"}, {131072, "128K"}, {1048576, "1M"}, {1536, "1.5K"}, {1000, "1000"}, {1024, "1K"},
        {1, "1"}, {0, "0"}, {1023, "1023"}, {3145728, "3M"}, {1572864, "1.5M"}, {1048576LL * 1024, "1024M"}};
    for (const auto& c : cases) {
        const std::string got = format_length(c.first);
        check(got == c.second, "format_length(" + std::to_string(c.first) + ") = " + got);
    }
}

static void test_heatmap() {
    const double nan = std::nan("");
    HeatmapPanel a{"known", {"2K", "8K", "1M"}, {"0.00", "0.50", "1.00"}, {1.0, 0.0, nan, 0.5, 0.67, 1.0, 1.7, -2.0, 0.25}};
    HeatmapPanel b{"second", {"2K", "4K"}, {"0.00", "1.00"}, {0.0, 1.0, 1.0, 0.0}};
    const std::vector<HeatmapPanel> panels = {a, b};
    check(heatmap_layout(panels, "", "", "").cell_w == 48, "cells are 48 pixels wide for short column labels");
    const HeatmapLayout L = heatmap_layout(panels, "Context length", "Needle depth", "caption");
    const RgbImage img = draw_heatmaps(panels, "Context length", "Needle depth", "caption");
    check(img.width == L.width && img.height == L.height, "image has the layout's size");
    const Decoded d = check_roundtrip(img, "heatmap");
    const size_t png_size = png_encode(img).size();
    check(png_size * 10 <= raw_size(img), "heatmap PNG is at most 1/10 of the raw size: " + std::to_string(png_size) +
                                              " of " + std::to_string(raw_size(img)) + " bytes, " +
                                              std::to_string(d.fixed_blocks) + " fixed blocks");

    const int cw = L.cell_w, ch = HeatmapLayout::cell_h;
    auto center_left = [&](size_t p, size_t r, size_t c) { return img.get(L.cell_x(p, c) + 3, L.cell_y(r) + ch / 2); };
    check(green_dominant(center_left(0, 0, 0)), "1.0 cell is green");
    check(red_dominant(center_left(0, 0, 1)), "0.0 cell is red");
    const Rgb g = center_left(0, 0, 2), gc = img.get(L.cell_x(0, 2) + cw / 2, L.cell_y(0) + ch / 2);
    check(g.r == g.g && g.g == g.b && g.r > 150 && gc.r == gc.g && gc.g == gc.b, "NaN cell is light grey");
    check(dark_pixels(img, L.cell_x(0, 2), L.cell_y(0), cw - 1, ch - 1) == 0, "NaN cell has no text");
    const Rgb y = center_left(0, 1, 0);
    check(y.r > 200 && y.g > 200 && y.b < 150, "0.5 cell is yellow");
    check(green_dominant(center_left(0, 2, 0)) && red_dominant(center_left(0, 2, 1)), "values outside [0,1] clamp");
    check(green_dominant(center_left(1, 0, 1)) && red_dominant(center_left(1, 1, 1)), "second panel's cells");
    check(L.cell_x(1, 0) > L.cell_x(0, 2) + cw, "second panel right of the first");
    for (size_t r = 0; r < 3; r++)
        for (size_t c = 0; c < 3; c++) {
            if (std::isnan(a.cells[r * 3 + c])) continue;
            const int n = dark_pixels(img, L.cell_x(0, c), L.cell_y(r), cw - 1, ch - 1);
            check(n > 20, "cell (" + std::to_string(r) + "," + std::to_string(c) + ") shows its value: " +
                              std::to_string(n) + " dark pixels");
        }
    // "100" at scale 2 in the 1.0 cell: the digit 1's stem starts 6 pixels in, centered.
    check(dark_pixels(img, L.cell_x(0, 0), L.cell_y(0), 6, ch - 1) == 0, "cell text is centered, not at the edge");
    const int below = L.cell_y(3);
    for (size_t c = 0; c < 3; c++)
        check(dark_pixels(img, L.cell_x(0, c), below, cw, 24) > 10, "column label " + std::to_string(c) + " drawn");
    check(dark_pixels(img, 0, L.cell_y(0), L.cell_x(0, 0), ch) > 10, "row label drawn");
    check(green_dominant(img.get(L.bar_x + L.bar_w / 2, L.bar_y + 1)) &&
              red_dominant(img.get(L.bar_x + L.bar_w / 2, L.bar_y + L.bar_h - 2)),
          "color bar: green at the top, red at the bottom");
    check(png_encode(draw_heatmaps(panels, "Context length", "Needle depth", "caption")) == png_encode(img),
          "same input, same bytes");

    HeatmapPanel bad = a;
    bad.cells.pop_back();
    expect_fatal("cells size mismatch refused", [&] { draw_heatmaps({bad}, "", "", ""); }, "'known' has 8 cells for 3 rows x 3 columns");
    bad = a;
    bad.rows.clear();
    bad.cells.clear();
    expect_fatal("panel with no rows refused", [&] { draw_heatmaps({bad}, "", "", ""); }, "at least one");
    expect_fatal("no panels refused", [] { draw_heatmaps({}, "", "", ""); }, "no panels");
    HeatmapPanel wide{"wide", std::vector<std::string>(400, "2K"), {"0.00"}, std::vector<double>(400, 1.0)};
    expect_fatal("heatmap over 16384 pixels wide refused", [&] { draw_heatmaps({wide}, "", "", ""); }, "fewer");
}

// A second, outside decoder: Python's zlib inflates the example's IDAT data; its length and
// CRC-32 must be those of our own inflate. Skipped (not failed) where python3 is missing.
static void check_with_python_zlib(const std::string& path, const Decoded& d) {
    if (std::system("command -v python3 >/dev/null 2>&1") != 0) {
        std::printf("SKIP python3 not found: example not checked with Python's zlib\n");
        return;
    }
    const std::string script =
        "import struct, sys, zlib\n"
        "png = open(sys.argv[1], \"rb\").read()\n"
        "at, idat = 8, b\"\"\n"
        "while at < len(png):\n"
        "    n, kind = struct.unpack(\">I4s\", png[at:at + 8])\n"
        "    if kind == b\"IDAT\": idat += png[at + 8:at + 8 + n]\n"
        "    at += 12 + n\n"
        "raw = zlib.decompress(idat)\n"
        "print(len(raw), zlib.crc32(raw))\n";
    FILE* p = popen(("python3 -c '" + script + "' '" + path + "' 2>&1").c_str(), "r");
    std::string out;
    char buf[256];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    const int status = p ? pclose(p) : -1;
    unsigned long long length = 0, crc = 0;
    const bool parsed = std::sscanf(out.c_str(), "%llu %llu", &length, &crc) == 2;
    const uint32_t ours = crc32_bitwise(d.raw.data(), d.raw.size());
    check(status == 0 && parsed && length == d.raw.size() && crc == ours,
          "Python's zlib inflates the example to " + std::to_string(d.raw.size()) + " bytes with our CRC-32" +
              (status == 0 && parsed ? "" : ": " + out));
}

// Two models over 2K..1M: a dense model trained at 2K that falls off past it, and one that
// holds up with a few misses, as the sweep would report them.
static void write_example() {
    std::vector<std::string> cols, rows;
    for (long long t = 2048; t <= 1048576; t *= 2) cols.push_back(format_length(t));
    for (int d = 0; d <= 10; d++) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%.2f", d / 10.0);
        rows.push_back(buf);
    }
    HeatmapPanel dense{"dense, trained at 2K", cols, rows, {}}, dilated{"dilated (LongNet)", cols, rows, {}};
    for (size_t r = 0; r < rows.size(); r++)
        for (size_t c = 0; c < cols.size(); c++) {
            const double fall = c == 0 ? 1.0 : std::max(0.0, 0.9 - 0.3 * c + 0.05 * r);
            dense.cells.push_back(c >= 8 ? std::nan("") : fall);
            dilated.cells.push_back((r * 7 + c * 3) % 11 == 0 ? 2.0 / 3.0 : 1.0 - 0.03 * c);
        }
    const RgbImage img = draw_heatmaps({dense, dilated}, "Context length (tokens)", "Needle depth",
                                       "Retrieval accuracy, 3 needles per cell; grey: not run (out of memory).");
    const std::string path = "build/test_heatmap_example.png";
    write_png(path, img);
    check(true, "wrote " + path);

    const std::string png = read_file(path, "the test just wrote it");
    Decoded d;
    const std::string err = decode_png(png, d);
    check(err.empty() && d.px == img.px, "example decodes to its pixels" + (err.empty() ? "" : ": " + err));
    check(png.size() * 10 <= raw_size(img), "example PNG is at most 1/10 of the raw size: " +
                                                std::to_string(png.size()) + " of " + std::to_string(raw_size(img)) +
                                                " bytes");
    check_with_python_zlib(path, d);
}

int main() {
    const std::vector<std::pair<const char*, void (*)()>> tests = {
        {"png format", test_png_format},
        {"decoder filters", test_decoder_filters},
        {"png round trip", test_png_roundtrip},
        {"png matches", test_png_matches},
        {"png errors", test_png_errors},
        {"drawing", test_drawing},
        {"format_length", test_format_length},
        {"heatmap", test_heatmap},
        {"example", write_example}};
    for (const auto& t : tests) {
        try {
            t.second();
        } catch (const std::exception& e) {
            check(false, std::string(t.first) + " threw: " + e.what());
        }
    }
    std::printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
}
