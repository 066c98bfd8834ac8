// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), small and dependency-free: what the rendezvous
// (comm/rendezvous.h) needs to let a rank prove it holds the job's secret without sending it.
// tests/test_rendezvous.cpp checks them against the FIPS 180-4 and RFC 4231 vectors.
//
//   Sha256Digest d = sha256(data, n);
//   Sha256Digest m = hmac_sha256(key, key_len, msg, msg_len);
//   digest_equal(a, b)    compares in time independent of where they differ
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

using Sha256Digest = std::array<unsigned char, 32>;

class Sha256 {
   public:
    Sha256() { reset(); }
    void reset() {
        static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
        std::memcpy(h_, init, sizeof h_);
        bits_ = 0, used_ = 0;
    }
    Sha256& update(const void* data, size_t n) {
        const unsigned char* p = (const unsigned char*)data;
        bits_ += (uint64_t)n * 8;
        while (n > 0) {
            const size_t take = n < 64 - used_ ? n : 64 - used_;
            std::memcpy(block_ + used_, p, take);
            used_ += take, p += take, n -= take;
            if (used_ == 64) compress(), used_ = 0;
        }
        return *this;
    }
    Sha256& update(const std::string& s) { return update(s.data(), s.size()); }
    Sha256Digest digest() {
        const uint64_t bits = bits_;
        const unsigned char one = 0x80, zero = 0;
        update(&one, 1);
        while (used_ != 56) update(&zero, 1);
        unsigned char len[8];
        for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
        update(len, 8);
        Sha256Digest d;
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 4; j++) d[4 * i + j] = (unsigned char)(h_[i] >> (24 - 8 * j));
        return d;
    }

   private:
    uint32_t h_[8];
    unsigned char block_[64];
    uint64_t bits_;
    size_t used_;

    static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
    void compress() {
        static const uint32_t k[64] = {
            0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
            0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
            0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
            0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
            0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
            0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
            0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
            0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)block_[4 * i] << 24 | (uint32_t)block_[4 * i + 1] << 16 | (uint32_t)block_[4 * i + 2] << 8 |
                   block_[4 * i + 3];
        for (int i = 16; i < 64; i++) {
            const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
        for (int i = 0; i < 64; i++) {
            const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
            const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
    }
};

inline Sha256Digest sha256(const void* data, size_t n) { return Sha256().update(data, n).digest(); }

// HMAC over a message given in pieces (hmac_sha256_begin, then update the returned hash, then
// hmac_sha256_end): the rendezvous authenticates fields without first copying them together.
struct HmacSha256 {
    unsigned char key[64] = {};  // the key, hashed first when longer than a block
    Sha256 inner;
    explicit HmacSha256(const void* k, size_t n) {
        if (n > 64) {
            const Sha256Digest d = sha256(k, n);
            std::memcpy(key, d.data(), d.size());
        } else if (n > 0) {
            std::memcpy(key, k, n);
        }
        unsigned char pad[64];
        for (int i = 0; i < 64; i++) pad[i] = key[i] ^ 0x36;
        inner.update(pad, 64);
    }
    HmacSha256& update(const void* data, size_t n) { return inner.update(data, n), *this; }
    HmacSha256& update(const std::string& s) { return update(s.data(), s.size()); }
    Sha256Digest digest() {
        const Sha256Digest in = inner.digest();
        unsigned char pad[64];
        for (int i = 0; i < 64; i++) pad[i] = key[i] ^ 0x5c;
        return Sha256().update(pad, 64).update(in.data(), in.size()).digest();
    }
};

inline Sha256Digest hmac_sha256(const void* key, size_t key_len, const void* msg, size_t msg_len) {
    return HmacSha256(key, key_len).update(msg, msg_len).digest();
}

// Equal or not, in time that does not depend on the first byte that differs: a peer timing the
// refusals learns nothing about the digest it should have sent.
inline bool digest_equal(const unsigned char* a, const unsigned char* b, size_t n = 32) {
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}
